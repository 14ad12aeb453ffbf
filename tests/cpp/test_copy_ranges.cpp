// Device::copy_ranges on the CPU backend and the Device default (one
// copy_2d per range): every case of copy_ranges_case.h (odd sizes, every
// misalignment of source and destination, hundreds of ranges, large ones)
// leaves the destination equal, bit for bit, to its pattern with each
// range's source bytes written, and nothing else changed.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/device.h"
#include "copy_ranges_case.h"

namespace kvc {
namespace {

using copy_ranges_case::Case;

// Runs one case on `dev`: buffers from dev.allocate, host-addressable (the
// CPU backend and the double below).
void run_case(Device& dev, const Case& c) {
  SCOPED_TRACE(c.name);
  auto* src = static_cast<uint8_t*>(dev.allocate(c.src_bytes));
  auto* dst = static_cast<uint8_t*>(dev.allocate(c.dst_bytes));
  const std::vector<uint8_t> s = copy_ranges_case::random_bytes(c.src_bytes, 1);
  const std::vector<uint8_t> before = copy_ranges_case::random_bytes(c.dst_bytes, 2);
  std::memcpy(src, s.data(), s.size());
  std::memcpy(dst, before.data(), before.size());
  std::vector<CopyRange> ranges;
  for (const auto& sp : c.spans) ranges.push_back({dst + sp.dst, src + sp.src, sp.bytes});
  dev.copy_ranges(ranges.data(), ranges.size(), nullptr);
  dev.synchronize(nullptr);
  const std::vector<uint8_t> want = copy_ranges_case::expected(c, s, before);
  EXPECT_EQ(std::memcmp(dst, want.data(), want.size()), 0);
  EXPECT_EQ(std::memcmp(src, s.data(), s.size()), 0) << "a source changed";
  dev.deallocate(src);
  dev.deallocate(dst);
}

TEST(CopyRanges, CpuBackendCopiesEveryRangeBitForBit) {
  std::unique_ptr<Device> dev = create_device(KVC_DEVICE_CPU, 0);
  for (const Case& c : copy_ranges_case::cases()) run_case(*dev, c);
}

TEST(CopyRanges, NoRangesAndEmptyRangesWriteNothing) {
  std::unique_ptr<Device> dev = create_device(KVC_DEVICE_CPU, 0);
  uint8_t dst[32], src[32];
  std::memset(dst, 7, sizeof dst);
  std::memset(src, 9, sizeof src);
  dev->copy_ranges(nullptr, 0, nullptr);
  const CopyRange empty[2] = {{dst, src, 0}, {dst + 3, src + 1, 0}};
  dev->copy_ranges(empty, 2, nullptr);
  for (uint8_t b : dst) EXPECT_EQ(b, 7);
}

// A backend with only the required calls and copy_2d: copy_ranges is the
// Device default, one copy_2d per non-empty range, counted.
class Copy2dOnly final : public Device {
 public:
  kvc_device_kind_t kind() const override { return KVC_DEVICE_CPU; }
  int32_t ordinal() const override { return 0; }
  std::string name() const override { return "copy_2d only"; }
  DeviceMemoryInfo memory_info() const override { return {}; }
  void* allocate(uint64_t bytes) override { return cpu_->allocate(bytes); }
  void deallocate(void* p) noexcept override { cpu_->deallocate(p); }
  void copy_blocks(void*, const BlockGeometry&, const BlockCopy*, size_t, void*) override {}
  void* allocate_host(uint64_t bytes) override { return cpu_->allocate_host(bytes); }
  void deallocate_host(void* p) noexcept override { cpu_->deallocate_host(p); }
  void copy_tier(TierDirection, void*, void*, uint64_t, const TierCopy*, size_t, void*) override {}
  void synchronize(void*) override {}
  void copy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width,
               uint64_t height, CopyKind kind, void* stream) override {
    ++calls;
    EXPECT_EQ(kind, CopyKind::kDeviceToDevice);
    cpu_->copy_2d(dst, dst_pitch, src, src_pitch, width, height, kind, stream);
  }
  size_t calls = 0;

 private:
  std::unique_ptr<Device> cpu_ = create_device(KVC_DEVICE_CPU, 0);
};

TEST(CopyRanges, TheDefaultIsOneCopy2dPerNonEmptyRange) {
  Copy2dOnly dev;
  for (const Case& c : copy_ranges_case::cases()) {
    dev.calls = 0;
    run_case(dev, c);
    size_t non_empty = 0;
    for (const auto& sp : c.spans) non_empty += sp.bytes > 0 ? 1 : 0;
    EXPECT_EQ(dev.calls, non_empty) << c.name;
  }
}

}  // namespace
}  // namespace kvc
