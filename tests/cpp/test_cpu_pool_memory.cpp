// The CPU backend's pool memory (issue 24, item 3): the pages of a pool are
// backed when it is allocated, reserved or grown, so that no serving call
// takes their page faults, and pools of 2 MiB or more start on a 2 MiB
// boundary (the transparent huge page hint needs one). Residency is read
// with mincore(2): a behaviour of the allocation, not a timing.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu_device.h"

namespace kvc {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// Pages of [p, p + bytes) that are not resident.
uint64_t pages_not_resident(const void* p, uint64_t bytes) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(p) / page * page;
  const uint64_t span = reinterpret_cast<uintptr_t>(p) + bytes - start;
  std::vector<unsigned char> in((span + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(start), span, in.data()), 0);
  uint64_t missing = 0;
  for (unsigned char v : in) missing += (v & 1) == 0;
  return missing;
}

bool huge_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % (2 * kMiB) == 0; }

TEST(CpuPoolMemory, AllocatedPoolsAreBackedAtOnce) {
  CpuDevice dev;
  for (uint64_t bytes : {uint64_t(4096 * 3 + 100), 3 * kMiB + 4096, 17 * kMiB}) {
    SCOPED_TRACE(bytes);
    void* pool = dev.allocate(bytes);
    void* host = dev.allocate_host(bytes);
    EXPECT_EQ(pages_not_resident(pool, bytes), 0u);
    EXPECT_EQ(pages_not_resident(host, bytes), 0u);
    if (bytes >= 2 * kMiB) {
      EXPECT_TRUE(huge_aligned(pool));
      EXPECT_TRUE(huge_aligned(host));
    }
    // Usable end to end.
    std::memset(pool, 0xab, bytes);
    std::memset(host, 0xcd, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(pool)[bytes - 1], 0xab);
    dev.deallocate(pool);
    dev.deallocate_host(host);
  }
}

TEST(CpuPoolMemory, AGrowablePoolIsBackedAsItGrowsAndNoFurther) {
  CpuDevice dev;
  const uint64_t g = dev.reserve_granularity();
  const uint64_t max = 64 * kMiB, first = 8 * kMiB;
  ASSERT_EQ(first % g, 0u);
  auto* base = static_cast<unsigned char*>(dev.reserve(max, first));
  EXPECT_TRUE(huge_aligned(base));
  EXPECT_EQ(pages_not_resident(base, first), 0u);
  // Reserved, not backed: no page of the rest is resident.
  EXPECT_EQ(pages_not_resident(base + first, max - first), (max - first) / g);
  dev.commit(base, first, 2 * first);
  EXPECT_EQ(pages_not_resident(base, 2 * first), 0u);
  EXPECT_EQ(pages_not_resident(base + 2 * first, max - 2 * first), (max - 2 * first) / g);
  base[2 * first - 1] = 7;  // writable to the new end
  EXPECT_EQ(dev.decommit(base, first, 2 * first), first);
  EXPECT_EQ(pages_not_resident(base + first, first), first / g);
  dev.unreserve(base, max, first);
}

TEST(CpuPoolMemory, ASmallReservationIsBackedToo) {
  CpuDevice dev;
  const uint64_t g = dev.reserve_granularity();
  auto* base = static_cast<unsigned char*>(dev.reserve(4 * g, 2 * g));
  EXPECT_EQ(pages_not_resident(base, 2 * g), 0u);
  base[2 * g - 1] = 1;
  dev.unreserve(base, 4 * g, 2 * g);
}

}  // namespace
}  // namespace kvc
