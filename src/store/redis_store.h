// The remote tier: a BlockStore (core/block_store.h) on a Redis server that
// many caches, in many processes and on many machines, share.
//
// Keys. `<namespace>:<geometry fingerprint>:<lookup hash>` (16 hex digits
// each): the namespace separates deployments (or models) sharing a server,
// the fingerprint keeps caches of another geometry off each other's keys,
// the lookup hash is the block's portable hash (events.h). None of it
// decides a hit: the value is the whole record (core/block_record.h), and
// the core checks its full key (chain digest and tokens, salt and LoRA in
// the digest), geometry and checksum before it becomes KV. A value of the
// wrong size never leaves the store (counted as rejected); one the core
// refuses (reject()) is deleted unless it is a sound record of another
// block (kOtherKey: a lookup-hash collision; its owner still wants it).
//
// Eviction. The server's own: run it with maxmemory and
// maxmemory-policy allkeys-lru (or allkeys-lfu) and every cache sharing it
// shares that budget, the coldest blocks going first whoever wrote them.
// The store's byte budget bounds what this cache adds on top: it keeps the
// keys it wrote in prioritized LRU order (lowest priority first, oldest
// first among equals, a hit refreshing one; redis_client.h) and deletes
// the first past the budget. No TTL: a block nobody reads stays until one
// of the two evictions takes it, as in every other tier.
//
// Time. load() returns within the command timeout (the whole chain, not
// each round trip); after a failure the client backs off and reconnects
// on its worker, and meanwhile loads miss at once and puts are dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/block_store.h"
#include "store/redis_client.h"

namespace kvc {

struct RedisStoreOptions {
  std::string url;            // redis://[user:password@]host:port/db
  std::string key_namespace;  // 1..64 bytes of [A-Za-z0-9._-]
  uint64_t capacity_bytes = 0;  // bytes of records this cache keeps in Redis (>= one record)
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};
  // Bytes of records waiting to be written; 0: 64 MiB (at least 2 records).
  uint64_t queue_bytes = 0;
  // The server cannot be reached or refuses the credentials or database at
  // create: false, refused; true, the store starts down and connects when it
  // can (loads miss and puts drop meanwhile, each failed connect an error).
  // A malformed URL or namespace or a budget below one record is refused
  // either way.
  bool optional = false;
  // Bytes of records per pipelined round trip of a load; 0: the default
  // (4 MiB). Not a user setting: the benchmark's knob.
  uint64_t chunk_bytes = 0;
};

class RedisStore final : public BlockStore {
 public:
  // Parses the URL, checks the namespace and budget, and connects. Throws
  // Error: KVC_ERR_INVALID_ARGUMENT for a malformed URL, a bad namespace, a
  // budget below one record, or (not optional) credentials or a database
  // the server refuses; KVC_ERR_DEVICE (not optional) when the server cannot
  // be reached in time; KVC_ERR_UNSUPPORTED in a build without hiredis.
  RedisStore(const RedisStoreOptions& options, const RecordLayout& layout);
  ~RedisStore() override;

  const char* name() const override { return "remote"; }
  const RecordLayout& layout() const override { return layout_; }
  bool put(uint64_t lookup_hash, uint32_t priority, const unsigned char* record) override;
  size_t load(const uint64_t* hashes, size_t n, unsigned char* const* out) override;
  void reject(uint64_t lookup_hash, RecordCheck why) override;
  void flush() override;
  StoreStats stats() const override;
  // This cache's own writes (redis_client.h): a record counts as held from
  // its SET's reply until the client deletes it (budget, a rejected value).
  // The server's own eviction, other writers and TTLs set by others are
  // never seen.
  void watch(std::vector<StoreChange>& held) override;
  void take_changes(std::vector<StoreChange>& out) override;

  // The Redis key of a record (tests plant values under it).
  std::string key_of(uint64_t lookup_hash) const;
  // Keys per pipelined round trip of a load (about 4 MiB of records).
  size_t chunk() const { return chunk_; }
  RedisClient& client() { return *client_; }

 private:
  const RecordLayout layout_;
  const uint64_t capacity_bytes_;
  std::string prefix_;  // "<namespace>:<fingerprint>:"
  size_t chunk_;
  std::unique_ptr<RedisClient> client_;
  std::atomic<uint64_t> rejected_{0};
  std::vector<RedisClient::KeyChange> key_changes_;  // take_changes' scratch  // reject() calls and values of the wrong size
};

// Checks a key namespace; throws Error(KVC_ERR_INVALID_ARGUMENT) naming it.
void check_key_namespace(const std::string& ns);

}  // namespace kvc
