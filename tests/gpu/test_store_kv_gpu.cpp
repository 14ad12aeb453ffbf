// CUDA store and block-copy kernels against the CPU reference: the GPU pool
// must equal the CPU pool byte for byte (both poisoned first). Errors found
// by the kernels come back through kvc_cache_get_async_error(). Skips with
// the reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tests/gpu/kernels_test_fixture.h"

namespace {

using namespace kvc_kernels_test;

// ---------------------------------------------------------------------------
// Store

void run_store(Kernels& t, const Shape& s, kvc_dtype_t src_dtype, uint32_t num_tokens,
               uint32_t layer) {
  SCOPED_TRACE(s.str() + " src " + dtype_str(src_dtype) + " tokens " + std::to_string(num_tokens));
  CachePair p;
  t.make_pair(s, p);
  if (::testing::Test::HasFatalFailure()) return;
  std::memset(p.cpu_pool.base, 0xA5, p.cpu_pool.bytes);
  CUDA_OK(cudaMemset(p.gpu_pool.base, 0xA5, p.gpu_pool.bytes));

  const uint64_t slots = p.cpu_pool.num_blocks * s.tokens_per_block;
  ASSERT_LE(num_tokens, slots);
  std::vector<int64_t> all(slots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), t.rng);
  std::vector<int64_t> slot_mapping(all.begin(), all.begin() + num_tokens);
  for (uint32_t i = 3; i < num_tokens; i += 7) slot_mapping[i] = -1;  // skipped tokens

  const size_t n = size_t(num_tokens) * s.kv_heads * s.head_dim;
  // A same-dtype store copies bytes, so any bit pattern must survive; the
  // fp8 path quantizes values, some beyond +-448 to hit saturation.
  std::vector<unsigned char> key, value;
  if (src_dtype == s.dtype) {
    key.resize(n * elem_size(src_dtype));
    value.resize(key.size());
    for (auto& b : key) b = (unsigned char)t.rng();
    for (auto& b : value) b = (unsigned char)t.rng();
  } else {
    key = random_values(t.rng, src_dtype, n, 900.0f);
    value = random_values(t.rng, src_dtype, n, 3.0f);
  }
  DeviceBuffer dkey(key.data(), key.size()), dvalue(value.data(), value.size());
  DeviceBuffer dslots(slot_mapping.data(), slot_mapping.size() * sizeof(int64_t));

  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.layer = layer;
  a.num_tokens = num_tokens;
  a.src_dtype = src_dtype;
  a.k_scale = 1.5f;
  a.v_scale = 0.0625f;
  a.key = key.data();
  a.value = s.kv_factor == 2 ? value.data() : nullptr;
  a.slot_mapping = slot_mapping.data();
  ASSERT_EQ(kvc_store_kv(p.cpu, &a, nullptr), KVC_OK) << kvc_last_error_message();
  a.key = dkey.ptr;
  a.value = s.kv_factor == 2 ? dvalue.ptr : nullptr;
  a.slot_mapping = dslots.as<int64_t>();
  ASSERT_EQ(kvc_store_kv(p.gpu, &a, p.stream), KVC_OK) << kvc_last_error_message();
  t.expect_no_async_error(p.gpu, p.stream);
  t.expect_pools_equal(p, "store");
}

TEST_F(Kernels, StoreMatchesReferenceEveryDtypeLayoutHeadDim) {
  for (kvc_dtype_t d : {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3})
    for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND})
      for (uint32_t dim : {64u, 128u, 256u}) {
        Shape s;
        s.dtype = d;
        s.layout = l;
        s.head_dim = dim;
        s.kv_heads = 4;
        s.max_tokens = 1024;
        run_store(*this, s, d, 700, 1);
      }
}

TEST_F(Kernels, StoreQuantizesToFp8LikeReference) {
  for (kvc_dtype_t src : {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16})
    for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND})
      for (uint32_t dim : {64u, 128u, 256u}) {
        Shape s;
        s.dtype = KVC_DTYPE_FP8_E4M3;
        s.layout = l;
        s.head_dim = dim;
        s.kv_heads = 3;
        s.max_tokens = 512;
        run_store(*this, s, src, 300, 0);
      }
}

TEST_F(Kernels, StoreOddShapesAndKvFactor1) {
  Shape s;
  s.dtype = KVC_DTYPE_F16;
  s.kv_heads = 3;
  s.head_dim = 40;  // 80-byte rows: 16-byte vectors do not fit
  s.tokens_per_block = 8;
  s.max_tokens = 256;
  run_store(*this, s, KVC_DTYPE_F16, 200, 1);
  s.head_dim = 36;
  s.dtype = KVC_DTYPE_FP8_E4M3;  // quantized one element at a time
  run_store(*this, s, KVC_DTYPE_BF16, 200, 0);
  s = Shape();
  s.kv_factor = 1;
  s.layout = KVC_LAYOUT_HND;
  run_store(*this, s, KVC_DTYPE_BF16, 1000, 1);
  s.tokens_per_block = 64;
  s.layout = KVC_LAYOUT_NHD;
  run_store(*this, s, KVC_DTYPE_BF16, 4096, 0);  // every slot
}

// The contiguous 16-byte copy at each items-per-thread variant (one by
// default) and, at one item, other block sizes: a partial last thread block
// and skipped tokens in each.
TEST_F(Kernels, StoreEveryItemsPerThread) {
  struct ForceItems {
    ForceItems(int n, int threads) {
      kvc::set_store_kv_items_override(n);
      kvc::set_store_kv_threads_override(threads);
    }
    ~ForceItems() {
      kvc::set_store_kv_items_override(0);
      kvc::set_store_kv_threads_override(0);
    }
  };
  const std::pair<int, int> variants[] = {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {1, 96}, {1, 1024}};
  for (auto [items, threads] : variants) {
    SCOPED_TRACE("items per thread " + std::to_string(items) + " threads " + std::to_string(threads));
    ForceItems force(items, threads);
    Shape s;
    s.layout = items % 2 == 0 ? KVC_LAYOUT_HND : KVC_LAYOUT_NHD;
    run_store(*this, s, s.dtype, 3001, 1);
  }
}

TEST_F(Kernels, StoreReportsBadSlotsAsynchronously) {
  Shape s;
  CachePair p;
  make_pair(s, p);
  if (::testing::Test::HasFatalFailure()) return;
  const uint64_t slots = p.gpu_pool.num_blocks * s.tokens_per_block;
  std::vector<int64_t> slot_mapping = {5, int64_t(slots) + 7, 6, -3};
  std::vector<unsigned char> key = random_values(rng, s.dtype, 4 * s.kv_heads * s.head_dim, 1.0f);
  DeviceBuffer dkey(key.data(), key.size()), dslots(slot_mapping.data(), 4 * sizeof(int64_t));
  kvc_store_args_t a = KVC_STORE_ARGS_INIT;
  a.num_tokens = 4;
  a.src_dtype = s.dtype;
  a.key = dkey.ptr;
  a.value = dkey.ptr;
  a.slot_mapping = dslots.as<int64_t>();
  ASSERT_EQ(kvc_store_kv(p.gpu, &a, p.stream), KVC_OK);
  kvc_status_t async = KVC_OK;
  ASSERT_EQ(kvc_cache_get_async_error(p.gpu, p.stream, &async), KVC_OK);
  EXPECT_EQ(async, KVC_ERR_INVALID_ARGUMENT);
  const std::string msg = kvc_last_error_message();
  EXPECT_TRUE(msg.find("store_kv (layer 0): slot_mapping[1] = " + std::to_string(slots + 7) +
                       " is outside [-1, " + std::to_string(slots) + ")") != std::string::npos ||
              msg.find("slot_mapping[3] = -3 is outside") != std::string::npos)
      << msg;
  // Reported once, then cleared; the good tokens were stored.
  expect_no_async_error(p.gpu, p.stream);
}

// ---------------------------------------------------------------------------
// Block copies

TEST_F(Kernels, CopyBlocksMatchesReference) {
  for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND})
    for (uint32_t dim : {40u, 128u}) {
      Shape s;
      s.layout = l;
      s.head_dim = dim;
      s.kv_heads = 3;
      s.layers = 3;
      s.max_tokens = 16 * 700;
      SCOPED_TRACE(s.str());
      CachePair p;
      make_pair(s, p);
      if (::testing::Test::HasFatalFailure()) return;
      std::vector<unsigned char> init(p.cpu_pool.bytes);
      for (auto& b : init) b = (unsigned char)rng();
      std::memcpy(p.cpu_pool.base, init.data(), init.size());
      CUDA_OK(cudaMemcpy(p.gpu_pool.base, init.data(), init.size(), cudaMemcpyHostToDevice));
      // 300 copies (more than one launch holds): sources from the first
      // 300 blocks, destinations from the rest, prefixes of every length.
      std::vector<int32_t> blocks(p.cpu_pool.num_blocks);
      std::iota(blocks.begin(), blocks.end(), 0);
      std::shuffle(blocks.begin(), blocks.end(), rng);
      const uint32_t n = 300;
      std::vector<int32_t> src(blocks.begin(), blocks.begin() + n),
          dst(blocks.begin() + n, blocks.begin() + 2 * n);
      std::vector<uint32_t> rows(n);
      for (uint32_t i = 0; i < n; ++i) rows[i] = uint32_t(rng() % (s.tokens_per_block + 3));
      src[1] = src[0];  // one source read twice
      ASSERT_EQ(kvc_copy_blocks(p.cpu, 0, src.data(), dst.data(), rows.data(), n, nullptr), KVC_OK);
      ASSERT_EQ(kvc_copy_blocks(p.gpu, 0, src.data(), dst.data(), rows.data(), n, p.stream), KVC_OK)
          << kvc_last_error_message();
      expect_pools_equal(p, "partial copies");
      ASSERT_EQ(kvc_copy_blocks(p.cpu, 0, dst.data(), src.data() + 2, nullptr, 5, nullptr), KVC_OK);
      ASSERT_EQ(kvc_copy_blocks(p.gpu, 0, dst.data(), src.data() + 2, nullptr, 5, p.stream), KVC_OK);
      expect_pools_equal(p, "whole copies");
    }
}
}  // namespace
