// The stateful configuration's input: 0-2 small stateful caches (1-3
// layers, 1-8 rows, growth steps of 1-6 tokens so that layers grow all the
// time, short maximum lengths, every dtype and both layouts), creations
// with hostile arguments, and a program of up to kMaxCalls operations.
#include <cmath>
#include <cstdio>

#include "fuzz_feedback.h"
#include "fuzz_ops.h"
#include "fuzz_options.h"
#include "fuzz_stateful.h"

namespace kvc_fuzz {

StCounters g_st;

namespace {

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK)
    finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

StGeometry decode_geometry(Input& in) {
  static const kvc_dtype_t kDtypes[4] = {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16,
                                         KVC_DTYPE_FP8_E4M3};
  static const uint32_t kDims[4] = {2, 4, 8, 64};
  const uint8_t a = in.u8(), b = in.u8(), c = in.u8(), d = in.u8(), e = in.u8();
  StGeometry g;
  g.L = 1 + a % 3;
  g.dtype = kDtypes[(a >> 2) & 3];
  g.es = uint32_t(st_dtype_size(g.dtype));
  g.layout = (a >> 4) & 1 ? KVC_LAYOUT_NHD : KVC_LAYOUT_HND;
  g.kv = ((a >> 5) & 3) == 3 ? 1 : 2;
  g.B = 1 + b % 8;
  g.D = kDims[(b >> 3) & 3];
  const uint32_t H = 1 + ((b >> 5) & 1);
  for (uint32_t l = 0; l < g.L; ++l) g.heads.push_back((b >> 6) & 1 ? 1 + ((l + H) & 1) : H);
  g.staggered = !((b >> 7) & 1);
  g.step = c < 0xF0 ? 1 + c % 6 : (c & 1) ? 128 : 16;
  // Short rows: every growth, the policy's cap, and max_length refusals
  // are reached (head_dim 64, which decode takes, gets the shortest).
  g.max_length = d < 0xF8 ? 3 + d % (g.D == 64 ? 14 : 30) : g.D == 64 ? 16 : 64;
  g.initial_length = e < 0xD0 ? 0 : 1 + e % g.max_length;
  return g;
}

// A creation that breaks one rule of the header: refused, *out untouched.
void hostile_create(const StGeometry& g, uint8_t k) {
  kvc_config_t* cfg = st_config(g);
  kvc_stateful_options_t o = st_options(g);
  struct Long {
    kvc_stateful_options_t o;
    uint32_t tail[2];
  } lo{o, {0, 0}};
  const kvc_stateful_options_t* op = &o;
  const kvc_config_t* cp = cfg;
  kvc_stateful_t* out = reinterpret_cast<kvc_stateful_t*>(uintptr_t(0x5a5a));
  kvc_stateful_t** outp = &out;
  kvc_status_t want = KVC_ERR_INVALID_ARGUMENT;
  switch (k % 14) {
    case 0: o.batch = 0; break;
    case 1: o.batch = KVC_STATEFUL_MAX_BATCH + 1; break;
    case 2: o.layout = 3; break;
    case 3: o.growth_step = 65537; break;
    case 4: o.growth_policy = 3; break;
    case 5: o.max_length = KVC_STATEFUL_MAX_LENGTH + 1; break;
    case 6: o.initial_length = o.max_length + 1; break;
    case 7: o.struct_size = k & 0x10 ? 3 : 0; break;
    case 8:
      lo.o.struct_size = sizeof lo;
      lo.tail[1] = 1;
      op = &lo.o;
      break;
    case 9: {
      const uint32_t w[1] = {4};
      must(kvc_config_set_attention_windows(cfg, w, 1), "kvc_config_set_attention_windows");
      want = KVC_ERR_UNSUPPORTED;
      break;
    }
    case 10: op = nullptr; break;
    case 11: cp = nullptr; break;
    case 12: outp = nullptr; break;
    default: {
      kvc_config_destroy(cfg);
      must(kvc_config_create(&cfg), "kvc_config_create");  // no model set
      cp = cfg;
      break;
    }
  }
  ++g_count.calls;
  set_current(-1, "kvc_stateful_create with a bad argument");
  const kvc_status_t st = kvc_stateful_create(cp, op, outp);
  if (st != want || out != reinterpret_cast<kvc_stateful_t*>(uintptr_t(0x5a5a)))
    finding("kvc_stateful_create with bad argument %u: %s (expected %s), out %s", k % 14,
            kvc_status_string(st), kvc_status_string(want),
            out == reinterpret_cast<kvc_stateful_t*>(uintptr_t(0x5a5a)) ? "untouched" : "written");
  if (kvc_last_error_message()[0] == '\0') finding("kvc_stateful_create failed with an empty message");
  ++g_count.failed_calls;
  kvc_config_destroy(cfg);
}

}  // namespace

kvc_config_t* st_config(const StGeometry& g) {
  kvc_config_t* cfg = nullptr;
  must(kvc_config_create(&cfg), "kvc_config_create");
  must(kvc_config_set_num_layers(cfg, g.L), "kvc_config_set_num_layers");
  must(kvc_config_set_kv_heads_per_layer(cfg, g.heads.data(), g.L), "set_kv_heads_per_layer");
  must(kvc_config_set_head_dim(cfg, g.D), "kvc_config_set_head_dim");
  must(kvc_config_set_dtype(cfg, g.dtype), "kvc_config_set_dtype");
  must(kvc_config_set_kv_factor(cfg, g.kv), "kvc_config_set_kv_factor");
  return cfg;
}

kvc_stateful_options_t st_options(const StGeometry& g) {
  kvc_stateful_options_t o;
  kvc_stateful_options_init(&o);
  o.batch = g.B;
  o.layout = g.layout == KVC_LAYOUT_HND && g.step % 2 ? 0 : g.layout;  // 0: the default, HND
  o.growth_step = g.step == 128 ? 0 : g.step;
  o.growth_policy = g.staggered ? (g.B % 2 ? KVC_GROWTH_STAGGERED : 0) : KVC_GROWTH_UNIFORM;
  o.max_length = g.max_length;
  o.initial_length = g.initial_length;
  return o;
}

uint32_t StProgram::rand32() { return uint32_t(mix64(++nonce_ * 0x9E3779B97F4A7C15ull) >> 32); }

void StProgram::run() {
  if (caches_.empty()) {
    // Only what needs no cache: calls on NULL handles.
    for (int i = 0; i < 8 && !in_.empty(); ++i) {
      in_.u8();
      null_handle();
    }
    return;
  }
  for (int i = 0; i < kMaxCalls && !in_.empty(); ++i) {
    const uint8_t op = in_.u8();
    cur_ = caches_.size() > 1 ? (op >> 5) & 1 : 0;
    g_op = op % 32;
    switch (op % 32) {
      case 0: case 1: case 2: case 3: case 4: case 5: case 31: step(false); break;
      case 6: case 7: case 8: append_one(); break;
      case 9: case 10: case 11: reorder(); break;
      case 12: case 13: trim(); break;
      case 14: reset(); break;
      case 15: case 16: export_row(); break;
      case 17: case 18: import_row(); break;
      case 19: case 20: compact(); break;
      case 21: case 22: decode(); break;
      case 23: workspace_size(); break;
      case 24: view_queries(); break;
      case 25: stats_queries(); break;
      case 26: if (op & 0x80) async_error(); else null_handle(); break;
      case 27: case 28: case 29: step(true); break;  // a beam search step
      default:
        // The next call's n-th device allocation fails.
        c().pending_fault = 1 + (op >= 0xC0 ? in_.below(3) : 0);
        if (g_trace) std::printf("cache %zu: fault at the next call's allocation %u\n", cur_,
                                 c().pending_fault);
        break;
    }
  }
}

void stateful_one_input(Input& in) {
  const uint8_t head = in.u8();
  const uint32_t n = (head & 3) == 1 ? 2 : (head & 3) == 3 ? 0 : 1;
  std::vector<std::unique_ptr<StModel>> caches;
  for (uint32_t i = 0; i < n; ++i) {
    const StGeometry g = decode_geometry(in);
    const uint8_t hx = in.u8();
    if (hx >= 0xE0) hostile_create(g, hx);
    kvc_config_t* cfg = st_config(g);
    const kvc_stateful_options_t o = st_options(g);
    kvc_stateful_t* h = nullptr;
    ++g_count.calls;
    set_current(int(i), "kvc_stateful_create");
    must(kvc_stateful_create(cfg, &o, &h), "kvc_stateful_create of valid options");
    kvc_config_destroy(cfg);
    if (g_trace)
      std::printf("stateful %u: %u layers, B %u, D %u, kv %u, dtype %u, layout %u, heads %u/%u/%u, "
                  "step %u %s, max %u, initial %u\n", i, g.L, g.B, g.D, g.kv, g.dtype, g.layout,
                  g.heads[0], g.L > 1 ? g.heads[1] : 0, g.L > 2 ? g.heads[2] : 0, g.step,
                  g.staggered ? "staggered" : "uniform", g.max_length, g.initial_length);
    caches.push_back(std::make_unique<StModel>(int(i), g, h));
  }
  StProgram program(in, caches);
  program.run();
}

}  // namespace kvc_fuzz
