// Host time of a block transfer's key work (issue 25): export
// (kvc_cache_export_sequence: the hold and the key blob) and import begin
// (kvc_cache_import_begin: the blob's checks against the receiver's own
// tokens and options, then the add that reserves the blocks) for one
// prompt, on the CPU backend with small blocks: the block bytes are not
// touched, so the time is what the host spends whatever the device. The
// default 2048 blocks of 16 tokens is bench/cuda/bench_ipc_transfer's
// 32K-token prompt. Uses the C API only, so one source builds against any
// version of the library (old and new binaries alternated for an A/B).
//
//   bench_transfer_keys --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//
// Counters: export_us and import_begin_us per iteration (manual time is
// their sum); import_abort and the release are outside the timing.
#include <benchmark/benchmark.h>
#include <kvcache/kvcache.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr uint32_t kTpb = 16;

kvc_cache_t* make_cache(uint64_t max_tokens) {
  kvc_config_t* c = nullptr;
  kvc_cache_t* cache = nullptr;
  if (kvc_config_create(&c) != KVC_OK) return nullptr;
  if (kvc_config_set_num_layers(c, 2) == KVC_OK && kvc_config_set_kv_heads(c, 1) == KVC_OK &&
      kvc_config_set_head_dim(c, 8) == KVC_OK && kvc_config_set_dtype(c, KVC_DTYPE_F16) == KVC_OK &&
      kvc_config_set_tokens_per_block(c, kTpb) == KVC_OK &&
      kvc_config_set_max_tokens(c, max_tokens) == KVC_OK)
    (void)kvc_cache_create(c, &cache);
  kvc_config_destroy(c);
  return cache;
}

void must(kvc_status_t s, const char* what) {
  if (s != KVC_OK) {
    std::fprintf(stderr, "%s failed: %d\n", what, int(s));
    std::abort();
  }
}

void BM_ExportImportBegin(benchmark::State& state) {
  const uint64_t blocks = uint64_t(state.range(0));
  const uint64_t n = blocks * kTpb;
  std::vector<int32_t> tokens(n);
  uint32_t x = 12345;
  for (auto& t : tokens) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    t = int32_t(x % 32000u);
  }
  kvc_cache_t* a = make_cache(n + 4 * kTpb);
  kvc_cache_t* b = make_cache(n + 4 * kTpb);
  if (a == nullptr || b == nullptr) {
    state.SkipWithError("cache create failed");
    return;
  }
  uint64_t cached = 0;
  must(kvc_sequence_add(a, 1, tokens.data(), n, nullptr, nullptr, &cached), "add");
  must(kvc_sequence_commit(a, 1, n), "commit");
  std::vector<unsigned char> keys;
  double export_s = 0, import_s = 0;
  uint64_t seq = 1;
  for (auto _ : state) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    kvc_export_t* exp = nullptr;
    must(kvc_cache_export_sequence(a, 1, 0, &exp), "export");
    size_t size = 0;
    (void)kvc_export_keys(exp, nullptr, 0, &size);
    keys.resize(size);
    must(kvc_export_keys(exp, keys.data(), keys.size(), &size), "keys");
    const auto t1 = clock::now();
    kvc_import_t* imp = nullptr;
    must(kvc_cache_import_begin(b, ++seq, tokens.data(), n, nullptr, keys.data(), keys.size(),
                                &imp),
         "import_begin");
    const auto t2 = clock::now();
    must(kvc_import_abort(imp), "abort");
    kvc_import_destroy(imp);
    kvc_export_release(exp);
    const double e = std::chrono::duration<double>(t1 - t0).count();
    const double i = std::chrono::duration<double>(t2 - t1).count();
    export_s += e;
    import_s += i;
    state.SetIterationTime(e + i);
  }
  const double it = double(state.iterations());
  state.counters["export_us"] = 1e6 * export_s / it;
  state.counters["import_begin_us"] = 1e6 * import_s / it;
  state.counters["key_bytes"] = double(keys.size());
  kvc_cache_destroy(a);
  kvc_cache_destroy(b);
}
BENCHMARK(BM_ExportImportBegin)->Arg(2048)->Arg(64)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
