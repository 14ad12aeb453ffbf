// The cache manager driven on a CUDA cache with the content oracle: K/V
// bytes derived from (token, position, layer, kv, head, dim) are stored
// through kvc_store_kv() at the slots the manager hands out, on a stream;
// prefix reuse, copy on partial reuse, fork and copy on write move blocks on
// the GPU (the batched copy kernel); every token of every live sequence is
// then read back from device memory and compared bit for bit. Finally decode
// attention runs through the manager's own block tables (padded and CSR) and
// is compared with the CPU reference on the same bytes. Skips with the
// reason when no CUDA device is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "backend/numeric.h"
#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t kLayers = 2, kHeads = 2, kDim = 64, kT = 16;

#define KVC_OK_(call) ASSERT_EQ((call), KVC_OK) << #call << ": " << kvc_last_error_message()
#define CUDA_OK_(call) ASSERT_EQ((call), cudaSuccess) << #call

uint32_t mix(int32_t token, uint64_t pos, uint32_t layer, uint32_t kv, uint32_t h, uint32_t d) {
  uint32_t x = uint32_t(token) * 2654435761u ^ uint32_t(pos) * 40503u ^ layer * 97u ^ kv * 13u ^
               h * 7u ^ d;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return x;
}

size_t elem_size(kvc_dtype_t d) { return d == KVC_DTYPE_F32 ? 4 : 2; }

// A finite value in [1, 2) whose mantissa mixes every coordinate.
void put_elem(unsigned char* p, kvc_dtype_t dtype, uint32_t bits) {
  if (dtype == KVC_DTYPE_F32) {
    const uint32_t v = 0x3F800000u | (bits & 0x7FFFFFu);
    std::memcpy(p, &v, 4);
  } else if (dtype == KVC_DTYPE_F16) {
    const uint16_t v = uint16_t(0x3C00u | (bits & 0x3FFu));
    std::memcpy(p, &v, 2);
  } else {
    const uint16_t v = uint16_t(0x3F80u | (bits & 0x7Fu));
    std::memcpy(p, &v, 2);
  }
}

class CudaCacheOracle : public ::testing::TestWithParam<kvc_dtype_t> {
 public:
  void SetUp() override {
    if ((kvc_features() & KVC_FEATURE_CUDA_DEVICE) == 0)
      GTEST_SKIP() << "no usable CUDA device (kvc_features() = " << kvc_features() << ")";
    dtype_ = GetParam();
    gpu_ = make(KVC_DEVICE_CUDA);
    cpu_ = make(KVC_DEVICE_CPU);
    ASSERT_NE(gpu_, nullptr);
    ASSERT_NE(cpu_, nullptr);
    KVC_OK_(kvc_cache_describe_pool(gpu_, 0, &pool_));
    for (uint32_t l = 0; l < kLayers; ++l) KVC_OK_(kvc_cache_layer_view(gpu_, l, &views_[l]));
    CUDA_OK_(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK_(cudaMemset(pool_.base, 0xA5, pool_.bytes));  // rows nobody wrote stay recognisable
  }
  void TearDown() override {
    kvc_cache_destroy(gpu_);
    kvc_cache_destroy(cpu_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  kvc_cache_t* make(kvc_device_kind_t kind) {
    kvc_config_t* c = nullptr;
    kvc_config_create(&c);
    kvc_config_set_num_layers(c, kLayers);
    kvc_config_set_kv_heads(c, kHeads);
    kvc_config_set_head_dim(c, kDim);
    kvc_config_set_dtype(c, dtype_);
    kvc_config_set_tokens_per_block(c, kT);
    kvc_config_set_max_tokens(c, 64 * kT);
    kvc_config_set_copy_on_partial_reuse(c, true);
    kvc_config_set_device(c, kind, 0);
    kvc_cache_t* cache = nullptr;
    const kvc_status_t s = kvc_cache_create(c, &cache);
    kvc_config_destroy(c);
    EXPECT_EQ(s, KVC_OK) << kvc_last_error_message();
    return cache;
  }

  // Stores the K/V of every token added to `id` since the last call, at
  // the slots the manager gives, from device buffers on the stream.
  void write_new_tokens(uint64_t id, const std::vector<int32_t>& tokens, size_t expect_written) {
    std::vector<int64_t> slots(tokens.size() + 1);
    size_t n = 0;
    int32_t added = 0;
    KVC_OK_(kvc_batch_slot_mapping(gpu_, 0, &id, 1, slots.data(), slots.size(), &n, &added));
    kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
    KVC_OK_(kvc_sequence_describe(gpu_, id, &sd));
    const uint64_t first = sd.num_tokens - n;
    const size_t es = elem_size(dtype_);
    const size_t bytes = n * kHeads * kDim * es;
    std::vector<unsigned char> key(bytes), val(bytes);
    void *dkey, *dval, *dslots;
    CUDA_OK_(cudaMalloc(&dkey, bytes));
    CUDA_OK_(cudaMalloc(&dval, bytes));
    CUDA_OK_(cudaMalloc(&dslots, n * sizeof(int64_t)));
    CUDA_OK_(cudaMemcpy(dslots, slots.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice));
    for (uint32_t l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < n; ++i)
        for (uint32_t h = 0; h < kHeads; ++h)
          for (uint32_t d = 0; d < kDim; ++d) {
            const uint64_t pos = first + i;
            const size_t at = ((i * kHeads + h) * kDim + d) * es;
            put_elem(&key[at], dtype_, mix(tokens[pos], pos, l, 0, h, d));
            put_elem(&val[at], dtype_, mix(tokens[pos], pos, l, 1, h, d));
          }
      // The host buffers are rewritten per layer: copy synchronously.
      CUDA_OK_(cudaMemcpy(dkey, key.data(), bytes, cudaMemcpyHostToDevice));
      CUDA_OK_(cudaMemcpy(dval, val.data(), bytes, cudaMemcpyHostToDevice));
      kvc_store_args_t a = KVC_STORE_ARGS_INIT;
      a.layer = l;
      a.num_tokens = uint32_t(n);
      a.src_dtype = dtype_;
      a.key = dkey;
      a.value = dval;
      a.slot_mapping = static_cast<const int64_t*>(dslots);
      KVC_OK_(kvc_store_kv(gpu_, &a, stream_));
      CUDA_OK_(cudaStreamSynchronize(stream_));
    }
    size_t written = 0;
    for (size_t i = 0; i < n; ++i) written += slots[i] >= 0;
    EXPECT_EQ(written, expect_written) << "sequence " << id;
    cudaFree(dkey);
    cudaFree(dval);
    cudaFree(dslots);
    kvc_status_t async = -1;
    KVC_OK_(kvc_cache_get_async_error(gpu_, stream_, &async));
    ASSERT_EQ(async, KVC_OK) << kvc_last_error_message();
  }

  std::vector<unsigned char> pool_bytes() {
    std::vector<unsigned char> host(pool_.bytes);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), pool_.base, host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  std::vector<int32_t> blocks_of(uint64_t id) {
    std::vector<int32_t> ids(64);
    size_t n = 0;
    EXPECT_EQ(kvc_sequence_block_ids(gpu_, id, 0, ids.data(), ids.size(), &n), KVC_OK);
    ids.resize(n);
    return ids;
  }

  // Every token of `id` holds exactly its derived bytes, read from the GPU.
  void check_sequence(uint64_t id, const std::vector<int32_t>& tokens) {
    SCOPED_TRACE("sequence " + std::to_string(id));
    kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
    KVC_OK_(kvc_sequence_describe(gpu_, id, &sd));
    ASSERT_EQ(sd.num_tokens, tokens.size());
    const std::vector<int32_t> blocks = blocks_of(id);
    const std::vector<unsigned char> pool = pool_bytes();
    const auto* base = static_cast<const unsigned char*>(pool_.base);
    const size_t es = elem_size(dtype_);
    for (uint64_t pos = 0; pos < sd.num_tokens; ++pos)
      for (uint32_t l = 0; l < kLayers; ++l)
        for (uint32_t kv = 0; kv < 2; ++kv)
          for (uint32_t h = 0; h < kHeads; ++h)
            for (uint32_t d = 0; d < kDim; ++d) {
              const kvc_layer_view_t& v = views_[l];
              const size_t at = size_t(static_cast<const unsigned char*>(v.base) - base) +
                                uint64_t(blocks[pos / kT]) * v.block_stride + kv * v.kv_stride +
                                (pos % kT) * v.token_stride + h * v.head_stride + d * v.elem_size;
              unsigned char want[4];
              put_elem(want, dtype_, mix(tokens[pos], pos, l, kv, h, d));
              ASSERT_EQ(std::memcmp(want, &pool[at], es), 0)
                  << "token " << pos << " layer " << l << " kv " << kv << " head " << h
                  << " dim " << d;
            }
  }

  // Rows >= from of every (layer, kv, head) of `block` still hold 0xA5.
  void check_untouched(int32_t block, uint32_t from) {
    const std::vector<unsigned char> pool = pool_bytes();
    const auto* base = static_cast<const unsigned char*>(pool_.base);
    for (uint32_t l = 0; l < kLayers; ++l)
      for (uint32_t kv = 0; kv < 2; ++kv)
        for (uint32_t r = from; r < kT; ++r)
          for (uint32_t h = 0; h < kHeads; ++h) {
            const kvc_layer_view_t& v = views_[l];
            const size_t at = size_t(static_cast<const unsigned char*>(v.base) - base) +
                              uint64_t(block) * v.block_stride + kv * v.kv_stride +
                              r * v.token_stride + h * v.head_stride;
            for (size_t i = 0; i < kDim * elem_size(dtype_); ++i)
              ASSERT_EQ(pool[at + i], 0xA5) << "block " << block << " row " << r << " written";
          }
  }

  // Decode through the manager's tables on the GPU against the CPU
  // reference on a CPU cache holding the same bytes.
  void check_decode(const std::vector<uint64_t>& ids) {
    if (dtype_ == KVC_DTYPE_F32) return;  // CUDA decode takes f16/bf16/fp8 K/V
    const std::vector<unsigned char> pool = pool_bytes();
    kvc_pool_desc_t cpu_pool = KVC_POOL_DESC_INIT;
    KVC_OK_(kvc_cache_describe_pool(cpu_, 0, &cpu_pool));
    ASSERT_EQ(cpu_pool.bytes, pool.size());
    std::memcpy(cpu_pool.base, pool.data(), pool.size());

    const uint32_t batch = uint32_t(ids.size()), q_heads = 2 * kHeads;
    std::vector<int32_t> lens(batch);
    KVC_OK_(kvc_batch_sequence_lengths(gpu_, ids.data(), batch, lens.data()));
    const uint32_t max_len = uint32_t(*std::max_element(lens.begin(), lens.end()));
    const size_t stride = (max_len + kT - 1) / kT;
    std::vector<int32_t> table(batch * stride), indptr(batch + 1), indices(batch * stride),
        last(batch);
    size_t needed = 0, num_indices = 0;
    KVC_OK_(kvc_batch_block_table(gpu_, 0, ids.data(), batch, table.data(), stride, -1, &needed));
    KVC_OK_(kvc_batch_block_table_csr(gpu_, 0, ids.data(), batch, indptr.data(), indices.data(),
                                      indices.size(), last.data(), &num_indices));
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<unsigned char> q(size_t(batch) * q_heads * kDim * 2), ref(q.size()), got(q.size());
    for (size_t i = 0; i < q.size() / 2; ++i) kvc::store_f32(q.data(), dtype_, i, dist(rng));
    void *dq, *dout, *dlens, *dtable, *dindptr, *dindices, *ws = nullptr;
    CUDA_OK_(cudaMalloc(&dq, q.size()));
    CUDA_OK_(cudaMalloc(&dout, q.size()));
    CUDA_OK_(cudaMalloc(&dlens, batch * 4));
    CUDA_OK_(cudaMalloc(&dtable, table.size() * 4));
    CUDA_OK_(cudaMalloc(&dindptr, indptr.size() * 4));
    CUDA_OK_(cudaMalloc(&dindices, indices.size() * 4));
    CUDA_OK_(cudaMemcpy(dq, q.data(), q.size(), cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(dlens, lens.data(), batch * 4, cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(dtable, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(dindptr, indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK_(cudaMemcpy(dindices, indices.data(), indices.size() * 4, cudaMemcpyHostToDevice));
    for (kvc_table_format_t format : {KVC_TABLE_PADDED, KVC_TABLE_CSR}) {
      kvc_decode_args_t a = KVC_DECODE_ARGS_INIT;
      a.layer = 1;
      a.batch = batch;
      a.q_heads = q_heads;
      a.q_dtype = dtype_;
      a.table_format = format;
      a.max_seq_len = max_len;
      a.table_stride = format == KVC_TABLE_PADDED ? uint32_t(stride) : 0;
      a.query = q.data();
      a.out = ref.data();
      a.seq_lens = lens.data();
      a.block_table = format == KVC_TABLE_PADDED ? table.data() : indices.data();
      a.indptr = format == KVC_TABLE_PADDED ? nullptr : indptr.data();
      KVC_OK_(kvc_decode_attention(cpu_, &a, nullptr));
      uint64_t ws_bytes = 0;
      KVC_OK_(kvc_decode_workspace_size(gpu_, &a, &ws_bytes));
      if (ws == nullptr && ws_bytes) CUDA_OK_(cudaMalloc(&ws, ws_bytes));
      a.workspace = ws;
      a.workspace_bytes = ws_bytes;
      a.query = dq;
      a.out = dout;
      a.seq_lens = static_cast<const int32_t*>(dlens);
      a.block_table = static_cast<const int32_t*>(format == KVC_TABLE_PADDED ? dtable : dindices);
      a.indptr = format == KVC_TABLE_PADDED ? nullptr : static_cast<const int32_t*>(dindptr);
      CUDA_OK_(cudaMemset(dout, 0xFF, q.size()));
      KVC_OK_(kvc_decode_attention(gpu_, &a, stream_));
      kvc_status_t async = -1;
      KVC_OK_(kvc_cache_get_async_error(gpu_, stream_, &async));
      ASSERT_EQ(async, KVC_OK) << kvc_last_error_message();
      CUDA_OK_(cudaMemcpy(got.data(), dout, got.size(), cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t i = 0; i < q.size() / 2; ++i) {
        const float g = kvc::load_f32(got.data(), dtype_, i), r = kvc::load_f32(ref.data(), dtype_, i);
        ASSERT_TRUE(std::isfinite(g)) << "output " << i << " not written";
        num += double(g - r) * (g - r);
        den += double(r) * r;
      }
      EXPECT_LT(std::sqrt(num / den), 1e-2) << (format == KVC_TABLE_PADDED ? "padded" : "CSR");
    }
    for (void* p : {dq, dout, dlens, dtable, dindptr, dindices, ws}) cudaFree(p);
  }

  kvc_dtype_t dtype_ = KVC_DTYPE_BF16;
  kvc_cache_t* gpu_ = nullptr;
  kvc_cache_t* cpu_ = nullptr;
  kvc_pool_desc_t pool_ = KVC_POOL_DESC_INIT;
  kvc_layer_view_t views_[kLayers] = {KVC_LAYER_VIEW_INIT, KVC_LAYER_VIEW_INIT};
  cudaStream_t stream_ = nullptr;
};

TEST_P(CudaCacheOracle, ReuseCopyForkAndDecodeKeepEveryByte) {
  // Sequence 1: three full blocks of prompt, stored and committed.
  std::vector<int32_t> p1(48);
  for (int i = 0; i < 48; ++i) p1[i] = 1000 + i;
  uint64_t cached = 99;
  KVC_OK_(kvc_sequence_add(gpu_, 1, p1.data(), p1.size(), nullptr, stream_, &cached));
  EXPECT_EQ(cached, 0u);
  write_new_tokens(1, p1, 48);
  KVC_OK_(kvc_sequence_commit(gpu_, 1, 48));
  check_sequence(1, p1);
  const std::vector<int32_t> b1 = blocks_of(1);
  KVC_OK_(kvc_sequence_remove(gpu_, 1));

  // Sequence 2 shares two full blocks and 6 rows of the third: the manager
  // copies those rows into a new block on the GPU (copy on partial reuse).
  std::vector<int32_t> p2(p1.begin(), p1.begin() + 38);
  for (int i = 38; i < 45; ++i) p2.push_back(7 + i);
  KVC_OK_(kvc_sequence_add(gpu_, 2, p2.data(), p2.size(), nullptr, stream_, &cached));
  EXPECT_EQ(cached, 38u);
  const std::vector<int32_t> b2 = blocks_of(2);
  ASSERT_EQ(b2.size(), 3u);
  EXPECT_EQ(b2[0], b1[0]);
  EXPECT_EQ(b2[1], b1[1]);
  EXPECT_NE(b2[2], b1[2]);
  check_untouched(b2[2], 6);  // only the matched rows were copied
  write_new_tokens(2, p2, 7);
  KVC_OK_(kvc_sequence_commit(gpu_, 2, p2.size()));
  check_sequence(2, p2);

  // Sequence 3 reuses all of sequence 1's prompt but its last token.
  KVC_OK_(kvc_sequence_add(gpu_, 3, p1.data(), p1.size(), nullptr, stream_, &cached));
  EXPECT_EQ(cached, 47u);
  write_new_tokens(3, p1, 1);
  KVC_OK_(kvc_sequence_commit(gpu_, 3, p1.size()));
  check_sequence(3, p1);

  // Fork 2 -> 4, then both write their own next token: the shared partial
  // tail is copied on the GPU before the child writes.
  KVC_OK_(kvc_sequence_fork(gpu_, 2, 4));
  std::vector<int32_t> p4 = p2;
  p4.push_back(4242);
  KVC_OK_(kvc_sequence_extend(gpu_, 4, &p4.back(), 1, stream_));
  EXPECT_NE(blocks_of(4)[2], b2[2]);
  write_new_tokens(4, p4, 1);
  std::vector<int32_t> p2b = p2;
  p2b.push_back(77);
  KVC_OK_(kvc_sequence_extend(gpu_, 2, &p2b.back(), 1, stream_));
  write_new_tokens(2, p2b, 1);
  check_sequence(4, p4);
  check_sequence(2, p2b);
  check_sequence(3, p1);

  // Decode steps for the whole batch, then attention through its tables.
  const std::vector<uint64_t> ids = {2, 3, 4};
  std::map<uint64_t, std::vector<int32_t>*> seqs = {{2, &p2b}, {3, &p1}, {4, &p4}};
  for (int step = 0; step < 20; ++step) {
    std::vector<int32_t> next;
    for (uint64_t id : ids) {
      next.push_back(int32_t(500 + step * 7 + id));
      seqs[id]->push_back(next.back());
    }
    KVC_OK_(kvc_batch_extend(gpu_, ids.data(), next.data(), ids.size(), stream_));
    for (uint64_t id : ids) write_new_tokens(id, *seqs[id], 1);
  }
  for (uint64_t id : ids) check_sequence(id, *seqs[id]);
  check_decode(ids);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaCacheOracle,
                         ::testing::Values(KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16),
                         [](const auto& info) {
                           return std::string(info.param == KVC_DTYPE_F32   ? "f32"
                                              : info.param == KVC_DTYPE_F16 ? "f16"
                                                                            : "bf16");
                         });

}  // namespace
