// Instruction counts of bench_core's four figures, for comparing two trees
// on a noisy machine: sets a scenario up as bench_core does, then makes
// exactly N of the measured calls with callgrind's instrumentation on only
// around them (a no-op when not under valgrind). Usage:
//   valgrind --tool=callgrind --instr-atstart=no core_calls SCENARIO N [EVENT_RING]
// SCENARIO: add (a cached 32K prompt), decode (512 sequences, one token),
// evict (an add that evicts 1000 blocks), hash (2048 chained block hashes),
// commit (publishing a new 32K prompt), addnew (a new 128K prompt, nothing
// cached: the allocation path). Ir / N is the cost of one call.
// Self-contained (C API and block_hash.h only) so that it builds against an
// older tree too.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else  // no valgrind headers: the calls run, uncounted
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/block_hash.h"
#include "kvcache/kvcache.h"

namespace {

constexpr uint32_t T = 16;
constexpr uint64_t kBlocks = 1000000;
constexpr uint32_t kPromptTokens = 2048 * T;

void check(kvc_status_t s, const char* what) {
  if (s == KVC_OK) return;
  std::fprintf(stderr, "%s failed: %s\n", what, kvc_last_error_message());
  std::exit(1);
}

kvc_cache_t* big_cache(uint32_t ring) {
  kvc_config_t* c = nullptr;
  check(kvc_config_create(&c), "config");
  kvc_config_set_num_layers(c, 1);
  kvc_config_set_kv_heads(c, 1);
  kvc_config_set_head_dim(c, 1);
  kvc_config_set_dtype(c, KVC_DTYPE_FP8_E4M3);
  kvc_config_set_kv_factor(c, 1);
  kvc_config_set_tokens_per_block(c, T);
  kvc_config_set_max_tokens(c, kBlocks * T);
  if (ring != 0) check(kvc_config_set_event_buffer_size(c, ring), "event_buffer_size");
  kvc_cache_t* cache = nullptr;
  check(kvc_cache_create(c, &cache), "create");
  kvc_config_destroy(c);
  return cache;
}

std::vector<int32_t> prompt(uint32_t seed, uint32_t tokens) {
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

void cache_prompt(kvc_cache_t* cache, uint64_t id, const std::vector<int32_t>& p) {
  check(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
  check(kvc_sequence_commit(cache, id, p.size()), "commit");
  check(kvc_sequence_remove(cache, id), "remove");
}

void fill(kvc_cache_t* cache) {
  for (uint64_t i = 0; i < kBlocks / 2048; ++i)
    cache_prompt(cache, 1000000 + i, prompt(1 + uint32_t(i), kPromptTokens));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: core_calls add|decode|evict|hash|commit|addnew N [EVENT_RING]\n");
    return 2;
  }
  const std::string what = argv[1];
  const int n = std::atoi(argv[2]);
  const uint32_t ring = argc > 3 ? uint32_t(std::atoi(argv[3])) : 0;
  if (what == "hash") {
    const auto p = prompt(3, kPromptTokens);
    std::vector<uint64_t> h(2048);
    CALLGRIND_START_INSTRUMENTATION;
    for (int i = 0; i < n; ++i) kvc::hash_chain(0, 0x1234, p.data(), T, 2048, h.data());
    CALLGRIND_STOP_INSTRUMENTATION;
    std::printf("%llu\n", (unsigned long long)h[2047]);
    return 0;
  }
  kvc_cache_t* cache = big_cache(ring);
  if (what == "add" || what == "evict") fill(cache);
  if (what == "add") {
    const auto p = prompt(1, kPromptTokens);
    for (int i = 0; i < n; ++i) {
      CALLGRIND_START_INSTRUMENTATION;
      check(kvc_sequence_add(cache, 1, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
      CALLGRIND_STOP_INSTRUMENTATION;
      check(kvc_sequence_remove(cache, 1), "remove");
    }
  } else if (what == "decode") {
    std::vector<uint64_t> ids(512);
    std::vector<int32_t> next(512, 7);
    for (uint32_t i = 0; i < 512; ++i) {
      ids[i] = i;
      const auto p = prompt(50000 + i, 1000);
      check(kvc_sequence_add(cache, i, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
    }
    CALLGRIND_START_INSTRUMENTATION;
    for (int i = 0; i < n; ++i) check(kvc_batch_extend(cache, ids.data(), next.data(), 512, nullptr), "extend");
    CALLGRIND_STOP_INSTRUMENTATION;
  } else if (what == "evict") {
    uint32_t seed = 900000;
    uint64_t id = 1;
    cache_prompt(cache, id++, prompt(seed++, 1000 * T));
    for (int i = 0; i < n; ++i) {
      const auto p = prompt(seed++, 1000 * T);
      CALLGRIND_START_INSTRUMENTATION;
      check(kvc_sequence_add(cache, id, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
      CALLGRIND_STOP_INSTRUMENTATION;
      check(kvc_sequence_commit(cache, id, p.size()), "commit");
      check(kvc_sequence_remove(cache, id++), "remove");
    }
  } else if (what == "commit") {
    for (int i = 0; i < n; ++i) {
      const auto p = prompt(700000 + uint32_t(i), kPromptTokens);
      check(kvc_sequence_add(cache, 1, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
      CALLGRIND_START_INSTRUMENTATION;
      check(kvc_sequence_commit(cache, 1, p.size()), "commit");
      CALLGRIND_STOP_INSTRUMENTATION;
      check(kvc_sequence_remove(cache, 1), "remove");
    }
  } else if (what == "addnew") {
    for (int i = 0; i < n; ++i) {
      const auto p = prompt(600000 + uint32_t(i), 4 * kPromptTokens);
      CALLGRIND_START_INSTRUMENTATION;
      check(kvc_sequence_add(cache, 1, p.data(), p.size(), nullptr, nullptr, nullptr), "add");
      CALLGRIND_STOP_INSTRUMENTATION;
      check(kvc_sequence_remove(cache, 1), "remove");
    }
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", what.c_str());
    return 2;
  }
  kvc_cache_destroy(cache);
  return 0;
}
