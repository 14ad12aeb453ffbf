/**
 * @file stats.h
 * @brief Statistics of a cache, its invariant checker and resetting its
 *        reuse state.
 */
#ifndef KVCACHE_STATS_H
#define KVCACHE_STATS_H

#include "kvcache/cache.h"
#include "kvcache/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Counts of a cache's blocks and of its reuse. Transparent; begins
 *        with struct_size. Primary block counts add up over all pools:
 *        free + cached + in_use == num_blocks; host-tier blocks are never in
 *        use: host_free + host_cached == host_blocks.
 * @since 0.1.0 (host-tier fields since 0.2.0)
 */
typedef struct kvc_cache_stats {
  uint32_t struct_size;     /**< sizeof(kvc_cache_stats_t) of the caller. */
  uint32_t reserved;        /**< Zero. */
  uint64_t num_blocks;      /**< Primary blocks over all pools. */
  uint64_t free_blocks;     /**< On a free list. */
  uint64_t cached_blocks;   /**< Unused but reusable (evictable). */
  uint64_t in_use_blocks;   /**< Held by sequences or pins. */
  uint64_t reused_blocks;   /**< Prompt block positions found cached by adds. */
  uint64_t missed_blocks;   /**< Prompt block positions adds had to compute. */
  double hit_rate;          /**< reused / (reused + missed); 0 before any add. */
  uint64_t evicted_blocks;  /**< Tree positions that left the radix tree to make room
                                 (dropped from the primary pools, or evicted from
                                 the host tier; a position's blocks of every group
                                 count once, per group see kvc_group_stats_t);
                                 offloads are counted apart. */
  uint64_t num_sequences;   /**< Live sequences. */
  uint64_t num_pinned;      /**< Pins not yet released. */
  uint64_t tree_nodes;      /**< Block positions in the radix tree (both tiers). */
  uint64_t offloaded_blocks; /**< Block positions copied from the primary pools to
                                  the host tier on eviction. @since 0.2.0 */
  uint64_t onboarded_blocks; /**< Block positions copied back from the host tier
                                  on a hit. @since 0.2.0 */
  uint64_t offloaded_bytes;  /**< Bytes copied to the host tier. @since 0.2.0 */
  uint64_t onboarded_bytes;  /**< Bytes copied back from it. @since 0.2.0 */
  uint64_t host_blocks;      /**< Host-tier blocks over all pools; 0 without a
                                  host tier. @since 0.2.0 */
  uint64_t host_free_blocks;   /**< Host-tier blocks holding nothing. @since 0.2.0 */
  uint64_t host_cached_blocks; /**< Host-tier blocks holding offloaded, reusable
                                    KV. @since 0.2.0 */
} kvc_cache_stats_t;

/** Static initializer for kvc_cache_stats_t. */
#define KVC_CACHE_STATS_INIT \
  {sizeof(kvc_cache_stats_t), 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `stats` and sets its struct_size. @since 0.1.0 */
KVC_API void kvc_cache_stats_init(kvc_cache_stats_t *stats);

/**
 * @brief Fills `out` with the current statistics.
 * @return KVC_OK or KVC_ERR_INVALID_ARGUMENT. Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_get_stats(const kvc_cache_t *cache, kvc_cache_stats_t *out);

/**
 * @brief Counts of one layer group's blocks and of its reuse. Transparent;
 *        begins with struct_size.
 *
 * A full-attention group holds a block for every block position of every
 * sequence. A windowed group (kvc_config_set_attention_windows, window W)
 * holds only the blocks covering the W tokens its next token attends to,
 * and releases the others as commits move the sequence forward: they are
 * counted in released_blocks and, being committed, stay cached in the tree
 * (cached_blocks) until evicted. Its reuse counts only the positions the
 * group needs: when an add reuses a prefix, the positions before the
 * window that ends at the reuse point are counted neither as reused nor as
 * missed, so reused_blocks + missed_blocks may differ between the groups of
 * one cache. Every computed prompt position is missed in every group.
 *
 * Pools are shared between groups whose blocks have the same size, so free
 * blocks belong to the pool, not to a group: pool_free_blocks is the same
 * for every group of one pool and is counted once per pool in
 * kvc_cache_stats_t.free_blocks.
 * @since 0.2.0
 */
typedef struct kvc_group_stats {
  uint32_t struct_size;      /**< sizeof(kvc_group_stats_t) of the caller. */
  uint32_t pool;             /**< Pool the group draws from (kvc_cache_describe_pool). */
  uint64_t in_use_blocks;    /**< Blocks of this group held by sequences or pins. */
  uint64_t cached_blocks;    /**< Blocks of this group cached in the tree (evictable). */
  uint64_t pool_free_blocks; /**< Free blocks of that pool, shared with the pool's other groups. */
  uint64_t reused_blocks;    /**< Prompt block positions reused from the tree. */
  uint64_t missed_blocks;    /**< Prompt block positions computed. */
  uint64_t evicted_blocks;   /**< Blocks of this group evicted. */
  uint64_t released_blocks;  /**< Blocks a windowed group let go because they left the window. */
} kvc_group_stats_t;

/** Static initializer for kvc_group_stats_t. */
#define KVC_GROUP_STATS_INIT {sizeof(kvc_group_stats_t), 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `stats` and sets its struct_size. NULL is ignored. @since 0.2.0 */
KVC_API void kvc_group_stats_init(kvc_group_stats_t *stats);

/**
 * @brief Fills `out` with the current statistics of layer group `group`
 *        (0 <= group < kvc_cache_desc_t.num_groups).
 * @param[in,out] out struct_size must be set (kvc_group_stats_init); the
 *        library writes min(struct_size, its own size) bytes. Borrowed for
 *        the call.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL cache or out, an
 *         unset struct_size, or a group out of range. Reads only.
 * @since 0.2.0
 */
KVC_API kvc_status_t kvc_cache_get_group_stats(const kvc_cache_t *cache, uint32_t group,
                                               kvc_group_stats_t *out);

/**
 * @brief Evicts every cached block: nothing is reusable afterwards.
 * @return KVC_OK; KVC_ERR_INVALID_STATE while any block is in use (live
 *         sequences holding blocks, pins).
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_reset_reuse(kvc_cache_t *cache);

/**
 * @brief Runs the invariant checker: block states add up per pool, free
 *        lists hold only free blocks once each, every reference count equals
 *        its owners, every cached block is in the tree and found by its key,
 *        the eviction queue holds exactly the cached leaves in age order.
 *        Debug builds of the library run it after every mutation.
 * @return KVC_OK, or KVC_ERR_INTERNAL naming the first broken invariant.
 *         Reads only.
 * @since 0.1.0
 */
KVC_API kvc_status_t kvc_cache_check(const kvc_cache_t *cache);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_STATS_H */
