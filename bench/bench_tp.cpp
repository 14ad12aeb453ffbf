// Tensor parallelism (issue 25 item 1): the bookkeeping of one decode step
// of 512 sequences (kvc_batch_extend, then the slot mapping and the padded
// block table an engine hands its kernels) on one TP-4 cache (4 CPU ranks,
// one manager), against 4 independent one-rank caches driven in lockstep
// (what an engine without a TP cache does: one cache per rank), and
// against one one-rank cache. Target: TP-4 <= 1.1x one cache, ~4x less
// than lockstep. Thread CPU time, as bench_core.
#include <vector>

#include "core_bench_common.h"

using namespace kvc_bench;

namespace {

constexpr uint32_t kSeqs = 512;
constexpr uint32_t kHeads = 4;
constexpr uint64_t kTpBlocks = 200000;  // per rank
constexpr uint32_t kMaxBlocks = 1024 / kTokensPerBlock + 72;

// kv_heads 4 of head_dim 1, fp8, K == V: 16-byte blocks per head; `ranks`
// ranks on the CPU backend (1: the cache of before).
kvc_cache_t* tp_cache(uint32_t ranks) {
  kvc_config_t* c = nullptr;
  CHECK_OK(kvc_config_create(&c));
  CHECK_OK(kvc_config_set_num_layers(c, 1));
  CHECK_OK(kvc_config_set_kv_heads(c, kHeads));
  CHECK_OK(kvc_config_set_head_dim(c, 1));
  CHECK_OK(kvc_config_set_dtype(c, KVC_DTYPE_FP8_E4M3));
  CHECK_OK(kvc_config_set_kv_factor(c, 1));
  CHECK_OK(kvc_config_set_tokens_per_block(c, kTokensPerBlock));
  CHECK_OK(kvc_config_set_max_tokens(c, kTpBlocks * kTokensPerBlock));
  const int32_t ordinals[4] = {0, 1, 2, 3};
  CHECK_OK(kvc_config_set_ranks(c, KVC_DEVICE_CPU, ordinals, ranks));
  kvc_cache_t* cache = nullptr;
  CHECK_OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

struct Step {
  std::vector<uint64_t> ids = std::vector<uint64_t>(kSeqs);
  std::vector<int32_t> next = std::vector<int32_t>(kSeqs, 7);
  std::vector<int64_t> slots = std::vector<int64_t>(kSeqs);
  std::vector<int32_t> table = std::vector<int32_t>(size_t(kSeqs) * kMaxBlocks);
  Step() {
    for (uint32_t i = 0; i < kSeqs; ++i) ids[i] = i;
  }
  void prefill(kvc_cache_t* cache) {
    for (uint32_t i = 0; i < kSeqs; ++i) {
      const auto p = prompt(50000 + i, 1000);
      CHECK_OK(kvc_sequence_add(cache, i, p.data(), p.size(), nullptr, nullptr, nullptr));
    }
    run(cache);  // the prompts' slot cursors
  }
  void run(kvc_cache_t* cache) {
    CHECK_OK(kvc_batch_extend(cache, ids.data(), next.data(), kSeqs, nullptr));
    size_t n = 0;
    std::vector<int64_t> big;
    if (kvc_batch_slot_mapping(cache, 0, ids.data(), kSeqs, slots.data(), slots.size(), &n,
                               nullptr) == KVC_ERR_BUFFER_TOO_SMALL) {
      big.resize(n);
      CHECK_OK(kvc_batch_slot_mapping(cache, 0, ids.data(), kSeqs, big.data(), n, &n, nullptr));
    }
    size_t width = 0;
    CHECK_OK(kvc_batch_block_table(cache, 0, ids.data(), kSeqs, table.data(), kMaxBlocks, -1,
                                   &width));
  }
  void rewind(kvc_cache_t* cache) {
    for (uint64_t id : ids) CHECK_OK(kvc_sequence_rewind(cache, id, 1024));
  }
};

// `caches` caches of `ranks` ranks each, stepped in lockstep.
void run_steps(benchmark::State& state, uint32_t caches, uint32_t ranks) {
  std::vector<kvc_cache_t*> cs;
  std::vector<Step> steps(caches);
  for (uint32_t i = 0; i < caches; ++i) {
    cs.push_back(tp_cache(ranks));
    steps[i].prefill(cs[i]);
  }
  uint64_t n = 0;
  Clock clock;
  double wall = 0;
  for (auto _ : state) {
    clock.start();
    for (uint32_t i = 0; i < caches; ++i) steps[i].run(cs[i]);
    state.SetIterationTime(clock.stop(&wall));
    if (++n % 1024 == 0)  // keep the sequences from outgrowing the pool
      for (uint32_t i = 0; i < caches; ++i) steps[i].rewind(cs[i]);
  }
  report_wall(state, wall);
  for (kvc_cache_t* c : cs) kvc_cache_destroy(c);
}

void BM_DecodeStep512_OneCache(benchmark::State& state) { run_steps(state, 1, 1); }
void BM_DecodeStep512_TP4(benchmark::State& state) { run_steps(state, 1, 4); }
void BM_DecodeStep512_FourCachesLockstep(benchmark::State& state) { run_steps(state, 4, 1); }

}  // namespace

BENCHMARK(BM_DecodeStep512_OneCache)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeStep512_TP4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeStep512_FourCachesLockstep)->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
