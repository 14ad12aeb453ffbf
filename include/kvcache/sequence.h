/**
 * @file sequence.h
 * @brief Sequences (requests, beams) on a cache: add a prompt and learn how
 *        much of it is cached, extend, commit computed tokens, rewind, fork,
 *        remove, pin; probe a prompt without side effects.
 *
 * What lives here: every call about sequences (kvc_sequence_*), and two
 * cache-wide calls that belong with them: kvc_cache_probe() answers the
 * question kvc_sequence_add() answers (how much of this prompt is cached,
 * with the same options) without adding anything, and
 * kvc_cache_advance_clock() moves the clock that retention durations
 * (kvc_sequence_options_t) run on. The cache's lifetime, shape and views are
 * in cache.h; per-step tables for a batch of sequences in batch.h;
 * statistics, kvc_cache_reset_reuse() and kvc_cache_check() in stats.h.
 *
 * Sequences are named by caller-chosen 64-bit ids, as TensorRT-LLM's
 * request ids. Tokens are int32 ids. A block holds `tokens_per_block`
 * tokens of every layer of one layer group; a sequence holds one block per
 * layer group per block position, so "blocks" below count positions.
 *
 * Reuse: a block becomes reusable by other sequences only once the caller
 * commits it (kvc_sequence_commit()): its KV is written. Blocks of a removed
 * sequence stay cached until evicted. Eviction is prioritized LRU over the
 * leaves of the radix tree: the cached leaf of the lowest priority whose
 * last user released it longest ago goes first. A cached block has the
 * priority the last sequence to release it gave it (see retention below);
 * a probe is not a use.
 *
 * Retention (TensorRT-LLM's KvCacheRetentionConfig): a block whose first
 * token is a prompt token takes the priority of the retention range holding
 * that token, or prompt_priority if none does; a block starting after the
 * prompt takes decode_priority. A range's duration_ms (decode_duration_ms
 * for generated blocks) bounds how long that priority lasts, counted from
 * when the block became reusable (its commit): then it reverts to
 * KVC_DEFAULT_PRIORITY. Durations run on the monotonic clock, or on a
 * manual clock (kvc_config_set_manual_clock, kvc_cache_advance_clock).
 *
 * Streams: calls that may copy blocks (copy on partial reuse in add, copy on
 * write of a shared tail in extend, with a host tier the offloads of
 * evicted blocks and the onboards of reused ones, with a disk or remote
 * tier the copies of evicted blocks out to them and the loads of reused
 * ones) take an opaque `stream` (a cudaStream_t cast, or NULL); the copies
 * are enqueued on it, batched (one copy per pool and direction per call),
 * so the caller's kernels on that stream see the data and overwrite
 * evicted blocks only after they were copied out. A call on another stream
 * first waits for every earlier tier copy. On a CPU cache the copies are
 * done before the call returns.
 *
 * All or nothing: a failing call changes nothing (counts, reference counts,
 * the tree, the eviction queue, the sequences). One exception: a host-tier
 * copy that cannot be enqueued (KVC_ERR_DEVICE) fails the call after the
 * evictions that made room; every block whose copy failed stays valid where
 * it was and the copy's destination is freed.
 */
#ifndef KVCACHE_SEQUENCE_H
#define KVCACHE_SEQUENCE_H

#include "kvcache/cache.h"
#include "kvcache/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Options                                                               */
/* ===================================================================== */

/** Default eviction priority of a block (0 = evicted first, 100 = last). */
#define KVC_DEFAULT_PRIORITY 35

/**
 * @brief An extra key (e.g. a multimodal item hash) covering tokens
 *        [offset, offset + length) of a sequence. Every block overlapping
 *        that range carries the key: two prompts with equal tokens but a
 *        different image never share those blocks. Fixed layout (used in
 *        arrays).
 * @since 0.1.0
 */
typedef struct kvc_extra_key {
  uint64_t offset;     /**< First token position covered. */
  uint64_t length;     /**< Tokens covered (> 0). */
  const void *data;    /**< Key bytes, borrowed for the call (NULL if size is 0). */
  size_t size;         /**< Bytes at data. */
} kvc_extra_key_t;

/** kvc_retention_range_t::end of a range reaching to the end of the sequence. */
#define KVC_RETENTION_OPEN_END UINT64_MAX

/**
 * @brief A retention range: prompt tokens [start, end) get `priority` for
 *        `duration_ms` milliseconds (0: for ever) after their block becomes
 *        reusable. A block takes the range holding its first token. Ranges
 *        must not overlap; only the last may be open-ended
 *        (end = KVC_RETENTION_OPEN_END). Fixed layout (used in arrays).
 * @since 0.1.0
 */
typedef struct kvc_retention_range {
  uint64_t start;        /**< First token position. */
  uint64_t end;          /**< One past the last token (> start), or KVC_RETENTION_OPEN_END. */
  uint32_t priority;     /**< Eviction priority, 0..100. */
  uint32_t reserved;     /**< Zero. */
  uint64_t duration_ms;  /**< How long the priority lasts; 0: for ever. */
} kvc_retention_range_t;

/**
 * @brief Options of kvc_sequence_add() and kvc_cache_probe(). Transparent;
 *        begins with struct_size.
 *
 * The scope of a sequence is its salt, its LoRA id and its extra keys: only
 * sequences with equal scopes share blocks. An absent salt (NULL) differs
 * from an empty one (non-NULL, size 0); no LoRA differs from LoRA id 0.
 * @since 0.1.0
 */
typedef struct kvc_sequence_options {
  uint32_t struct_size;       /**< sizeof(kvc_sequence_options_t) of the caller. */
  uint32_t prompt_priority;   /**< Eviction priority of prompt blocks, 0..100 (35). */
  uint32_t decode_priority;   /**< Priority of blocks holding only generated tokens (35). */
  bool has_lora;              /**< Whether lora_id is set. */
  uint64_t lora_id;           /**< LoRA adapter id (if has_lora). */
  const void *salt;           /**< Cache salt bytes, or NULL for none; borrowed. */
  size_t salt_size;           /**< Bytes at salt. */
  const kvc_extra_key_t *extra_keys; /**< Array of num_extra_keys, borrowed; may be NULL if 0. */
  size_t num_extra_keys;      /**< Entries in extra_keys. */
  /** Retention ranges over the prompt, in token order, borrowed; may be
   *  NULL if num_retention_ranges is 0. Prompt blocks outside every range
   *  take prompt_priority (for ever). */
  const kvc_retention_range_t *retention_ranges;
  size_t num_retention_ranges;  /**< Entries in retention_ranges. */
  uint64_t decode_duration_ms;  /**< How long decode_priority lasts; 0: for ever. */
} kvc_sequence_options_t;

/** Static initializer for kvc_sequence_options_t (the defaults). */
#define KVC_SEQUENCE_OPTIONS_INIT \
  {sizeof(kvc_sequence_options_t), KVC_DEFAULT_PRIORITY, KVC_DEFAULT_PRIORITY, false, 0, NULL, 0, \
   NULL, 0, NULL, 0, 0}

/** @brief Sets `options` to the defaults (KVC_SEQUENCE_OPTIONS_INIT). @since 0.1.0 */
KVC_API void kvc_sequence_options_init(kvc_sequence_options_t *options);

/* ===================================================================== */
/* Lifetime                                                              */
/* ===================================================================== */

/**
 * @brief Adds sequence `id` with its prompt and reuses its cached prefix.
 *
 * Looks the prompt up in the radix tree: full blocks are shared with the
 * sequences that computed them; with partial reuse a block can also match
 * token by token (copied into a new block with copy on partial reuse, taken
 * over in place otherwise when nothing else uses it). The last prompt token
 * is never reported cached, so the model always computes at least one.
 * Blocks for the rest of the prompt are allocated, evicting cached blocks
 * if needed (offloading them to the host tier when it is configured and
 * their priority is at least the offload min priority). Cached blocks found
 * in the host tier are copied back (onboarded) into fresh blocks on
 * `stream` first; they count as cached tokens.
 * @param tokens `num_tokens` (> 0) token ids, borrowed for the call.
 * @param options NULL for the defaults; borrowed for the call.
 * @param[out] cached_tokens Receives the prompt tokens already cached (the
 *        caller skips computing them); may be NULL. Untouched on failure.
 * @param stream Stream for the partial-block copy and the host-tier copies
 *        (NULL: default stream).
 * @return KVC_OK; KVC_ERR_ALREADY_EXISTS (id in use);
 *         KVC_ERR_OUT_OF_BLOCKS (free + evictable blocks do not suffice:
 *         nothing is evicted); KVC_ERR_INVALID_ARGUMENT (NULL tokens, empty
 *         prompt, priority > 100, bad extra key, bad retention range:
 *         priority > 100, end <= start, overlapping ranges, an open range
 *         that is not last; overlong sequence); KVC_ERR_DEVICE (a host-tier
 *         copy could not be enqueued, see above).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_add(kvc_cache_t *cache, uint64_t id, const int32_t *tokens,
                                      size_t num_tokens, const kvc_sequence_options_t *options,
                                      void *stream, uint64_t *cached_tokens);

/**
 * @brief Appends `num_tokens` tokens to sequence `id`, allocating blocks as
 *        needed. A partial tail block shared with another sequence or
 *        published in the tree is copied (on `stream`) before it is written;
 *        evicted blocks may be offloaded to the host tier (on `stream`).
 * @param tokens Borrowed; may be NULL only if num_tokens is 0 (a no-op).
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_OUT_OF_BLOCKS,
 *         KVC_ERR_INVALID_ARGUMENT, KVC_ERR_DEVICE (a host-tier copy).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_extend(kvc_cache_t *cache, uint64_t id, const int32_t *tokens,
                                         size_t num_tokens, void *stream);

/**
 * @brief Declares that the KV of the first `num_computed` tokens of
 *        sequence `id` is written: full blocks among them become reusable
 *        by other sequences. A block whose key is already cached is not
 *        cached twice: the sequence keeps its own copy, freed on release
 *        (if the cached one was offloaded to the host tier, the sequence's
 *        block replaces it in the tree instead, with no copy).
 *        A block still shared with a fork sibling is published once this
 *        sequence holds it alone (at a later commit, any count). Committing
 *        fewer tokens than already committed keeps the committed count.
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_INVALID_ARGUMENT (beyond the
 *         sequence's length).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_commit(kvc_cache_t *cache, uint64_t id, uint64_t num_computed);

/**
 * @brief Drops the last `num_tokens` tokens of sequence `id` (rejected
 *        draft tokens of speculative decoding). Blocks left empty are
 *        released; a published block that becomes the partial tail is copied
 *        before the next write, so cached KV is never overwritten.
 *        On a cache with state resources (state.h, since 0.3.0) a rewind
 *        by more than 0 tokens goes only to a position whose state snapshot
 *        is cached (kvc_sequence_publish_state()), and restores the state
 *        from it.
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_INVALID_ARGUMENT (more tokens
 *         than the sequence has), KVC_ERR_INVALID_STATE (state resources
 *         and no snapshot at the new length: the message names what is
 *         missing; nothing changed).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_rewind(kvc_cache_t *cache, uint64_t id, uint64_t num_tokens);

/**
 * @brief Creates sequence `child` sharing every block of `parent` (beam
 *        search, parallel sampling). Needs no new block: a shared partial
 *        tail is copied by whichever side extends first.
 * @return KVC_OK, KVC_ERR_NOT_FOUND (parent), KVC_ERR_ALREADY_EXISTS (child).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_fork(kvc_cache_t *cache, uint64_t parent, uint64_t child);

/**
 * @brief Removes sequence `id`. Its committed blocks stay cached for reuse
 *        until evicted; with partial reuse the committed part of its tail
 *        block is published too. Other blocks return to the free list.
 * @return KVC_OK, KVC_ERR_NOT_FOUND.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_remove(kvc_cache_t *cache, uint64_t id);

/**
 * @brief Pins the published blocks of sequence `id` (its committed full
 *        blocks, the ones that outlive it in the tree): they are never
 *        evicted, even after the sequence is removed, until
 *        kvc_sequence_unpin(id).
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_ALREADY_EXISTS (already pinned).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_pin(kvc_cache_t *cache, uint64_t id);

/**
 * @brief Releases the blocks pinned by kvc_sequence_pin(id); the sequence
 *        itself may be gone.
 * @return KVC_OK, KVC_ERR_NOT_FOUND (no pin under that id).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_unpin(kvc_cache_t *cache, uint64_t id);

/* ===================================================================== */
/* Queries                                                               */
/* ===================================================================== */

/**
 * @brief State of one sequence. Transparent; begins with struct_size.
 * @since 0.1.0
 */
typedef struct kvc_sequence_desc {
  uint32_t struct_size;       /**< sizeof(kvc_sequence_desc_t) of the caller. */
  uint32_t prompt_priority;   /**< Priority of its prompt blocks. */
  uint32_t decode_priority;   /**< Priority of its generated blocks. */
  uint32_t reserved;          /**< Zero. */
  uint64_t num_tokens;        /**< Current length. */
  uint64_t prompt_tokens;     /**< Length of the prompt given to add. */
  uint64_t cached_tokens;     /**< Prompt tokens reused at add (<= num_tokens). */
  uint64_t committed_tokens;  /**< Tokens committed as computed. */
  uint64_t num_blocks;        /**< Block positions (blocks per layer group). */
} kvc_sequence_desc_t;

/** Static initializer for kvc_sequence_desc_t. */
#define KVC_SEQUENCE_DESC_INIT {sizeof(kvc_sequence_desc_t), 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_sequence_desc_init(kvc_sequence_desc_t *desc);

/**
 * @brief Describes sequence `id`.
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_describe(const kvc_cache_t *cache, uint64_t id,
                                           kvc_sequence_desc_t *out);

/**
 * @brief Block ids of sequence `id` in layer group `group`, in token order.
 *        Ids index the blocks of the group's pool (see kvc_layer_view_t).
 *        In a windowed group, -1 for blocks wholly before the window: the
 *        sequence released them when its commits passed them.
 * @param[out] ids Caller buffer of `capacity` entries; may be NULL if
 *        capacity is 0.
 * @param[out] count Receives the number of blocks, also when the buffer is
 *        too small (then nothing is written to ids).
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_BUFFER_TOO_SMALL,
 *         KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_block_ids(const kvc_cache_t *cache, uint64_t id,
                                            uint32_t group, int32_t *ids, size_t capacity,
                                            size_t *count);

/**
 * @brief Blocks per layer group that `num_tokens` more tokens of sequence
 *        `id` need, including a copy of a shared tail.
 * @return KVC_OK, KVC_ERR_NOT_FOUND, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_sequence_blocks_needed(const kvc_cache_t *cache, uint64_t id,
                                                uint64_t num_tokens, uint64_t *out);

/**
 * @brief How many tokens of this prompt kvc_sequence_add() would find
 *        cached, with no side effect (not even on eviction order).
 *
 * Looks at the cache's tree only: the primary tier and the host tier. The
 * disk and remote tiers are not read (that would be I/O), so an add on a
 * cache with one of them may find more: the blocks it loads from them. A
 * scheduler that sizes a prompt's first chunk by the probe should take the
 * add's count (cached_tokens) as the truth.
 * @param options NULL for the defaults; the scope (salt, LoRA, extra keys)
 *        must be the one the add will use.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_probe(const kvc_cache_t *cache, const int32_t *tokens,
                                     size_t num_tokens, const kvc_sequence_options_t *options,
                                     uint64_t *cached_tokens);

/**
 * @brief Evicts cached blocks ahead of need until `block_sets` block sets
 *        (one block of every layer group) are free.
 *
 * The evictions that the next kvc_sequence_add() or kvc_sequence_extend()
 * calls would make to find room, made now: the same victims in the same
 * order (retention priority, then least recently used, leaves first), with
 * the same fates (a host tier takes those at or above its offload priority,
 * making room in itself as usual; evicted_blocks, REMOVED events and the
 * block stores see them as any eviction). An engine calls it while the
 * device runs a step, when its scheduler thread waits anyway, with the
 * blocks the next step may take (say, its token budget / tokens_per_block
 * plus one per running sequence): that step's calls then find their
 * blocks free and evict nothing. A step that needs more still evicts on
 * its own calls, as without this call.
 *
 * Blocks in use are never evicted: when the cached blocks cannot free
 * `block_sets` sets, every cached block that can go goes and the call
 * still succeeds; `*free_sets` says what is free. Blocks freed ahead are
 * no longer reusable (a prompt that would have reused them computes them,
 * or onboards them from the host tier), so ask for one step's room, not
 * more. Copies to the host tier are enqueued on `stream` (NULL: the
 * default stream), as an add's are.
 * @param block_sets the free block sets wanted; 0 evicts nothing.
 * @param stream the device stream for the host tier's copies (NULL: default).
 * @param free_sets NULL, or receives the block sets free after the call.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL cache); KVC_ERR_DEVICE (a
 *         host-tier copy could not be enqueued: as for an add, the
 *         evictions that made room in the host tier stand, and every block
 *         whose copy failed stays cached where it was).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_make_room(kvc_cache_t *cache, uint64_t block_sets, void *stream,
                                         uint64_t *free_sets);

/* ===================================================================== */
/* Retention clock                                                       */
/* ===================================================================== */

/**
 * @brief Moves the manual retention clock of `cache` forward by
 *        `milliseconds`; cached blocks whose retention duration has run out
 *        revert to KVC_DEFAULT_PRIORITY at once.
 * @return KVC_OK; KVC_ERR_INVALID_STATE (the cache reads the monotonic
 *         clock: see kvc_config_set_manual_clock); KVC_ERR_INVALID_ARGUMENT
 *         (NULL cache, or the clock would overflow).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_advance_clock(kvc_cache_t *cache, uint64_t milliseconds);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_SEQUENCE_H */
