/**
 * @file tiers.h
 * @brief Tiers below the radix tree: the disk tier (a directory of block
 *        files that outlives the process), its settings, and the statistics
 *        of every such tier.
 *
 * The tiers of a cache, top down: primary (device or CPU pools), host
 * (kvc_config_set_host_cache_bytes, optional), then block stores, each
 * optional: disk, then remote. The primary and host tiers hold radix-tree
 * nodes; a store holds records addressed by the block's portable hash
 * (events.h), which survive the cache (disk) or are shared between caches
 * (remote). How blocks move:
 *   - On the CPU backend (pools in host memory, no sliding-window layer
 *     groups), a full block that kvc_sequence_commit publishes with a
 *     priority >= kvc_config_set_secondary_offload_min_priority (the one its
 *     sequence gives it at add) is written through to every store: the
 *     commit queues a small job and goes on, and a worker thread copies the
 *     block out, seals and queues the record while the cache keeps the block
 *     from reuse; evicting it later writes nothing. So another cache on the
 *     same Redis sees a block as soon as it is committed and flushed. Until
 *     its write is done such a block counts as in use (kvc_cache_stats_t):
 *     a call that needs blocks (kvc_sequence_add, kvc_sequence_extend,
 *     kvc_cache_reset_reuse, a resize) first takes back the finished writes,
 *     and one short of blocks waits for the writer, so a call that then
 *     fails may still have moved those blocks from in use to cached: the
 *     only change a refused call makes. A
 *     priority changed after the commit does not write or unwrite it.
 *     Elsewhere (CUDA), a cached block that leaves the lowest tree tier
 *     (evicted from the host tier, or from the primary pools without one)
 *     with such a priority is written to every store, asynchronously: the
 *     call that evicts it copies the block into the store's bounded queue
 *     and goes on. Either way a full queue, a failed device copy, a full or
 *     unwritable disk drops the write (counted in
 *     kvc_tier_stats_t.dropped_blocks); no call waits on I/O.
 *   - kvc_sequence_add looks up, after the tree's match, the prompt's
 *     following full blocks in the stores (disk first, then remote), and
 *     copies the blocks found into the sequence's new blocks before it
 *     returns: `cached_tokens` counts them, and they are published in the
 *     tree as kvc_sequence_commit would. A stored block is used only if its
 *     full key (a SHA-256 chain over the parent blocks, the tokens, the salt,
 *     the LoRA id and the extra keys), the model's geometry and a checksum all
 *     match, so a hash collision, a torn or corrupted file, or a record of
 *     another salt or model is a miss, never KV. A store that fails is a
 *     miss: the add goes on without it.
 *     Loaded blocks land in the primary tier only, also on a cache with a
 *     host tier: the sequence computes on them there, and a copy into the
 *     host tier at load would cost the serving call a device-to-host copy
 *     and host room for blocks the primary tier holds anyway. They reach
 *     the host tier as every block does (where it qualifies), when the
 *     primary tier evicts them (kvc_config_set_host_cache_bytes), so the
 *     host tier stages what the stores returned once it goes cold, not
 *     before.
 *   - kvc_cache_reset_reuse writes nothing to the stores and leaves them as
 *     they are (a later add may load from them). The stores know the model's
 *     shape (geometry fingerprint), not its weights: after the weights
 *     change, give the cache another directory (or event hash seed), or the
 *     old weights' KV is reused. kvc_cache_probe reports the
 *     tree only: it reads no store.
 *   - A stateful cache (stateful.h) has no stores: kvc_stateful_create
 *     refuses a config with a disk tier (KVC_ERR_UNSUPPORTED).
 * KV events (events.h) describe the tree and the stores, each a place of
 * its own in a router's index: a block leaving the tree is REMOVED from the
 * tier it left, a block loaded from a store enters the tree (STORED,
 * KVC_TIER_PRIMARY), and a store's record written, evicted or rejected is
 * STORED or REMOVED with KVC_TIER_DISK or KVC_TIER_REMOTE, emitted at the
 * cache's next successful add, commit or kvc_cache_flush_tiers (the stores'
 * threads hand their changes back; the serving thread emits them). The disk
 * tier's entries are exact; the remote tier's name only this cache's own
 * writes and deletions (the server's eviction and other caches are not
 * seen): events.h, "Store entries".
 *
 * Threading: as every call on a cache (common.h); the stores write on
 * threads of their own.
 */
#ifndef KVCACHE_TIERS_H
#define KVCACHE_TIERS_H

#include "kvcache/cache.h"
#include "kvcache/common.h"
#include "kvcache/config.h"
#include "kvcache/events.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Turns the disk tier on: slab files under `directory`, at most
 *        `bytes` of them; a NULL or empty directory with `bytes` 0 turns it
 *        off (the default).
 *
 * The directory must exist and be writable when the cache is created
 * (kvc_cache_create fails with KVC_ERR_INVALID_ARGUMENT naming it
 * otherwise, or when `bytes` is below one block's record, or when another
 * cache of the same model geometry uses the directory). A cache created on
 * a directory that a previous cache of the same geometry and event hash
 * seed used finds its blocks: a restart keeps its prefix cache. Each block
 * is one record in a fixed-size slot of a few slab files
 * `<geometry>-<n>.slab` (a header with the block's full key, the geometry
 * fingerprint and a checksum over the whole record, then the KV of every
 * layer); a slot torn by a crash in the middle of a write, or damaged
 * otherwise, fails its checksum and is a miss, never KV. The tier reuses the
 * slots of the blocks it evicts when `bytes` is reached: lowest retention
 * priority first, then least recently used. Requires block reuse
 * (kvc_config_set_block_reuse).
 * @param directory Copied; NULL or "" (with bytes 0) for none.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config, a directory
 *         with bytes 0, or bytes without a directory. Nothing changes on
 *         failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_disk_cache(kvc_config_t *config, const char *directory,
                                               uint64_t bytes);
/**
 * @brief The disk tier's settings.
 * @param[out] directory The directory, "" when off; valid until the config
 *        changes or is destroyed. May be NULL.
 * @param[out] bytes The byte budget, 0 when off. May be NULL.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_get_disk_cache(const kvc_config_t *config,
                                               const char **directory, uint64_t *bytes);

/**
 * @brief Statistics of one tier below the tree (a block store). Transparent;
 *        begins with struct_size. Latencies are over the tier's last 1024
 *        operations.
 * @since 0.3.0
 */
typedef struct kvc_tier_stats {
  uint32_t struct_size;       /**< sizeof(kvc_tier_stats_t) of the caller. */
  uint32_t tier;              /**< kvc_tier_t: KVC_TIER_DISK or KVC_TIER_REMOTE. */
  uint64_t blocks;            /**< Blocks held now (the remote tier: those this cache
                                   knows of, or 0). */
  uint64_t bytes;             /**< Bytes they take (records: header and KV). */
  uint64_t capacity_bytes;    /**< The tier's byte budget. */
  uint64_t hits;              /**< Lookups the tier answered with a record. */
  uint64_t misses;            /**< Lookups of a block the tier does not hold. */
  uint64_t rejected;          /**< Records refused by the check (torn, corrupted,
                                   another block's, another geometry's). */
  uint64_t onboarded_blocks;  /**< Blocks copied into the cache from the tier. */
  uint64_t onboarded_bytes;   /**< Their KV bytes. */
  uint64_t offered_blocks;    /**< Blocks the tier's writer handed to the store (at
                                   commit or eviction; not those an add loaded from
                                   it); writes still waiting are in queued_blocks
                                   (kvc_cache_flush_tiers settles them). */
  uint64_t stored_blocks;     /**< Blocks written. */
  uint64_t dropped_blocks;    /**< Writes dropped: queue full, no room, a failed
                                   write, the tier down. */
  uint64_t errors;            /**< I/O failures, timeouts, protocol errors. */
  uint64_t evicted_blocks;    /**< Blocks the tier removed to stay in its budget. */
  uint64_t queued_blocks;     /**< Writes waiting now. */
  uint64_t load_count;        /**< Lookups (one per run of a prompt's blocks). */
  uint64_t load_p50_us;       /**< Median lookup latency, microseconds. */
  uint64_t load_p99_us;       /**< 99th percentile lookup latency. */
  uint64_t load_max_us;       /**< Longest lookup since creation. */
  uint64_t write_count;       /**< Blocks written (timed). */
  uint64_t write_p50_us;      /**< Median write latency, microseconds. */
  uint64_t write_p99_us;      /**< 99th percentile write latency. */
  uint64_t write_max_us;      /**< Longest write since creation. */
} kvc_tier_stats_t;

/** Static initializer for kvc_tier_stats_t. */
#define KVC_TIER_STATS_INIT \
  {sizeof(kvc_tier_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** @brief Zeroes `stats` and sets its struct_size. NULL is ignored. @since 0.3.0 */
KVC_API void kvc_tier_stats_init(kvc_tier_stats_t *stats);

/**
 * @brief Fills `out` with the statistics of tier `tier` (KVC_TIER_DISK or
 *        KVC_TIER_REMOTE) of the cache.
 * @param[in,out] out struct_size must be set (kvc_tier_stats_init); the
 *        library writes min(struct_size, its own size) bytes.
 * @return KVC_OK; KVC_ERR_NOT_FOUND when the cache has no such tier;
 *         KVC_ERR_INVALID_ARGUMENT for a NULL cache or out, an unset
 *         struct_size, or a tier that is not a store (primary, host: see
 *         kvc_cache_get_stats). Reads only.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_get_tier_stats(const kvc_cache_t *cache, kvc_tier_t tier,
                                              kvc_tier_stats_t *out);

/**
 * @brief Waits until every block queued for writing to the cache's stores
 *        (written through at commit, or offloaded at eviction) is written
 *        or dropped (before a snapshot of the directory, a
 *        handover to another process, or in tests instead of sleeping),
 *        then emits the stores' changes as KV events (events.h, "Store
 *        entries"). Destroying the cache waits the same way. Other calls on
 *        the cache wait meanwhile.
 * @return KVC_OK (also without stores); KVC_ERR_INVALID_ARGUMENT for a NULL
 *         cache.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_cache_flush_tiers(kvc_cache_t *cache);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_TIERS_H */
