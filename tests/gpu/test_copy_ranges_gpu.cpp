// Device::copy_ranges on CUDA (cuda/copy_ranges.cu): every case of
// copy_ranges_case.h (odd sizes, every misalignment of source and
// destination, 300 ranges over three launches, large misaligned ranges)
// on a non-blocking stream, then read back: the destination equals, bit
// for bit, its pattern with each range's source bytes written, and the
// source is unchanged. The same copy captured into a CUDA graph and
// replayed gives the same bytes. Skips with the reason when no CUDA device
// is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "../cpp/copy_ranges_case.h"
#include "backend/device.h"

namespace kvc {
namespace {

using copy_ranges_case::Case;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Buffers {
  Device& dev;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  std::vector<uint8_t> s, before;
  std::vector<CopyRange> ranges;
  Buffers(Device& d, const Case& c) : dev(d) {
    src = static_cast<uint8_t*>(dev.allocate(c.src_bytes));
    dst = static_cast<uint8_t*>(dev.allocate(c.dst_bytes));
    s = copy_ranges_case::random_bytes(c.src_bytes, 1);
    before = copy_ranges_case::random_bytes(c.dst_bytes, 2);
    for (const auto& sp : c.spans) ranges.push_back({dst + sp.dst, src + sp.src, sp.bytes});
  }
  ~Buffers() {
    dev.deallocate(src);
    dev.deallocate(dst);
  }
};

void expect_bytes(const Case& c, const Buffers& b) {
  std::vector<uint8_t> got(c.dst_bytes), src(c.src_bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), b.dst, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src.data(), b.src, src.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  const std::vector<uint8_t> want = copy_ranges_case::expected(c, b.s, b.before);
  size_t first = 0;
  while (first < want.size() && got[first] == want[first]) ++first;
  EXPECT_EQ(first, want.size()) << c.name << ": first differing destination byte at " << first;
  EXPECT_TRUE(src == b.s) << c.name << ": a source changed";
}

TEST(CudaCopyRanges, EveryRangeBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device";
  std::unique_ptr<Device> dev = create_device(KVC_DEVICE_CUDA, 0);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const Case& c : copy_ranges_case::cases()) {
    Buffers b(*dev, c);
    CUDA_OK(cudaMemcpy(b.src, b.s.data(), b.s.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(b.dst, b.before.data(), b.before.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());  // a pageable upload may still be in flight
    dev->copy_ranges(b.ranges.data(), b.ranges.size(), stream);
    dev->synchronize(stream);
    expect_bytes(c, b);
  }
  // The legacy default stream (a fork's and a rewind's copies) too.
  const Case c = copy_ranges_case::cases()[2];
  Buffers b(*dev, c);
  CUDA_OK(cudaMemcpy(b.src, b.s.data(), b.s.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b.dst, b.before.data(), b.before.size(), cudaMemcpyHostToDevice));
  dev->copy_ranges(b.ranges.data(), b.ranges.size(), nullptr);
  dev->synchronize(nullptr);
  expect_bytes(c, b);
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST(CudaCopyRanges, ACapturedCopyReplaysBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device";
  std::unique_ptr<Device> dev = create_device(KVC_DEVICE_CUDA, 0);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Case c = copy_ranges_case::cases()[3];  // many ranges: three launches
  Buffers b(*dev, c);
  CUDA_OK(cudaMemcpy(b.src, b.s.data(), b.s.size(), cudaMemcpyHostToDevice));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  dev->copy_ranges(b.ranges.data(), b.ranges.size(), stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  // Nothing ran at capture: the pattern is written after it, then replayed over.
  CUDA_OK(cudaMemcpy(b.dst, b.before.data(), b.before.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_bytes(c, b);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace kvc
