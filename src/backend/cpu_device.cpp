#include "backend/cpu_device.h"

#include <algorithm>
#include <cstdint>
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
// Pools of this size or more are aligned to it and asked for transparent
// huge pages: the tier copies and kernels touch blocks at random, and with
// 4 KiB pages nearly each block would also miss the TLB (as BigArray).
constexpr uint64_t kHugePage = uint64_t(2) << 20;

uint64_t round_up(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

void advise_huge(void* p, uint64_t bytes) {
  if (bytes >= kHugePage) (void)madvise(p, bytes, MADV_HUGEPAGE);  // a hint: failure is fine
}

// Writes a byte of each page of [p, p + bytes) so that the pages are backed
// now, at create or resize, and no serving call takes their page faults
// (issue 24: a first step as fast as the millionth). Pool bytes have no
// value before a kernel writes them, so the zero written is no change.
void touch_pages(void* p, uint64_t bytes) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  auto* c = static_cast<volatile unsigned char*>(p);
  for (uint64_t at = 0; at < bytes; at += page) c[at] = 0;
}
}  // namespace

void* CpuDevice::allocate_at(FaultSite site, uint64_t bytes) {
  const char* what = site == FaultSite::kAllocate ? "the pool" : "the host tier";
  if (inject(site))
    fail(KVC_ERR_OUT_OF_MEMORY, "could not allocate " + std::to_string(bytes) +
                                    " bytes of host memory for " + what + " (injected fault)");
  const uint64_t align = bytes >= kHugePage ? kHugePage : kAlignment;
  const uint64_t rounded = round_up(bytes, align);
  void* p = rounded == 0 ? nullptr : std::aligned_alloc(align, rounded);
  if (p == nullptr)
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not allocate " + std::to_string(bytes) + " bytes of host memory for " + what);
  advise_huge(p, rounded);
  touch_pages(p, rounded);
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
  // A large reservation starts on a huge page: reserved with a huge page's
  // slack, whose unaligned ends go back at once (unreserve unmaps
  // [base, base + max_bytes), the part kept).
  const uint64_t slack = max_bytes >= kHugePage ? kHugePage : 0;
  void* m = mmap(nullptr, max_bytes + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED)
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not reserve " + std::to_string(max_bytes) + " bytes of address space for the pool");
  auto* raw = static_cast<unsigned char*>(m);
  auto* p = raw;
  if (slack != 0) {
    p = reinterpret_cast<unsigned char*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
    const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    const uint64_t tail = round_up(max_bytes, page);
    if (p > raw) munmap(raw, uint64_t(p - raw));
    unsigned char* const end = raw + max_bytes + slack;
    if (end > p + tail) munmap(p + tail, uint64_t(end - (p + tail)));
    advise_huge(p, tail);
  }
  if (bytes != 0 && mprotect(p, bytes, PROT_READ | PROT_WRITE) != 0) {
    munmap(p, max_bytes);
    fail(KVC_ERR_OUT_OF_MEMORY,
         "could not back " + std::to_string(bytes) + " bytes of host memory for the pool");
  }
  touch_pages(p, bytes);
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
  touch_pages(static_cast<char*>(base) + from, to - from);
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
