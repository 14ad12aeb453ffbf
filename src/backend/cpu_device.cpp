#include "backend/cpu_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu_kernels.h"
#include "backend/kernel_checks.h"
#include "base/error.h"

namespace kvc {

namespace {
constexpr size_t kAlignment = 256;  // the same alignment cudaMalloc gives
}

void* CpuDevice::allocate_at(FaultSite site, uint64_t bytes) {
  const char* what = site == FaultSite::kAllocate ? "the pool" : "the host tier";
  if (inject(site))
    fail(KVC_ERR_OUT_OF_MEMORY, "could not allocate " + std::to_string(bytes) +
                                    " bytes of host memory for " + what + " (injected fault)");
  const uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = rounded == 0 ? nullptr : std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not allocate " + std::to_string(bytes) + " bytes of host memory for " + what);
  note_allocated(site, p);
  return p;
}

void* CpuDevice::allocate(uint64_t bytes) { return allocate_at(FaultSite::kAllocate, bytes); }

void CpuDevice::deallocate(void* ptr) noexcept {
  note_released(FaultSite::kAllocate, ptr);
  std::free(ptr);
}

void* CpuDevice::allocate_host(uint64_t bytes) {
  return allocate_at(FaultSite::kAllocateHost, bytes);
}

void CpuDevice::deallocate_host(void* ptr) noexcept {
  note_released(FaultSite::kAllocateHost, ptr);
  std::free(ptr);
}

uint64_t CpuDevice::reserve_granularity() const { return uint64_t(sysconf(_SC_PAGESIZE)); }

void* CpuDevice::reserve(uint64_t max_bytes, uint64_t bytes) {
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "could not reserve " + std::to_string(max_bytes) +
                                    " bytes of address space for the pool (injected fault)");
  void* p = mmap(nullptr, max_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not reserve " + std::to_string(max_bytes) + " bytes of address space for the pool");
  if (bytes != 0 && mprotect(p, bytes, PROT_READ | PROT_WRITE) != 0) {
    munmap(p, max_bytes);
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not back " + std::to_string(bytes) + " bytes of host memory for the pool");
  }
  note_allocated(FaultSite::kAllocate, p);
  return p;
}

void CpuDevice::commit(void* base, uint64_t from, uint64_t to) {
  if (inject(FaultSite::kAllocate))
    fail(KVC_ERR_OUT_OF_MEMORY, "could not back " + std::to_string(to - from) +
                                    " more bytes of host memory for the pool (injected fault)");
  if (mprotect(static_cast<char*>(base) + from, to - from, PROT_READ | PROT_WRITE) != 0)
    fail(KVC_ERR_OUT_OF_MEMORY, "could not back " + std::to_string(to - from) +
                                    " more bytes of host memory for the pool");
}

uint64_t CpuDevice::decommit(void* base, uint64_t from, uint64_t to) noexcept {
  char* p = static_cast<char*>(base) + from;
  (void)madvise(p, to - from, MADV_DONTNEED);  // the pages go back now
  (void)mprotect(p, to - from, PROT_NONE);       // a stray access faults
  return from;
}

void CpuDevice::unreserve(void* base, uint64_t max_bytes, uint64_t /*bytes*/) noexcept {
  note_released(FaultSite::kAllocate, base);
  munmap(base, max_bytes);
}

void CpuDevice::copy_blocks(void* pool_base, const BlockGeometry& g, const BlockCopy* copies,
                            size_t count, void* /*stream*/) {
  auto* base = static_cast<unsigned char*>(pool_base);
  for (size_t i = 0; i < count; ++i) {
    const BlockCopy& c = copies[i];
    unsigned char* dst = base + uint64_t(c.dst) * g.block_bytes;
    const unsigned char* src = base + uint64_t(c.src) * g.block_bytes;
    if (c.num_tokens >= g.tokens_per_block) {
      std::memcpy(dst, src, g.block_bytes);
      continue;
    }
    const uint64_t n = uint64_t(c.num_tokens) * g.row_bytes;
    for (uint64_t r = 0; r < g.num_runs; ++r)
      std::memcpy(dst + r * g.run_bytes(), src + r * g.run_bytes(), n);
  }
}

void CpuDevice::copy_ranges(const CopyRange* ranges, size_t count, void* /*stream*/) {
  for (size_t i = 0; i < count; ++i)
    if (ranges[i].bytes > 0) std::memcpy(ranges[i].dst, ranges[i].src, ranges[i].bytes);
}

void CpuDevice::copy_tier(TierDirection direction, void* device_pool, void* host_pool,
                          uint64_t block_bytes, const TierCopy* copies, size_t count,
                          void* /*stream*/) {
  auto* dev = static_cast<unsigned char*>(device_pool);
  auto* host = static_cast<unsigned char*>(host_pool);
  // An injected fault copies the first half, as a copy that broke off would.
  const bool broken = inject(FaultSite::kCopyTier);
  const size_t done = broken ? count / 2 : count;
  const bool offload = direction == TierDirection::kOffload;
  // The blocks are scattered over both pools: each copy of a small block
  // waits for its source's lines (and its destination's, written). The
  // lines of the copy kAhead ahead are fetched while this one runs (the
  // first kLines of a large block: the hardware follows its stream).
  constexpr size_t kAhead = 4, kLines = 4, kLine = 64;
  const uint64_t fetched = std::min<uint64_t>(block_bytes, kLines * kLine);
  for (size_t i = 0; i < done; ++i) {
    if (i + kAhead < done) {
      const unsigned char* fd = dev + uint64_t(copies[i + kAhead].device_block) * block_bytes;
      const unsigned char* fh = host + uint64_t(copies[i + kAhead].host_block) * block_bytes;
      for (uint64_t o = 0; o < fetched; o += kLine) {
        __builtin_prefetch(offload ? fd + o : fh + o, 0);
        __builtin_prefetch(offload ? fh + o : fd + o, 1);
      }
    }
    unsigned char* d = dev + uint64_t(copies[i].device_block) * block_bytes;
    unsigned char* h = host + uint64_t(copies[i].host_block) * block_bytes;
    if (offload) std::memcpy(h, d, block_bytes);
    else std::memcpy(d, h, block_bytes);
  }
  if (broken)
    fail(KVC_ERR_DEVICE, std::string(direction == TierDirection::kOffload ? "offload" : "onboard") +
                             " copy of " + std::to_string(count) +
                             " blocks failed after " + std::to_string(done) + " (injected fault)");
}

void CpuDevice::store_kv(const StoreKvWork& work, void* /*stream*/) {
  check_store_slots(work);
  cpu_store_kv(work);
}

void CpuDevice::decode_attention(const DecodeWork& work, void* /*stream*/) {
  check_decode_tables(work);
  cpu_decode_attention(work);
}

void CpuDevice::prefill_attention(const PrefillWork& work, void* /*stream*/) {
  check_prefill_tables(work);
  cpu_prefill_attention(work);
}

}  // namespace kvc
