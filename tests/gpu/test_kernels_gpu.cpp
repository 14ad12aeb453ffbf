// CUDA decode attention against the CPU reference kernels: two caches of the
// same shape, one on the CPU and one on cuda:0, fed the same fresh random
// inputs (kernels_test_fixture.h); the store and block-copy tests are in
// test_store_kv_gpu.cpp. Decode must match within ||gpu - cpu|| / ||cpu||
// < 1e-2 (f16/bf16 outputs), never NaN, with the output poisoned with NaN
// first so that every element is checked written. Errors found by the
// kernels come back through kvc_cache_get_async_error(). Skips with the
// reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/numeric.h"
#include "cuda/cuda_kernels.h"
#include "kvcache/kvcache.h"
#include "tests/gpu/kernels_test_fixture.h"

namespace {

using namespace kvc_kernels_test;

// ---------------------------------------------------------------------------
// Decode attention

struct DecodeCase {
  Shape shape;
  kvc_dtype_t q_dtype = KVC_DTYPE_BF16;
  uint32_t q_heads = 8;
  std::vector<int32_t> lens;
  uint32_t layer = 0;
  uint32_t window = 0;  // args.window
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  float q_range = 1.0f;  // query elements uniform in [-q_range, q_range]
  // fp8 K/V: bytes uniform over the 254 finite e4m3 values (subnormals and
  // +-448 included) instead of values uniform in [-2, 2].
  bool every_fp8_byte = false;
};

float rel_error(const std::vector<float>& out, const std::vector<float>& ref, bool* nan) {
  double num = 0, den = 0;
  *nan = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) *nan = true;
    num += double(out[i] - ref[i]) * (out[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return float(std::sqrt(num / std::max(den, 1e-30)));
}

void run_decode(Kernels& t, const DecodeCase& c) {
  const Shape& s = c.shape;
  std::string lens;
  for (int32_t l : c.lens) lens += std::to_string(l) + " ";
  SCOPED_TRACE(s.str() + " q " + dtype_str(c.q_dtype) + " q_heads " + std::to_string(c.q_heads) +
               " window " + std::to_string(c.window) + " lens " + lens);
  CachePair p;
  t.make_pair(s, p);
  if (::testing::Test::HasFatalFailure()) return;

  // Fresh random K/V in the whole pool, the same bytes on both sides.
  const size_t pool_elems = p.cpu_pool.bytes / elem_size(s.dtype);
  std::vector<unsigned char> kv = random_values(t.rng, s.dtype, pool_elems, 2.0f);
  if (c.every_fp8_byte) {
    std::uniform_int_distribution<int> byte(0, 253);  // 0x00..0x7e, 0x80..0xfe
    for (unsigned char& v : kv) {
      const int x = byte(t.rng);
      v = static_cast<unsigned char>(x < 127 ? x : x + 1);
    }
  }
  std::memcpy(p.cpu_pool.base, kv.data(), kv.size());
  CUDA_OK(cudaMemcpy(p.gpu_pool.base, kv.data(), kv.size(), cudaMemcpyHostToDevice));

  const uint32_t batch = uint32_t(c.lens.size());
  const uint32_t T = s.tokens_per_block;
  const uint32_t max_len = uint32_t(*std::max_element(c.lens.begin(), c.lens.end()));
  const uint32_t max_seq_len = std::max(max_len, 1u) + 3;  // a loose bound is fine
  const uint32_t stride = (max_seq_len + T - 1) / T + 1;
  uint32_t layer_window = 0;
  if (!s.windows.empty()) layer_window = s.windows[c.layer % s.windows.size()];
  const uint32_t window = c.window != 0 ? c.window : layer_window;

  // Distinct random blocks per sequence; entries the window leaves out are
  // -1, so reading one would be reported.
  std::vector<int32_t> blocks(p.cpu_pool.num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), t.rng);
  std::vector<int32_t> padded(size_t(batch) * stride, -1), indices, indptr = {0};
  size_t next = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    const uint32_t len = uint32_t(c.lens[b]);
    const uint32_t need = (len + T - 1) / T;
    const uint32_t first = (window != 0 && len > window) ? (len - window) / T : 0;
    for (uint32_t j = 0; j < need; ++j) {
      ASSERT_LT(next, blocks.size());
      const int32_t id = j >= first ? blocks[next++] : -1;
      padded[size_t(b) * stride + j] = id;
      indices.push_back(id);
    }
    if (b % 2 == 1) indices.push_back(-1);  // CSR rows may be longer than needed
    indptr.push_back(int32_t(indices.size()));
  }

  const size_t q_elems = size_t(batch) * c.q_heads * s.head_dim;
  std::vector<unsigned char> query = random_values(t.rng, c.q_dtype, q_elems, c.q_range);
  DeviceBuffer dq(query.data(), query.size()), dout(query.size());
  DeviceBuffer dlens(c.lens.data(), c.lens.size() * 4), dpadded(padded.data(), padded.size() * 4);
  DeviceBuffer dindices(indices.data(), indices.size() * 4), dindptr(indptr.data(), indptr.size() * 4);

  for (kvc_table_format_t format : {KVC_TABLE_PADDED, KVC_TABLE_CSR}) {
    SCOPED_TRACE(format == KVC_TABLE_PADDED ? "padded table" : "CSR table");
    kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
    a.layer = c.layer;
    a.batch = batch;
    a.q_heads = c.q_heads;
    a.q_dtype = c.q_dtype;
    a.table_format = format;
    a.max_seq_len = max_seq_len;
    a.window = c.window;
    a.k_scale = c.k_scale;
    a.v_scale = c.v_scale;
    a.table_stride = format == KVC_TABLE_PADDED ? stride : 0;

    std::vector<unsigned char> ref(query.size());
    a.query = query.data();
    a.out = ref.data();
    a.seq_lens = c.lens.data();
    a.block_table = format == KVC_TABLE_PADDED ? padded.data() : indices.data();
    a.indptr = format == KVC_TABLE_PADDED ? nullptr : indptr.data();
    ASSERT_EQ(kvc_decode_attention(p.cpu, &a, nullptr), KVC_OK) << kvc_last_error_message();

    a.query = dq.ptr;
    a.out = dout.ptr;
    a.seq_lens = dlens.as<int32_t>();
    a.block_table = format == KVC_TABLE_PADDED ? dpadded.as<int32_t>() : dindices.as<int32_t>();
    a.indptr = format == KVC_TABLE_PADDED ? nullptr : dindptr.as<int32_t>();
    uint64_t ws_bytes = 0;
    ASSERT_EQ(kvc_decode_workspace_size(p.gpu, &a, &ws_bytes), KVC_OK) << kvc_last_error_message();
    DeviceBuffer ws(ws_bytes);
    a.workspace = ws.ptr;
    a.workspace_bytes = ws_bytes;
    CUDA_OK(cudaMemsetAsync(dout.ptr, 0xFF, dout.bytes, p.stream));  // NaN in f16 and bf16
    ASSERT_EQ(kvc_decode_attention(p.gpu, &a, p.stream), KVC_OK) << kvc_last_error_message();
    t.expect_no_async_error(p.gpu, p.stream);
    std::vector<unsigned char> got(query.size());
    CUDA_OK(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost));

    std::vector<float> out(q_elems), want(q_elems);
    for (size_t i = 0; i < q_elems; ++i) {
      out[i] = kvc::load_f32(got.data(), c.q_dtype, i);
      want[i] = kvc::load_f32(ref.data(), c.q_dtype, i);
    }
    bool nan = false;
    const float err = rel_error(out, want, &nan);
    EXPECT_FALSE(nan) << "an output element is NaN or was not written";
    EXPECT_LT(err, 1e-2f) << "relative error";
    for (uint32_t b = 0; b < batch; ++b) {
      if (c.lens[b] != 0) continue;
      for (size_t i = 0; i < size_t(c.q_heads) * s.head_dim; ++i)
        ASSERT_EQ(out[size_t(b) * c.q_heads * s.head_dim + i], 0.0f) << "empty sequence " << b;
    }
  }
}

std::vector<int32_t> ragged_lens(uint32_t T) {
  // 1 token, exactly one and two blocks, one past a block, and longer ones.
  return {1, int32_t(T), int32_t(T + 1), int32_t(2 * T), 250, 1000, 0, 37};
}

TEST_F(Kernels, DecodeMatchesReferenceEveryDtypeLayoutHeadDim) {
  const std::pair<kvc_dtype_t, kvc_dtype_t> types[] = {{KVC_DTYPE_F16, KVC_DTYPE_F16},
                                                       {KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_F16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16}};
  for (const auto& [kv, q] : types)
    for (kvc_layout_t l : {KVC_LAYOUT_NHD, KVC_LAYOUT_HND})
      for (uint32_t dim : {64u, 128u, 256u}) {
        DecodeCase c;
        c.shape.dtype = kv;
        c.shape.layout = l;
        c.shape.head_dim = dim;
        c.shape.kv_heads = 2;
        c.q_dtype = q;
        c.q_heads = 8;
        c.lens = ragged_lens(16);
        c.layer = 1;
        if (kv == KVC_DTYPE_FP8_E4M3) {
          c.k_scale = 0.75f;
          c.v_scale = 1.25f;
        }
        run_decode(*this, c);
      }
}

TEST_F(Kernels, DecodeGroupSizesAndBlockSizes) {
  for (uint32_t group : {1u, 2u, 3u, 6u, 8u})
    for (uint32_t T : {8u, 32u}) {
      DecodeCase c;
      c.shape.kv_heads = 2;
      c.shape.tokens_per_block = T;
      c.q_heads = 2 * group;
      c.lens = ragged_lens(T);
      run_decode(*this, c);
    }
  DecodeCase mqa;  // one kv head for 16 query heads
  mqa.shape.kv_heads = 1;
  mqa.q_heads = 16;
  mqa.lens = {300, 1, 64};
  run_decode(*this, mqa);
  DecodeCase k_is_v;  // kv_factor 1: V is K
  k_is_v.shape.kv_factor = 1;
  k_is_v.lens = {100, 17};
  run_decode(*this, k_is_v);
}

TEST_F(Kernels, DecodeWindows) {
  DecodeCase c;
  c.shape.windows = {0, 64};  // layer 1 keeps the last 64 tokens
  c.layer = 1;
  c.lens = {1, 63, 64, 65, 100, 500, 1000};
  run_decode(*this, c);
  c.window = 100;  // a per-call window overrides the layer's
  run_decode(*this, c);
  c.layer = 0;
  c.window = 17;  // not a multiple of the block size
  c.shape.layout = KVC_LAYOUT_HND;
  run_decode(*this, c);
}

TEST_F(Kernels, DecodeSplitsLongSequences) {
  // One long sequence must be cut over many blocks (split-KV) and merged.
  DecodeCase c;
  c.shape.kv_heads = 8;
  c.shape.layers = 1;
  c.shape.max_tokens = 24000;
  c.q_heads = 32;
  c.lens = {20000};
  run_decode(*this, c);
  c.lens = {20000, 5, 0, 16};
  run_decode(*this, c);
  c.window = 4000;
  run_decode(*this, c);
}

// Both decode kernels, each forced (kvc::set_decode_kernel_override): the
// tensor-core kernel (head dim 64 and 128, groups <= 16 or a multiple of
// 16; head dim 256 falls back to CUDA cores) and the CUDA-core kernel, over
// every K/V type, group sizes 1..32, both layouts, windows and splits.
struct ForcePath {
  explicit ForcePath(int path) { kvc::set_decode_kernel_override(path); }
  ~ForcePath() { kvc::set_decode_kernel_override(0); }
};

// fp8 K/V on the tensor-core kernel (converted in registers into permuted
// mma operands, decode_tc_kernel.cuh), both pipeline shapes: every finite
// e4m3 byte (subnormals, +-448) at every head dim and token position of a
// tile, partial tiles and splits, against the CPU reference.
TEST_F(Kernels, DecodeFp8EveryByteTensorCores) {
  for (int path : {2, 3}) {
    SCOPED_TRACE(path == 2 ? "tensor-core kernel" : "tensor-core kernel, other depth");
    ForcePath force(path);
    for (uint32_t dim : {64u, 128u})
      for (uint32_t group : {1u, 4u, 8u}) {
        for (kvc_dtype_t q : {KVC_DTYPE_BF16, KVC_DTYPE_F16}) {
          DecodeCase c;
          c.shape.dtype = KVC_DTYPE_FP8_E4M3;
          c.shape.head_dim = dim;
          c.shape.kv_heads = 2;
          c.shape.layout = group == 4 ? KVC_LAYOUT_HND : KVC_LAYOUT_NHD;
          c.q_dtype = q;
          c.q_heads = 2 * group;
          c.every_fp8_byte = true;
          c.k_scale = 1.0f / 256;
          c.v_scale = 0.5f;
          c.lens = {1, 15, 16, 17, 33, 700, 2100};
          run_decode(*this, c);
        }
      }
  }
}

TEST_F(Kernels, DecodeEveryKernelPathAndGroupSize) {
  const std::pair<kvc_dtype_t, kvc_dtype_t> types[] = {{KVC_DTYPE_BF16, KVC_DTYPE_BF16},
                                                       {KVC_DTYPE_F16, KVC_DTYPE_F16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_BF16},
                                                       {KVC_DTYPE_FP8_E4M3, KVC_DTYPE_F16}};
  for (int path : {1, 2, 3}) {
    SCOPED_TRACE(path == 1 ? "CUDA-core kernel" : path == 2 ? "tensor-core kernel" : "tensor-core kernel, other depth");
    ForcePath force(path);
    for (const auto& [kv, q] : types)
      for (uint32_t dim : {64u, 128u})
        for (uint32_t group : {1u, 3u, 4u, 8u, 16u, 32u}) {
          if (kv == KVC_DTYPE_FP8_E4M3 && (group == 3 || group == 16)) continue;
          DecodeCase c;
          c.shape.dtype = kv;
          c.q_dtype = q;
          c.shape.head_dim = dim;
          c.shape.kv_heads = 2;
          c.shape.layout = group % 2 == 0 ? KVC_LAYOUT_NHD : KVC_LAYOUT_HND;
          c.q_heads = 2 * group;
          c.lens = ragged_lens(16);
          if (kv == KVC_DTYPE_FP8_E4M3) {
            c.k_scale = 0.75f;
            c.v_scale = 1.25f;
          }
          run_decode(*this, c);
        }
    DecodeCase big_q;  // fp8 K/V, bf16 query beyond f16's range (the tensor-core kernel scales it)
    big_q.shape.dtype = KVC_DTYPE_FP8_E4M3;
    big_q.q_heads = 8;
    big_q.q_range = 3.0e5f;
    big_q.k_scale = 2.0e-5f;
    big_q.lens = {300, 1, 64};
    run_decode(*this, big_q);
    DecodeCase wide;  // head dim 256: CUDA cores
    wide.shape.head_dim = 256;
    wide.q_heads = 8;
    wide.lens = {300, 1, 64};
    run_decode(*this, wide);
    DecodeCase win;  // windows and block sizes
    win.shape.windows = {0, 64};
    win.layer = 1;
    win.q_heads = 16;
    win.lens = {1, 63, 64, 65, 100, 500, 1000};
    run_decode(*this, win);
    win.window = 17;
    win.shape.tokens_per_block = 8;
    run_decode(*this, win);
    win.window = 0;
    win.layer = 0;
    win.shape.tokens_per_block = 32;
    run_decode(*this, win);
    DecodeCase k_is_v;  // kv_factor 1: V is K
    k_is_v.shape.kv_factor = 1;
    k_is_v.lens = {100, 17};
    run_decode(*this, k_is_v);
    for (uint32_t group : {1u, 4u, 8u}) {  // split-KV: one long sequence over many blocks
      DecodeCase c;
      c.shape.kv_heads = 8;
      c.shape.layers = 1;
      c.shape.max_tokens = 24000;
      c.q_heads = 8 * group;
      c.lens = {20000, 5, 0, 16};
      run_decode(*this, c);
      c.window = 4000;
      run_decode(*this, c);
      if (group == 4) {
        c.shape.dtype = KVC_DTYPE_FP8_E4M3;
        c.k_scale = 0.75f;
        c.v_scale = 1.25f;
        run_decode(*this, c);
      }
    }
  }
}

TEST_F(Kernels, DecodeWorkspaceSizeGrowsWithBatchAndLength) {
  Shape s;
  s.kv_heads = 8;
  s.layers = 1;
  kvc_cache_t* gpu = make_cache(s, KVC_DEVICE_CUDA);
  ASSERT_NE(gpu, nullptr);
  kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
  a.q_heads = 32;
  a.q_dtype = KVC_DTYPE_BF16;
  uint64_t prev_len = 0;
  for (uint32_t len : {1u, 100u, 257u, 1000u, 4096u, 32768u, 131072u}) {
    uint64_t prev_batch = 0;
    for (uint32_t batch = 1; batch <= 256; batch += (batch < 16 ? 1 : 15)) {
      a.batch = batch;
      a.max_seq_len = len;
      a.table_stride = (len + 15) / 16;
      uint64_t bytes = 0;
      ASSERT_EQ(kvc_decode_workspace_size(gpu, &a, &bytes), KVC_OK) << kvc_last_error_message();
      EXPECT_GE(bytes, prev_batch) << "batch " << batch << " len " << len;
      prev_batch = bytes;
      if (batch == 1) {
        EXPECT_GE(bytes, prev_len) << "len " << len;
        prev_len = bytes;
      }
    }
  }
  kvc_cache_destroy(gpu);
}

TEST_F(Kernels, DecodeReportsErrors) {
  Shape s;
  CachePair p;
  make_pair(s, p);
  if (::testing::Test::HasFatalFailure()) return;
  const uint32_t batch = 2, q_heads = 4;
  std::vector<unsigned char> query = random_values(rng, KVC_DTYPE_BF16, batch * q_heads * 128, 1.0f);
  DeviceBuffer dq(query.data(), query.size()), dout(query.size());
  std::vector<int32_t> lens = {40, 20};
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5};
  DeviceBuffer dlens(lens.data(), 8), dtable(table.data(), table.size() * 4);
  kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
  a.batch = batch;
  a.q_heads = q_heads;
  a.q_dtype = KVC_DTYPE_BF16;
  a.query = dq.ptr;
  a.out = dout.ptr;
  a.seq_lens = dlens.as<int32_t>();
  a.block_table = dtable.as<int32_t>();
  a.table_stride = 3;
  a.max_seq_len = 48;
  uint64_t ws_bytes = 0;
  ASSERT_EQ(kvc_decode_workspace_size(p.gpu, &a, &ws_bytes), KVC_OK);
  DeviceBuffer ws(ws_bytes + 64);
  a.workspace = ws.ptr;
  a.workspace_bytes = ws_bytes;
  ASSERT_EQ(kvc_decode_attention(p.gpu, &a, p.stream), KVC_OK) << kvc_last_error_message();
  expect_no_async_error(p.gpu, p.stream);

  if (ws_bytes > 0) {
    kvc_decode_args_t small = a;
    small.workspace_bytes = ws_bytes - 1;
    EXPECT_EQ(kvc_decode_attention(p.gpu, &small, p.stream), KVC_ERR_BUFFER_TOO_SMALL);
    EXPECT_NE(std::string(kvc_last_error_message()).find("see kvc_decode_workspace_size"),
              std::string::npos);
  }

  auto expect_async = [&](const std::string& needle) {
    ASSERT_EQ(kvc_decode_attention(p.gpu, &a, p.stream), KVC_OK) << kvc_last_error_message();
    kvc_status_t async = KVC_OK;
    ASSERT_EQ(kvc_cache_get_async_error(p.gpu, p.stream, &async), KVC_OK);
    EXPECT_EQ(async, KVC_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvc_last_error_message()).find(needle), std::string::npos)
        << kvc_last_error_message();
  };
  // A length over max_seq_len: found on the device.
  std::vector<int32_t> bad_lens = {49, 20};
  CUDA_OK(cudaMemcpy(dlens.ptr, bad_lens.data(), 8, cudaMemcpyHostToDevice));
  expect_async("decode_attention (layer 0): seq_lens[0] = 49 is outside [0, max_seq_len 48]");
  CUDA_OK(cudaMemcpy(dlens.ptr, lens.data(), 8, cudaMemcpyHostToDevice));
  // A block id out of range.
  std::vector<int32_t> bad_table = {0, 1, 2, 3, -5, 5};
  CUDA_OK(cudaMemcpy(dtable.ptr, bad_table.data(), 24, cudaMemcpyHostToDevice));
  expect_async("block table entry 1 of sequence 1 is -5, outside [0, ");
  // A CSR row too short for its length.
  std::vector<int32_t> indptr = {0, 3, 4};
  DeviceBuffer dindptr(indptr.data(), 12);
  CUDA_OK(cudaMemcpy(dtable.ptr, table.data(), 24, cudaMemcpyHostToDevice));
  a.table_format = KVC_TABLE_CSR;
  a.indptr = dindptr.as<int32_t>();
  a.table_stride = 0;
  expect_async("indptr gives sequence 1 1 blocks, fewer than the 2 its length spans");
  expect_no_async_error(p.gpu, p.stream);

  // f32 K/V: the CPU backend computes it, CUDA does not.
  Shape f32 = s;
  f32.dtype = KVC_DTYPE_F32;
  kvc_cache_t* gpu32 = make_cache(f32, KVC_DEVICE_CUDA);
  ASSERT_NE(gpu32, nullptr);
  a.q_dtype = KVC_DTYPE_F32;
  EXPECT_EQ(kvc_decode_attention(gpu32, &a, p.stream), KVC_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kvc_last_error_message()).find("supports f16, bf16 and fp8_e4m3"),
            std::string::npos);
  kvc_cache_destroy(gpu32);
}

}  // namespace
