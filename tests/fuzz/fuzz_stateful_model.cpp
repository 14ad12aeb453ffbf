// The stateful configuration's model of one cache (fuzz_stateful.h):
// snapshots through the public API, and the checks of a call against the
// shadow.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "capi/stateful_handle.h"
#include "fuzz_feedback.h"
#include "fuzz_stateful.h"

namespace kvc_fuzz {

namespace {

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK)
    finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

// KVC_FUZZ_OPSTATS=1: the statuses each call returned, printed at exit
// (to see what a change of the program's choices does).
void count_status(const char* what, kvc_status_t st) {
  static std::map<std::string, std::map<int, uint64_t>>* counts = nullptr;
  static bool checked_env = false;
  if (!checked_env) {
    checked_env = true;
    const char* e = std::getenv("KVC_FUZZ_OPSTATS");
    if (e == nullptr || e[0] == '\0' || e[0] == '0') return;
    counts = new std::map<std::string, std::map<int, uint64_t>>();
    std::atexit([] {
      for (const auto& c : *counts) {
        std::fprintf(stderr, "%-36s", c.first.c_str());
        for (const auto& s : c.second)
          std::fprintf(stderr, " %s %llu", kvc_status_string(s.first), (unsigned long long)s.second);
        std::fprintf(stderr, "\n");
      }
    });
  }
  if (counts != nullptr) ++(*counts)[what][st];
}

}  // namespace

uint32_t StGeometry::capacity_for(uint32_t l, uint32_t need) const {
  // The smallest o_l + k * step (k >= 1) that holds need, capped.
  const uint64_t o = offset(l);
  uint64_t k = 1;
  if (need > o + step) k = (uint64_t(need) - o + step - 1) / step;
  const uint64_t c = o + k * step;
  return c > max_length ? max_length : uint32_t(c);
}

bool StFaults::fail(kvc::FaultSite site) {
  if (site == kvc::FaultSite::kCopyTier || fail_in == 0) return false;
  if (--fail_in != 0) return false;
  fired = true;
  return true;
}

StModel::StModel(int idx, const StGeometry& geo, kvc_stateful_t* handle)
    : index(idx), g(geo), h(handle) {
  // Made before the hook could be installed: the lengths, the identity
  // rows, and the initial preallocation of every layer.
  pre_hook_allocs = 2 + (g.initial_length > 0 ? g.L : 0);
  h->impl->device().set_fault_hook(&faults);
  hist.assign(g.L, std::vector<std::vector<unsigned char>>(g.B));
  src.assign(g.B, {});
  cap.assign(g.L, 0);
  reallocs.assign(g.L, 0);
  last_growth.assign(g.L, 0);
  if (g.initial_length > 0)
    for (uint32_t l = 0; l < g.L; ++l) cap[l] = g.capacity_for(l, g.initial_length);
  take(last);
  uint64_t kv = 0;
  for (uint32_t l = 0; l < g.L; ++l) kv += g.layer_bytes(l, cap[l]);
  fixed_bytes = last.stats.bytes_allocated - kv;
  if (last.stats.bytes_allocated < kv + 4ull * g.L * g.B)
    finding("a new stateful cache holds %llu bytes, less than its %llu bytes of K/V and lengths",
            (unsigned long long)last.stats.bytes_allocated,
            (unsigned long long)(kv + 4ull * g.L * g.B));
  if (last.stats.peak_bytes != last.stats.bytes_allocated)
    finding("a new stateful cache: peak %llu != allocated %llu",
            (unsigned long long)last.stats.peak_bytes,
            (unsigned long long)last.stats.bytes_allocated);
  verify(last, StChange{});
  verify_bytes(last);
}

StModel::~StModel() {
  kvc_stateful_destroy(h);
  // The hook heard every release, also of what was made before it.
  if (faults.live + pre_hook_allocs != 0)
    finding("destroying stateful cache %d left %lld device allocations", index,
            (long long)(faults.live + pre_hook_allocs));
}

uint32_t StModel::max_len(uint32_t l) const {
  uint32_t m = 0;
  for (uint32_t r = 0; r < g.B; ++r) m = std::max(m, len(l, r));
  return m;
}

bool StModel::equal_layers() const {
  for (uint32_t l = 1; l < g.L; ++l)
    for (uint32_t r = 0; r < g.B; ++r)
      if (len(l, r) != len(0, r)) return false;
  return true;
}

bool StModel::read_by_other(uint32_t l, uint32_t x, uint32_t from, uint32_t to) const {
  for (uint32_t c = 0; c < g.B; ++c) {
    if (c == x) continue;
    const uint32_t n = std::min(len(l, c), to);
    for (uint32_t t = from; t < n; ++t)
      if (src[c][t] == int32_t(x)) return true;
  }
  return false;
}

bool StModel::read_by_other_any(uint32_t x) const {
  for (uint32_t l = 0; l < g.L; ++l)
    if (read_by_other(l, x, 0, UINT32_MAX)) return true;
  return false;
}

uint64_t StModel::grow(uint32_t l, uint32_t need) {
  if (need <= cap[l]) return 0;
  if (cap[l] > 0) ++reallocs[l], ++reallocations;
  last_growth[l] = max_len(l);
  cap[l] = g.capacity_for(l, need);
  return g.layer_bytes(l, cap[l]);
}

void StModel::take(StSnapshot& s) const {
  s.views.resize(g.L);
  s.lstats.resize(g.L);
  s.lengths.resize(g.L);
  s.bufs.resize(g.L);
  for (uint32_t l = 0; l < g.L; ++l) {
    kvc_stateful_view_t& v = s.views[l];
    kvc_stateful_view_init(&v);
    must(kvc_stateful_layer_view(h, l, &v), "kvc_stateful_layer_view");
    kvc_stateful_layer_stats_init(&s.lstats[l]);
    must(kvc_stateful_get_layer_stats(h, l, &s.lstats[l]), "kvc_stateful_get_layer_stats");
    s.lengths[l].assign(g.B, 0xEEEEEEEE);
    must(kvc_stateful_get_lengths(h, l, s.lengths[l].data(), g.B), "kvc_stateful_get_lengths");
    const size_t bytes = v.key == nullptr ? 0 : size_t(g.kv) * g.B * v.row_stride;
    if (v.key != nullptr && v.row_stride != uint64_t(v.kv_heads) * v.capacity * g.D * g.es)
      finding("layer %u view: row_stride %llu for %u heads x %u positions x %u dims", l,
              (unsigned long long)v.row_stride, v.kv_heads, v.capacity, g.D);
    s.bufs[l].resize(bytes);
    if (bytes > 0) std::memcpy(s.bufs[l].data(), v.key, bytes);
  }
  const kvc_stateful_view_t& v0 = s.views[0];
  s.table.resize(v0.beam_table == nullptr ? 0 : size_t(g.B) * v0.beam_table_stride);
  if (!s.table.empty()) std::memcpy(s.table.data(), v0.beam_table, 4 * s.table.size());
  kvc_stateful_stats_init(&s.stats);
  must(kvc_stateful_get_stats(h, &s.stats), "kvc_stateful_get_stats");
  s.live = faults.live + pre_hook_allocs;
}

void StModel::checked(const char* what, const Expect& e, kvc_status_t st, bool reads_only,
                      uint32_t armed, uint32_t allocs, bool fired) {
  feedback(kOpStatus, g_op, uint32_t(-st) % 32);
  if (armed != 0) feedback(kStFault, armed * 4 + std::min<uint32_t>(allocs, 3), fired);
  g_st.faults += fired;
  count_status(what, st);
  if (g_trace) std::printf("    -> %s%s\n", kvc_status_string(st), fired ? " (injected)" : "");
  if (!e.allows(st))
    finding("%s (stateful %d) returned %s, expected %s; message: %s", what, index,
            kvc_status_string(st), e.str().c_str(), st == KVC_OK ? "" : kvc_last_error_message());
  if (fired && st != KVC_ERR_OUT_OF_MEMORY)
    finding("%s (stateful %d): an injected allocation failure was answered %s", what, index,
            kvc_status_string(st));
  if (st == KVC_ERR_OUT_OF_MEMORY && !fired)
    finding("%s (stateful %d): out of memory without an injected failure: %s", what, index,
            kvc_last_error_message());
  if (st != KVC_OK) {
    if (kvc_last_error_message()[0] == '\0') finding("%s failed with an empty message", what);
    ++g_count.failed_calls;
  }
  if (st != KVC_OK || reads_only) {
    take(scratch_);
    unchanged(scratch_, what);
  }
}

void StModel::unchanged(const StSnapshot& now, const char* what) const {
  const StSnapshot& was = last;
  for (uint32_t l = 0; l < g.L; ++l) {
    if (std::memcmp(&now.views[l], &was.views[l], sizeof(kvc_stateful_view_t)) != 0)
      finding("%s (stateful %d) changed layer %u's view (capacity %u -> %u, longest row %u -> %u)",
              what, index, l, was.views[l].capacity, now.views[l].capacity,
              was.views[l].max_length, now.views[l].max_length);
    if (std::memcmp(&now.lstats[l], &was.lstats[l], sizeof(kvc_stateful_layer_stats_t)) != 0)
      finding("%s (stateful %d) changed layer %u's statistics", what, index, l);
    if (now.lengths[l] != was.lengths[l])
      finding("%s (stateful %d) changed layer %u's lengths", what, index, l);
    if (now.bufs[l] != was.bufs[l]) {
      size_t i = 0;
      while (now.bufs[l][i] == was.bufs[l][i]) ++i;
      finding("%s (stateful %d) changed layer %u's K/V (first at byte %zu of %zu)", what, index,
              l, i, now.bufs[l].size());
    }
  }
  if (now.table != was.table) finding("%s (stateful %d) changed the beam table", what, index);
  if (std::memcmp(&now.stats, &was.stats, sizeof(kvc_stateful_stats_t)) != 0)
    finding("%s (stateful %d) changed the statistics (allocated %llu -> %llu, peak %llu -> %llu, "
            "reallocations %llu -> %llu)", what, index,
            (unsigned long long)was.stats.bytes_allocated,
            (unsigned long long)now.stats.bytes_allocated, (unsigned long long)was.stats.peak_bytes,
            (unsigned long long)now.stats.peak_bytes, (unsigned long long)was.stats.reallocations,
            (unsigned long long)now.stats.reallocations);
  if (now.live != was.live)
    finding("%s (stateful %d) changed the device allocations held: %lld -> %lld", what, index,
            (long long)was.live, (long long)now.live);
}

void StModel::settle(const StChange& c) {
  take(scratch_);
  verify(scratch_, c);
  verify_bytes(scratch_);
  uint32_t sharing = 0;
  for (uint32_t r = 0; r < g.B; ++r)
    for (int32_t s : src[r])
      if (s != int32_t(r)) {
        ++sharing;
        break;
      }
  feedback(kStShape, std::min<uint32_t>(sharing, 7) * 4 + table * 2 + equal_layers(),
           bucket(max_len(0)));
  std::swap(last, scratch_);
}

void StModel::verify(const StSnapshot& now, const StChange& c) const {
  uint64_t kv_bytes = 0, reall = 0;
  const bool first = last.views.empty();
  for (uint32_t l = 0; l < g.L; ++l) {
    const kvc_stateful_view_t& v = now.views[l];
    const uint32_t H = g.heads[l];
    const uint64_t es = g.es, D = g.D;
    if (v.struct_size != sizeof v || v.layer != l || v.batch != g.B || v.kv_heads != H ||
        v.head_dim != g.D || v.dtype != g.dtype || v.layout != g.layout)
      finding("layer %u view: geometry (batch %u, heads %u, dim %u, dtype %u, layout %u)", l,
              v.batch, v.kv_heads, v.head_dim, v.dtype, v.layout);
    if (v.capacity != cap[l])
      finding("layer %u: capacity %u, the growth policy gives %u (offset %u, step %u, max %u, "
              "longest row %u)", l, v.capacity, cap[l], g.offset(l), g.step, g.max_length,
              max_len(l));
    if (v.max_length != max_len(l))
      finding("layer %u view: max_length %u, the shadow's longest row %u", l, v.max_length, max_len(l));
    const bool hnd = g.layout == KVC_LAYOUT_HND;
    const uint64_t ts = hnd ? D * es : H * D * es, hs = hnd ? uint64_t(v.capacity) * D * es : D * es;
    if ((v.key == nullptr) != (cap[l] == 0) || (v.key != nullptr && (v.token_stride != ts || v.head_stride != hs)))
      finding("layer %u view: key %p, strides token %llu head %llu for capacity %u", l, v.key,
              (unsigned long long)v.token_stride, (unsigned long long)v.head_stride, v.capacity);
    const unsigned char* want_value = g.kv == 1 || v.key == nullptr
                                          ? static_cast<unsigned char*>(v.key)
                                          : static_cast<unsigned char*>(v.key) + g.B * v.row_stride;
    if (v.value != want_value) finding("layer %u view: value %p, key %p", l, v.value, v.key);
    if (v.lengths == nullptr) finding("layer %u view: no lengths", l);
    for (uint32_t r = 0; r < g.B; ++r)
      if (uint32_t(v.lengths[r]) != len(l, r) || now.lengths[l][r] != len(l, r))
        finding("layer %u row %u: length %d (view) / %u (get_lengths), the shadow says %u", l, r,
                v.lengths[r], now.lengths[l][r], len(l, r));
    if ((v.beam_table != nullptr) != table || v.beam_table != now.views[0].beam_table ||
        v.beam_table_stride != now.views[0].beam_table_stride)
      finding("layer %u view: beam table %p (stride %u), the shadow says %s", l,
              static_cast<const void*>(v.beam_table), v.beam_table_stride, table ? "one" : "none");
    if (table && v.beam_table_stride < max_len(l))
      finding("beam table stride %u below layer %u's longest row %u", v.beam_table_stride, l, max_len(l));
    if (!first && !c.may_move &&
        (v.key != last.views[l].key || v.capacity != last.views[l].capacity ||
         v.lengths != last.views[l].lengths ||
         (last.views[l].beam_table != nullptr && v.beam_table != last.views[l].beam_table)))
      finding("layer %u: a call that may not reallocate moved its view", l);
    const kvc_stateful_layer_stats_t& s = now.lstats[l];
    if (s.layer != l || s.capacity != cap[l] || s.growth_offset != g.offset(l) ||
        s.bytes != g.layer_bytes(l, cap[l]) || s.reallocations != reallocs[l] ||
        s.last_growth_length != last_growth[l] || s.max_length != max_len(l))
      finding("layer %u stats: capacity %u offset %u bytes %llu reallocations %llu last growth at "
              "%u max %u; the model: %u %u %llu %llu %u %u", l, s.capacity, s.growth_offset,
              (unsigned long long)s.bytes, (unsigned long long)s.reallocations,
              s.last_growth_length, s.max_length, cap[l], g.offset(l),
              (unsigned long long)g.layer_bytes(l, cap[l]), (unsigned long long)reallocs[l],
              last_growth[l], max_len(l));
    kv_bytes += s.bytes;
    reall += s.reallocations;
  }
  const kvc_stateful_stats_t& s = now.stats;
  const uint64_t table_bytes = 4ull * g.B * now.views[0].beam_table_stride;
  if (s.struct_size != sizeof s || s.num_layers != g.L || s.kv_bytes != kv_bytes ||
      s.table_bytes != (table ? table_bytes : 0) ||
      s.bytes_allocated != fixed_bytes + kv_bytes + s.table_bytes)
    finding("stats: %u layers, kv %llu (layers: %llu), table %llu (stride: %llu), allocated %llu "
            "(fixed %llu)", s.num_layers, (unsigned long long)s.kv_bytes,
            (unsigned long long)kv_bytes, (unsigned long long)s.table_bytes,
            (unsigned long long)table_bytes, (unsigned long long)s.bytes_allocated,
            (unsigned long long)fixed_bytes);
  if (s.reallocations != reall || s.reallocations != reallocations || s.reorders != reorders ||
      s.compactions != compactions)
    finding("stats: reallocations %llu (layers %llu, model %llu), reorders %llu (%llu), "
            "compactions %llu (%llu)", (unsigned long long)s.reallocations,
            (unsigned long long)reall, (unsigned long long)reallocations,
            (unsigned long long)s.reorders, (unsigned long long)reorders,
            (unsigned long long)s.compactions, (unsigned long long)compactions);
  const int64_t live = 2 + std::count_if(cap.begin(), cap.end(), [](uint32_t x) { return x > 0; }) +
                       (table ? 1 : 0);
  if (now.live != live)
    finding("%lld device allocations held, the model has %lld", (long long)now.live, (long long)live);
  if (s.peak_bytes < s.bytes_allocated) finding("stats: peak %llu < allocated %llu",
                                                (unsigned long long)s.peak_bytes,
                                                (unsigned long long)s.bytes_allocated);
  if (first) return;
  // The peak: at least what the call held at once beside what it held
  // before (one new buffer beside every old one), at most every new buffer
  // of the call beside every old one.
  const kvc_stateful_stats_t& w = last.stats;
  uint64_t table_new = 0;
  if (c.table_alloc && now.views[0].beam_table != nullptr &&
      now.views[0].beam_table != last.views[0].beam_table)
    table_new = table_bytes;
  uint64_t lower = std::max(table_new, c.scratch), upper = table_new + c.scratch;
  for (uint64_t b : c.grown) lower = std::max(lower, b), upper += b;
  if (s.peak_bytes < w.peak_bytes || s.peak_bytes < w.bytes_allocated + lower ||
      s.peak_bytes > std::max({w.peak_bytes, w.bytes_allocated + upper, s.bytes_allocated}))
    finding("stats: peak %llu -> %llu with allocated %llu -> %llu; the call held between %llu and "
            "%llu more bytes at once", (unsigned long long)w.peak_bytes,
            (unsigned long long)s.peak_bytes, (unsigned long long)w.bytes_allocated,
            (unsigned long long)s.bytes_allocated, (unsigned long long)lower,
            (unsigned long long)upper);
  if (s.table_entries_copied < w.table_entries_copied ||
      s.table_entries_copied - w.table_entries_copied > c.copied_bound)
    finding("stats: table entries copied %llu -> %llu, the call may move at most %llu",
            (unsigned long long)w.table_entries_copied, (unsigned long long)s.table_entries_copied,
            (unsigned long long)c.copied_bound);
}

void StModel::verify_bytes(const StSnapshot& now) const {
  const uint32_t stride = now.views[0].beam_table_stride;
  for (uint32_t r = 0; r < g.B; ++r) {
    uint32_t longest = 0;
    for (uint32_t l = 0; l < g.L; ++l) longest = std::max(longest, len(l, r));
    if (src[r].size() != longest) finding("harness: row %u's sources cover %zu of %u positions", r,
                                          src[r].size(), longest);
    for (uint32_t t = 0; t < longest; ++t) {
      const int32_t s = table ? now.table[size_t(r) * stride + t] : int32_t(r);
      if (s != src[r][t])
        finding("beam table: row %u position %u reads row %d, the shadow says row %d", r, t, s,
                src[r][t]);
    }
  }
  const size_t chunk = size_t(g.D) * g.es;
  for (uint32_t l = 0; l < g.L; ++l) {
    const kvc_stateful_view_t& v = now.views[l];
    const unsigned char* buf = now.bufs[l].data();
    const uint64_t kv_off = uint64_t(g.B) * v.row_stride;
    for (uint32_t r = 0; r < g.B; ++r) {
      const std::vector<unsigned char>& want = hist[l][r];
      for (uint32_t t = 0; t < len(l, r); ++t) {
        const uint32_t s = uint32_t(src[r][t]);
        for (uint32_t k = 0; k < g.kv; ++k)
          for (uint32_t hd = 0; hd < g.heads[l]; ++hd) {
            const unsigned char* got =
                buf + s * v.row_stride + k * kv_off + hd * v.head_stride + t * v.token_stride;
            const unsigned char* exp = want.data() + t * g.pos_bytes(l) + (k * g.heads[l] + hd) * chunk;
            if (std::memcmp(got, exp, chunk) != 0)
              finding("layer %u row %u position %u (read from row %u) %s head %u: K/V bytes differ "
                      "from the shadow's", l, r, t, s, k ? "V" : "K", hd);
          }
      }
    }
  }
}

}  // namespace kvc_fuzz
