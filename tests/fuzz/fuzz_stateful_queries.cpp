// The stateful program's reading calls: the indirect decode attention
// (bit for bit against the same history in a fresh cache without a beam
// table, and within a tolerance against a double-precision reference from
// the shadow), its workspace size, views, lengths, statistics, the async
// error, and every call on a NULL handle; hostile buffers and struct sizes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "fuzz_feedback.h"
#include "fuzz_stateful.h"

namespace kvc_fuzz {

namespace {

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK)
    finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

// The shadow's histories appended to a fresh cache of the same geometry:
// plain rows, no beam table (the "gather, then decode" of the header).
kvc_stateful_t* plain_copy(const StModel& m) {
  StGeometry g = m.g;
  g.initial_length = 0;
  kvc_config_t* cfg = st_config(g);
  const kvc_stateful_options_t o = st_options(g);
  kvc_stateful_t* h = nullptr;
  must(kvc_stateful_create(cfg, &o, &h), "kvc_stateful_create of the plain copy");
  kvc_config_destroy(cfg);
  const size_t chunk = size_t(g.D) * g.es;
  for (uint32_t l = 0; l < g.L; ++l) {
    const uint32_t n = m.max_len(l), H = g.heads[l];
    if (n == 0) continue;
    std::vector<unsigned char> kv[2];
    kv[0].assign(size_t(g.B) * n * H * chunk, 0);
    kv[1] = kv[0];
    std::vector<uint32_t> rows(g.B);
    for (uint32_t r = 0; r < g.B; ++r) {
      rows[r] = m.len(l, r);
      for (uint32_t t = 0; t < rows[r]; ++t)
        for (uint32_t k = 0; k < g.kv; ++k)
          for (uint32_t hd = 0; hd < H; ++hd) {
            const size_t e = g.layout == KVC_LAYOUT_HND ? (size_t(r) * H + hd) * n + t
                                                        : (size_t(r) * n + t) * H + hd;
            std::memcpy(kv[k].data() + e * chunk,
                        m.hist[l][r].data() + t * g.pos_bytes(l) + (k * H + hd) * chunk, chunk);
          }
    }
    kvc_stateful_append_args_t a;
    kvc_stateful_append_args_init(&a);
    a.layer = l;
    a.num_tokens = n;
    a.src_dtype = g.dtype;
    a.key = kv[0].data();
    a.value = g.kv == 2 ? kv[1].data() : nullptr;
    a.row_tokens = rows.data();
    must(kvc_stateful_append(h, &a, nullptr), "kvc_stateful_append to the plain copy");
  }
  return h;
}

}  // namespace

void StProgram::decode() {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint8_t f = in_.u8(), lb = in_.u8(), hostile = in_.u8();
  const uint32_t layer = lb % 4 == 3 ? g.L + lb / 4 : lb % g.L;
  const uint32_t l = layer < g.L ? layer : 0, H = g.heads[l], D = g.D;
  const uint32_t G = 1u << (f % 3);
  kvc_dtype_t qd = g.dtype == KVC_DTYPE_FP8_E4M3 ? ((f >> 2) & 1 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16) : g.dtype;
  const size_t qes = st_dtype_size(qd), n = size_t(g.B) * H * G * D;
  std::vector<unsigned char> query(n * 4), out(n * 4 + 16, 0xA5);
  for (size_t i = 0; i < n; ++i) st_moderate(query.data(), qd, i, rand32());
  static const float kScales[4] = {1.0f, 2.0f, 0.5f, 0.25f};
  kvc_stateful_decode_args_t a;
  kvc_stateful_decode_args_init(&a);
  a.layer = layer;
  a.q_heads = H * G;
  a.q_dtype = qd;
  a.query = query.data();
  a.out = out.data();
  a.max_seq_len = (f >> 3) & 1 ? m.max_len(l) + 3 : 0;
  a.softmax_scale = (f >> 4) & 1 ? 0.125f * float(1 + ((f >> 5) & 3)) : 0.0f;
  if (g.dtype == KVC_DTYPE_FP8_E4M3) a.k_scale = kScales[(f >> 5) & 3], a.v_scale = kScales[(f >> 6) & 3];
  const kvc_stateful_decode_args_t* ap = &a;
  bool invalid = layer >= g.L, either = false, args_bad = false;
  switch (hostile % 16) {
    case 8: a.q_heads = H > 1 && (hostile & 0x10) ? H * G + 1 : 0; invalid = true; break;
    case 9:
      a.q_dtype = g.dtype == KVC_DTYPE_FP8_E4M3 ? (hostile & 0x10 ? KVC_DTYPE_F32 : KVC_DTYPE_FP8_E4M3)
                  : g.dtype == KVC_DTYPE_F16 ? KVC_DTYPE_BF16 : KVC_DTYPE_F16;
      invalid = true;
      break;
    case 10: a.query = nullptr; invalid = true; break;
    case 11: a.out = nullptr; invalid = true; break;
    case 12: a.softmax_scale = hostile & 0x10 ? NAN : INFINITY; invalid = true; break;
    case 13:
      (hostile & 0x10 ? a.v_scale : a.k_scale) = (hostile & 0x20) ? 0.0f : NAN;
      if (g.dtype == KVC_DTYPE_FP8_E4M3) invalid = true;
      else either = true;
      break;
    case 14:
      if (hostile & 0x10) ap = nullptr;
      else a.struct_size = 0;
      args_bad = true;
      break;
    case 15: a.workspace_bytes = 8; invalid = true; break;
    default: break;
  }
  Expect e;
  if (args_bad || invalid || either) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!args_bad && layer < g.L && D != 64) e.allow(KVC_ERR_UNSUPPORTED);
  if (!args_bad && !invalid && D == 64) e.allow(KVC_OK);
  if (g_trace) std::printf("cache %zu: decode layer %u, %u q heads, q dtype %u, hostile %u\n", cur_,
                           layer, a.q_heads, a.q_dtype, hostile % 16);
  const kvc_status_t st = m.call("kvc_stateful_decode", e, true, 0,
                                 [&] { return kvc_stateful_decode(m.h, ap, nullptr); });
  if (st != KVC_OK) {
    for (unsigned char b : out)
      if (b != 0xA5) finding("kvc_stateful_decode failed with %s but wrote out", kvc_status_string(st));
    return;
  }
  const size_t bytes = n * qes;
  for (size_t i = bytes; i < out.size(); ++i)
    if (out[i] != 0xA5) finding("kvc_stateful_decode wrote past out (byte %zu of %zu)", i, bytes);
  feedback(kStShape, 40 + m.table, bucket(m.max_len(l)));
  ++g_st.decodes;
  // The same history in plain rows decodes to the same bits.
  kvc_stateful_t* plain = plain_copy(m);
  std::vector<unsigned char> out2(out.size(), 0xA5);
  a.out = out2.data();
  must(kvc_stateful_decode(plain, &a, nullptr), "kvc_stateful_decode of the plain copy");
  kvc_stateful_destroy(plain);
  if (std::memcmp(out.data(), out2.data(), bytes) != 0) {
    size_t i = 0;
    while (out[i] == out2[i]) ++i;
    finding("decode of layer %u through the beam table differs from the same history in plain rows "
            "(first at byte %zu: row %zu)", l, i, i / (size_t(H) * G * D * qes));
  }
  // A reference in double precision, where the values are moderate.
  const float scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(float(D));
  const float ks = g.dtype == KVC_DTYPE_FP8_E4M3 ? a.k_scale : 1.0f;
  const float vs = g.dtype == KVC_DTYPE_FP8_E4M3 ? a.v_scale : 1.0f;
  const uint32_t vk = g.kv == 2 ? 1 : 0;
  std::vector<double> scores, acc(D);
  for (uint32_t b = 0; b < g.B; ++b) {
    const uint32_t len = m.len(l, b);
    const unsigned char* hr = m.hist[l][b].data();
    bool moderate = true;
    double vmax = 1.0;
    for (size_t i = 0; i < size_t(len) * g.pos_bytes(l) / g.es && moderate; ++i) {
      const float x = st_load(hr, g.dtype, i);
      moderate = std::isfinite(x) && std::fabs(x) <= 64.0f;
      vmax = std::max(vmax, std::fabs(double(x)) * std::max(ks, vs));
    }
    if (len == 0 || !moderate) continue;
    for (uint32_t qh = 0; qh < H * G; ++qh) {
      const uint32_t kh = qh / G;
      const size_t qb = (size_t(b) * H * G + qh) * D;
      scores.assign(len, 0.0);
      double mx = -INFINITY, sum = 0.0;
      for (uint32_t t = 0; t < len; ++t) {
        const unsigned char* kr = hr + t * g.pos_bytes(l) + size_t(kh) * D * g.es;
        double s = 0.0;
        for (uint32_t d = 0; d < D; ++d)
          s += double(st_load(query.data(), qd, qb + d)) * double(st_load(kr, g.dtype, d)) * ks;
        scores[t] = s * scale;
        mx = std::max(mx, scores[t]);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t t = 0; t < len; ++t) {
        const double p = std::exp(scores[t] - mx);
        sum += p;
        const unsigned char* vr = hr + t * g.pos_bytes(l) + (size_t(vk) * H + kh) * D * g.es;
        for (uint32_t d = 0; d < D; ++d) acc[d] += p * double(st_load(vr, g.dtype, d)) * vs;
      }
      for (uint32_t d = 0; d < D; ++d) {
        const double want = acc[d] / sum, got = st_load(out.data(), qd, qb + d);
        if (!(std::fabs(got - want) <= 1e-3 + 1e-2 * vmax))
          finding("decode of layer %u row %u head %u dim %u: %g, the reference %g", l, b, qh, d,
                  got, want);
      }
    }
  }
}

void StProgram::workspace_size() {
  StModel& m = c();
  const uint8_t f = in_.u8();
  kvc_stateful_decode_args_t a;
  kvc_stateful_decode_args_init(&a);
  a.layer = f % 4 == 3 ? m.g.L : f % m.g.L;
  const uint32_t l = a.layer < m.g.L ? a.layer : 0;
  a.q_heads = (f >> 2) & 1 ? 0 : m.g.heads[l];
  a.q_dtype = m.g.dtype == KVC_DTYPE_FP8_E4M3 ? KVC_DTYPE_BF16 : m.g.dtype;
  a.max_seq_len = (f >> 3) & 7;
  uint64_t bytes = 77;
  uint64_t* bp = (f >> 6) == 3 ? nullptr : &bytes;
  const bool invalid = a.layer >= m.g.L || a.q_heads == 0 || bp == nullptr;
  Expect e;
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (a.layer < m.g.L && m.g.D != 64) e.allow(KVC_ERR_UNSUPPORTED);
  if (!invalid && m.g.D == 64) e.allow(KVC_OK);
  const kvc_status_t st = m.call("kvc_stateful_decode_workspace_size", e, true, 0, [&] {
    return kvc_stateful_decode_workspace_size(m.h, &a, bp);
  });
  if (st == KVC_OK ? bytes != 0 : bytes != 77)
    finding("kvc_stateful_decode_workspace_size: %s, bytes %llu (a CPU cache needs 0)",
            kvc_status_string(st), (unsigned long long)bytes);
}

// A struct of T with struct_size `size` in a buffer of sentinels: what a
// call writes must stop at size (a longer one gets its tail zeroed).
template <class T, class F>
void sized_query(StModel& m, const char* what, uint8_t f, bool bad, const T& want, F&& fn) {
  const uint32_t sizes[4] = {uint32_t(sizeof(T)), 8, uint32_t(sizeof(T)) + 8, f & 0x40 ? 3u : 0u};
  const uint32_t size = sizes[(f >> 4) & 3];
  std::vector<unsigned char> buf(sizeof(T) + 16, 0xA5);
  std::memcpy(buf.data(), &size, 4);
  const bool null = (f >> 4) % 4 == 3 && (f & 0x80);
  Expect e;
  e.allow(bad || size < 4 || null ? KVC_ERR_INVALID_ARGUMENT : KVC_OK);
  const kvc_status_t st = m.call(what, e, true, 0, [&] {
    return fn(null ? nullptr : reinterpret_cast<T*>(buf.data()));
  });
  const size_t n = st != KVC_OK ? 4 : std::min<size_t>(size, sizeof(T));
  T got;
  std::memcpy(&got, buf.data(), sizeof(T));
  if (st == KVC_OK && (got.struct_size != size ||
                       std::memcmp(buf.data() + 4, reinterpret_cast<const unsigned char*>(&want) + 4, n - 4) != 0))
    finding("%s wrote other values than the snapshot's", what);
  for (size_t i = n; i < buf.size(); ++i) {
    const unsigned char w = st == KVC_OK && i < size ? 0 : 0xA5;
    if (buf[i] != w) finding("%s with struct_size %u: byte %zu is %u", what, size, i, buf[i]);
  }
}

void StProgram::view_queries() {
  StModel& m = c();
  const uint8_t f = in_.u8();
  const uint32_t layer = f % 4 == 3 ? m.g.L + (f >> 7) * 1000 : f % m.g.L;
  const bool bad = layer >= m.g.L;
  if ((f >> 2) & 1) {
    const kvc_stateful_view_t want = bad ? kvc_stateful_view_t{} : m.last.views[layer];
    sized_query<kvc_stateful_view_t>(m, "kvc_stateful_layer_view", f, bad, want,
                                     [&](kvc_stateful_view_t* v) { return kvc_stateful_layer_view(m.h, layer, v); });
    return;
  }
  // Lengths: room for fewer rows than the batch, exactly, more; NULL.
  const uint32_t room = (f >> 4) % 4 == 0 ? m.g.B - 1 : (f >> 4) % 4 == 1 ? m.g.B + 2 : m.g.B;
  std::vector<uint32_t> buf(m.g.B + 2, 0xA5A5A5A5);
  uint32_t* p = (f >> 4) % 4 == 3 && (f & 0x80) ? nullptr : buf.data();
  Expect e;
  e.allow(bad || p == nullptr ? KVC_ERR_INVALID_ARGUMENT : room < m.g.B ? KVC_ERR_BUFFER_TOO_SMALL : KVC_OK);
  const kvc_status_t st = m.call("kvc_stateful_get_lengths", e, true, 0,
                                 [&] { return kvc_stateful_get_lengths(m.h, layer, p, room); });
  for (uint32_t r = 0; r < buf.size(); ++r) {
    const uint32_t w = st == KVC_OK && r < m.g.B ? m.len(layer, r) : 0xA5A5A5A5;
    if (buf[r] != w) finding("kvc_stateful_get_lengths (%s): entry %u is %u, expected %u",
                             kvc_status_string(st), r, buf[r], w);
  }
}

void StProgram::stats_queries() {
  StModel& m = c();
  const uint8_t f = in_.u8();
  if (f & 1) {
    sized_query<kvc_stateful_stats_t>(m, "kvc_stateful_get_stats", f, false, m.last.stats,
                                      [&](kvc_stateful_stats_t* s) { return kvc_stateful_get_stats(m.h, s); });
    return;
  }
  const uint32_t layer = (f >> 1) % 4 == 3 ? m.g.L : (f >> 1) % m.g.L;
  const bool bad = layer >= m.g.L;
  const kvc_stateful_layer_stats_t want = bad ? kvc_stateful_layer_stats_t{} : m.last.lstats[layer];
  sized_query<kvc_stateful_layer_stats_t>(m, "kvc_stateful_get_layer_stats", f, bad, want,
                                          [&](kvc_stateful_layer_stats_t* s) {
                                            return kvc_stateful_get_layer_stats(m.h, layer, s);
                                          });
}

void StProgram::async_error() {
  StModel& m = c();
  kvc_status_t err = KVC_ERR_INTERNAL;
  const bool null = in_.u8() & 1;
  const kvc_status_t st = m.call("kvc_stateful_get_async_error",
                                 Expect().allow(null ? KVC_ERR_INVALID_ARGUMENT : KVC_OK), true, 0,
                                 [&] { return kvc_stateful_get_async_error(m.h, nullptr, null ? nullptr : &err); });
  if (st == KVC_OK && err != KVC_OK) finding("kvc_stateful_get_async_error: %s", kvc_status_string(err));
}

// Every call of the mode on a NULL handle: KVC_ERR_INVALID_ARGUMENT.
void StProgram::null_handle() {
  kvc_stateful_view_t v;
  kvc_stateful_view_init(&v);
  kvc_stateful_stats_t s;
  kvc_stateful_stats_init(&s);
  kvc_stateful_layer_stats_t ls;
  kvc_stateful_layer_stats_init(&ls);
  kvc_stateful_append_args_t a;
  kvc_stateful_append_args_init(&a);
  kvc_stateful_decode_args_t d;
  kvc_stateful_decode_args_init(&d);
  uint32_t lengths[8];
  int32_t idx[1] = {0};
  uint64_t size = 0;
  kvc_status_t err;
  unsigned char buf[64] = {0};
  const kvc_status_t st[] = {
      kvc_stateful_layer_view(nullptr, 0, &v), kvc_stateful_get_lengths(nullptr, 0, lengths, 8),
      kvc_stateful_append(nullptr, &a, nullptr), kvc_stateful_reorder(nullptr, idx, 1, nullptr),
      kvc_stateful_compact(nullptr, nullptr), kvc_stateful_trim(nullptr, 0, 0, nullptr),
      kvc_stateful_reset(nullptr, true, nullptr),
      kvc_stateful_export_row(nullptr, 0, buf, sizeof buf, &size, nullptr),
      kvc_stateful_import_row(nullptr, 0, buf, sizeof buf, nullptr),
      kvc_stateful_decode_workspace_size(nullptr, &d, &size), kvc_stateful_decode(nullptr, &d, nullptr),
      kvc_stateful_get_async_error(nullptr, nullptr, &err), kvc_stateful_get_stats(nullptr, &s),
      kvc_stateful_get_layer_stats(nullptr, 0, &ls)};
  for (size_t i = 0; i < sizeof st / sizeof st[0]; ++i) {
    ++g_count.calls;
    ++g_count.failed_calls;
    if (st[i] != KVC_ERR_INVALID_ARGUMENT)
      finding("stateful call %zu on a NULL handle: %s", i, kvc_status_string(st[i]));
  }
  kvc_stateful_destroy(nullptr);
  kvc_stateful_options_init(nullptr);
  kvc_stateful_view_init(nullptr);
  kvc_stateful_stats_init(nullptr);
  kvc_stateful_layer_stats_init(nullptr);
  kvc_stateful_append_args_init(nullptr);
  kvc_stateful_decode_args_init(nullptr);
}

}  // namespace kvc_fuzz
