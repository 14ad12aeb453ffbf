/**
 * @file kv_resource.h
 * @brief Paged KV resources, each with its own geometry (hybrid and mixed
 *        models: Jamba, Nemotron-H, models whose attention layers differ in
 *        head_dim, dtype, kv_factor or layout; TensorRT-LLM AutoDeploy's
 *        KVPagedResourceHandler).
 *
 * **Two ways to describe the attention layers.** The global setters of
 * config.h (kvc_config_set_num_layers, _kv_heads, _kv_heads_per_layer,
 * _head_dim, _dtype, _kv_factor, _layout, _attention_windows) describe
 * layers that share one geometry: the all-attention case, as before. Or
 * kvc_config_add_kv_resource() adds paged KV resources, each a set of layers
 * with its own kv heads, head_dim, dtype, kv_factor, layout and window. Once
 * a config has a KV resource, the global shape setters are refused
 * (KVC_ERR_INVALID_STATE naming the setter, nothing changed), and
 * kvc_config_add_kv_resource() is refused on a config where a global shape
 * setter was called (KVC_ERR_INVALID_STATE naming it): never both, never
 * silently ignored. tokens_per_block stays global. With KV resources the
 * getters of config.h read the derived settings: num_layers is the highest
 * layer id + 1, kv_heads and the attention window per layer are the
 * layer's resource's, head_dim, dtype, kv_factor and layout are KV resource
 * 0's. kvc_config_validate() and kvc_cache_create() refuse a layer in 0 ..
 * num_layers - 1 that no resource holds (KVC_ERR_INVALID_ARGUMENT naming
 * it).
 *
 * **Managed together or in their own pools.** As in AutoDeploy, KV
 * resources that match KV resource 0 on (head_dim, dtype, kv_factor,
 * layout) are *managed* together: their layers form layer groups (by
 * window and kv heads, which may differ) whose blocks come from pools
 * shared as in the all-attention cache (groups with equal block bytes share
 * one). A KV resource that differs is *local*: its layers' groups get pools
 * of their own, shared only with other resources of its own class (the same
 * four values), inside the same memory budget (never refused for its
 * geometry). kvc_cache_describe_kv_resource() says which, and why: the
 * first of head_dim, dtype, kv_factor, layout that differs from KV resource
 * 0's (KVC_RESOURCE_REASON_KV_*). Every block's bytes are laid out by its
 * group's own geometry: kvc_cache_layer_view() and the kernels of
 * kernels.h read each layer's own dtype, head_dim, kv_factor and layout.
 *
 * **Not supported yet with KV resources of more than one class** (refused,
 * never wrong bytes): several ranks (kvc_config_set_ranks; validation
 * refuses, KVC_ERR_INVALID_ARGUMENT), a disk or remote cache (validation
 * refuses), block export and import (transfer.h; KVC_ERR_UNSUPPORTED) and
 * the stateful mode (stateful.h; KVC_ERR_UNSUPPORTED). KV resources of one
 * class are the all-attention cache and support all of these.
 */
#ifndef KVCACHE_KV_RESOURCE_H
#define KVCACHE_KV_RESOURCE_H

#include "kvcache/state.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most KV resources one config may have. */
#define KVC_MAX_KV_RESOURCES 1024u

/**
 * @brief A paged KV resource: layers and their geometry. Transparent;
 *        begins with struct_size.
 * @since 0.3.0
 */
typedef struct kvc_kv_resource {
  uint32_t struct_size;     /**< sizeof(kvc_kv_resource_t) of the caller. */
  const uint32_t *layers;   /**< Model layer ids, ascending and distinct, each
                                 < 65536; borrowed for the call (copied). */
  uint32_t num_layers;      /**< Entries of `layers`, > 0. */
  uint32_t kv_heads;        /**< KV heads of each layer, 1..4096. */
  uint32_t head_dim;        /**< Head dimension, 1..4096. */
  kvc_dtype_t dtype;        /**< KVC_DTYPE_*; default BF16. */
  uint32_t kv_factor;       /**< 2 (K and V) or 1 (MLA); default 2. */
  kvc_layout_t layout;      /**< KVC_LAYOUT_NHD (default) or HND. */
  uint32_t window;          /**< Attention window in tokens; 0 = full (default). */
} kvc_kv_resource_t;

/** Static initializer for kvc_kv_resource_t (the defaults above). */
#define KVC_KV_RESOURCE_INIT {sizeof(kvc_kv_resource_t), NULL, 0, 0, 0, KVC_DTYPE_BF16, 2, KVC_LAYOUT_NHD, 0}

/** @brief Sets `desc` to KVC_KV_RESOURCE_INIT. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_kv_resource_init(kvc_kv_resource_t *desc);

/**
 * @brief Adds a paged KV resource to the config (see the file comment for
 *        how it combines with the global shape setters).
 * @param desc struct_size set (kvc_kv_resource_init); read during the call.
 * @param[out] index Receives the resource's index (0, 1, ... in the order of
 *        the calls); untouched on failure.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT naming the field and value
 *         (num_layers 0, a dimension 0 or too large, an unknown dtype,
 *         kv_factor or layout, a window above 2^30, layers not ascending,
 *         a layer another resource already has, more than
 *         KVC_MAX_KV_RESOURCES resources); KVC_ERR_INVALID_STATE when a
 *         global shape setter was called on the config. The config is
 *         unchanged on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_add_kv_resource(kvc_config_t *config,
                                                const kvc_kv_resource_t *desc,
                                                uint32_t *index);

/**
 * @brief One KV resource of a cache: its geometry, and whether it is
 *        managed together with KV resource 0 or in pools of its own.
 *        Transparent; begins with struct_size.
 * @since 0.3.0
 */
typedef struct kvc_kv_resource_desc {
  uint32_t struct_size;      /**< sizeof(kvc_kv_resource_desc_t) of the caller. */
  uint32_t managed;          /**< 1: managed together with KV resource 0 (its
                                  class); 0: local, its own pools. */
  kvc_resource_reason_t reason; /**< KVC_RESOURCE_REASON_MANAGED, or the first of
                                  KVC_RESOURCE_REASON_KV_HEAD_DIM_DIFFERS,
                                  _KV_DTYPE_DIFFERS, _KV_FACTOR_DIFFERS,
                                  _KV_LAYOUT_DIFFERS that holds. */
  const char *reason_text;   /**< The reason in words; static, never NULL. */
  uint32_t managed_with;     /**< The first KV resource of its class (0 when
                                  managed; itself or an earlier local one). */
  uint32_t num_layers;       /**< Its layers. */
  uint32_t kv_heads;         /**< As added. */
  uint32_t head_dim;         /**< As added. */
  kvc_dtype_t dtype;         /**< As added. */
  uint32_t kv_factor;        /**< As added. */
  kvc_layout_t layout;       /**< As added. */
  uint32_t window;           /**< As added. */
  uint32_t group;            /**< The layer group holding its layers
                                  (kvc_cache_describe_group). */
  uint32_t pool;             /**< The pool of that group (kvc_cache_describe_pool). */
  uint64_t block_bytes;      /**< Bytes of one block of that group (every layer
                                  of the group, not only this resource's). */
} kvc_kv_resource_desc_t;

/** Static initializer for kvc_kv_resource_desc_t. */
#define KVC_KV_RESOURCE_DESC_INIT {sizeof(kvc_kv_resource_desc_t), 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `desc` and sets its struct_size. @since 0.3.0 */
KVC_API void kvc_kv_resource_desc_init(kvc_kv_resource_desc_t *desc);

/**
 * @brief Describes KV resource `index` of the cache.
 * @param index < kvc_cache_desc_t::num_kv_resources.
 * @param[in,out] out struct_size set (kvc_kv_resource_desc_init).
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT (NULL, index out of range,
 *         naming it). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_describe_kv_resource(const kvc_cache_t *cache, uint32_t index,
                                                    kvc_kv_resource_desc_t *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_KV_RESOURCE_H */
