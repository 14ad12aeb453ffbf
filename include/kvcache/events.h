/**
 * @file events.h
 * @brief KV events for routers: a loss-detectable stream of what a cache
 *        stores, removes, moves between tiers and reprioritizes, a snapshot
 *        to resynchronize from, and portable block hashes that any process
 *        computes from tokens alone.
 *
 * A KV-aware router keeps an index of which engine holds which prefix
 * blocks. Each cache appends events to a ring of
 * kvc_config_set_event_buffer_size() entries (0, the default, turns events
 * off at no cost); the router's feeder polls kvc_cache_drain_events(). Every
 * event has a 64-bit id, counting from 1 without gaps. When the ring is
 * full the oldest events are dropped, never silently: the next drain starts
 * with one KVC_EVENT_LOST naming the dropped ids, and the consumer rebuilds
 * its index from kvc_cache_snapshot(), which lists every cached block as of
 * a given event id.
 *
 * What an event is about: a cached block position of the radix tree (the
 * blocks of every layer group at one position of a prefix), or a record of
 * a block store (the disk or remote tier, tiers.h), named by its portable
 * hash. `groups` is a bit mask of layer groups (bit g: group g of
 * kvc_cache_get_group_stats): a sliding-window group can lose its block at
 * a position while the position stays cached for the others. A block can
 * be held in several places at once: in the tree (tier PRIMARY or HOST: one
 * place, TIER_CHANGED moves it between the two) and in each store (DISK,
 * REMOTE: a place each; a block written through at commit is in the tree
 * and on the disk). A consumer that applies every event in id order to an
 * index keyed by (hash, place), place being "tree" for tiers PRIMARY and
 * HOST and the tier itself for DISK and REMOTE, holds exactly
 * kvc_cache_snapshot()'s entries:
 *   - STORED: entry[hash, place(tier)] gains `groups` (created with
 *     parent_hash, tier, priority, num_tokens, LoRA id if absent).
 *   - REMOVED: entry[hash, place(tier)] loses `groups`; erased when none is
 *     left.
 *   - TIER_CHANGED: entry[hash, tree] moves to `tier` (PRIMARY or HOST),
 *     holding `groups`.
 *   - PRIORITY_CHANGED: entry[hash, tree] takes `priority`.
 *   - CLEARED: every tree entry is erased (kvc_cache_reset_reuse); the
 *     stores' entries stay (a reset leaves the stores as they are).
 *   - LOST: events with ids [id, id + lost_count) were dropped: resync.
 * A cache with events on requires at most 64 layer groups.
 *
 * Store entries (tier KVC_TIER_DISK or KVC_TIER_REMOTE). A store keeps a
 * record per block addressed by its portable hash alone: its STORED events
 * and snapshot entries have parent_hash 0, no LoRA id, every layer group in
 * `groups`, num_tokens = tokens_per_block (only full blocks are stored), the
 * retention priority sealed in the record, and no token ids (token_offset
 * KVC_EVENT_NO_TOKENS). The stores write and evict on threads of their own;
 * the cache emits what they did at its next kvc_sequence_add that succeeds,
 * kvc_sequence_commit, or kvc_cache_flush_tiers (which waits for the queued
 * writes first), never from a call that fails or only reads (a drain, a
 * snapshot): until then the events and the snapshot still describe the
 * stores as last announced, so they always agree with each other.
 *   - DISK: STORED once the record is written to the slab files (not when it
 *     is queued: a queued write may still be dropped), REMOVED when the disk
 *     forgets it (evicted for another record's slot under its byte budget,
 *     rejected by a load's check, a failed write or read); a block written
 *     again at another priority is REMOVED, then STORED again. A cache created on
 *     a directory announces the records it finds there (STORED each) before
 *     any other event; records evicted at that open (a smaller budget) are
 *     never announced. Exact for this cache's directory: nothing else writes
 *     it while the cache holds its lock file.
 *   - REMOTE: this cache's own writes only: STORED when the server
 *     acknowledged its SET, REMOVED when this cache deleted the key (its
 *     byte budget, a value that failed the check). Not seen, hence never
 *     announced: the server's own eviction (maxmemory policy) or a TTL set
 *     by someone else, another cache deleting or overwriting the key, keys
 *     other caches wrote (each cache announces its own), and what the
 *     server held before this cache was created. A remote entry is
 *     therefore a hint that the block was there, and a router should treat
 *     a hit on it as a probable prefix match, not a guarantee (the engine's
 *     add checks the record and counts a vanished one as a miss).
 *
 * Portable block hashes (the same in every process, language and run, for
 * equal tokens, options, tokens_per_block and seed; see
 * kvc_config_set_event_hash_seed, default 0). All integers little endian;
 * XXH3 is XXH3_64bits_withSeed of xxHash 0.8 with the configured seed:
 *   scope  = XXH3('S', has_salt [, u64 salt_size, salt bytes],
 *                 'L', has_lora [, u64 lora_id])   (has_* one byte 0/1)
 *   extra  = 0 if no extra key overlaps the block, else
 *            XXH3(for each overlapping key in (offset, length, bytes)
 *                 order: 'X', u64 offset, u64 length, u64 size, bytes)
 *   hash   = XXH3(u64 parent_hash, u64 scope, u64 extra, u32 num_tokens,
 *                 num_tokens x i32 token ids)
 * where parent_hash is 0 for the first block of a prompt. A partial block
 * (a published tail with partial reuse) hashes its num_tokens tokens.
 * kvc_block_hashes() computes the full blocks' hashes of a prompt from a
 * config alone. Inside the cache a hash never grants reuse: lookups compare
 * the full key, and the radix tree's own bucket hash stays keyed by a
 * per-process secret. Salted scopes hash differently per salt, so a router
 * matches a salted prompt only against blocks of the same salt.
 *
 * Threading: kvc_cache_drain_events() and kvc_cache_snapshot() take the
 * cache's lock like every call on a cache handle, so a feeder thread may
 * drain while other threads serve.
 */
#ifndef KVCACHE_EVENTS_H
#define KVCACHE_EVENTS_H

#include "kvcache/cache.h"
#include "kvcache/common.h"
#include "kvcache/config.h"
#include "kvcache/sequence.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What an event reports (kvc_event_t::kind). @since 0.3.0 */
typedef uint32_t kvc_event_kind_t;
enum {
  KVC_EVENT_STORED = 1,           /**< A block became reusable (commit). */
  KVC_EVENT_REMOVED = 2,          /**< Blocks left the cache (eviction). */
  KVC_EVENT_TIER_CHANGED = 3,     /**< A block moved between tiers. */
  KVC_EVENT_PRIORITY_CHANGED = 4, /**< A cached block's priority changed. */
  KVC_EVENT_CLEARED = 5,          /**< Every cached block was dropped. */
  KVC_EVENT_LOST = 6              /**< Events were dropped (ring full). */
};

/** Where a cached block lives (kvc_event_t::tier). @since 0.3.0 */
typedef uint32_t kvc_tier_t;
enum {
  KVC_TIER_PRIMARY = 0, /**< The cache's device (or CPU) pools. */
  KVC_TIER_HOST = 1,    /**< The host tier (kvc_config_set_host_cache_bytes). */
  KVC_TIER_DISK = 2,    /**< The disk tier (kvc_config_set_disk_cache, tiers.h):
                             STORED and REMOVED of its records
                             (see "Store entries" above). @since 0.3.0 */
  KVC_TIER_REMOTE = 3   /**< A remote store shared by caches (tiers.h): this
                             cache's own writes and deletions only (see "Store
                             entries" above). @since 0.3.0 */
};

/** kvc_event_t::token_offset of an event that carries no token ids. */
#define KVC_EVENT_NO_TOKENS UINT64_MAX

/**
 * @brief One event. Fixed layout (used in arrays); fields a kind does not
 *        use are 0.
 * @since 0.3.0
 */
typedef struct kvc_event {
  uint64_t id;           /**< From 1, no gaps; LOST: the first dropped id. */
  uint32_t kind;         /**< kvc_event_kind_t. */
  uint32_t tier;         /**< STORED: KVC_TIER_PRIMARY (committed or loaded into the
                              tree), KVC_TIER_DISK or KVC_TIER_REMOTE (a store's
                              record); REMOVED: the tier left; TIER_CHANGED: the
                              new tier (PRIMARY or HOST). */
  uint64_t hash;         /**< The block's portable hash (0: CLEARED, LOST). */
  uint64_t parent_hash;  /**< STORED: the previous block's hash, 0 for a first block
                              (0 for a store's record: see "Store entries"). */
  uint64_t groups;       /**< Layer groups (bit g: group g): STORED, the groups
                              stored; REMOVED, the groups removed; TIER_CHANGED,
                              the groups the block holds in its new tier. */
  uint64_t lora_id;      /**< STORED: the LoRA id if has_lora. */
  uint32_t has_lora;     /**< STORED: 1 if the block's scope has a LoRA id. */
  uint32_t priority;     /**< STORED, TIER_CHANGED, PRIORITY_CHANGED: the block's
                              eviction priority (0..100) now. */
  uint32_t num_tokens;   /**< STORED: tokens in the block (tokens_per_block,
                              fewer for a partial block). */
  uint32_t reserved;     /**< Zero. */
  uint64_t token_offset; /**< STORED of tier PRIMARY: index of the block's first
                              token id in the drain's token buffer;
                              KVC_EVENT_NO_TOKENS when the drain asked for none,
                              for a store's STORED, and for other kinds. */
  uint64_t lost_count;   /**< LOST: how many events were dropped. */
} kvc_event_t;

/**
 * @brief What kvc_cache_drain_events() did, and what is left. Transparent;
 *        begins with struct_size.
 * @since 0.3.0
 */
typedef struct kvc_event_drain {
  uint32_t struct_size;    /**< sizeof(kvc_event_drain_t) of the caller. */
  uint32_t reserved;       /**< Zero. */
  uint64_t events;         /**< Events written. */
  uint64_t tokens;         /**< Token ids written. */
  uint64_t events_pending; /**< Events still pending after the call. */
  uint64_t tokens_pending; /**< Token ids the pending events carry. */
  uint64_t last_id;        /**< Id of the newest event emitted so far (0: none). */
} kvc_event_drain_t;

/** Static initializer for kvc_event_drain_t. */
#define KVC_EVENT_DRAIN_INIT {sizeof(kvc_event_drain_t), 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `drain` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_event_drain_init(kvc_event_drain_t *drain);

/**
 * @brief Moves the oldest pending events, in id order, into `events`, and
 *        the token ids of STORED events into `tokens`, stopping before the
 *        first event that does not fit either buffer. Drained events are
 *        gone from the cache.
 *
 * If events were dropped since the last drain, the first event written is
 * one KVC_EVENT_LOST (it takes a place in `events`). Call with capacity 0
 * to learn the sizes: `result` says how many events and token ids are
 * pending.
 * @param events Caller memory for `capacity` events; may be NULL if
 *        capacity is 0.
 * @param tokens Caller memory for `token_capacity` token ids, or NULL: then
 *        no token ids are copied and STORED events say KVC_EVENT_NO_TOKENS.
 * @param[out] result What was written and what is left; struct_size set
 *        by the caller (kvc_event_drain_init).
 * @return KVC_OK (also when nothing or only part was drained);
 *         KVC_ERR_INVALID_ARGUMENT (NULL cache or result, NULL events with
 *         capacity > 0, NULL tokens with token_capacity > 0);
 *         KVC_ERR_UNSUPPORTED (events are off: event buffer size 0).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_drain_events(kvc_cache_t *cache, kvc_event_t *events,
                                            size_t capacity, int32_t *tokens,
                                            size_t token_capacity, kvc_event_drain_t *result);

/**
 * @brief One cached block of kvc_cache_snapshot(). Fixed layout.
 * @since 0.3.0
 */
typedef struct kvc_snapshot_entry {
  uint64_t hash;        /**< Portable hash. */
  uint64_t parent_hash; /**< The previous block's hash, 0 for a first block. */
  uint64_t groups;      /**< Layer groups holding a block here (bit g). */
  uint64_t lora_id;     /**< The LoRA id if has_lora. */
  uint32_t has_lora;    /**< 1 if the block's scope has a LoRA id. */
  uint32_t tier;        /**< kvc_tier_t: PRIMARY or HOST (the tree), DISK or REMOTE
                             (a store's record; see "Store entries"). */
  uint32_t priority;    /**< Eviction priority (0..100). */
  uint32_t num_tokens;  /**< Tokens in the block. */
} kvc_snapshot_entry_t;

/**
 * @brief Lists every cached block of the tree (tiers PRIMARY and HOST),
 *        parents before children, then the store entries announced so far
 *        (DISK, then REMOTE, each by hash; a block can be listed once in the
 *        tree and once per store), as of event `*event_id`: applying to the
 *        list the events with larger ids gives the cache's state at any
 *        later moment.
 * @param entries Caller memory for `capacity` entries; may be NULL if
 *        capacity is 0.
 * @param[out] count Receives the number of entries (needed, on
 *        KVC_ERR_BUFFER_TOO_SMALL).
 * @param[out] event_id Receives the id of the newest event emitted before
 *        the snapshot (0: none); may be NULL.
 * @return KVC_OK; KVC_ERR_BUFFER_TOO_SMALL (nothing written but *count);
 *         KVC_ERR_INVALID_ARGUMENT (NULL cache or count, NULL entries with
 *         capacity > 0); KVC_ERR_UNSUPPORTED (events are off). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_snapshot(const kvc_cache_t *cache, kvc_snapshot_entry_t *entries,
                                        size_t capacity, size_t *count, uint64_t *event_id);

/**
 * @brief The portable hashes (see the file comment) of the full blocks of a
 *        prompt under `options`, from a config alone: what STORED events of
 *        a cache built from an equal config report for them. Needs no cache
 *        and no device.
 * @param config Its tokens_per_block and event hash seed are read.
 * @param tokens `num_tokens` token ids, borrowed; may be NULL if num_tokens
 *        is 0.
 * @param options NULL for none (no salt, no LoRA, no extra keys);
 *        priorities and retention ranges are not read.
 * @param hashes Caller memory for `capacity` hashes (one per full block:
 *        num_tokens / tokens_per_block); may be NULL if capacity is 0.
 * @param[out] count Receives the number of full blocks (needed, on
 *        KVC_ERR_BUFFER_TOO_SMALL).
 * @return KVC_OK; KVC_ERR_BUFFER_TOO_SMALL (nothing written but *count);
 *         KVC_ERR_INVALID_ARGUMENT (NULL config or count, NULL tokens with
 *         num_tokens > 0, NULL hashes with capacity > 0, a bad extra key:
 *         zero length, NULL data with size > 0).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_block_hashes(const kvc_config_t *config, const int32_t *tokens,
                                      size_t num_tokens, const kvc_sequence_options_t *options,
                                      uint64_t *hashes, size_t capacity, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_EVENTS_H */
