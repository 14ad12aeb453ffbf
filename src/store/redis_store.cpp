// RedisStore: records as Redis values under keys derived from the portable
// hash; the I/O is RedisClient's.
#include "store/redis_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/hex.h"

namespace kvc {

namespace {

constexpr uint64_t kDefaultQueueBytes = uint64_t(64) << 20;
// Records per pipelined load round trip: about 4 MiB (the best of 1, 2, 4
// and 8 MiB on loopback, bench/results/2026-11-25-redis-tier-vm-2cpu.md).
constexpr uint64_t kChunkBytes = uint64_t(4) << 20;
constexpr size_t kMaxChunk = 256;

}  // namespace

void check_key_namespace(const std::string& ns) {
  if (ns.empty() || ns.size() > 64) {
    invalid_argument("remote cache key namespace \"" + ns + "\" must be 1..64 bytes long (got " +
                     std::to_string(ns.size()) + ")");
  }
  for (char c : ns) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      invalid_argument("remote cache key namespace \"" + ns +
                       "\" may hold only letters, digits, '.', '_' and '-'");
    }
  }
}

RedisStore::RedisStore(const RedisStoreOptions& options, const RecordLayout& layout)
    : layout_(layout), capacity_bytes_(options.capacity_bytes) {
  check_key_namespace(options.key_namespace);
  const uint64_t record = layout_.record_bytes();
  if (capacity_bytes_ < record) {
    invalid_argument("remote cache bytes " + std::to_string(capacity_bytes_) +
                     " is below one block record (" + std::to_string(record) +
                     " bytes for this model's geometry)");
  }
  RedisClientOptions o;
  o.url = parse_redis_url(options.url);
  o.connect_timeout = options.connect_timeout;
  o.command_timeout = options.command_timeout;
  o.byte_budget = capacity_bytes_;
  o.queue_bytes = std::max<uint64_t>(options.queue_bytes != 0 ? options.queue_bytes
                                                              : kDefaultQueueBytes,
                                     2 * record);
  o.write_batch_bytes = std::max<uint64_t>(uint64_t(8) << 20, record);
  o.start_down_on_failure = options.optional;
  prefix_ = options.key_namespace + ":" + hex16(layout_.fingerprint) + ":";
  const uint64_t chunk_bytes = options.chunk_bytes != 0 ? options.chunk_bytes : kChunkBytes;
  chunk_ = static_cast<size_t>(
      std::clamp<uint64_t>((chunk_bytes + record - 1) / record, 1, kMaxChunk));
  client_ = std::make_unique<RedisClient>(o);
}

RedisStore::~RedisStore() = default;

void RedisStore::watch(std::vector<StoreChange>& held) {
  held.clear();  // a client knows only the keys it wrote: none yet
  client_->watch();
}

void RedisStore::take_changes(std::vector<StoreChange>& out) {
  key_changes_.clear();
  client_->take_changes(key_changes_);
  for (const RedisClient::KeyChange& c : key_changes_) {
    // Every key is prefix_ + 16 hex digits (key_of).
    if (c.key.size() != prefix_.size() + 16) continue;
    uint64_t hash = 0;
    for (size_t i = prefix_.size(); i < c.key.size(); ++i) {
      const char ch = c.key[i];
      hash = hash * 16 + uint64_t(ch >= 'a' ? ch - 'a' + 10 : ch >= 'A' ? ch - 'A' + 10 : ch - '0');
    }
    out.push_back(StoreChange{hash, c.priority, c.held});
  }
}

std::string RedisStore::key_of(uint64_t lookup_hash) const { return prefix_ + hex16(lookup_hash); }

bool RedisStore::put(uint64_t lookup_hash, uint32_t priority, const unsigned char* record) {
  std::string value(reinterpret_cast<const char*>(record), layout_.record_bytes());
  return client_->put(key_of(lookup_hash), std::move(value), priority);
}

size_t RedisStore::load(const uint64_t* hashes, size_t n, unsigned char* const* out) {
  if (n == 0) return 0;
  std::vector<std::string> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = key_of(hashes[i]);
  const size_t size = layout_.record_bytes();
  return client_->get_chain(keys.data(), n, chunk_, [&](size_t i, size_t len) -> unsigned char* {
    if (len != size) {  // not a record of this geometry: garbage, never KV
      ++rejected_;
      return nullptr;
    }
    return out[i];
  });
}

void RedisStore::reject(uint64_t lookup_hash, RecordCheck why) {
  ++rejected_;
  // A sound record of another block stays: its block's caches still use it.
  if (why != RecordCheck::kOtherKey) client_->unlink(key_of(lookup_hash));
}

void RedisStore::flush() { client_->flush(); }

StoreStats RedisStore::stats() const {
  const RedisClientCounters c = client_->counters();
  StoreStats s;
  s.blocks = c.owned_keys;
  s.bytes = c.owned_bytes;
  s.capacity_bytes = capacity_bytes_;
  s.hits = c.hits;
  s.misses = c.misses;
  s.rejected = rejected_.load();
  s.stores = c.stores;
  s.drops = c.drops;
  s.errors = c.errors;
  s.evictions = c.deletes;
  s.queued = c.queued;
  s.load = c.lookup;
  s.write = c.write;
  return s;
}

}  // namespace kvc
