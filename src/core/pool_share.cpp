// Sharing a rank's pool memory with another process (transfer.h,
// kvc_cache_describe_pool_share / kvc_cache_export_pool_chunk): the device
// says what backs the pool's reservation and exports its chunks; the cache
// only checks the indices and holds its lock, so that a resize cannot add
// or return chunks in the middle of a call. Pools that share pages (one
// arena) view the same reservation from its base: each reports its chunks.
#include <mutex>
#include <string>

#include "base/error.h"
#include "core/cache.h"

namespace kvc {

namespace {

void check_pool(uint32_t pool, size_t num_pools) {
  if (pool >= num_pools)
    invalid_argument("pool must be < num_pools (" + std::to_string(num_pools) + "), got " +
                     std::to_string(pool));
}

}  // namespace

SharedMemory Cache::shared_pool(uint32_t rank, uint32_t pool) const {
  check_rank(rank);
  check_pool(pool, num_pools());
  std::lock_guard<std::mutex> lock(mutex_);
  return ranks_->device(rank).shared_memory(ranks_->pools(rank)[pool]->base());
}

int Cache::export_pool_chunk(uint32_t rank, uint32_t pool, uint64_t chunk,
                             SharedChunk* where) const {
  check_rank(rank);
  check_pool(pool, num_pools());
  std::lock_guard<std::mutex> lock(mutex_);
  const Device& d = ranks_->device(rank);
  const void* base = ranks_->pools(rank)[pool]->base();
  const SharedMemory m = d.shared_memory(base);
  if (chunk >= m.chunks.size())
    invalid_argument("chunk must be < num_chunks (" + std::to_string(m.chunks.size()) + "), got " +
                     std::to_string(chunk));
  *where = m.chunks[chunk];
  return d.export_chunk(base, chunk);
}

}  // namespace kvc
