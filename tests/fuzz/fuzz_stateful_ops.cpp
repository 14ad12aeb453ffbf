// The stateful program's changes: append (a step over every layer, or one
// layer with hostile arguments), reorder, trim, reset and compaction, each
// with the statuses the header allows and the shadow updated on success.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "fuzz_feedback.h"
#include "fuzz_stateful.h"

namespace kvc_fuzz {

// New tokens for every layer: 1-4 per row mostly, sometimes a prompt, and
// rows that append nothing or fewer; a beam step reorders first.
void StProgram::step(bool beam) {
  StModel& m = c();
  if (beam) reorder();
  const uint8_t f = in_.u8();
  uint32_t n = 1 + f % 4;
  if ((f >> 2) % 8 == 7) n = 1 + in_.below(12);
  std::vector<uint32_t> rows;
  if ((f >> 5) % 4 == 3)
    for (uint32_t r = 0; r < m.g.B; ++r) rows.push_back(in_.below(n + 1));
  const uint8_t hostile = (f >> 7) ? in_.u8() : 0;
  // Mostly tokens that fit: rows at max_length are trimmed or emptied
  // first (as an engine would), else the step is cut to the room left.
  if (!(f & 0x40)) {
    uint32_t longest = 0, shortest = UINT32_MAX;
    for (uint32_t l = 0; l < m.g.L; ++l)
      for (uint32_t r = 0; r < m.g.B; ++r)
        longest = std::max(longest, m.len(l, r)), shortest = std::min(shortest, m.len(l, r));
    if (longest >= m.g.max_length) {
      if (m.equal_layers() && shortest > 0 && (f & 0x20))
        do_trim(KVC_STATEFUL_ALL_ROWS, 1 + in_.below(shortest));
      else
        do_reset(f & 0x10);
      longest = 0;
      for (uint32_t l = 0; l < m.g.L; ++l) longest = std::max(longest, m.max_len(l));
    }
    if (longest < m.g.max_length) n = std::min(n, m.g.max_length - longest);
  }
  for (uint32_t l = 0; l < m.g.L; ++l)
    if (append(l, n, rows.empty() ? nullptr : &rows, l + 1 == m.g.L ? hostile : 0) != KVC_OK) break;
}

void StProgram::append_one() {
  const uint8_t f = in_.u8(), l = in_.u8();
  uint32_t n = f % 5;
  std::vector<uint32_t> rows;
  if ((f >> 3) & 1)
    for (uint32_t r = 0; r < c().g.B; ++r) rows.push_back(in_.below(n + 1));
  append(l % 4 == 3 ? c().g.L + l / 4 : l % c().g.L, n, rows.empty() ? nullptr : &rows, in_.u8());
}

kvc_status_t StProgram::append(uint32_t layer, uint32_t n, const std::vector<uint32_t>* rows,
                               uint8_t hostile) {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint32_t l = layer < g.L ? layer : 0;
  const uint32_t H = g.heads[l], D = g.D, B = g.B;
  const uint8_t f = in_.u8();
  // An fp8 cache also takes float K/V, stored as x / scale.
  kvc_dtype_t sd = g.dtype;
  if (g.dtype == KVC_DTYPE_FP8_E4M3 && (f & 3) != 0)
    sd = f % 4 == 1 ? KVC_DTYPE_F32 : f % 4 == 2 ? KVC_DTYPE_F16 : KVC_DTYPE_BF16;
  const bool convert = sd != g.dtype;
  static const float kScales[4] = {1.0f, 2.0f, 0.5f, 4.0f};
  const float ks = convert ? kScales[(f >> 2) & 3] : 1.0f, vs = convert ? kScales[(f >> 4) & 3] : 1.0f;
  const bool raw = !convert && (f >> 6) == 3;  // any bytes (NaN, inf): stored as they are
  const size_t ses = st_dtype_size(sd), chunk = size_t(D) * ses;
  const uint32_t nn = std::min<uint32_t>(n, 64);  // a huge hostile count reads nothing
  std::vector<unsigned char> key(size_t(B) * nn * H * chunk + 1, 0xEE), value(key.size(), 0xEE);
  // stored[k][r][j][h]: the bytes the cache must hold (the cache dtype).
  const size_t schunk = size_t(D) * g.es;
  std::vector<unsigned char> stored(size_t(2) * B * nn * H * schunk);
  for (uint32_t k = 0; k < g.kv; ++k)
    for (uint32_t r = 0; r < B; ++r)
      for (uint32_t j = 0; j < nn; ++j)
        for (uint32_t h = 0; h < H; ++h) {
          const size_t e = g.layout == KVC_LAYOUT_HND ? ((size_t(r) * H + h) * nn + j)
                                                      : ((size_t(r) * nn + j) * H + h);
          unsigned char* in = (k ? value : key).data() + e * chunk;
          unsigned char* out = stored.data() + (((size_t(k) * B + r) * nn + j) * H + h) * schunk;
          for (uint32_t d = 0; d < D; ++d) {
            const uint32_t w = rand32();
            if (raw) {
              for (size_t b = 0; b < g.es; ++b) in[d * g.es + b] = uint8_t(w >> (8 * b));
            } else if (convert) {
              st_moderate(out, g.dtype, d, w);
              st_store_exact(in, sd, d, st_load(out, g.dtype, d) * (k ? vs : ks));
              continue;
            } else {
              st_moderate(in, sd, d, w);
            }
          }
          if (!convert) std::memcpy(out, in, schunk);
        }
  kvc_stateful_append_args_t a;
  kvc_stateful_append_args_init(&a);
  a.layer = layer;
  a.num_tokens = n;
  a.src_dtype = sd;
  a.key = key.data();
  a.value = g.kv == 2 ? value.data() : nullptr;
  a.row_tokens = rows != nullptr ? rows->data() : nullptr;
  a.k_scale = ks;
  a.v_scale = vs;
  std::vector<uint32_t> bad_rows;
  struct Long {
    kvc_stateful_append_args_t a;
    uint64_t tail;
  } lo{a, 0};
  const kvc_stateful_append_args_t* ap = &a;
  // What the header makes of the arguments.
  bool invalid = layer >= g.L, either = false;
  switch (hostile % 16) {
    case 0: case 1: case 2: case 3: case 4: case 5: break;  // none
    case 6:
      // Unknown, or another float than the cache's (an fp8 cache takes them all).
      if ((hostile & 0x10) || g.dtype == KVC_DTYPE_FP8_E4M3) a.src_dtype = hostile & 0x20 ? 99u : 0u;
      else a.src_dtype = g.dtype == KVC_DTYPE_F32 ? KVC_DTYPE_F16 : g.dtype == KVC_DTYPE_F16 ? KVC_DTYPE_BF16 : KVC_DTYPE_F32;
      invalid = true;
      break;
    case 7:
      if (g.kv == 2) a.value = nullptr, invalid = invalid || n > 0, either = n == 0;
      else a.value = key.data(), invalid = true;
      break;
    case 8: a.key = nullptr; invalid = invalid || n > 0; break;
    case 9: {
      static const float kBad[4] = {0.0f, -1.0f, NAN, INFINITY};
      (hostile & 0x10 ? a.v_scale : a.k_scale) = kBad[(hostile >> 5) & 3];
      if (convert && n > 0 && (g.kv == 2 || !(hostile & 0x10))) invalid = true;
      else either = true;  // a scale the call does not use
      break;
    }
    case 10:
      bad_rows.assign(B, 0);
      bad_rows[(hostile >> 4) % B] = n + 1 + (hostile >> 7) * 0x7fffffffu;
      a.row_tokens = bad_rows.data();
      invalid = true;
      either = n == 0;  // num_tokens 0 is a no-op
      break;
    case 11: a.struct_size = hostile & 0x10 ? 3 : 0; invalid = true; break;
    case 12:
      lo.a = a;
      lo.a.struct_size = sizeof lo;
      lo.tail = hostile & 0x10 ? 1 : 0;
      ap = &lo.a;
      invalid = invalid || lo.tail != 0;
      break;
    case 13:
      // Shorter struct_size: the scales (past it) take their default, 1.
      if (!convert) {
        a.struct_size = offsetof(kvc_stateful_append_args_t, k_scale);
        a.k_scale = a.v_scale = NAN;
      }
      break;
    case 14: ap = nullptr; invalid = true; break;
    default:
      // A count past max_length that no row uses: refused all the same.
      a.num_tokens = g.max_length + 1 + (hostile >> 7) * 0x7fffff00u;
      bad_rows.assign(B, 0);
      a.row_tokens = bad_rows.data();
      break;
  }
  if (ap != nullptr && ap->num_tokens > g.max_length) invalid = true;
  const uint32_t num = ap == nullptr ? 0 : ap->num_tokens;
  const uint32_t* cnt = ap == nullptr ? nullptr : ap->row_tokens;
  // Rows are checked in order after the other arguments: a row count above
  // num_tokens or past max_length (INVALID_ARGUMENT) and a write over a
  // position another row reads (INVALID_STATE, exactly then) may each be
  // met first.
  Expect e;
  uint32_t need = 0;
  bool bad_row = hostile % 16 == 10 && layer < g.L, conflict = false;
  if (!invalid || bad_row) {
    for (uint32_t r = 0; r < B; ++r) {
      const uint32_t k = cnt != nullptr ? cnt[r] : num;
      if (k == 0 || k > num) continue;
      const uint32_t pos = m.len(l, r);
      if (uint64_t(pos) + k > g.max_length) bad_row = invalid = true;
      need = std::max(need, pos + k);
      if (m.read_by_other(l, r, pos, pos + k)) conflict = true;
    }
  }
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (conflict && (!invalid || bad_row)) e.allow(KVC_ERR_INVALID_STATE);
  if (!invalid && !conflict) e.allow(KVC_OK);
  if (either) e.allow(KVC_OK).allow(KVC_ERR_INVALID_ARGUMENT);
  const bool grows = need > m.cap[l], table_grows = m.table && need > m.table_stride();
  if (g_trace)
    std::printf("cache %zu: append layer %u, %u tokens%s, src dtype %u, scales %g/%g, hostile %u%s\n",
                cur_, layer, num, cnt ? " (per row)" : "", a.src_dtype, double(a.k_scale),
                double(a.v_scale), hostile % 16, conflict ? ", overwrites a read row" : "");
  // num_tokens 0 is a no-op: checked to change nothing.
  const kvc_status_t st = m.call("kvc_stateful_append", e, num == 0, grows + table_grows,
                                 [&] { return kvc_stateful_append(m.h, ap, nullptr); });
  feedback(kStBeams, 64 + conflict, uint32_t(-st) % 16);
  if (st != KVC_OK || num == 0) return st;
  feedback(kStGrowth, l * 4 + (need > m.cap[l]) * 2 + table_grows, cnt ? 1 : bucket(num));
  StChange ch;
  ch.may_move = true;
  ch.table_alloc = table_grows;
  if (need > 0) {
    const uint64_t b = m.grow(l, need);
    if (b > 0) ch.grown.push_back(b);
  }
  for (uint32_t r = 0; r < B; ++r) {
    const uint32_t k = cnt != nullptr ? cnt[r] : num;
    if (k == 0) continue;
    const uint32_t pos = m.len(l, r);
    std::vector<unsigned char>& hr = m.hist[l][r];
    for (uint32_t j = 0; j < k; ++j)
      for (uint32_t kk = 0; kk < g.kv; ++kk)
        for (uint32_t h = 0; h < H; ++h) {
          const unsigned char* s = stored.data() + (((size_t(kk) * B + r) * nn + j) * H + h) * schunk;
          hr.insert(hr.end(), s, s + schunk);
        }
    if (m.src[r].size() < pos + k) m.src[r].resize(pos + k);
    std::fill(m.src[r].begin() + pos, m.src[r].begin() + pos + k, int32_t(r));
  }
  m.settle(ch);
  return st;
}

// beam_idx: the identity, one source for all, a random choice of few
// sources, a rotation; hostile: a wrong count, NULL, an entry out of range.
void StProgram::reorder() {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint8_t f = in_.u8();
  std::vector<int32_t> idx(g.B + 1);
  const uint32_t one = in_.below(g.B);
  for (uint32_t b = 0; b < g.B; ++b) {
    switch (f % 4) {
      case 0: idx[b] = int32_t(b); break;
      case 1: idx[b] = int32_t(one); break;
      case 2: idx[b] = int32_t(in_.below(1 + (f >> 2) % g.B)); break;
      default: idx[b] = int32_t((b + one) % g.B); break;
    }
  }
  if (f % 4 == 0 && (f >> 2) % 4 == 1) idx[in_.below(g.B)] = int32_t(in_.below(g.B));
  uint32_t count = g.B;
  const int32_t* p = idx.data();
  bool invalid = false;
  if (f >= 0xF0) {
    const int32_t bad[4] = {-1, int32_t(g.B), INT32_MIN, INT32_MAX};
    switch (f & 3) {
      case 0: count = (f & 4) ? g.B + 1 : g.B - 1; break;
      case 1: p = nullptr; break;
      default: idx[in_.below(g.B)] = bad[(f >> 2) & 3]; break;
    }
    invalid = count != g.B || p == nullptr ||
              std::any_of(idx.begin(), idx.begin() + g.B, [&](int32_t v) { return v < 0 || v >= int32_t(g.B); });
  }
  bool identity = true;
  for (uint32_t b = 0; b < g.B; ++b) identity = identity && idx[b] == int32_t(b);
  const bool equal = m.equal_layers();
  Expect e;
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  else if (!equal) e.allow(KVC_ERR_INVALID_STATE);
  else e.allow(KVC_OK);
  if (!invalid && !equal && identity) e.allow(KVC_OK);  // "the identity does nothing"
  const bool creates = !invalid && equal && !identity && !m.table;
  if (g_trace) {
    std::printf("cache %zu: reorder count %u%s {", cur_, count, p ? "" : " NULL");
    for (uint32_t b = 0; b < g.B; ++b) std::printf("%s%d", b ? "," : "", idx[b]);
    std::printf("}\n");
  }
  // The identity does nothing: checked to change nothing.
  const kvc_status_t st = m.call("kvc_stateful_reorder", e, identity, creates,
                                 [&] { return kvc_stateful_reorder(m.h, p, count, nullptr); });
  if (st != KVC_OK || identity) return;
  std::vector<int32_t> sources(idx.begin(), idx.begin() + g.B);
  std::sort(sources.begin(), sources.end());
  const uint32_t distinct = uint32_t(std::unique(sources.begin(), sources.end()) - sources.begin());
  feedback(kStBeams, distinct * 2 + m.table, bucket(m.max_len(0)));
  StChange ch;
  ch.table_alloc = creates;
  m.table = true;
  const auto hist = m.hist;
  const auto src = m.src;
  for (uint32_t b = 0; b < g.B; ++b) {
    const uint32_t s = uint32_t(idx[b]);
    for (uint32_t l = 0; l < g.L; ++l) m.hist[l][b] = hist[l][s];
    m.src[b] = src[s];
    if (s != b) ch.copied_bound += hist[0][s].size() / g.pos_bytes(0);
  }
  ++m.reorders;
  m.settle(ch);
}

void StProgram::trim() {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint8_t f = in_.u8(), k = in_.u8();
  uint32_t row = f % 4 == 3 ? KVC_STATEFUL_ALL_ROWS : in_.below(g.B);
  if (f >= 0xF8) row = g.B + (f & 1) * 1000;
  const uint32_t first = row == KVC_STATEFUL_ALL_ROWS ? 0 : row;
  const uint32_t last = row == KVC_STATEFUL_ALL_ROWS ? g.B : std::min(row + 1, g.B);
  uint32_t shortest = UINT32_MAX;
  for (uint32_t r = first; r < last; ++r) shortest = std::min(shortest, m.len(0, r));
  if (shortest == UINT32_MAX) shortest = 0;
  uint32_t n = shortest == 0 ? 0 : 1 + k % shortest;
  if (k >= 0xF0) n = shortest + 1 + (k & 1) * 0x7fffffffu;  // more than a row has
  else if (k >= 0xE0) n = 0;
  do_trim(row, n);
}

void StProgram::do_trim(uint32_t row, uint32_t n) {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint32_t first = row == KVC_STATEFUL_ALL_ROWS ? 0 : row;
  const uint32_t last = row == KVC_STATEFUL_ALL_ROWS ? g.B : std::min(row + 1, g.B);
  uint32_t shortest = UINT32_MAX;
  for (uint32_t r = first; r < last; ++r) shortest = std::min(shortest, m.len(0, r));
  if (shortest == UINT32_MAX) shortest = 0;
  const bool bad_row = row != KVC_STATEFUL_ALL_ROWS && row >= g.B;
  const bool too_many = !bad_row && n > shortest;
  const bool equal = m.equal_layers();
  Expect e;
  if (bad_row) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!bad_row && !equal) e.allow(KVC_ERR_INVALID_STATE);
  if (too_many) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!bad_row && equal && !too_many) e.allow(KVC_OK);
  if (g_trace) std::printf("cache %zu: trim row %u by %u\n", cur_, row, n);
  const kvc_status_t st = m.call("kvc_stateful_trim", e, n == 0, 0,
                                 [&] { return kvc_stateful_trim(m.h, row, n, nullptr); });
  if (st != KVC_OK || n == 0) return;
  for (uint32_t r = first; r < last; ++r) {
    const uint32_t keep = m.len(0, r) - n;
    for (uint32_t l = 0; l < g.L; ++l) m.hist[l][r].resize(size_t(keep) * g.pos_bytes(l));
    m.src[r].resize(keep);
  }
  m.settle(StChange{});
}

void StProgram::reset() { do_reset(in_.u8() & 1); }

void StProgram::do_reset(bool release) {
  StModel& m = c();
  if (g_trace) std::printf("cache %zu: reset%s\n", cur_, release ? " releasing memory" : "");
  m.call("kvc_stateful_reset", Expect().allow(KVC_OK), false, 0,
         [&] { return kvc_stateful_reset(m.h, release, nullptr); });
  for (auto& layer : m.hist)
    for (auto& row : layer) row.clear();
  for (auto& row : m.src) row.clear();
  m.table = false;
  if (release) std::fill(m.cap.begin(), m.cap.end(), 0);
  StChange ch;
  ch.may_move = true;
  m.settle(ch);
}

void StProgram::compact() {
  StModel& m = c();
  const bool equal = m.equal_layers();
  Expect e;
  e.allow(!m.table || equal ? KVC_OK : KVC_ERR_INVALID_STATE);
  uint64_t scratch = 0;
  for (uint32_t l = 0; l < m.g.L; ++l) scratch = std::max(scratch, m.g.layer_bytes(l, m.cap[l]));
  const bool gathers = m.table && equal;
  if (g_trace) std::printf("cache %zu: compact%s\n", cur_, m.table ? "" : " (no table)");
  const kvc_status_t st = m.call("kvc_stateful_compact", e, !gathers, gathers && scratch > 0,
                                 [&] { return kvc_stateful_compact(m.h, nullptr); });
  if (st != KVC_OK || !gathers) return;
  for (uint32_t r = 0; r < m.g.B; ++r) std::fill(m.src[r].begin(), m.src[r].end(), int32_t(r));
  m.table = false;
  ++m.compactions;
  StChange ch;
  ch.may_move = true;
  ch.scratch = scratch;
  m.settle(ch);
}

}  // namespace kvc_fuzz
