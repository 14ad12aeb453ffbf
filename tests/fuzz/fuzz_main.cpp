// libFuzzer entry point: the input decodes into one or two tiny caches
// (3-17 blocks of 2 or 4 tokens, sometimes 40-68; optional windowed layers,
// host tier, other dtypes, layouts and head counts) and a program of up to
// kMaxCalls calls on them (fuzz_ops.h), checked call by call
// (fuzz_model.h). At exit the harness prints how many API calls it made.
//
// Built four ways (CMakeLists.txt): kvcache_fuzz (any configuration),
// kvcache_fuzz_hash8 (the library with 8-bit bucket hashes),
// kvcache_fuzz_window_tier (KVC_FUZZ_WINDOW_TIER: every cache has a
// windowed layer group and a host tier), kvcache_fuzz_disk (KVC_FUZZ_DISK:
// every cache has a disk tier in a directory of its own, no windows) and
// kvcache_fuzz_stateful (KVC_FUZZ_STATEFUL: the stateful mode instead,
// fuzz_stateful.h) and kvcache_fuzz_state (KVC_FUZZ_STATE: a cache with
// state resources and snapshots, fuzz_state.cpp) and kvcache_fuzz_ranks
// (KVC_FUZZ_RANKS: caches of 2 or 4 CPU ranks, fuzz_ranks.cpp).
#include <stdlib.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_emit.h"
#include "fuzz_feedback.h"
#include "fuzz_ops.h"

#ifndef KVC_FUZZ_WINDOW_TIER
#define KVC_FUZZ_WINDOW_TIER 0
#endif
#ifndef KVC_FUZZ_DISK
#define KVC_FUZZ_DISK 0
#endif
#ifndef KVC_FUZZ_STATEFUL
#define KVC_FUZZ_STATEFUL 0
#endif
#if KVC_FUZZ_STATEFUL
#include "fuzz_stateful.h"
#endif
#ifndef KVC_FUZZ_STATE
#define KVC_FUZZ_STATE 0
#endif
#if KVC_FUZZ_STATE
#include "fuzz_state.h"
#endif
#ifndef KVC_FUZZ_RANKS
#define KVC_FUZZ_RANKS 0
#endif
#if KVC_FUZZ_RANKS
#include "fuzz_ranks.h"
#endif

namespace kvc_fuzz {

__attribute__((used, section("__libfuzzer_extra_counters")))
uint8_t g_feedback[kNumKinds * kFeedbackPerKind];

namespace {

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK) finding("%s failed: %s", what, kvc_last_error_message());
}

// One setter with a value the header rules out: refused, config unchanged.
void hostile_setter(kvc_config_t* cfg, uint8_t k) {
  uint32_t before = 0, after = 0;
  kvc_status_t st = KVC_OK;
  switch (k % 6) {
    case 0:
      kvc_config_get_tokens_per_block(cfg, &before);
      st = kvc_config_set_tokens_per_block(cfg, 12);
      kvc_config_get_tokens_per_block(cfg, &after);
      break;
    case 1:
      kvc_config_get_num_layers(cfg, &before);
      st = kvc_config_set_num_layers(cfg, 0);
      kvc_config_get_num_layers(cfg, &after);
      break;
    case 2:
      kvc_config_get_dtype(cfg, &before);
      st = kvc_config_set_dtype(cfg, 99);
      kvc_config_get_dtype(cfg, &after);
      break;
    case 3:
      kvc_config_get_attention_window(cfg, 0, &before);
      st = kvc_config_set_attention_windows(cfg, nullptr, 2);
      kvc_config_get_attention_window(cfg, 0, &after);
      break;
    case 4:
      kvc_config_get_secondary_offload_min_priority(cfg, &before);
      st = kvc_config_set_secondary_offload_min_priority(cfg, 101);
      kvc_config_get_secondary_offload_min_priority(cfg, &after);
      break;
    default:
      kvc_config_get_layout(cfg, &before);
      st = kvc_config_set_layout(cfg, 0);
      kvc_config_get_layout(cfg, &after);
      break;
  }
  g_count.calls += 1;
  g_count.check_calls += 2;
  if (st != KVC_ERR_INVALID_ARGUMENT || before != after)
    finding("hostile config setter %u: %s, value %u -> %u", k % 6, kvc_status_string(st), before, after);
}

std::unique_ptr<CacheModel> make_cache(Input& in, int index) {
  static const kvc_dtype_t kDtypes[4] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_F32};
  static const uint32_t kOffload[4] = {35, 0, 60, 100};
  const uint8_t f = in.u8(), g = in.u8(), nb = in.u8(), w = in.u8(), h = in.u8(), t = in.u8();
  const uint32_t T = (f & 1) ? 4 : 2;
  const kvc_dtype_t dtype = kDtypes[(f >> 1) & 3];
  const uint32_t es = dtype == KVC_DTYPE_F32 ? 4 : 2;
  const uint32_t kv_factor = ((f >> 4) & 3) == 3 ? 1 : 2;
  const uint32_t layers = 2 + ((g >> 2) & 1);
  uint32_t window_mode = g & 3;
  bool host = (g >> 3) & 1;
  if (KVC_FUZZ_WINDOW_TIER) {
    if (window_mode == 0) window_mode = 1 + ((g >> 2) & 1);
    host = true;
  }
  // A disk tier needs block reuse; its records hold every group's block of a
  // full position, so this configuration has no windows.
  if (KVC_FUZZ_DISK) window_mode = 0;
  const bool reuse = KVC_FUZZ_DISK || ((g >> 4) & 7) != 7;
  const bool manual = (g >> 7) & 1;
  // Mostly 3-17 blocks, where every call evicts; one in 32 gets 40-68, so
  // a prompt can span more blocks than the prefix walk takes in one chunk
  // (they cost more to check, hence rarely).
  const uint32_t blocks = nb < 0xF8 ? 3 + nb % 15 : 40 + (nb & 7) * 4;
  const uint32_t W = 1 + w % 12;
  const uint32_t heads = 1 + (h & 1), head_dim = (h >> 1) & 1 ? 4 : 2;
  const bool per_layer_heads = ((h >> 2) & 3) == 3;
  // Events on in half the caches, some with a ring of 3 (LOST, resyncs).
  static const uint32_t kRings[4] = {0, 0, 3, 256};
  const uint32_t ring = kRings[(h >> 4) & 3];

  kvc_config_t* cfg = nullptr;
  must(kvc_config_create(&cfg), "kvc_config_create");
  emit_line("kvc_config_create(&cfg);");
  // A setter that must succeed, written to the C reproducer too.
  auto set = [&](kvc_status_t (*setter)(kvc_config_t*, uint64_t), const char* name, uint64_t v) {
    must(setter(cfg, v), name);
    emit_line("%s(cfg, %llu);", name, (unsigned long long)v);
  };
#define KVC_SET(fn, v) set([](kvc_config_t* c, uint64_t x) { return fn(c, x); }, #fn, uint64_t(v))
  KVC_SET(kvc_config_set_num_layers, layers);
  uint64_t set_bytes = 0;
  if (per_layer_heads) {
    uint32_t hs[3] = {0, 0, 0};
    for (uint32_t l = 0; l < layers; ++l) hs[l] = l % 2 ? 3 - heads : heads, set_bytes += hs[l];
    must(kvc_config_set_kv_heads_per_layer(cfg, hs, layers), "set_kv_heads_per_layer");
    emit_line("kvc_config_set_kv_heads_per_layer(cfg, (const uint32_t[]){%u, %u, %u}, %u);", hs[0],
              hs[1], hs[2], layers);
  } else {
    KVC_SET(kvc_config_set_kv_heads, heads);
    set_bytes = uint64_t(heads) * layers;
  }
  set_bytes *= uint64_t(T) * head_dim * es * kv_factor;
  KVC_SET(kvc_config_set_head_dim, head_dim);
  KVC_SET(kvc_config_set_dtype, dtype);
  KVC_SET(kvc_config_set_layout, (f >> 3) & 1 ? KVC_LAYOUT_HND : KVC_LAYOUT_NHD);
  KVC_SET(kvc_config_set_kv_factor, kv_factor);
  KVC_SET(kvc_config_set_tokens_per_block, T);
  KVC_SET(kvc_config_set_max_tokens, uint64_t(blocks) * T);
  KVC_SET(kvc_config_set_partial_reuse, !((f >> 6) & 1));
  KVC_SET(kvc_config_set_copy_on_partial_reuse, !((f >> 7) & 1));
  KVC_SET(kvc_config_set_block_reuse, reuse);
  KVC_SET(kvc_config_set_manual_clock, manual);
  if (ring != 0) KVC_SET(kvc_config_set_event_buffer_size, ring);
  // Room to grow (kvc_cache_resize): twice the blocks asked for.
  KVC_SET(kvc_config_set_max_primary_bytes, 2 * uint64_t(blocks) * set_bytes);
  if (window_mode != 0) {
    const uint32_t modes[3][2] = {{0, W}, {W, W}, {W, 0}};
    const uint32_t* w2 = modes[window_mode - 1];
    must(kvc_config_set_attention_windows(cfg, w2, window_mode == 2 ? 1 : 2), "set_attention_windows");
    emit_line("kvc_config_set_attention_windows(cfg, (const uint32_t[]){%u, %u}, %u);", w2[0], w2[1],
              window_mode == 2 ? 1 : 2);
  }
  if (host) KVC_SET(kvc_config_set_host_cache_bytes, (1 + t % 8) * set_bytes + (t >> 5));
  // With a disk tier, a threshold that lets the default priority (35) go
  // down: evicted blocks reach the disk.
  if (host || KVC_FUZZ_DISK)
    KVC_SET(kvc_config_set_secondary_offload_min_priority,
            kOffload[(t >> 3) & (KVC_FUZZ_DISK ? 1 : 3)]);
#undef KVC_SET
  std::string disk_dir;
  uint64_t disk_bytes = 0;
  if (KVC_FUZZ_DISK) {
    // Its own directory, removed with the cache: nothing carries over from
    // one input to the next. Room for 2-17 records (a record is a block of
    // every group plus a header well under 16 KiB).
    char dir[] = "/tmp/kvc-fuzz-disk-XXXXXX";
    if (mkdtemp(dir) == nullptr) finding("mkdtemp: %s", std::strerror(errno));
    disk_dir = dir;
    const uint64_t bytes = (2 + t % 16) * (set_bytes + 16384);
    disk_bytes = bytes;
    must(kvc_config_set_disk_cache(cfg, dir, bytes), "kvc_config_set_disk_cache");
    emit_line("{ char d[] = \"/tmp/kvc-fuzz-disk-XXXXXX\"; "
              "kvc_config_set_disk_cache(cfg, mkdtemp(d), %llu); }", (unsigned long long)bytes);
  }
  if (t >= 0xF8) hostile_setter(cfg, t);
  must(kvc_config_validate(cfg), "kvc_config_validate of a valid config");
  emit_line("if (kvc_cache_create(cfg, &c[%d]) != KVC_OK) return 2;", index);
  emit_line("kvc_config_destroy(cfg);");
  auto model = std::make_unique<CacheModel>(index, cfg, host, manual, reuse, ring != 0);
  model->disk_dir = disk_dir;
  model->disk_bytes = disk_bytes;
  model->config = cfg;  // the receiver of imports is created from it (fuzz_import.cpp)
  return model;
}

void report() {
  std::fprintf(stderr,
               "kvcache_fuzz: %llu inputs, %llu API calls in the programs (%llu failed, each "
               "checked to change nothing), %llu more API calls by the checks\n",
               (unsigned long long)g_count.inputs, (unsigned long long)g_count.calls,
               (unsigned long long)g_count.failed_calls, (unsigned long long)g_count.check_calls);
#if KVC_FUZZ_STATE
  state_report();
#endif
#if KVC_FUZZ_RANKS
  ranks_report();
#endif
#if !KVC_FUZZ_STATEFUL && !KVC_FUZZ_STATE && !KVC_FUZZ_RANKS
  std::fprintf(stderr,
               "kvcache_fuzz transfer: exports %llu ok, %llu refused (%llu of them unsupported: "
               "a window had evicted a block), %llu released (%llu after their cache was "
               "destroyed); imports %llu completed (%llu blocks copied, %llu first completed "
               "with a wrong count), %llu aborted, %llu refused (hostile blob, tokens, salt), "
               "%llu out of blocks; %llu adds after a completed import reused its blocks\n",
               (unsigned long long)g_count.exports_ok, (unsigned long long)g_count.exports_refused,
               (unsigned long long)g_count.exports_unsupported,
               (unsigned long long)g_count.exports_released,
               (unsigned long long)g_count.exports_orphaned, (unsigned long long)g_count.imports_ok,
               (unsigned long long)g_count.imported_blocks,
               (unsigned long long)g_count.imports_wrong_count,
               (unsigned long long)g_count.imports_aborted, (unsigned long long)g_count.imports_refused,
               (unsigned long long)g_count.imports_no_room, (unsigned long long)g_count.imports_reused);
#endif
#if KVC_FUZZ_DISK
  const kvc_tier_stats_t& d = g_count.disk;
  std::fprintf(stderr,
               "kvcache_fuzz disk: %llu adds loaded %llu blocks from the disk tier; the tiers "
               "were offered %llu blocks, stored %llu, dropped %llu, hit %llu, onboarded %llu, "
               "rejected %llu\n",
               (unsigned long long)g_count.disk_loads, (unsigned long long)g_count.disk_blocks,
               (unsigned long long)d.offered_blocks, (unsigned long long)d.stored_blocks,
               (unsigned long long)d.dropped_blocks, (unsigned long long)d.hits,
               (unsigned long long)d.onboarded_blocks, (unsigned long long)d.rejected);
  std::fprintf(stderr,
               "kvcache_fuzz disk writer: inputs by mode %llu flushed before adds, %llu not, "
               "%llu not and paused, %llu offload at eviction; %llu calls left write jobs "
               "holding blocks; %llu refused calls gave write-held blocks back; %llu flush "
               "operations, %llu drains\n",
               (unsigned long long)g_count.disk_mode_inputs[0],
               (unsigned long long)g_count.disk_mode_inputs[1],
               (unsigned long long)g_count.disk_mode_inputs[2],
               (unsigned long long)g_count.disk_mode_inputs[3],
               (unsigned long long)g_count.disk_pending_calls,
               (unsigned long long)g_count.disk_released_on_failure,
               (unsigned long long)g_count.disk_flushes, (unsigned long long)g_count.disk_drains);
  std::fprintf(stderr,
               "kvcache_fuzz disk jobs: %llu eviction victims deferred (write job pending) in %llu "
               "inputs; %llu waits for a write job\n",
               (unsigned long long)g_count.disk_deferrals,
               (unsigned long long)g_count.disk_deferring_inputs,
               (unsigned long long)g_count.disk_write_waits);
#endif
#if KVC_FUZZ_STATEFUL
  std::fprintf(stderr,
               "kvcache_fuzz stateful: %llu decodes compared, %llu injected allocation failures\n",
               (unsigned long long)g_st.decodes, (unsigned long long)g_st.faults);
#endif
}

}  // namespace
}  // namespace kvc_fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvc_fuzz::g_emit_path = std::getenv("KVC_FUZZ_EMIT_C");
  const char* t = std::getenv("KVC_FUZZ_TRACE");
  kvc_fuzz::g_trace = t != nullptr && t[0] != '\0' && t[0] != '0';
  if (kvc_fuzz::g_trace) std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a sanitizer abort keeps the trace
  std::atexit(kvc_fuzz::report);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvc_fuzz;
  Input in(data, size);
  ++g_count.inputs;
  set_current(0, nullptr);
#if KVC_FUZZ_STATEFUL
  stateful_one_input(in);
  return 0;
#endif
#if KVC_FUZZ_STATE
  state_one_input(in);
  return 0;
#endif
#if KVC_FUZZ_RANKS
  ranks_one_input(in);
  return 0;
#endif
  emit_begin();
  const uint8_t head = in.u8();
  std::vector<std::unique_ptr<CacheModel>> caches;
  for (int i = 0; i < 1 + (head & 1); ++i) caches.push_back(make_cache(in, i));
  if (g_trace)
    for (const auto& c : caches)
      std::printf("cache %d: %u layers, %u groups, %u pools, %llu blocks, T %u, host %d, events %d\n",
                  c->index, c->num_layers, c->num_groups, c->num_pools,
                  (unsigned long long)c->desc.num_blocks, c->T, c->host, c->events);
#if KVC_FUZZ_DISK
  // How the program treats the disk writer (fuzz_disk.h): the first byte's
  // bits 1-2 (0: flush before adds, as before; 1: no flush; 2, 3: no flush,
  // and then by the input's length, odd: the writer paused between calls
  // (mode 2), even: a device cache's path, offload at eviction through
  // staging slots and the offer worker (mode 3); the seeds' first bytes
  // rarely differ in other bits). The pause and the path are no C API
  // call: the C reproducer says them in a comment.
  const int disk_mode = ((head >> 1) & 3) < 2 ? (head >> 1) & 3 : 2 + int((size & 1) == 0);
  ++g_count.disk_mode_inputs[disk_mode];
  emit_line("/* disk mode %d: %s */", disk_mode,
            disk_mode == 0   ? "kvc_cache_flush_tiers before every add and resize"
            : disk_mode == 1 ? "no flush before adds"
            : disk_mode == 2 ? "no flush, the writer paused after every call"
                             : "no flush, offload at eviction as on a device (test hook)");
  for (auto& c : caches) {
    c->disk_mode = disk_mode;
    if (disk_mode == 2) disk_pause_writer(c->cache, true);
    if (disk_mode == 3) disk_offload_at_eviction(c->cache);
  }
  g_deferred_this_input = false;
#endif
  Program program(in, caches);
  program.run();
  emit_end();
  size_t orphan_cache = SIZE_MAX;
  ExportModel orphan = program.finish_transfers(&orphan_cache);
  for (size_t i = 0; i < caches.size(); ++i)
    Program::drain(*caches[i], i == orphan_cache ? &orphan : nullptr);
  caches.clear();  // an orphan export outlives its cache, as the header allows
  if (orphan.handle != nullptr) Program::release_orphan(orphan);
#if KVC_FUZZ_DISK
  if (g_deferred_this_input) ++g_count.disk_deferring_inputs;
#endif
  return 0;
}
