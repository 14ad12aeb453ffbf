/**
 * @file remote_tier.h
 * @brief The remote tier: a Redis (or Valkey) server that many caches, in
 *        many processes on many machines, share, below the disk tier
 *        (tiers.h says how blocks move between the tiers).
 *
 * A block evicted with enough priority is written to the server
 * asynchronously; kvc_sequence_add looks a prompt's following blocks up
 * there, pipelined (one round trip per about 4 MiB of blocks, not one per
 * block), within the command timeout. Keys are
 * `<namespace>:<geometry fingerprint>:<portable block hash>`; the value is
 * the block's record: a header with its full key (a SHA-256 chain over the
 * parent blocks, tokens, salt, LoRA id and extra keys), the geometry
 * fingerprint and a checksum, then the KV. A value is used only when all of
 * them match what this cache computes from its own prompt, so a hash
 * collision, a value of another salt, model or writer, or garbage is a
 * miss (counted in kvc_tier_stats_t.rejected), never KV. The server is
 * trusted as far as its access control goes: anyone who may write to it
 * can plant a wrong KV under a block's true key (use Redis ACLs).
 *
 * Faults: a server that goes down, stops answering within the command
 * timeout, restarts or answers garbage makes lookups misses and writes
 * drops (counted in kvc_tier_stats_t.errors and .dropped_blocks); no call
 * returns an error for it, none waits longer than the command timeout, and
 * the tier reconnects on its own thread with exponential backoff (20 ms up
 * to 2 s), missing at once meanwhile.
 *
 * Eviction: the server's own. Run it with `maxmemory` and
 * `maxmemory-policy allkeys-lru` (or allkeys-lfu): all caches sharing it
 * share that memory, the coldest blocks going first whoever wrote them. The
 * byte budget bounds what this cache adds: it deletes its own oldest
 * records of the lowest retention priority past the budget (the order
 * every tier evicts in). It knows only the records it wrote since it was
 * created: what an earlier process left is the server's to evict. No TTL
 * is set.
 *
 * Requires a library built with hiredis (kvc_features() has
 * KVC_FEATURE_REDIS; Debian: libhiredis-dev); without it kvc_cache_create
 * fails with KVC_ERR_UNSUPPORTED saying so.
 */
#ifndef KVCACHE_REMOTE_TIER_H
#define KVCACHE_REMOTE_TIER_H

#include "kvcache/common.h"
#include "kvcache/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Turns the remote tier on: the server at `url`, keys under
 *        `key_namespace`, at most `bytes` of this cache's records; a NULL or
 *        empty url with bytes 0 turns it off (the default).
 *
 * The URL is `redis://[user:password@]host[:port][/db]` (port 6379 and
 * database 0 by default; `%XX` escapes in user and password; no TLS). It is
 * parsed here; the server is reached at kvc_cache_create, which fails with
 * KVC_ERR_DEVICE when it cannot be reached within the connect timeout
 * ("cannot connect within N ms: Connection refused"; a host name is first
 * resolved within that timeout too: "cannot resolve 'host': ..."), or with
 * KVC_ERR_INVALID_ARGUMENT when it refuses the password ("AUTH refused:
 * WRONGPASS ...", or "NOAUTH" without one) or the database, or when `bytes`
 * is below one block's record, unless the tier is optional
 * (kvc_config_set_remote_cache_optional). Messages never show the password.
 * Requires block reuse (kvc_config_set_block_reuse); the stateful mode
 * has no remote tier (kvc_stateful_create refuses a config that sets one).
 * @param url Copied. NULL or "" (with bytes 0) for none.
 * @param key_namespace Copied; 1..64 letters, digits, '.', '_' or '-'
 *        separating deployments or models on one server. NULL: "kvc".
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config, a malformed
 *         URL or namespace (the message names the part at fault), a URL
 *         with bytes 0, or bytes without a URL. Nothing changes on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_remote_cache(kvc_config_t *config, const char *url,
                                                 const char *key_namespace, uint64_t bytes);
/**
 * @brief The remote tier's settings.
 * @param[out] url The URL as set (password included), "" when off; valid
 *        until the config changes or is destroyed. May be NULL.
 * @param[out] key_namespace The namespace ("kvc" unless set). May be NULL.
 * @param[out] bytes The byte budget, 0 when off. May be NULL.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_get_remote_cache(const kvc_config_t *config, const char **url,
                                                 const char **key_namespace, uint64_t *bytes);

/**
 * @brief The remote tier's timeouts: connecting (at create and each
 *        reconnect; a host name's lookup and the connection each get
 *        `connect_ms`) and a lookup or a write batch, whole (all its round
 *        trips together, not each). Defaults: 1000 and 1000 ms.
 *
 * A serving call waits at most `command_ms` for the tier (a lookup that
 * runs out of time uses what it read in full, and the tier reconnects);
 * choose it above the time a prompt's blocks take to arrive (about 1 GB/s
 * on loopback, bench/results/2026-11-25-redis-tier-vm-2cpu.md). Timeouts
 * other than the defaults without a remote tier make kvc_cache_create fail
 * (KVC_ERR_INVALID_ARGUMENT): they would be ignored.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config or a timeout
 *         outside 1..600000 ms. Nothing changes on failure.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_remote_cache_timeouts(kvc_config_t *config,
                                                          uint32_t connect_ms,
                                                          uint32_t command_ms);
/**
 * @brief The remote tier's timeouts. Either pointer may be NULL.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_get_remote_cache_timeouts(const kvc_config_t *config,
                                                          uint32_t *connect_ms,
                                                          uint32_t *command_ms);

/**
 * @brief Whether the cache may be created while the server cannot be
 *        reached or refuses the credentials or database (default false).
 *
 * Optional: kvc_cache_create succeeds and the tier starts disconnected: it
 * counts an error per failed connect (kvc_tier_stats_t.errors), misses and
 * drops meanwhile, and connects as soon as it can. A malformed URL or
 * namespace, or a budget below one block, is refused either way, as is a
 * build without hiredis. True without a remote tier makes kvc_cache_create
 * fail (KVC_ERR_INVALID_ARGUMENT): it would be ignored.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_set_remote_cache_optional(kvc_config_t *config, bool optional);
/**
 * @brief Whether the remote tier is optional.
 * @return KVC_OK; KVC_ERR_INVALID_ARGUMENT for a NULL config or out.
 * @since 0.3.0
 */
KVC_API kvc_status_t kvc_config_get_remote_cache_optional(const kvc_config_t *config,
                                                          bool *out);

#ifdef __cplusplus
}
#endif

#endif /* KVCACHE_REMOTE_TIER_H */
