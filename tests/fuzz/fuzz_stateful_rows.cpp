// The stateful program's row states: export (learning the size, buffers
// too small, exact and larger) checked byte for byte against the shadow,
// and import of saved states, from this cache or the other, whole or
// damaged (wrong sizes, header bytes, payload bytes, another geometry).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "fuzz_feedback.h"
#include "fuzz_stateful.h"

namespace kvc_fuzz {

namespace {

// Payload bytes of a row of `length` positions (the header's "each layer's
// K then V in the cache's layout with capacity = length").
uint64_t payload_bytes(const StGeometry& g, uint32_t length) {
  uint64_t n = 0;
  for (uint32_t l = 0; l < g.L; ++l) n += uint64_t(length) * g.pos_bytes(l);
  return n;
}

// Byte i of the payload as a (layer, position, offset in the shadow's
// position) triple, walking the saved layout; calls f for every chunk.
template <class F>
void walk_payload(const StGeometry& g, uint32_t length, F&& f) {
  const size_t chunk = size_t(g.D) * g.es;
  uint64_t at = 0;
  for (uint32_t l = 0; l < g.L; ++l) {
    const uint32_t H = g.heads[l];
    for (uint32_t k = 0; k < g.kv; ++k)
      for (uint32_t a = 0; a < (g.layout == KVC_LAYOUT_HND ? H : length); ++a)
        for (uint32_t b = 0; b < (g.layout == KVC_LAYOUT_HND ? length : H); ++b) {
          const uint32_t h = g.layout == KVC_LAYOUT_HND ? a : b, t = g.layout == KVC_LAYOUT_HND ? b : a;
          f(l, size_t(t) * g.pos_bytes(l) + (size_t(k) * H + h) * chunk, at, chunk);
          at += chunk;
        }
  }
}

}  // namespace

std::vector<unsigned char> StProgram::export_state(StModel& m, uint32_t row) {
  const uint8_t f = in_.u8();
  const StGeometry& g = m.g;
  const bool bad_row = row >= g.B;
  const bool equal = m.equal_layers();
  const uint32_t length = bad_row ? 0 : m.len(0, row);
  const uint64_t payload = payload_bytes(g, length);
  uint64_t want = m.header_bytes == 0 ? 0 : m.header_bytes + payload;
  // Buffer: to learn the size (capacity 0, NULL), one byte short, exact, larger.
  const uint32_t mode = f % 4;
  const uint64_t guess = want != 0 ? want : 4096 + payload;
  uint64_t capacity = mode == 0 ? 0 : mode == 1 ? (want != 0 ? want - 1 : 16) : mode == 2 ? guess : guess + 16;
  std::vector<unsigned char> buf(capacity + 16, 0xA5);
  void* bp = mode == 0 ? nullptr : buf.data();
  uint64_t size = 0x5A5A5A5A;
  uint64_t* sp = &size;
  bool invalid = bad_row;
  if (f >= 0xF0) {
    if (f & 4) sp = nullptr;
    else bp = nullptr, capacity = guess;
    invalid = true;
  }
  Expect e;
  if (invalid) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!bad_row && sp != nullptr && !equal) e.allow(KVC_ERR_INVALID_STATE);
  if (!invalid && equal) {
    if (want == 0) e.allow(KVC_ERR_BUFFER_TOO_SMALL).allow(KVC_OK);  // the size not learned yet
    else e.allow(capacity < want ? KVC_ERR_BUFFER_TOO_SMALL : KVC_OK);
  }
  if (g_trace) std::printf("cache %zu: export row %u, capacity %llu%s%s\n", cur_, row,
                           (unsigned long long)capacity, bp ? "" : " NULL buffer", sp ? "" : " NULL size");
  const kvc_status_t st = m.call("kvc_stateful_export_row", e, true, 0, [&] {
    return kvc_stateful_export_row(m.h, row, bp, capacity, sp, nullptr);
  });
  if (st == KVC_OK || st == KVC_ERR_BUFFER_TOO_SMALL) {
    if (m.header_bytes == 0) {
      if (size <= payload || size - payload > 4096)
        finding("export of row %u: size %llu for %llu payload bytes", row,
                (unsigned long long)size, (unsigned long long)payload);
      m.header_bytes = size - payload;
      want = size;
    }
    if (size != want)
      finding("export of row %u (length %u): size %llu, expected %llu", row, length,
              (unsigned long long)size, (unsigned long long)want);
  } else if (size != 0x5A5A5A5A) {
    finding("export of row %u failed with %s but wrote size", row, kvc_status_string(st));
  }
  if (st != KVC_OK) {
    for (unsigned char b : buf)
      if (b != 0xA5) finding("export of row %u failed with %s but wrote the buffer", row, kvc_status_string(st));
    return {};
  }
  for (uint64_t i = want; i < buf.size(); ++i)
    if (buf[i] != 0xA5) finding("export of row %u wrote byte %llu past its %llu bytes", row,
                                (unsigned long long)i, (unsigned long long)want);
  const unsigned char* p = buf.data() + m.header_bytes;
  walk_payload(g, length, [&](uint32_t l, size_t off, uint64_t at, size_t chunk) {
    if (std::memcmp(p + at, m.hist[l][row].data() + off, chunk) != 0)
      finding("export of row %u: layer %u bytes at payload offset %llu differ from the shadow's",
              row, l, (unsigned long long)at);
  });
  buf.resize(want);
  return buf;
}

void StProgram::export_row() {
  StModel& m = c();
  const uint8_t r = in_.u8();
  const uint32_t row = r >= 0xF8 ? (r & 1 ? UINT32_MAX : m.g.B) : r % m.g.B;
  std::vector<unsigned char> bytes = export_state(m, row);
  if (bytes.empty()) return;
  SavedState s{m.g, m.len(0, row), m.header_bytes, std::move(bytes)};
  if (saved_.size() < 6) saved_.push_back(std::move(s));
  else saved_[nonce_ % 6] = std::move(s);
}

void StProgram::import_row() {
  StModel& m = c();
  const StGeometry& g = m.g;
  const uint8_t f = in_.u8(), r = in_.u8(), mut = in_.u8();
  SavedState s;
  bool junk = false;
  if (!saved_.empty() && f % 4 != 3) {
    s = saved_[in_.below(uint32_t(saved_.size()))];
  } else {
    // A fresh state of one of this cache's rows (its export may fail).
    const uint32_t from = in_.below(g.B);
    s.bytes = export_state(m, from);
    junk = s.bytes.empty();
    if (junk) s.bytes.assign(64 + in_.below(64), 0);  // not a state
    s.g = g;
    s.length = junk ? 0 : m.len(0, from);
    s.header = junk ? 0 : m.header_bytes;
  }
  const uint32_t row = r >= 0xF8 ? (r & 1 ? UINT32_MAX : g.B) : r % g.B;
  std::vector<unsigned char>& b = s.bytes;
  bool valid_state = !junk && s.header != 0 && b.size() == s.header + payload_bytes(s.g, s.length) &&
                     g.same_state_format(s.g);
  bool either = false;
  bool null = false;
  uint64_t size = b.size();
  const uint32_t kind = mut % 16;
  // The saved format (stateful/state_format.cpp): magic, version, the
  // geometry, the length in [0, 36), reserved [36, 40), the total bytes
  // [40, 48), then num_layers kv heads and padding. Any change but to the
  // reserved bytes and the padding is refused.
  if (kind == 8 && size > 0) size -= 1, valid_state = false;
  else if (kind == 9) b.push_back(0), size += 1, valid_state = false;
  else if (kind == 10 && s.header != 0) {
    const uint64_t at = in_.below(uint32_t(s.header));
    b[at] ^= uint8_t(1 + (mut >> 4));
    if (at < 36 || (at >= 40 && at < 48 + 4ull * s.g.L)) valid_state = false;
    else either = valid_state;
  } else if (kind == 11 && s.header != 0 && b.size() > s.header) {
    b[s.header + in_.below(uint32_t(b.size() - s.header))] ^= uint8_t(1 + (mut >> 4));
  } else if (kind == 12) {
    null = true;
  } else if (kind == 13) {
    size = 0, valid_state = false;
  } else if (kind == 14 && s.header != 0 && b.size() > s.header) {
    size = s.header, valid_state = false;
  } else if (kind == 15) {
    std::fill(b.begin(), b.end(), 0), valid_state = false;
  }
  const unsigned char* bp = null ? nullptr : b.data();
  const bool bad = row >= g.B || bp == nullptr || !valid_state || s.length > g.max_length;
  const bool equal = m.equal_layers();
  const bool exact = row < g.B && m.read_by_other_any(row);
  Expect e;
  if (bad || either) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!bad && (!equal || exact)) e.allow(KVC_ERR_INVALID_STATE);
  if (!bad && equal && !exact) e.allow(KVC_OK);
  uint32_t allocs = 0;
  for (uint32_t l = 0; l < g.L; ++l) allocs += s.length > m.cap[l];
  const bool table_grows = m.table && s.length > m.table_stride();
  allocs += table_grows;
  if (g_trace) std::printf("cache %zu: import into row %u a state of %u positions, %llu bytes, "
                           "damage %u%s\n", cur_, row, s.length, (unsigned long long)size,
                           kind < 8 ? 0 : kind, exact ? ", a row reads it" : "");
  const kvc_status_t st = m.call("kvc_stateful_import_row", e, false, allocs,
                                 [&] { return kvc_stateful_import_row(m.h, row, bp, size, nullptr); });
  feedback(kStBeams, 128 + exact, uint32_t(-st) % 16);
  if (st != KVC_OK) return;
  StChange ch;
  ch.may_move = true;
  ch.table_alloc = table_grows;
  for (uint32_t l = 0; l < g.L; ++l) {
    const uint64_t grown = m.grow(l, s.length);
    if (grown > 0) ch.grown.push_back(grown);
    m.hist[l][row].assign(size_t(s.length) * g.pos_bytes(l), 0);
  }
  walk_payload(g, s.length, [&](uint32_t l, size_t off, uint64_t at, size_t chunk) {
    std::memcpy(m.hist[l][row].data() + off, b.data() + s.header + at, chunk);
  });
  m.src[row].assign(s.length, int32_t(row));
  m.settle(ch);
}

}  // namespace kvc_fuzz
