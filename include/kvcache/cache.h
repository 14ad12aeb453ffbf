/**
 * @file cache.h
 * @brief Creating a cache from a config, describing its memory, and the
 *        per-layer tensor views that external attention kernels read.
 *
 * A cache owns its primary pool (host memory on the CPU backend, cudaMalloc
 * memory on CUDA), allocated once at creation and never grown while
 * serving.
 */
#ifndef KVCACHE_CACHE_H
#define KVCACHE_CACHE_H

#include "kvcache/common.h"
#include "kvcache/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque cache handle. */
typedef struct kvc_cache kvc_cache_t;

/* ===================================================================== */
/* Lifetime                                                              */
/* ===================================================================== */

/**
 * @brief Validates `config`, sizes and allocates the primary pool, and
 *        creates a cache.
 *
 * Sizing: the pool takes the least of primary_bytes, the bytes of
 * max_tokens tokens per layer, and (CUDA) free_gpu_memory_fraction of the
 * free device memory; it is rounded down to whole blocks.
 * @param config Borrowed for the call; the cache keeps its own copy.
 * @param[out] out Receives the cache, owned by the caller, freed with
 *             kvc_cache_destroy(); untouched on failure.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (invalid config or NULL);
 *         KVC_ERR_DEVICE (CUDA asked for but not built, no such device,
 *         no usable driver, or a GPU this build has no code for: the CUDA
 *         kernels need compute capability 9.0 or newer; the message says
 *         which);
 *         KVC_ERR_OUT_OF_MEMORY (the pool could not be allocated).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_create(const kvc_config_t *config,
                                      kvc_cache_t **out);

/**
 * @brief Frees the cache and its pools. NULL is accepted and ignored.
 *
 * Not thread safe against other calls on the same cache: the caller must
 * make sure no other thread uses it any more.
 * @since 0.1.0
 */
KVC_API void kvc_cache_destroy(kvc_cache_t *cache);

/* ===================================================================== */
/* Description                                                           */
/* ===================================================================== */

/**
 * @brief Summary of a cache. Transparent; begins with struct_size.
 * @since 0.1.0
 */
typedef struct kvc_cache_desc {
  uint32_t struct_size;        /**< sizeof(kvc_cache_desc_t) of the caller. */
  kvc_device_kind_t device_kind; /**< KVC_DEVICE_*. */
  int32_t device_ordinal;      /**< CUDA ordinal; 0 on CPU. */
  kvc_dtype_t dtype;           /**< Stored element type. */
  kvc_layout_t layout;         /**< Block layout. */
  uint32_t num_layers;         /**< Attention layers. */
  uint32_t num_groups;         /**< Layer groups (window, heads, head_dim). */
  uint32_t num_pools;          /**< Block pools. */
  uint32_t tokens_per_block;   /**< Tokens per block. */
  uint32_t kv_factor;          /**< 2 (K and V) or 1. */
  uint64_t num_blocks;         /**< Primary blocks over all pools. */
  uint64_t token_capacity;     /**< Tokens every layer can hold at once. */
  uint64_t primary_bytes;      /**< Bytes of the primary pools. */
  uint64_t host_cache_bytes;   /**< Bytes of the secondary (host) tier's pools: the
                                    configured host_cache_bytes (less the host
                                    state snapshot pool of a cache with state
                                    resources, state.h) rounded down to whole
                                    block sets (one block per layer group);
                                    0 without a host tier. */
  uint64_t device_free_bytes;  /**< Free device memory seen at sizing (CUDA); 0 on CPU. */
  uint64_t device_total_bytes; /**< Total device memory (CUDA); 0 on CPU. */
  uint32_t num_resources;      /**< State resources (state.h); 0 without. @since 0.3.0 */
  uint32_t num_state_slots;    /**< Slots of every state resource. @since 0.3.0 */
  uint64_t state_bytes;        /**< Bytes of all state slots (out of the budget). @since 0.3.0 */
  uint32_t num_ranks;          /**< Tensor-parallel ranks (kvc_config_set_ranks); 1
                                    without. num_blocks, token_capacity, the pool and
                                    host bytes above are one rank's: every rank has as
                                    many (kvc_group_desc_t says how the heads are
                                    split). @since 0.3.0 */
  uint32_t max_head_replication; /**< The most ranks holding one kv head over the
                                    groups (1: every group's heads are split, none
                                    replicated). @since 0.3.0 */
  uint32_t num_kv_resources;   /**< Paged KV resources (kv_resource.h); 0 when the
                                    global shape setters describe the layers.
                                    kvc_cache_describe_kv_resource() says which are
                                    managed together and why. With KV resources,
                                    dtype, layout and kv_factor above are KV
                                    resource 0's. @since 0.3.0 */
} kvc_cache_desc_t;

/** Static initializer for kvc_cache_desc_t. */
#define KVC_CACHE_DESC_INIT {sizeof(kvc_cache_desc_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_cache_desc_init(kvc_cache_desc_t *desc);

/**
 * @brief Fills `out` with a summary of the cache.
 * @param[in,out] out struct_size must be set (kvc_cache_desc_init); the
 *        library writes min(struct_size, its own size) bytes.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_describe(const kvc_cache_t *cache,
                                        kvc_cache_desc_t *out);

/**
 * @brief One layer group: the layers sharing (window, kv heads, head dim).
 *        Transparent; begins with struct_size.
 * @since 0.1.0
 */
typedef struct kvc_group_desc {
  uint32_t struct_size;   /**< sizeof(kvc_group_desc_t) of the caller. */
  uint32_t window;        /**< Attention window in tokens; 0 = full. */
  uint32_t kv_heads;      /**< KV heads of each layer of the group (the model's). */
  uint32_t head_dim;      /**< Head dimension. */
  uint32_t num_layers;    /**< Layers in the group. */
  uint32_t pool;          /**< Index of the pool its blocks come from. */
  uint64_t block_bytes;   /**< Bytes of one block (all layers of the group; one
                               rank's with several ranks). */
  uint64_t bytes_per_token; /**< block_bytes / tokens_per_block. */
  uint32_t kv_heads_per_rank; /**< KV heads each rank holds of each layer
                               (kv_heads with one rank). @since 0.3.0 */
  uint32_t head_replication; /**< Ranks holding each of those heads: 1 when the
                               ranks split the heads, num_ranks / kv_heads when
                               they replicate them. @since 0.3.0 */
  kvc_dtype_t dtype;      /**< Element type of the group's layers (with KV
                               resources of several geometries it may differ
                               from kvc_cache_desc_t's, kv_resource.h). @since 0.3.0 */
  uint32_t kv_factor;     /**< 2 (K and V) or 1, the group's. @since 0.3.0 */
  kvc_layout_t layout;    /**< Block layout of the group. @since 0.3.0 */
} kvc_group_desc_t;

/** Static initializer for kvc_group_desc_t. */
#define KVC_GROUP_DESC_INIT {sizeof(kvc_group_desc_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_group_desc_init(kvc_group_desc_t *desc);

/**
 * @brief Describes layer group `group` (0 <= group < num_groups).
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_describe_group(const kvc_cache_t *cache,
                                              uint32_t group,
                                              kvc_group_desc_t *out);

/**
 * @brief One block pool. Transparent; begins with struct_size.
 * @since 0.1.0
 */
typedef struct kvc_pool_desc {
  uint32_t struct_size;   /**< sizeof(kvc_pool_desc_t) of the caller. */
  uint32_t num_groups;    /**< Layer groups drawing from this pool. */
  uint64_t block_bytes;   /**< Bytes of one block. */
  uint64_t num_blocks;    /**< Blocks in the pool. With several pools (block
                               bytes differ) they share pages of the budget:
                               the blocks this pool can address, holding as
                               many as the pages it takes. @since 0.1.0 */
  uint64_t bytes;         /**< block_bytes * num_blocks (with shared pages,
                               the shared budget). */
  void *base;             /**< First byte (device pointer on CUDA). Owned by the cache.
                               With several ranks (kvc_config_set_ranks) rank 0's pool;
                               every rank's pool has these counts and bytes, and
                               kvc_cache_layer_view_rank() addresses the others. */
} kvc_pool_desc_t;

/** Static initializer for kvc_pool_desc_t. */
#define KVC_POOL_DESC_INIT {sizeof(kvc_pool_desc_t), 0, 0, 0, 0, NULL}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_pool_desc_init(kvc_pool_desc_t *desc);

/**
 * @brief Describes pool `pool` (0 <= pool < num_pools).
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_describe_pool(const kvc_cache_t *cache,
                                             uint32_t pool,
                                             kvc_pool_desc_t *out);

/* ===================================================================== */
/* Per-layer tensor views                                                */
/* ===================================================================== */

/**
 * @brief Where one layer's K and V live, as a strided tensor that external
 *        kernels can address. Transparent; begins with struct_size.
 *
 * Element (block b, kv k, token t, head h, dim d) of this layer is at
 * `base + b * block_stride + k * kv_stride + t * token_stride +
 *  h * head_stride + d * elem_size` bytes. Block ids are those the cache
 * hands out for the layer's group. All strides are in bytes.
 * @since 0.1.0
 */
typedef struct kvc_layer_view {
  uint32_t struct_size;   /**< sizeof(kvc_layer_view_t) of the caller. */
  uint32_t group;         /**< Layer group of the layer. */
  uint32_t pool;          /**< Pool the blocks come from. */
  kvc_dtype_t dtype;      /**< Element type. */
  kvc_layout_t layout;    /**< NHD or HND. */
  uint32_t kv_heads;      /**< KV heads. */
  uint32_t head_dim;      /**< Head dimension. */
  uint32_t tokens_per_block; /**< Tokens per block. */
  uint32_t kv_factor;     /**< 2 (K at kv 0, V at kv 1) or 1. */
  uint32_t elem_size;     /**< Bytes per element. */
  void *base;             /**< Byte 0 of block 0 for this layer (layer offset applied). */
  uint64_t num_blocks;    /**< Blocks addressable through the view. */
  uint64_t block_stride;  /**< Bytes between consecutive blocks. */
  uint64_t kv_stride;     /**< Bytes between K and V. */
  uint64_t token_stride;  /**< Bytes between consecutive tokens. */
  uint64_t head_stride;   /**< Bytes between consecutive heads. */
  uint32_t rank;          /**< The rank whose pool this is (0 with one rank). @since 0.3.0 */
  uint32_t first_kv_head; /**< The model's kv head at head 0 of the view: the
                               view holds heads first_kv_head ..
                               first_kv_head + kv_heads - 1. @since 0.3.0 */
  uint32_t total_kv_heads; /**< The layer's kv heads in the model. @since 0.3.0 */
} kvc_layer_view_t;

/** Static initializer for kvc_layer_view_t. */
#define KVC_LAYER_VIEW_INIT {sizeof(kvc_layer_view_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `view` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_layer_view_init(kvc_layer_view_t *view);

/**
 * @brief The tensor view of layer `layer` (0 <= layer < num_layers).
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_layer_view(const kvc_cache_t *cache,
                                          uint32_t layer,
                                          kvc_layer_view_t *out);

/**
 * @brief The tensor view of layer `layer` on rank `rank` (0 <= rank <
 *        num_ranks; kvc_config_set_ranks): the rank's pool and its share of
 *        the heads (kv_heads, first_kv_head). Block ids are the same on
 *        every rank. Rank 0 is kvc_cache_layer_view.
 * @return KVC_OK, KVC_ERR_INVALID_ARGUMENT (a layer or rank out of range,
 *         named). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_layer_view_rank(const kvc_cache_t *cache,
                                               uint32_t rank, uint32_t layer,
                                               kvc_layer_view_t *out);

/* ===================================================================== */
/* Resizing the primary pools in place                                   */
/* ===================================================================== */

/**
 * @brief What AutoDeploy measures after a forward pass (its phase 6).
 *        Transparent; begins with struct_size. @since 0.3.0
 */
typedef struct kvc_resize_inputs {
  uint32_t struct_size;      /**< sizeof(kvc_resize_inputs_t) of the caller. */
  uint32_t reserved;        /**< Must be 0 (alignment). */
  double free_gpu_memory_fraction; /**< Share of what is left, in (0, 1]. */
  uint64_t free_bytes;       /**< Free device memory measured by the caller;
                                  0: the device's free memory now plus the
                                  bytes of this cache's primary pools (what
                                  shutting the cache down would free, as the
                                  seed does before measuring). */
  uint64_t non_paged_bytes;  /**< Memory outside the paged pools that must
                                  stay (unpaged resources, other buffers). */
  uint64_t forward_bytes;    /**< Activation memory of the forward pass. */
} kvc_resize_inputs_t;

/** Static initializer for kvc_resize_inputs_t (fraction 0.9, as the config's default). */
#define KVC_RESIZE_INPUTS_INIT {sizeof(kvc_resize_inputs_t), 0, 0.9, 0, 0, 0}

/** @brief Zeroes `inputs`, sets struct_size and the fraction 0.9. @since 0.3.0 */
KVC_API void kvc_resize_inputs_init(kvc_resize_inputs_t *inputs);

/**
 * @brief The primary pools a resize would give. Transparent; begins with
 *        struct_size. @since 0.3.0
 */
typedef struct kvc_resize_plan {
  uint32_t struct_size;       /**< sizeof(kvc_resize_plan_t) of the caller. */
  uint32_t num_pools;         /**< Pools (entries of pool_blocks). */
  uint64_t free_bytes;        /**< The free memory the formula used. */
  uint64_t mem_for_paged;     /**< The formula's result, in bytes. */
  uint64_t primary_bytes;     /**< What to pass to kvc_cache_resize:
                                   mem_for_paged held to max_primary_bytes. */
  uint64_t max_primary_bytes; /**< The cache's ceiling (see kvc_cache_resize). */
  uint64_t blocks_per_group;  /**< Blocks every layer group gets. */
  uint64_t token_capacity;    /**< Tokens every layer can hold. */
  uint64_t num_blocks;        /**< Blocks over all pools (with shared pages:
                                   the id bounds of every pool). */
  uint64_t total_bytes;       /**< Bytes the pools take (<= primary_bytes). */
} kvc_resize_plan_t;

#define KVC_RESIZE_PLAN_INIT {sizeof(kvc_resize_plan_t), 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `plan` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_resize_plan_init(kvc_resize_plan_t *plan);

/**
 * @brief Plans a resize from measured memory, changing nothing.
 *
 * The primary bytes are AutoDeploy's (seed 004, phase 6), exactly:
 *
 *     mem_for_paged = (free_mem - non_paged - forward_mem) * free_gpu_fraction
 *
 * with free_mem = inputs->free_bytes, non_paged = inputs->non_paged_bytes,
 * forward_mem = inputs->forward_bytes, free_gpu_fraction =
 * inputs->free_gpu_memory_fraction, rounded down to a byte. The plan is that
 * of kvc_cache_resize(cache, plan->primary_bytes), primary_bytes being
 * mem_for_paged held to the cache's ceiling: every layer group gets
 * primary_bytes / (bytes of one block of every group) blocks, as at
 * creation; with pools sharing pages, primary_bytes / page bytes pages.
 * @param pool_blocks the blocks of each pool (their id bounds with shared
 *        pages) go to pool_blocks[0 .. min(num_pools, pool_capacity)); may
 *        be NULL when pool_capacity is 0.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, a fraction outside
 *         (0, 1], non_paged + forward above free, free_bytes 0 on a device
 *         that reports no free memory (the CPU backend), or primary bytes
 *         that hold no block of every layer group). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_plan_resize(const kvc_cache_t *cache,
                                           const kvc_resize_inputs_t *inputs,
                                           kvc_resize_plan_t *out,
                                           uint64_t *pool_blocks,
                                           size_t pool_capacity);

/**
 * @brief Resizes the primary pools in place to `primary_bytes`.
 *
 * Pools reserve the address space of their ceiling at creation (the
 * config's max_primary_bytes, at least the budget at creation) and back
 * a prefix of it (CUDA: the driver's virtual memory management; CPU:
 * mmap PROT_NONE + mprotect), so base pointers, layer views and CUDA
 * graphs captured against them stay valid across resizes. The new size is
 * planned as at creation (see kvc_cache_plan_resize).
 *
 * Every block in use keeps its id and its bytes; every cached block that
 * stays keeps its key and its bytes.
 *  - Growing adds blocks at the end of every pool (each layer group gets
 *    the same number, as at creation). They are handed out after the free
 *    blocks already there, so the low ids fill first. With pools that
 *    share pages (layer groups of different block bytes, no host tier) the
 *    new pages join the shared arena free, and each pool takes them as it
 *    needs blocks; pages still move between pools as before.
 *  - Shrinking cuts the last ids of every pool (the last pages of a shared
 *    arena). Cached blocks are evicted in the usual victim order
 *    (retention priority, then least recently used, leaves first; counted
 *    in evicted_blocks, REMOVED events, offered to the block stores; a
 *    host tier takes those at or above its offload priority, as any
 *    eviction) until the blocks left fit below the new ends, wherever the
 *    victims lie. Cached blocks past the new ends then move into free
 *    blocks below them (their bytes copied; no caller holds a cached
 *    block's id). With a shared arena, a pool whose free room below the
 *    end lies in other pools' pages keeps its most valuable blocks and
 *    evicts the rest. A block in use past the new end refuses the shrink:
 *    KVC_ERR_OUT_OF_BLOCKS, the message naming the block; block ids in
 *    use never move, so remove the sequences holding it and retry.
 *    Blocks held only by the block stores' writes (blocks written through
 *    at commit, tiers.h) are not in use for this: the resize first waits
 *    for those writes (CPU work, no I/O wait) and takes the blocks back.
 * Kernels must not run on blocks past the new end of a shrink; a kernel
 * or layer view taken before a grow sees only the old blocks (its
 * num_blocks), the same bytes at the same addresses.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT (NULL, primary bytes that hold
 *         no block of every group or fewer pages than pools, or above the
 *         ceiling); KVC_ERR_OUT_OF_BLOCKS (a block in use past the new
 *         end); KVC_ERR_OUT_OF_MEMORY (the device could not back the
 *         growth); KVC_ERR_UNSUPPORTED (a device that reserves no address
 *         space). Nothing changed on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_resize(kvc_cache_t *cache, uint64_t primary_bytes);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_CACHE_H */
