/**
 * @file config.h
 * @brief The cache configuration: an opaque object with typed setters and
 *        getters, validated as a whole before a cache is created from it.
 *
 * Setters check what they can check alone (a range, a power of two) and
 * return KVC_ERR_INVALID_ARGUMENT without changing the config. Checks that
 * involve several settings (a per-layer array against the number of layers,
 * the memory budget against one block) happen in kvc_config_validate(),
 * which kvc_cache_create() also calls.
 *
 * A config is a plain value: it is not synchronized, and a cache copies what
 * it needs at creation, so the config may be changed or destroyed afterwards.
 */
#ifndef KVCACHE_CONFIG_H
#define KVCACHE_CONFIG_H

#include "kvcache/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Enumerations                                                          */
/* ===================================================================== */

/** Element type of the stored K/V (values of enum kvc_dtype). */
typedef uint32_t kvc_dtype_t;
/** K/V element types. */
enum kvc_dtype {
  KVC_DTYPE_F32 = 1,      /**< IEEE float32. */
  KVC_DTYPE_F16 = 2,      /**< IEEE float16. */
  KVC_DTYPE_BF16 = 3,     /**< bfloat16 (the default). */
  KVC_DTYPE_FP8_E4M3 = 4  /**< float8 e4m3 with a per-tensor scale. */
};

/** Order of tokens and heads inside a block (values of enum kvc_layout). */
typedef uint32_t kvc_layout_t;
/** Block layouts. Every block is [layer][kv] slabs of one of these. */
enum kvc_layout {
  KVC_LAYOUT_NHD = 1,  /**< [tokens][heads][head_dim] per slab (default). */
  KVC_LAYOUT_HND = 2   /**< [heads][tokens][head_dim] per slab. */
};

/** Where the primary pool lives (values of enum kvc_device_kind). */
typedef uint32_t kvc_device_kind_t;
/** Device kinds. */
enum kvc_device_kind {
  KVC_DEVICE_CPU = 1,  /**< Host memory; the reference backend (default). */
  KVC_DEVICE_CUDA = 2  /**< GPU memory of CUDA device `ordinal`. */
};

/** Opaque cache configuration. */
typedef struct kvc_config kvc_config_t;

/* ===================================================================== */
/* Lifetime                                                              */
/* ===================================================================== */

/**
 * @brief Creates a config holding the defaults.
 *
 * Defaults: no layers (must be set), kv_heads and head_dim unset (must be
 * set), dtype bf16, kv_factor 2, layout NHD, 16 tokens per block, every
 * layer full attention, device cpu, no byte or token limit (a CPU cache
 * with neither then takes 1 GiB; a CUDA cache takes
 * free_gpu_memory_fraction of the free GPU memory), free_gpu_memory_fraction
 * 0.9, host cache 0 bytes, offload min priority 35, block reuse on, partial
 * reuse on, copy on partial reuse on, event buffer 0 (events off).
 * @param[out] out Receives the new config; untouched on failure. The caller
 *             owns it and frees it with kvc_config_destroy().
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (out is NULL),
 *         KVC_ERR_OUT_OF_MEMORY.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_create(kvc_config_t **out);

/**
 * @brief Copies a config.
 * @param[out] out Receives the copy, owned by the caller; untouched on
 *             failure.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT, KVC_ERR_OUT_OF_MEMORY.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_clone(const kvc_config_t *config,
                                      kvc_config_t **out);

/**
 * @brief Frees a config. NULL is accepted and ignored.
 * @since 0.1.0
 */
KVC_API void kvc_config_destroy(kvc_config_t *config);

/**
 * @brief Checks the config as a whole, as kvc_cache_create() will.
 *
 * Fails on: zero layers, kv heads or head dim; a per-layer kv heads array or
 * a window list longer than the number of layers (a window list shorter
 * than it repeats, as TensorRT-LLM's max_attention_window does; a per-layer
 * heads array must match exactly); a byte or token budget too small for
 * one block of every pool. The message names the setting and its value.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_validate(const kvc_config_t *config);

/* ===================================================================== */
/* Model shape                                                           */
/* ===================================================================== */

/* These setters describe attention layers of one geometry (the all-attention
 * case). Layers of several geometries are described with paged KV resources
 * instead (kv_resource.h: kvc_config_add_kv_resource); once a config has one,
 * num_layers, kv_heads, kv_heads_per_layer, head_dim, dtype, kv_factor, layout
 * and attention_windows setters are refused with KVC_ERR_INVALID_STATE (the
 * getters read what the resources give), and a resource is refused on a
 * config where one of those setters was called. */

/** @brief Number of attention layers (> 0). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_num_layers(kvc_config_t *config,
                                               uint32_t num_layers);
/** @brief Number of attention layers; 0 if unset. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_num_layers(const kvc_config_t *config,
                                               uint32_t *out);

/**
 * @brief The same number of KV heads (> 0) for every layer.
 * Replaces a per-layer array set before. @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_kv_heads(kvc_config_t *config,
                                             uint32_t kv_heads);

/**
 * @brief KV heads per layer (GQA/MQA models whose layers differ).
 * @param kv_heads Array of `count` values > 0, borrowed for the call.
 *        `count` must equal the number of layers (checked by validate).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_kv_heads_per_layer(
    kvc_config_t *config, const uint32_t *kv_heads, size_t count);

/**
 * @brief KV heads of one layer, as the cache will use them.
 * @return KVC_ERR_INVALID_ARGUMENT if heads are unset or layer is out of
 *         range of a per-layer array. @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_get_kv_heads(const kvc_config_t *config,
                                             uint32_t layer, uint32_t *out);

/** @brief Head dimension (> 0). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_head_dim(kvc_config_t *config,
                                             uint32_t head_dim);
/** @brief Head dimension; 0 if unset. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_head_dim(const kvc_config_t *config,
                                             uint32_t *out);

/** @brief Element type of the stored K/V (KVC_DTYPE_*). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_dtype(kvc_config_t *config,
                                          kvc_dtype_t dtype);
/** @brief Element type of the stored K/V. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_dtype(const kvc_config_t *config,
                                          kvc_dtype_t *out);

/**
 * @brief 2 to store K and V, 1 when K and V are one tensor (MLA).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_kv_factor(kvc_config_t *config,
                                              uint32_t kv_factor);
/** @brief The kv factor (1 or 2). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_kv_factor(const kvc_config_t *config,
                                              uint32_t *out);

/** @brief Block layout (KVC_LAYOUT_*). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_layout(kvc_config_t *config,
                                           kvc_layout_t layout);
/** @brief Block layout. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_layout(const kvc_config_t *config,
                                           kvc_layout_t *out);

/**
 * @brief Tokens per block: a power of two > 1 (and at most 1024).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_tokens_per_block(kvc_config_t *config,
                                                     uint32_t tokens);
/** @brief Tokens per block. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_tokens_per_block(
    const kvc_config_t *config, uint32_t *out);

/**
 * @brief Attention window per layer, in tokens; 0 means full attention.
 *
 * The list repeats over the layers (TensorRT-LLM's max_attention_window):
 * {0, 256} on 4 layers means full, 256, full, 256. `count` == 0 resets to
 * full attention everywhere.
 * @param windows Array of `count` values, borrowed for the call.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_attention_windows(kvc_config_t *config,
                                                      const uint32_t *windows,
                                                      size_t count);
/**
 * @brief Attention window of one layer after repetition (0 = full).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_get_attention_window(
    const kvc_config_t *config, uint32_t layer, uint32_t *out);

/* ===================================================================== */
/* Device and memory                                                     */
/* ===================================================================== */

/**
 * @brief Device of the primary pool: KVC_DEVICE_CPU (ordinal must be 0) or
 *        KVC_DEVICE_CUDA with a device ordinal >= 0.
 *
 * On KVC_DEVICE_CPU the pools (and the host tier's) are host memory backed
 * at kvc_cache_create (a growable pool: as far as it is backed, and as it
 * grows): every page is resident from the start, so no serving call takes
 * a page fault in them; pools of 2 MiB or more ask for transparent huge
 * pages.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_device(kvc_config_t *config,
                                           kvc_device_kind_t kind,
                                           int32_t ordinal);
/** @brief Device of the primary pool. Either out may be NULL. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_device(const kvc_config_t *config,
                                           kvc_device_kind_t *kind,
                                           int32_t *ordinal);

/**
 * @brief Tensor parallelism: one cache over `num_ranks` ranks, rank r on
 *        device `ordinals[r]` of `kind`.
 *
 * The cache has one manager, one prefix tree and one set of block ids,
 * valid on every rank; each rank has its own pools (and host tier), holding
 * its share of every layer's kv heads: `kv_heads / num_ranks` heads when
 * the ranks divide the heads, else, when the heads divide the ranks, one
 * head replicated on `num_ranks / kv_heads` ranks (rank r holds head
 * `r / (num_ranks / kv_heads)`), as vLLM and TensorRT-LLM shard. Every copy
 * the cache makes (copy-on-write, offload, onboard, the moves of a resize)
 * is made on every rank; a layer view, store or attention kernel names its
 * rank (kvc_cache_layer_view_rank, the `rank` field of the kernel
 * arguments). Every byte budget (primary_bytes, max_primary_bytes,
 * host_cache_bytes, the free-memory fraction) is per rank, as vLLM's
 * gpu_memory_utilization is per GPU; a CUDA cache is sized by the rank with
 * the least free memory. Streams passed to cache calls are rank 0's; the
 * cache's copies on another rank go to that device's default stream.
 *
 * CUDA: `ordinals` are device ordinals, checked at kvc_cache_create; a
 * call that works on a rank makes that rank's device current on the calling
 * thread (as a one-device cache makes its own), so a caller with several
 * devices sets its own (cudaSetDevice) before its own CUDA work. CPU:
 * each rank has its own host pools; the ordinals only name them. One rank
 * is kvc_config_set_device(kind, ordinals[0]). kvc_config_set_device sets
 * one rank again.
 *
 * Refused at kvc_cache_create, naming the numbers: a layer whose kv heads
 * the ranks neither divide nor are divided by; state resources (state.h),
 * a disk or remote cache with more than one rank. kvc_stateful_create
 * refuses a config of several ranks.
 * @param ordinals Array of `num_ranks` distinct ordinals >= 0 (CPU with one
 *        rank: 0), borrowed for the call.
 * @param num_ranks 1..64.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (a kind, a count out of range,
 *         a negative or duplicate ordinal: the message names the indices);
 *         nothing changed on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_ranks(kvc_config_t *config,
                                          kvc_device_kind_t kind,
                                          const int32_t *ordinals,
                                          uint32_t num_ranks);
/**
 * @brief The ranks' ordinals (one rank: the device ordinal) into
 *        `ordinals[capacity]`; `*num_ranks` gets their count.
 * @param ordinals May be NULL when capacity is 0.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT, KVC_ERR_BUFFER_TOO_SMALL (then
 *         `*num_ranks` is the capacity needed and nothing is written).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_get_ranks(const kvc_config_t *config,
                                          int32_t *ordinals, uint32_t capacity,
                                          uint32_t *num_ranks);

/**
 * @brief Upper bound on the primary pool, in bytes; 0 = no byte bound.
 *
 * The pool is the lesser of this, max_tokens and (on CUDA)
 * free_gpu_memory_fraction of the free device memory. A CPU cache with
 * neither this nor max_tokens set takes 1 GiB (since 0.3.0; before, it was
 * refused).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_primary_bytes(kvc_config_t *config,
                                                  uint64_t bytes);
/** @brief Byte bound of the primary pool (0 = none). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_primary_bytes(const kvc_config_t *config,
                                                  uint64_t *out);

/**
 * @brief The most primary bytes kvc_cache_resize may grow the pools to;
 *        0 (default) = the budget at creation.
 *
 * The pools reserve this much address space at creation (no memory) and
 * the prefix tree is sized for it. Below the budget at creation it counts
 * as that budget. A device that cannot reserve address space refuses a
 * ceiling above the budget at creation (KVC_ERR_UNSUPPORTED).
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_max_primary_bytes(kvc_config_t *config,
                                                      uint64_t bytes);
/** @brief Ceiling of kvc_cache_resize (0 = the budget at creation). @since 0.3.0 */
KVC_API kvc_status_t kvc_config_get_max_primary_bytes(const kvc_config_t *config,
                                                      uint64_t *out);

/**
 * @brief Upper bound on the primary pool in tokens per layer; 0 = none.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_max_tokens(kvc_config_t *config,
                                               uint64_t max_tokens);
/** @brief Token bound of the primary pool (0 = none). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_max_tokens(const kvc_config_t *config,
                                               uint64_t *out);

/**
 * @brief Share of the free GPU memory the primary pool may take, in (0, 1].
 *        Default 0.9. Ignored on the CPU backend.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_free_gpu_memory_fraction(
    kvc_config_t *config, double fraction);
/** @brief Share of free GPU memory. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_free_gpu_memory_fraction(
    const kvc_config_t *config, double *out);

/**
 * @brief Bytes of host memory for the secondary tier; 0 = none (default).
 *
 * The cache allocates them at creation (pinned and mapped on CUDA, plain
 * host memory on the CPU backend) as pools mirroring the primary pools,
 * the same number of blocks for every layer group (rounded down to whole
 * block sets; less than one set means no tier). A cached block evicted
 * from the primary pools with a priority >= the offload min priority is
 * copied there and stays reusable; a later hit copies it back (onboards
 * it) on the stream of the call that reuses it, before that call returns.
 * Since 0.2.0 the tier works; 0.1.0 accepted the setting and ignored it.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_host_cache_bytes(kvc_config_t *config,
                                                     uint64_t bytes);
/** @brief Bytes of the secondary tier. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_host_cache_bytes(
    const kvc_config_t *config, uint64_t *out);

/**
 * @brief Blocks evicted with a priority below this (0..100, default 35) are
 *        dropped instead of offloaded to the secondary tier.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_secondary_offload_min_priority(
    kvc_config_t *config, uint32_t priority);
/** @brief Offload priority threshold. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_secondary_offload_min_priority(
    const kvc_config_t *config, uint32_t *out);

/* ===================================================================== */
/* Reuse and events                                                      */
/* ===================================================================== */

/** @brief Reuse of blocks across sequences (default on). @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_block_reuse(kvc_config_t *config,
                                                bool enable);
/** @brief Reuse of blocks across sequences. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_block_reuse(const kvc_config_t *config,
                                                bool *out);

/** @brief Token-by-token reuse of a partly matching block (default on).
 *  @since 0.1.0 */
KVC_API kvc_status_t kvc_config_set_partial_reuse(kvc_config_t *config,
                                                  bool enable);
/** @brief Partial reuse. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_partial_reuse(const kvc_config_t *config,
                                                  bool *out);

/**
 * @brief Copy a partly matched block instead of using it in place
 *        (default on), so several sequences can partially reuse it.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_copy_on_partial_reuse(
    kvc_config_t *config, bool enable);
/** @brief Copy on partial reuse. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_copy_on_partial_reuse(
    const kvc_config_t *config, bool *out);

/**
 * @brief Capacity of the event ring, in events; 0 (default) turns events off
 *        (no cost). See events.h: when more events are pending than this,
 *        the oldest are dropped and the next drain reports them as lost.
 *        A cache with events on needs at most 64 layer groups.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (more than 2^20 events).
 * @since 0.1.0 (events work since 0.3.0; before, any value but 0 was
 *        refused with KVC_ERR_UNSUPPORTED)
 */
KVC_API kvc_status_t kvc_config_set_event_buffer_size(kvc_config_t *config,
                                                      uint32_t events);
/** @brief Capacity of the event ring. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_event_buffer_size(
    const kvc_config_t *config, uint32_t *out);

/**
 * @brief Seed of the portable block hashes of events and of
 *        kvc_block_hashes() (events.h); default 0. Engines and routers that
 *        share an index use equal seeds; a deployment may pick its own so
 *        that hashes do not match another's.
 * @return KVC_OK. @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_event_hash_seed(kvc_config_t *config,
                                                    uint64_t seed);
/** @brief Seed of the portable block hashes. @since 0.3.0 */
KVC_API kvc_status_t kvc_config_get_event_hash_seed(
    const kvc_config_t *config, uint64_t *out);

/* ===================================================================== */
/* Retention clock                                                       */
/* ===================================================================== */

/**
 * @brief Measure retention durations (kvc_retention_range_t::duration_ms,
 *        kvc_sequence_options_t::decode_duration_ms) on a manual clock that
 *        starts at 0 and moves only by kvc_cache_advance_clock(), instead
 *        of the monotonic clock (default off). For tests and simulators.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_config_set_manual_clock(kvc_config_t *config,
                                                 bool enable);
/** @brief Whether the cache will use a manual retention clock. @since 0.1.0 */
KVC_API kvc_status_t kvc_config_get_manual_clock(const kvc_config_t *config,
                                                 bool *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_CONFIG_H */
