// Stateful decode attention, host side: picks the compiled variant, cuts
// every row into chunks (the paged decode's split planner, so the cut
// depends on the lengths and the shape, never on the beam table), groups
// the rows that read the same K/V over a chunk, and launches the attention
// and merge kernels of stateful_decode_kernel.cuh.
//
// Grouping (batches of at most 16 rows with a beam table): rows a < b read
// the same K/V over chunk [t0, t1) when both are longer than t0, end at the
// same place in it (e = min(length, t1)), and the beam book says their table
// rows agree over [0, e) (common[a][b] >= e). Each group is served by
// ceil(size / (16 / G)) thread blocks, one MMA tile of packed query rows
// each. Consecutive chunks with the same groups form a segment; when the
// segments or groups do not fit the kernel parameters, every row is its
// own group (the same results, read without sharing).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_kernels.h"
#include "cuda/decode_split.h"
#include "cuda/stateful_decode_kernel.cuh"

namespace kvc {

namespace {

struct Variant {
  void (*attend)(sd::Params);       // two blocks per SM
  void (*attend_deep)(sd::Params);  // one block per SM, deepest pipeline
  void (*merge)(sd::Params);
  size_t smem_bytes;
  size_t smem_deep;
  int blocks_per_sm;
};

constexpr int kMaxDevices = 64;
constexpr uint32_t kDefaultWavePercent = 100;
std::atomic<uint32_t> g_wave_percent{kDefaultWavePercent};

template <class Q, class KV, int D>
const Variant& variant() {
  static Variant per_device[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= kMaxDevices) fail(KVC_ERR_UNSUPPORTED, "CUDA device ordinal >= 64");
  std::call_once(once[device], [] {
    int dev = 0;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    Variant& r = per_device[dev];
    using C = sd::Cfg<Q, KV, D>;
    r.attend = sd::attend_kernel<Q, KV, D, C::kNormal>;
    r.attend_deep = sd::attend_kernel<Q, KV, D, C::kDeep>;
    r.merge = sd::merge_kernel<Q, D>;
    r.smem_bytes = size_t(sd::Layout<Q, KV, D, C::kNormal>::kBytes);
    r.smem_deep = size_t(sd::Layout<Q, KV, D, C::kDeep>::kBytes);
    cuda_check(cudaFuncSetAttribute(r.attend, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(r.smem_bytes)),
               "cudaFuncSetAttribute");
    cuda_check(cudaFuncSetAttribute(r.attend_deep, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(r.smem_deep)),
               "cudaFuncSetAttribute");
    cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, r.attend,
                                                             sd::kThreads, r.smem_bytes),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    r.blocks_per_sm = std::max(r.blocks_per_sm, 1);
  });
  return per_device[device];
}

template <class Q, class KV>
const Variant& pick_dim(uint32_t head_dim) {
  switch (head_dim) {
    case 64: return variant<Q, KV, 64>();
    case 128: return variant<Q, KV, 128>();
    default: return variant<Q, KV, 256>();
  }
}

const Variant& pick(const DecodeWork& w) {
  switch (w.kv.dtype) {
    case KVC_DTYPE_F16: return pick_dim<f16_t, f16_t>(w.kv.head_dim);
    case KVC_DTYPE_BF16: return pick_dim<bf16_t, bf16_t>(w.kv.head_dim);
    case KVC_DTYPE_FP8_E4M3:
      return w.q_dtype == KVC_DTYPE_F16 ? pick_dim<f16_t, fp8_t>(w.kv.head_dim)
                                        : pick_dim<bf16_t, fp8_t>(w.kv.head_dim);
    default:
      fail(KVC_ERR_UNSUPPORTED,
           "decode attention on a CUDA cache supports f16, bf16 and fp8_e4m3 K/V; this cache "
           "holds f32 (the CPU backend computes f32)");
  }
}

uint32_t group_of(const DecodeWork& w) { return w.q_heads / w.kv.kv_heads; }
uint32_t head_chunks_of(uint32_t G) { return (G + sd::kRowsPerCta - 1) / sd::kRowsPerCta; }

DecodeShape shape_of(const DecodeWork& w, const Variant& v, const GpuInfo& gpu) {
  const uint32_t G = group_of(w);
  DecodeShape s;
  s.batch = w.batch;
  s.q_heads = w.q_heads;
  s.kv_heads = w.kv.kv_heads;
  s.head_chunks = head_chunks_of(G);
  s.heads_per_cta = (G + s.head_chunks - 1) / s.head_chunks;
  s.head_dim = w.kv.head_dim;
  s.max_tokens = std::max<uint32_t>(w.max_seq_len, 1);
  s.tile = uint32_t(sd::kTile);
  // The chunks must not depend on the sharing (a row's bits would): they
  // are planned for the resident blocks as if no row shared (benchmarks may
  // scale that, set_stateful_decode_wave_percent). Rows that share take
  // fewer blocks, which then run the deep pipeline.
  s.wave = uint64_t(gpu.sm_count) * uint64_t(v.blocks_per_sm) *
           g_wave_percent.load(std::memory_order_relaxed) / 100;
  s.wave = std::max<uint64_t>(s.wave, 1);
  return s;
}

// Most chunks a row may be cut into for this shape (plan_decode_split never
// exceeds it); grows with max_tokens only.
uint64_t max_splits(const DecodeShape& s) {
  const uint64_t by_length = std::max<uint64_t>(1, s.max_tokens / kMinSplitTokens);
  const uint64_t base = s.batch * s.kv_heads * s.head_chunks;
  const uint64_t by_occupancy = std::max<uint64_t>(1, (4 * s.wave + base - 1) / base);
  return std::min(by_length, by_occupancy);
}

// The groups of chunk [t0, t1) as row masks, each at most `per_cta` rows
// (batches of at most 16 rows).
void chunk_groups(const StatefulDecodeWork& w, uint64_t t0, uint64_t t1, uint32_t per_cta,
                  std::vector<uint16_t>& out) {
  const uint32_t B = w.decode.batch;
  out.clear();
  uint32_t assigned = 0;
  for (uint32_t a = 0; a < B; ++a) {
    if (((assigned >> a) & 1u) != 0 || w.lengths[a] <= t0) continue;
    const uint64_t e = std::min<uint64_t>(w.lengths[a], t1);
    uint32_t members[sd::kMaxSharedRows];
    uint32_t n = 0;
    members[n++] = a;
    for (uint32_t b = a + 1; b < B; ++b) {
      if (((assigned >> b) & 1u) != 0 || w.lengths[b] <= t0) continue;
      if (std::min<uint64_t>(w.lengths[b], t1) == e && w.common[uint64_t(a) * B + b] >= e)
        members[n++] = b;
    }
    for (uint32_t i = 0; i < n; i += per_cta) {
      uint32_t mask = 0;
      for (uint32_t k = i; k < std::min(n, i + per_cta); ++k) mask |= 1u << members[k];
      out.push_back(uint16_t(mask));
    }
    for (uint32_t k = 0; k < n; ++k) assigned |= 1u << members[k];
  }
}

// Fills the segments of a grouped launch; false when they do not fit.
bool plan_groups(const StatefulDecodeWork& w, const DecodeSplit& split, sd::Params& p,
                 uint64_t* items) {
  const uint32_t B = w.decode.batch;
  if (w.common == nullptr || w.lengths == nullptr || B > sd::kMaxSharedRows) return false;
  const uint32_t G = group_of(w.decode);
  const uint32_t per_cta = G >= uint32_t(sd::kRowsPerCta) ? 1 : uint32_t(sd::kRowsPerCta) / G;
  std::vector<uint16_t> groups, last;
  uint32_t segments = 0, used_groups = 0;
  uint64_t item = 0;
  for (uint32_t c = 0; c < split.num_splits; ++c) {
    const uint64_t t0 = uint64_t(c) * split.split_tokens;
    chunk_groups(w, t0, t0 + split.split_tokens, per_cta, groups);
    if (segments > 0 && groups == last) {
      ++p.segments[segments - 1].end_chunk;
    } else {
      if (segments == uint32_t(sd::kMaxSegments) ||
          used_groups + groups.size() > size_t(sd::kMaxGroups))
        return false;
      sd::Segment& s = p.segments[segments++];
      s.first_chunk = c;
      s.end_chunk = c + 1;
      s.first_group = used_groups;
      s.groups = uint32_t(groups.size());
      s.first_item = uint32_t(item);
      std::copy(groups.begin(), groups.end(), p.group_rows + used_groups);
      used_groups += uint32_t(groups.size());
      last = groups;
    }
    item += groups.size();
  }
  // Segments without groups (every row shorter) take no blocks; the kernel
  // finds a block's segment by first_item, so drop them.
  uint32_t kept = 0;
  for (uint32_t s = 0; s < segments; ++s)
    if (p.segments[s].groups > 0) p.segments[kept++] = p.segments[s];
  p.num_segments = kept;
  for (uint32_t r = 0; r < B; ++r) p.lengths[r] = w.lengths[r];
  *items = item;
  return kept > 0;
}

}  // namespace

void set_stateful_decode_wave_percent(uint32_t percent) {
  g_wave_percent.store(percent == 0 ? kDefaultWavePercent : percent, std::memory_order_relaxed);
}

uint64_t stateful_decode_workspace_bytes(const DecodeWork& w, const GpuInfo& gpu) {
  const Variant& v = pick(w);
  const DecodeShape s = shape_of(w, v, gpu);
  // Every call merges through the workspace, one partial row per (row,
  // query head, chunk).
  return uint64_t(w.batch) * w.q_heads * max_splits(s) *
         (uint64_t(w.kv.head_dim) * sizeof(float) + sizeof(float2));
}

void launch_stateful_decode(const StatefulDecodeWork& sw, const GpuInfo& gpu,
                            KernelErrorRecord* err, cudaStream_t stream) {
  const DecodeWork& w = sw.decode;
  const LayerSlabs& kv = w.kv;
  const Variant& v = pick(w);
  const DecodeShape shape = shape_of(w, v, gpu);
  const DecodeSplit split = plan_decode_split(shape);
  if (reinterpret_cast<uintptr_t>(w.query) % 16 != 0)
    invalid_argument("query must be 16-byte aligned on a CUDA cache");
  if (w.batch > 65535)
    fail(KVC_ERR_UNSUPPORTED, "decode attention on CUDA takes at most 65535 rows per call, got " +
                                  std::to_string(w.batch));
  const bool fp8 = kv.dtype == KVC_DTYPE_FP8_E4M3;
  const uint32_t G = group_of(w);

  sd::Params p{};
  p.query = w.query;
  p.out = w.out;
  p.k_base = static_cast<const unsigned char*>(kv.base);
  p.v_base = p.k_base + (kv.kv_factor == 2 ? kv.kv_stride : 0);
  p.row_stride = kv.block_stride;
  p.token_stride = kv.token_stride;
  p.head_stride = kv.head_stride;
  // tokens_per_block 1: a beam table, one entry per position; else each
  // row reads itself (stateful_decode.cpp).
  p.table = kv.tokens_per_block == 1 ? w.block_table : nullptr;
  p.table_stride = w.table_stride;
  p.dev_lengths = w.seq_lens;
  p.rows = w.batch;
  p.q_heads = w.q_heads;
  p.group = G;
  p.head_chunks = head_chunks_of(G);
  p.max_seq_len = w.max_seq_len;
  p.num_splits = split.num_splits;
  p.split_tokens = split.split_tokens;
  const float kLog2e = 1.4426950408889634f;
  p.score_scale = w.softmax_scale * (fp8 ? w.k_scale : 1.0f) * kLog2e;
  p.v_scale = fp8 ? w.v_scale : 1.0f;
  p.ws_o = static_cast<float*>(w.workspace);
  p.ws_ml = reinterpret_cast<float2*>(p.ws_o + uint64_t(w.batch) * w.q_heads * split.num_splits *
                                                   kv.head_dim);
  p.err = err;
  p.layer = kv.layer;

  uint64_t items = 0;
  if (p.table == nullptr || !plan_groups(sw, split, p, &items)) {
    p.num_segments = 0;
    items = uint64_t(w.batch) * split.num_splits;
  }
  if (items > uint64_t(INT32_MAX) || uint64_t(kv.kv_heads) * p.head_chunks > 65535)
    fail(KVC_ERR_UNSUPPORTED, "stateful decode: the launch exceeds the grid limits");
  if (items > 0) {
    // At most one block per SM (rows sharing their history): the deep
    // pipeline, one block per SM streaming with more copies in flight.
    const uint64_t blocks = items * kv.kv_heads * p.head_chunks;
    const bool deep = blocks <= uint64_t(gpu.sm_count);
    const dim3 grid(uint32_t(items), kv.kv_heads * p.head_chunks);
    if (deep)
      v.attend_deep<<<grid, sd::kThreads, v.smem_deep, stream>>>(p);
    else
      v.attend<<<grid, sd::kThreads, v.smem_bytes, stream>>>(p);
    cuda_check(cudaGetLastError(), "stateful decode attention kernel launch");
  }
  // The merge writes every row (zeros for empty ones); programmatic
  // dependent launch hides most of its start behind the attention grid.
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(w.q_heads, w.batch);
  cfg.blockDim = dim3(kv.head_dim);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = items > 0 ? 1 : 0;
  cuda_check(cudaLaunchKernelEx(&cfg, v.merge, p), "stateful decode merge kernel launch");
  cuda_check(cudaGetLastError(), "stateful decode merge kernel launch");
}

}  // namespace kvc
