// KV events on vs off (issue 20), on bench_core's 10^6-block cache through
// the C API, each figure measured with events off and on in the same run
// (run with --benchmark_repetitions=N --benchmark_enable_random_interleaving
// so the two alternate): the ratio on/off against its limit.
//   decode step of 512 sequences            on/off <= 1.10
//   add of a cached 32K prompt              on/off <= 1.10
//   commit publishing a new 32K prompt      on/off <= 1.15
//   drain, per event (2048 STORED a drain)  <= 20 ns
// Times are thread CPU time (core_bench_common.h).
#include <map>
#include <string>
#include <vector>

#include "core_bench_common.h"

namespace {

using namespace kvc_bench;

constexpr uint32_t kRing = 1u << 16;

uint32_t ring_of(const benchmark::State& state) { return state.range(0) != 0 ? kRing : 0; }

// Drains whatever is pending (outside the timed region).
void drain_all(kvc_cache_t* cache) {
  static std::vector<kvc_event_t> ev(4096);
  static std::vector<int32_t> tokens(4096 * kTokensPerBlock);
  for (;;) {
    kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
    CHECK_OK(kvc_cache_drain_events(cache, ev.data(), ev.size(), tokens.data(), tokens.size(), &r));
    if (r.events_pending == 0) return;
  }
}

void BM_DecodeStep512(benchmark::State& state) {
  kvc_cache_t* cache = big_cache(ring_of(state));
  constexpr uint32_t kSeqs = 512;
  std::vector<uint64_t> ids(kSeqs);
  std::vector<int32_t> next(kSeqs, 7);
  for (uint32_t i = 0; i < kSeqs; ++i) {
    ids[i] = i;
    const auto p = prompt(50000 + i, 1000);
    CHECK_OK(kvc_sequence_add(cache, i, p.data(), p.size(), nullptr, nullptr, nullptr));
  }
  uint64_t steps = 0;
  Clock clock;
  double wall = 0;
  for (auto _ : state) {
    clock.start();
    CHECK_OK(kvc_batch_extend(cache, ids.data(), next.data(), kSeqs, nullptr));
    state.SetIterationTime(clock.stop(&wall));
    if (++steps % 1024 == 0)
      for (uint64_t id : ids) CHECK_OK(kvc_sequence_rewind(cache, id, 1024));
  }
  report_wall(state, wall);
  kvc_cache_destroy(cache);
}
BENCHMARK(BM_DecodeStep512)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_AddCached32K(benchmark::State& state) {
  kvc_cache_t* cache = big_cache(ring_of(state));
  fill(cache, 1);
  if (ring_of(state) != 0) drain_all(cache);
  const std::vector<int32_t> p = prompt(1, kPromptTokens);
  uint64_t cached = 0;
  Clock clock;
  double wall = 0;
  for (auto _ : state) {
    clock.start();
    CHECK_OK(kvc_sequence_add(cache, 1, p.data(), p.size(), nullptr, nullptr, &cached));
    state.SetIterationTime(clock.stop(&wall));
    CHECK_OK(kvc_sequence_remove(cache, 1));
    if (cached != kPromptTokens - 1) state.SkipWithError("prompt not cached");
  }
  report_wall(state, wall);
  kvc_cache_destroy(cache);
}
BENCHMARK(BM_AddCached32K)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Commit of a new 32K prompt: 2048 blocks published (2048 STORED with events).
void BM_Commit32K(benchmark::State& state) {
  kvc_cache_t* cache = big_cache(ring_of(state));
  uint32_t seed = 700000;
  uint64_t id = 1;
  Clock clock;
  double wall = 0;
  for (auto _ : state) {
    const auto p = prompt(seed++, kPromptTokens);
    CHECK_OK(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr));
    clock.start();
    CHECK_OK(kvc_sequence_commit(cache, id, p.size()));
    state.SetIterationTime(clock.stop(&wall));
    CHECK_OK(kvc_sequence_remove(cache, id++));
    if (ring_of(state) != 0) drain_all(cache);
  }
  report_wall(state, wall);
  kvc_cache_destroy(cache);
}
BENCHMARK(BM_Commit32K)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Draining 2048 STORED events with their token ids into caller buffers.
// 200 iterations publish 409,600 blocks: no eviction, no REMOVED between.
void BM_Drain2048(benchmark::State& state) {
  kvc_cache_t* cache = big_cache(kRing);
  std::vector<kvc_event_t> ev(kPromptBlocks);
  std::vector<int32_t> tokens(kPromptTokens);
  uint32_t seed = 800000;
  uint64_t id = 1;
  Clock clock;
  double wall = 0;
  for (auto _ : state) {
    cache_prompt(cache, id++, prompt(seed++, kPromptTokens));
    kvc_event_drain_t r = KVC_EVENT_DRAIN_INIT;
    clock.start();
    CHECK_OK(kvc_cache_drain_events(cache, ev.data(), ev.size(), tokens.data(), tokens.size(), &r));
    state.SetIterationTime(clock.stop(&wall));
    if (r.events != kPromptBlocks || r.events_pending != 0) state.SkipWithError("not 2048 events");
  }
  report_wall(state, wall);
  kvc_cache_destroy(cache);
}
BENCHMARK(BM_Drain2048)->Iterations(200)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Each run's time per iteration (ns), the median when repeated.
class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.iterations <= 0) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (median || r.run_type == Run::RT_Iteration)
        ns_[r.run_name.str()] = r.real_accumulated_time * 1e9 / double(r.iterations);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double get(const std::string& name) const {
    auto it = ns_.find(name);
    return it == ns_.end() ? -1.0 : it->second;
  }

 private:
  std::map<std::string, double> ns_;
};

void ratio_row(const Recorder& rec, const char* figure, const std::string& bench, double limit) {
  const double off = rec.get(bench + "/0/manual_time"), on = rec.get(bench + "/1/manual_time");
  if (off <= 0 || on <= 0) return;
  std::printf("| %-40s | %9.2f us | %9.2f us | %5.3f | <= %4.2f | %-4s |\n", figure, off / 1e3,
              on / 1e3, on / off, limit, on / off <= limit ? "met" : "MISS");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Recorder rec;
  benchmark::RunSpecifiedBenchmarks(&rec);
  std::printf("\n| figure (10^6 blocks of 16 tokens)        | events off   | events on    | on/off | limit  | ok   |\n");
  std::printf("|------------------------------------------|--------------|--------------|--------|--------|------|\n");
  ratio_row(rec, "decode step: 512 sequences, one token", "BM_DecodeStep512", 1.10);
  ratio_row(rec, "add of a cached 32K prompt", "BM_AddCached32K", 1.10);
  ratio_row(rec, "commit publishing a new 32K prompt", "BM_Commit32K", 1.15);
  const double drain = rec.get("BM_Drain2048/iterations:200/manual_time");
  if (drain > 0)
    std::printf("| %-40s | %27.2f ns per event  | limit 20 ns | %-4s |\n",
                "drain of 2048 STORED with token ids", drain / kPromptBlocks,
                drain / kPromptBlocks <= 20 ? "met" : "MISS");
  benchmark::Shutdown();
  return 0;
}
