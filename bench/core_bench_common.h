// What the core benchmarks share (bench_core, bench_events): the 10^6-block
// cache, prompts, and a clock of thread CPU time.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "kvcache/kvcache.h"

namespace kvc_bench {

constexpr uint32_t kTokensPerBlock = 16;
constexpr uint64_t kBlocks = 1000000;
constexpr uint32_t kPromptBlocks = 2048;
constexpr uint32_t kPromptTokens = kPromptBlocks * kTokensPerBlock;  // 32768

#define CHECK_OK(call)                                                              \
  do {                                                                              \
    const kvc_status_t s_ = (call);                                                 \
    if (s_ != KVC_OK) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #call, kvc_last_error_message());     \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// `blocks` blocks of 16 tokens; one fp8 layer with K == V keeps the pool at
// 16 bytes a block. event_ring != 0: events on, with a ring of that many
// events. host_blocks != 0: a host tier of that many blocks.
inline kvc_cache_t* cache_of(uint64_t blocks, uint32_t event_ring = 0, uint64_t host_blocks = 0) {
  kvc_config_t* c = nullptr;
  CHECK_OK(kvc_config_create(&c));
  CHECK_OK(kvc_config_set_num_layers(c, 1));
  CHECK_OK(kvc_config_set_kv_heads(c, 1));
  CHECK_OK(kvc_config_set_head_dim(c, 1));
  CHECK_OK(kvc_config_set_dtype(c, KVC_DTYPE_FP8_E4M3));
  CHECK_OK(kvc_config_set_kv_factor(c, 1));
  CHECK_OK(kvc_config_set_tokens_per_block(c, kTokensPerBlock));
  CHECK_OK(kvc_config_set_max_tokens(c, blocks * kTokensPerBlock));
  CHECK_OK(kvc_config_set_event_buffer_size(c, event_ring));
  if (host_blocks != 0) CHECK_OK(kvc_config_set_host_cache_bytes(c, host_blocks * kTokensPerBlock));
  kvc_cache_t* cache = nullptr;
  CHECK_OK(kvc_cache_create(c, &cache));
  kvc_config_destroy(c);
  return cache;
}

// The 10^6-block cache of the figures.
inline kvc_cache_t* big_cache(uint32_t event_ring = 0) { return cache_of(kBlocks, event_ring); }

inline std::vector<int32_t> prompt(uint32_t seed, uint32_t tokens) {
  std::vector<int32_t> p(tokens);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& t : p) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t = int32_t(x % 128000);
  }
  return p;
}

// Adds, commits and removes: the prompt's blocks end up cached.
inline void cache_prompt(kvc_cache_t* cache, uint64_t id, const std::vector<int32_t>& p) {
  CHECK_OK(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr));
  CHECK_OK(kvc_sequence_commit(cache, id, p.size()));
  CHECK_OK(kvc_sequence_remove(cache, id));
}

// Fills the cache with cached 32K-token prompts until no block is free.
inline void fill(kvc_cache_t* cache, uint32_t first_seed) {
  const uint64_t n = kBlocks / kPromptBlocks;
  for (uint64_t i = 0; i < n; ++i) cache_prompt(cache, 1000000 + i, prompt(first_seed + uint32_t(i), kPromptTokens));
}

// The timed region is measured in thread CPU time: the machine these
// figures come from is shared, and CPU time leaves out the time the thread
// waited for a core. Wall time is reported beside it as a counter.
struct Clock {
  timespec cpu0{};
  std::chrono::steady_clock::time_point wall0;
  void start() {
    wall0 = std::chrono::steady_clock::now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  }
  // Seconds of thread CPU time since start(); adds wall seconds to *wall.
  double stop(double* wall) {
    timespec cpu1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    *wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return double(cpu1.tv_sec - cpu0.tv_sec) + double(cpu1.tv_nsec - cpu0.tv_nsec) * 1e-9;
  }
};

inline void report_wall(benchmark::State& state, double wall) {
  state.counters["wall_us"] = benchmark::Counter(wall * 1e6 / double(state.iterations()));
}

}  // namespace kvc_bench
