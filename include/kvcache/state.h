/**
 * @file state.h
 * @brief Per-sequence state resources beside the paged attention KV (hybrid
 *        models: Jamba, Nemotron-H, Mamba-2; TensorRT-LLM AutoDeploy's
 *        resource handlers): Mamba SSM state, causal-conv state, generic
 *        per-sequence state and unpaged per-token resources, held in state
 *        slots that the cache hands out with the sequences.
 *
 * **Describing resources.** Attention layers are still described by the
 * per-layer setters of config.h (the all-attention case). State resources
 * are added to the config, each call returning the resource's index (0, 1,
 * ... in the order of the calls):
 *   - kvc_config_add_ssm_state(): Mamba SSM state, one slot is
 *     `[num_heads][head_dim][d_state]` elements of `dtype`;
 *   - kvc_config_add_conv_state(): causal-conv state, one slot is
 *     `[conv_dim][d_conv]` elements of `dtype`;
 *   - kvc_config_add_generic_state(): `bytes` opaque bytes per sequence,
 *     aligned to `alignment`;
 *   - kvc_config_add_unpaged_resource(): `bytes_per_token` bytes for each of
 *     up to `max_tokens` tokens of a sequence, one contiguous row per slot
 *     (not paged: the row is the sequence's whatever its length).
 * A slot's bytes start at an offset that is a multiple of 256 (generic:
 * of max(256, alignment)) and slots follow each other at slot_stride bytes
 * (the slot's bytes rounded up to that alignment).
 *
 * **Managed or local.** As in AutoDeploy, resources that can share one slot
 * index are *managed* together: every sequence gets the same slot index in
 * each of them (kvc_batch_state_slots() with KVC_STATE_ALL returns it once
 * per resource). The rule:
 *   - the first SSM resource is managed; a later SSM resource is managed when
 *     its (num_heads, head_dim, d_state, dtype) equal the first one's, else
 *     it is local (KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS);
 *   - a conv resource pairs with the first SSM resource and is managed when
 *     `conv_dim = head_dim * num_heads + 2 * n_groups * d_state` holds for an
 *     integer n_groups >= 0 (Mamba-2's conv over x, B and C) and its
 *     (conv_dim, d_conv, dtype) equal those of the first managed conv
 *     resource; else it is local: no SSM resource to pair with
 *     (KVC_RESOURCE_REASON_NO_SSM), the constraint fails
 *     (KVC_RESOURCE_REASON_N_GROUPS) or the shape differs
 *     (KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS). A fallback is reported
 *     through kvc_cache_describe_resource(), never an error;
 *   - generic and unpaged resources are always managed.
 * A local resource has its own slot array and its own free list: its slot
 * index of a sequence may differ from the managed one. Every resource has
 * the same number of slots, and a sequence holds one slot of every resource
 * from kvc_sequence_add() (or kvc_sequence_fork()) to kvc_sequence_remove().
 *
 * **Memory plan.** State slots come out of the primary budget (the least of
 * primary_bytes, max_tokens' bytes, free_gpu_memory_fraction of the free GPU
 * memory, or the CPU default; config.h): with S the bytes of one slot of
 * every resource (the sum of their slot strides) and B one block of every
 * layer group,
 *   - the number of slots N is kvc_config_set_max_state_slots() when set,
 *     else `min(256, max(1, floor((budget - B) / 2 / S)))`: at most half of
 *     what is left after one block set, capped at 256 sequences;
 *   - state snapshots (see prefix reuse below) take M * S: M is
 *     kvc_config_set_max_state_snapshots() when set, else
 *     `min(N, floor((budget - N * S - B) / 4 / S))`;
 *   - the paged pools get the rest, `budget - (N + M) * S`, planned as
 *     without state resources.
 * The budget must hold `B + N * S` with N >= 1 (kvc_config_validate() and
 * kvc_cache_create() refuse it otherwise, naming both figures).
 * kvc_cache_describe()'s primary_bytes counts the paged pools only;
 * state_bytes counts the slots. kvc_cache_resize() and
 * kvc_cache_plan_resize() are refused (KVC_ERR_UNSUPPORTED) on a cache with
 * state resources.
 *
 * **Sequences.** kvc_sequence_add() takes a slot of every resource after
 * its other checks and all or nothing: when any resource has no free slot
 * the add is refused with KVC_ERR_OUT_OF_BLOCKS and a message naming the
 * resource and its slot count; nothing changed. A slot's bytes are not
 * cleared on add (the caller's kernels initialize the state of a new
 * sequence). kvc_sequence_remove() frees the slots. kvc_sequence_fork()
 * takes slots for the child in the same way and copies every resource's
 * slot bytes from the parent into the child's slot with a device copy
 * (stream NULL: the device's default stream; on CUDA the copy is
 * device-to-device). A sequence longer than an unpaged resource's
 * max_tokens is refused by add and extend (KVC_ERR_INVALID_ARGUMENT,
 * nothing changed).
 *
 * **Prefix reuse through state snapshots.** Attention blocks alone cannot
 * be reused by a hybrid model: the state after the prefix is needed too.
 * The caller publishes a sequence's state at a block-aligned position with
 * kvc_sequence_publish_state(), right after the chunk of tokens that ends
 * there was computed (so the slots hold the state at that position) and
 * committed (kvc_sequence_commit() publishes the blocks). The cache copies
 * the bytes of every resource's slot of the sequence into a *state
 * snapshot* hung on the prefix-tree node of the block ending at that
 * position (one snapshot per node; a later publish at the same node
 * overwrites it: the state is a function of the prefix).
 *   - kvc_sequence_add() and kvc_cache_probe() reuse the longest prefix
 *     that every attention group has its blocks for (windows included)
 *     *and* whose last block's node has a snapshot; never a partial block.
 *     Without a snapshot the reuse is shorter (down to 0), never wrong.
 *     When the reuse is > 0, add copies the snapshot into the new
 *     sequence's slots before it returns (Device copy on the add's
 *     `stream`; on CUDA device to device): the caller computes the prompt
 *     from `cached_tokens` on with the restored state. With no reuse the
 *     slots are left as they are (the caller initializes them).
 *   - Snapshots live in their own pool of snapshot slots (each one slot of
 *     every resource, S bytes as above): kvc_config_set_max_state_snapshots()
 *     or, planned, `min(N, floor((budget - N * S - B) / 4 / S))`: up to a
 *     quarter of what the state slots leave, at most one per state slot.
 *     Their bytes come out of the primary budget beside the state slots
 *     (kvc_snapshot_stats_t bytes; the paged pools get the rest).
 *   - Eviction: evicting a node (the prioritized LRU, the host tier's own
 *     eviction, kvc_cache_reset_reuse()) drops its snapshot; moving a node
 *     to the host tier keeps it. A publish into a full pool evicts the
 *     snapshot whose node has the lowest priority now (what the LRU would
 *     evict first), the least recently published or reused among equals;
 *     that node keeps its blocks (a prompt then reuses up to an earlier
 *     snapshot). With a host tier the victim may move to the host pool
 *     instead (below).
 *   - Offloaded to the host tier: with a host tier
 *     (kvc_config_set_host_cache_bytes) a quarter of host_cache_bytes goes
 *     to a host snapshot pool first, `min(2^20, floor(host_cache_bytes / 4 /
 *     S))` host snapshot slots (none with KVC_STATE_SNAPSHOTS_NONE or 0
 *     device snapshot slots); the host pools are planned from the rest
 *     (kvc_cache_desc_t host_cache_bytes counts those pools only;
 *     kvc_snapshot_stats_t host_bytes the snapshot pool). The victim of a
 *     publish into a full pool whose node's priority is at or above the
 *     secondary offload priority
 *     (kvc_config_set_secondary_offload_min_priority, as for blocks) is
 *     copied into a host snapshot slot instead of being dropped (a free
 *     one, else the host snapshot the same rule picks is evicted: lowest
 *     priority, then least recently used); below it, it is dropped. A node
 *     has one snapshot, in one pool. A reuse (or a rewind) of a host
 *     snapshot copies it straight into the new sequence's state slots (host
 *     to device, on the add's stream) and keeps it in the host pool; a
 *     publish at its node puts the new bytes in the device pool and frees
 *     the host slot. The offload and onboard copies are complete when the
 *     call returns (the cache synchronizes the call's stream after them).
 *     Evicting the node from every tier drops its snapshot, wherever it is;
 *     moving the node's blocks between tiers leaves it where it is. Block
 *     export/import and the disk and remote stores do not carry snapshots,
 *     so they are refused on a cache with state resources
 *     (KVC_ERR_UNSUPPORTED; validation refuses a store).
 *   - How often to publish: every publish copies kvc_snapshot_stats_t
 *     bytes_per_snapshot bytes (the sum of the resources' slot bytes, e.g.
 *     the SSM and conv state of every Mamba layer: a few MB for an 8B
 *     hybrid model) and takes a snapshot slot, and a publish into a full
 *     pool evicts another snapshot. Publish where later prompts branch:
 *     the end of a shared system prompt, and the last block boundary a
 *     turn reaches (the next turn's prompt extends it); size the pool to
 *     the branch points worth keeping. Publishing at every prefill chunk
 *     makes every boundary reusable but, with a pool smaller than what is
 *     published, its intermediate snapshots evict the useful ones: on the
 *     simulator's multi-turn workload and its Nemotron-H-8B preset,
 *     publishing every 16 blocks reused 41.8% of prompt tokens with 64
 *     snapshot slots, every 4 blocks 17.5%, every block 6.9%
 *     (bench/results/2026-11-28-hybrid-snapshots-vm-2cpu.md).
 *
 * **Rewind (speculative decoding).** The state cannot run backwards, so on
 * a sequence with state resources kvc_sequence_rewind() by more than 0
 * tokens is allowed only to a position p that is a positive multiple of
 * tokens_per_block, at most the committed tokens, whose block is published
 * and whose node has a snapshot cached (published by this sequence or by
 * another with the same prefix); the rewind then restores the state from
 * it (Device copy on the default stream, stream NULL, as fork). Otherwise
 * KVC_ERR_INVALID_STATE naming the missing piece, nothing changed. The
 * pattern: before running draft tokens from a block boundary p, commit up
 * to p and publish the state at p; after verification, rewind to p (the
 * state comes back) and extend by the accepted tokens, or keep the
 * sequence when every draft token was accepted.
 *
 * Threading: as every call on a kvc_cache_t (serialized inside). A base
 * pointer from kvc_cache_describe_resource() stays valid until the cache is
 * destroyed.
 */
#ifndef KVCACHE_STATE_H
#define KVCACHE_STATE_H

#include "kvcache/cache.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a resource is (values of enum kvc_resource_kind). */
typedef uint32_t kvc_resource_kind_t;
/** Resource kinds. */
enum kvc_resource_kind {
  KVC_RESOURCE_SSM = 1,     /**< Mamba SSM state [num_heads][head_dim][d_state]. */
  KVC_RESOURCE_CONV = 2,    /**< Causal-conv state [conv_dim][d_conv]. */
  KVC_RESOURCE_GENERIC = 3, /**< Opaque per-sequence bytes. */
  KVC_RESOURCE_UNPAGED = 4  /**< Per-token bytes, one row of max_tokens per slot. */
};

/** Why a resource is managed or local (values of enum kvc_resource_reason). */
typedef uint32_t kvc_resource_reason_t;
/** Reasons. */
enum kvc_resource_reason {
  KVC_RESOURCE_REASON_MANAGED = 0,             /**< Managed with the others. */
  KVC_RESOURCE_REASON_SSM_SHAPE_DIFFERS = 1,   /**< SSM shape/dtype differ from the first SSM's. */
  KVC_RESOURCE_REASON_NO_SSM = 2,              /**< Conv state without an SSM resource. */
  KVC_RESOURCE_REASON_N_GROUPS = 3,            /**< conv_dim fails the n_groups constraint. */
  KVC_RESOURCE_REASON_CONV_SHAPE_DIFFERS = 4,  /**< Conv shape/dtype differ from the first managed conv's. */
  KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS = 5, /**< KV resource: head_dim differs from KV resource 0's (kv_resource.h). @since 0.3.0 */
  KVC_RESOURCE_REASON_KV_DTYPE_DIFFERS = 6,    /**< KV resource: dtype differs from KV resource 0's. @since 0.3.0 */
  KVC_RESOURCE_REASON_KV_FACTOR_DIFFERS = 7,   /**< KV resource: kv_factor differs from KV resource 0's. @since 0.3.0 */
  KVC_RESOURCE_REASON_KV_LAYOUT_DIFFERS = 8    /**< KV resource: layout differs from KV resource 0's. @since 0.3.0 */
};

/** `resource` value of kvc_batch_state_slots() meaning every resource. */
#define KVC_STATE_ALL UINT32_MAX

/** The most resources one config may have. */
#define KVC_STATE_MAX_RESOURCES 256u

/** Largest generic-state alignment (a power of two up to this). */
#define KVC_STATE_MAX_ALIGNMENT 4096u

/**
 * @brief Adds a Mamba SSM state resource: one slot holds
 *        `[num_heads][head_dim][d_state]` elements of `dtype`.
 * @param num_heads,head_dim,d_state Each > 0.
 * @param dtype KVC_DTYPE_F32, F16 or BF16.
 * @param[out] index Receives the resource's index; untouched on failure.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (the message names the argument
 *         and value: a dimension 0 or above 2^20, another dtype, a slot
 *         above 2^40 bytes, more than KVC_STATE_MAX_RESOURCES resources;
 *         the config unchanged).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_add_ssm_state(kvc_config_t *config, uint32_t num_heads,
                                              uint32_t head_dim, uint32_t d_state,
                                              kvc_dtype_t dtype, uint32_t *index);

/**
 * @brief Adds a causal-conv state resource: one slot holds
 *        `[conv_dim][d_conv]` elements of `dtype`. Whether it is managed
 *        (the n_groups constraint) is decided when the cache is created.
 * @param conv_dim,d_conv Each > 0.
 * @param dtype KVC_DTYPE_F32, F16 or BF16.
 * @param[out] index Receives the resource's index; untouched on failure.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (config unchanged).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_add_conv_state(kvc_config_t *config, uint32_t conv_dim,
                                               uint32_t d_conv, kvc_dtype_t dtype,
                                               uint32_t *index);

/**
 * @brief Adds a generic per-sequence state of `bytes` bytes (> 0) whose
 *        slots start at multiples of `alignment` (a power of two up to
 *        KVC_STATE_MAX_ALIGNMENT; 0 = 256).
 * @param[out] index Receives the resource's index; untouched on failure.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (config unchanged).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_add_generic_state(kvc_config_t *config, uint64_t bytes,
                                                  uint64_t alignment, uint32_t *index);

/**
 * @brief Adds an unpaged per-token resource: `bytes_per_token` (> 0) bytes
 *        for each of up to `max_tokens` (> 0) tokens of a sequence.
 * @param[out] index Receives the resource's index; untouched on failure.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (config unchanged; also when
 *         bytes_per_token * max_tokens exceeds 2^40).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_add_unpaged_resource(kvc_config_t *config,
                                                     uint64_t bytes_per_token,
                                                     uint64_t max_tokens, uint32_t *index);

/** @brief Number of resources added to the config. @since 0.3.0 */
KVC_API kvc_status_t kvc_config_get_num_resources(const kvc_config_t *config,
                                                  uint32_t *out);

/**
 * @brief Number of state slots (the most sequences at once); 0 (default)
 *        = planned from the budget (see the file's memory plan). At most
 *        2^20.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_max_state_slots(kvc_config_t *config, uint32_t slots);
/** @brief The state slot setting (0 = planned). @since 0.3.0 */
KVC_API kvc_status_t kvc_config_get_max_state_slots(const kvc_config_t *config,
                                                    uint32_t *out);

/**
 * @brief One resource of a cache, and the view a kernel addresses it by.
 *        Transparent; begins with struct_size.
 *
 * Slot s of the resource starts at `base + s * slot_stride`. Inside a slot:
 * SSM element (h, p, n) is at `h * stride0 + p * stride1 + n * stride2`
 * ([num_heads][head_dim][d_state]); conv element (c, k) at
 * `c * stride0 + k * stride1` (stride2 = 0); unpaged token t's bytes at
 * `t * stride0`; generic: all strides 0. Strides are in bytes.
 * @since 0.3.0
 */
typedef struct kvc_resource_desc {
  uint32_t struct_size;        /**< sizeof(kvc_resource_desc_t) of the caller. */
  kvc_resource_kind_t kind;    /**< KVC_RESOURCE_*. */
  uint32_t managed;            /**< 1: managed (shared slot index); 0: local. */
  kvc_resource_reason_t reason; /**< KVC_RESOURCE_REASON_*. */
  const char *reason_text;     /**< The reason in words, owned by the cache (valid until
                                    kvc_cache_destroy). */
  kvc_dtype_t dtype;           /**< SSM and conv: element type; else 0. */
  uint32_t num_heads;          /**< SSM; else 0. */
  uint32_t head_dim;           /**< SSM; else 0. */
  uint32_t d_state;            /**< SSM; else 0. */
  uint32_t conv_dim;           /**< Conv; else 0. */
  uint32_t d_conv;             /**< Conv; else 0. */
  uint32_t n_groups;           /**< Conv meeting the constraint: its n_groups; else 0. */
  uint32_t num_slots;          /**< Slots of the resource. */
  uint32_t slots_used;         /**< Slots held by live sequences now. */
  uint64_t bytes_per_token;    /**< Unpaged; else 0. */
  uint64_t max_tokens;         /**< Unpaged; else 0. */
  uint64_t alignment;          /**< Alignment of every slot's start. */
  uint64_t slot_bytes;         /**< Bytes of the state in one slot. */
  uint64_t slot_stride;        /**< Bytes from one slot to the next (>= slot_bytes). */
  uint64_t stride0;            /**< See above. */
  uint64_t stride1;            /**< See above. */
  uint64_t stride2;            /**< See above. */
  void *base;                  /**< Slot 0 (device memory on CUDA). */
} kvc_resource_desc_t;

/** Static initializer for kvc_resource_desc_t. */
#define KVC_RESOURCE_DESC_INIT                                                             \
  {sizeof(kvc_resource_desc_t), 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
   0, 0, 0, NULL}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_resource_desc_init(kvc_resource_desc_t *desc);

/**
 * @brief Describes resource `index` (< kvc_cache_desc_t num_resources):
 *        kind, managed or local and why, slots used and free, and the view.
 * @param[in,out] out struct_size must be set; min(struct_size, its own size)
 *        bytes are written.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (index out of range, named with
 *         the count). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_describe_resource(const kvc_cache_t *cache, uint32_t index,
                                                 kvc_resource_desc_t *out);

/**
 * @brief Each sequence's slot index (AutoDeploy's slot_idx).
 *
 * With `resource` < num_resources, `slots[i]` gets sequence ids[i]'s slot of
 * that resource. With KVC_STATE_ALL, `slots[i * num_resources + r]` gets its
 * slot of resource r.
 * @param slots `count` (or count * num_resources) int32, written only on
 *        success.
 * @return KVC_OK; KVC_ERR_NOT_FOUND (an id, named); KVC_ERR_INVALID_ARGUMENT
 *         (NULL arrays with count > 0, a resource out of range, or a cache
 *         without state resources). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_batch_state_slots(const kvc_cache_t *cache, const uint64_t *ids,
                                           size_t count, uint32_t resource, int32_t *slots);

/** Value of kvc_config_set_max_state_snapshots(): no snapshot pool. */
#define KVC_STATE_SNAPSHOTS_NONE UINT32_MAX

/**
 * @brief Number of state snapshot slots (see the file's prefix reuse):
 *        0 (default) = planned from the budget; KVC_STATE_SNAPSHOTS_NONE =
 *        none (no prefix reuse, no rewind); else at most 2^20, and the
 *        budget must hold them after the state slots and one block set
 *        (validation and kvc_cache_create() refuse it, naming both figures).
 *        Applies only to a config with state resources.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (above 2^20 and not
 *         KVC_STATE_SNAPSHOTS_NONE; config unchanged).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_max_state_snapshots(kvc_config_t *config, uint32_t slots);
/** @brief The snapshot slot setting (0 = planned). @since 0.3.0 */
KVC_API kvc_status_t kvc_config_get_max_state_snapshots(const kvc_config_t *config,
                                                        uint32_t *out);

/**
 * @brief Publishes sequence `id`'s state at `position`: copies the bytes of
 *        every resource's slot of the sequence into the snapshot of the
 *        prefix-tree node of its block ending at `position` (see the file's
 *        prefix reuse), on `stream` (NULL: the device's default stream; on
 *        CUDA device to device, ordered after the caller's kernels on that
 *        stream). The slots must hold the state at `position`: publish
 *        right after the chunk ending there, before later tokens run.
 * @param position A positive multiple of tokens_per_block, at most the
 *        sequence's committed tokens.
 * @return KVC_OK; KVC_ERR_NOT_FOUND (no such sequence);
 *         KVC_ERR_INVALID_ARGUMENT (a cache without state resources, a
 *         position 0, not a multiple of tokens_per_block or past the
 *         committed tokens: the message names the value and the bound);
 *         KVC_ERR_INVALID_STATE (the block is not published: block reuse
 *         off; or the cache has 0 snapshot slots); KVC_ERR_DEVICE (the
 *         copy failed: the node has no snapshot then). Nothing changed on
 *         any failure but KVC_ERR_DEVICE. A full snapshot pool evicts one
 *         (the file's eviction rule).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_sequence_publish_state(kvc_cache_t *cache, uint64_t id,
                                                uint64_t position, void *stream);

/**
 * @brief The state snapshot pool and its counters (kvc_cache_get_snapshot_stats).
 *        Transparent; begins with struct_size. All 0 without state resources.
 * @since 0.3.0
 */
typedef struct kvc_snapshot_stats {
  uint32_t struct_size;        /**< sizeof(kvc_snapshot_stats_t) of the caller. */
  uint32_t num_slots;          /**< Snapshot slots of the pool. */
  uint32_t slots_used;         /**< Snapshots cached now. */
  uint32_t reserved;           /**< 0. */
  uint64_t bytes_per_snapshot; /**< Bytes one publish or restore copies. */
  uint64_t bytes;              /**< Bytes of the pool (out of the primary budget). */
  uint64_t published;          /**< Publishes that stored a snapshot. */
  uint64_t hits;               /**< Adds that reused a prefix (restored a snapshot). */
  uint64_t hit_tokens;         /**< Tokens those adds reused. */
  uint64_t restores;           /**< Rewinds that restored a snapshot. */
  uint64_t evicted;            /**< Snapshots a publish into a full pool evicted for good
                                    (not offloaded to the host pool). */
  uint64_t dropped;            /**< Snapshots dropped with their node (block eviction, reset),
                                    from either pool. */
  uint32_t host_num_slots;     /**< Host snapshot slots (a quarter of host_cache_bytes;
                                    0 without a host tier). @since 0.3.0 */
  uint32_t host_slots_used;    /**< Snapshots in the host pool now. */
  uint64_t host_bytes;         /**< Bytes of the host pool (out of host_cache_bytes). */
  uint64_t offloaded;          /**< Snapshots a publish into a full pool moved to the host
                                    pool (not counted in evicted). */
  uint64_t onboarded;          /**< Reuses and rewinds that restored a host snapshot (also
                                    counted in hits or restores). */
  uint64_t host_evicted;       /**< Host snapshots evicted to make room for an offload. */
} kvc_snapshot_stats_t;

/** Static initializer for kvc_snapshot_stats_t. */
#define KVC_SNAPSHOT_STATS_INIT \
  {sizeof(kvc_snapshot_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `stats` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_snapshot_stats_init(kvc_snapshot_stats_t *stats);

/**
 * @brief The snapshot pool's use and counters.
 * @param[in,out] out struct_size must be set; min(struct_size, its own
 *        size) bytes are written.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (NULL, struct_size 0). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_get_snapshot_stats(const kvc_cache_t *cache,
                                                  kvc_snapshot_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_STATE_H */
