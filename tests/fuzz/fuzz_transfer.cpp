// The program's block-transfer operations (kvcache/transfer.h): export a
// sequence's committed blocks (held, in use, at their positions and with
// their bytes until released; fuzz_model.cpp checks that after every call),
// query an export with hostile buffers, release one, and import one into
// the receiver: a second cache of the same configuration (the twin, made by
// the first import), so that the import's blocks are fresh and the bytes
// the harness copies into them (memcpy through the layer views, as the CPU
// transport of tests/c/test_transfer.c) are what a later add reuses. A blob
// with a token flipped, another salt, truncated or with a byte flipped, and
// receiver tokens short of the blob, are refused and change nothing.
#include "fuzz_ops.h"

#include "fuzz_emit.h"
#include "fuzz_feedback.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kvc_fuzz {

namespace {

constexpr size_t kMaxExports = 4;
constexpr unsigned char kFill = 0xCD;
kvc_export_t* const kExportSentinel = reinterpret_cast<kvc_export_t*>(uintptr_t(0xDEAD0));
kvc_import_t* const kImportSentinel = reinterpret_cast<kvc_import_t*>(uintptr_t(0xBEEF0));

void must_direct(kvc_status_t st, kvc_status_t want, const char* what) {
  ++g_count.calls;
  if (st != want)
    finding("%s returned %s, expected %s: %s", what, kvc_status_string(st), kvc_status_string(want),
            st == KVC_OK ? "" : kvc_last_error_message());
}

uint64_t keys_size_of(uint64_t blocks, uint32_t T) { return 32 + 4 * blocks * T + 40 * blocks + 8; }

void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void trace(const char* fmt, ...) {
  if (!g_trace) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
}

// The receiver's options for "another salt": the digests differ from any
// scope the decoder makes.
const kvc_sequence_options_t* other_salt() {
  static kvc_sequence_options_t o;
  static const char salt[] = "\xfe kvc fuzz: another salt";
  kvc_sequence_options_init(&o);
  o.salt = salt;
  o.salt_size = sizeof(salt) - 1;
  return &o;
}

}  // namespace

void Program::transfer(uint8_t f) {
  if (emitting()) emit_line("/* a block-transfer operation (not written to the reproducer) */");
  switch (f % 8) {
    case 0: case 1: case 2: export_sequence(); break;
    case 3: case 4: case 5: import_blocks(); break;
    case 6: release_export(); break;
    default: query_export(); break;
  }
}

CacheModel& Program::receiver() {
  CacheModel& m = c();
  if (m.twin) return *m.twin;
  std::string dir;
  if (!m.disk_dir.empty()) {
    char d[] = "/tmp/kvc-fuzz-disk-XXXXXX";
    if (mkdtemp(d) == nullptr) finding("mkdtemp: %s", std::strerror(errno));
    dir = d;
    ++g_count.check_calls;
    if (kvc_config_set_disk_cache(m.config, d, m.disk_bytes) != KVC_OK)
      finding("kvc_config_set_disk_cache for the receiver: %s", kvc_last_error_message());
  }
  m.twin = std::make_unique<CacheModel>(m.index + 2, m.config, m.host, m.manual_clock, m.block_reuse,
                                        m.events);
  m.twin->disk_dir = dir;
  return *m.twin;
}

// describe, block ids and keys of a held export, with buffers too small,
// exact and larger, NULLs and a group out of range: each reads only.
void Program::check_export_queries(CacheModel& m, ExportModel& e, uint64_t keys_bytes) {
  const uint64_t N = e.num_blocks;
  set_current(m.index, "kvc_export_describe");
  kvc_transfer_desc_t d;
  std::memset(&d, kFill, sizeof d);
  d.struct_size = sizeof d;
  Expect ok, bad, small;
  ok.allow(KVC_OK);
  bad.allow(KVC_ERR_INVALID_ARGUMENT);
  small.allow(KVC_ERR_BUFFER_TOO_SMALL);
  m.call("kvc_export_describe", ok, true, [&] { return kvc_export_describe(e.handle, &d); });
  if (d.struct_size != sizeof d || d.num_groups != m.num_groups || d.tokens_per_block != m.T ||
      d.reserved != 0 || d.seq_id != e.seq_id || d.num_blocks != N || d.first_block != 0 ||
      d.num_tokens != N * m.T || d.keys_bytes != keys_bytes)
    finding("kvc_export_describe: groups %u T %u seq %llu blocks %llu first %llu tokens %llu keys "
            "%llu; expected %u %u %llu %llu 0 %llu %llu", d.num_groups, d.tokens_per_block,
            (unsigned long long)d.seq_id, (unsigned long long)d.num_blocks,
            (unsigned long long)d.first_block, (unsigned long long)d.num_tokens,
            (unsigned long long)d.keys_bytes, m.num_groups, m.T, (unsigned long long)e.seq_id,
            (unsigned long long)N, (unsigned long long)(N * m.T), (unsigned long long)keys_bytes);
  m.call("kvc_export_describe(NULL out)", bad, true, [&] { return kvc_export_describe(e.handle, nullptr); });
  m.call("kvc_export_describe(NULL)", bad, true, [&] { return kvc_export_describe(nullptr, &d); });

  set_current(m.index, "kvc_export_block_ids");
  for (uint32_t g = 0; g <= m.num_groups; ++g) {
    std::vector<int32_t> ids(N + 2, -9);
    size_t count = 12345;
    if (g == m.num_groups) {  // out of range
      m.call("kvc_export_block_ids(group = num_groups)", bad, true,
             [&] { return kvc_export_block_ids(e.handle, g, ids.data(), ids.size(), &count); });
      break;
    }
    m.call("kvc_export_block_ids(NULL, 0)", small, true,
           [&] { return kvc_export_block_ids(e.handle, g, nullptr, 0, &count); });
    if (count != N) finding("kvc_export_block_ids with no room: count %zu, %llu blocks", count, (unsigned long long)N);
    count = 12345;
    m.call("kvc_export_block_ids(one short)", small, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), N - 1, &count); });
    if (count != N || ids[0] != -9) finding("kvc_export_block_ids one short: count %zu, ids written", count);
    m.call("kvc_export_block_ids(NULL count)", bad, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), ids.size(), nullptr); });
    m.call("kvc_export_block_ids", ok, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), N + 1, &count); });
    if (count != N || ids[N] != -9 || ids[N + 1] != -9)
      finding("kvc_export_block_ids: count %zu of %llu, or wrote past them", count, (unsigned long long)N);
    ids.resize(N);
    if (e.ids[g] != ids) finding("kvc_export_block_ids of group %u changed while the export is held", g);
  }

  set_current(m.index, "kvc_export_keys");
  size_t size = 12345;
  m.call("kvc_export_keys(NULL, 0)", small, true, [&] { return kvc_export_keys(e.handle, nullptr, 0, &size); });
  if (size != keys_bytes) finding("kvc_export_keys sized %zu, describe says %llu", size, (unsigned long long)keys_bytes);
  std::vector<unsigned char> buf(keys_bytes + 8, kFill);
  size = 12345;
  m.call("kvc_export_keys(one short)", small, true,
         [&] { return kvc_export_keys(e.handle, buf.data(), keys_bytes - 1, &size); });
  if (size != keys_bytes || std::count(buf.begin(), buf.end(), kFill) != long(buf.size()))
    finding("kvc_export_keys one byte short: size %zu, or the buffer written", size);
  m.call("kvc_export_keys(NULL size)", bad, true,
         [&] { return kvc_export_keys(e.handle, buf.data(), buf.size(), nullptr); });
  m.call("kvc_export_keys(NULL)", bad, true, [&] { return kvc_export_keys(nullptr, buf.data(), buf.size(), &size); });
  m.call("kvc_export_keys", ok, true, [&] { return kvc_export_keys(e.handle, buf.data(), buf.size(), &size); });
  if (size != keys_bytes || buf[keys_bytes] != kFill)
    finding("kvc_export_keys: size %zu of %llu, or wrote past it", size, (unsigned long long)keys_bytes);
  buf.resize(keys_bytes);
  if (e.keys != buf) finding("kvc_export_keys changed while the export is held");
}

void Program::export_sequence() {
  CacheModel& m = c();
  // Mostly a sequence with a committed full block (else live_id()'s pick:
  // a live one, or an unknown id).
  uint64_t id = 0;
  const uint8_t pick = in_.u8();
  std::vector<uint64_t> ready;
  for (const auto& [k, q] : m.seqs)
    if (q.committed >= m.T) ready.push_back(k);
  if (!ready.empty() && pick < 0xC0) id = ready[pick % ready.size()];
  else id = live_id();
  const uint8_t f = in_.u8();
  const SeqModel* s = find(id);
  const uint64_t full = s ? s->committed / m.T : 0;
  uint64_t n = 0;
  bool null_out = false;
  switch (f % 8) {
    case 4: n = full > 0 ? (1 + (f >> 3) % full) * m.T : 0; break;  // a prefix of the blocks
    case 5: n = (full + 1) * m.T; break;                               // a block past them
    case 6: n = (f & 0x80) ? UINT64_MAX : full * m.T + 1; break;       // not block aligned
    case 7: null_out = true; break;
    default: break;  // 0: every committed full block
  }
  if (m.exports.size() >= kMaxExports) {  // bounded: the oldest goes first
    ++g_count.calls;
    kvc_export_release(m.exports.front().handle);
    ++g_count.exports_released;
    m.exports.erase(m.exports.begin());
    m.settle();
  }
  const uint64_t want = n == 0 ? full : n / m.T;
  Expect e;
  if (null_out) {
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  } else if (s == nullptr) {
    e.allow(KVC_ERR_NOT_FOUND);
  } else if (!m.block_reuse) {
    e.allow(KVC_ERR_UNSUPPORTED);
  } else if (n % m.T != 0 || n > full * m.T || want == 0) {
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  } else {
    e.allow(KVC_OK);
    // A fork sibling shares a committed block: it may not be published.
    if (s->shared) e.allow(KVC_ERR_INVALID_STATE);
    // A windowed group that released a block: it may have been evicted.
    for (uint32_t g = 0; g < m.num_groups; ++g)
      if (s->window_begin[g] > 0) e.allow(KVC_ERR_UNSUPPORTED);
  }
  set_current(m.index, "kvc_cache_export_sequence");
  kvc_export_t* h = kExportSentinel;
  const kvc_status_t st = m.call("kvc_cache_export_sequence", e, false, [&] {
    return kvc_cache_export_sequence(m.cache, id, n, null_out ? nullptr : &h);
  });
  trace("c%d export(id %llu, %llu tokens%s) -> %s\n", m.index, (unsigned long long)id,
        (unsigned long long)n, null_out ? ", NULL out" : "", kvc_status_string(st));
  if (st != KVC_OK) {
    if (h != kExportSentinel) finding("a refused export wrote *out");
    ++g_count.exports_refused;
    if (st == KVC_ERR_UNSUPPORTED && m.block_reuse) ++g_count.exports_unsupported;
    return;
  }
  ++g_count.exports_ok;
  ExportModel ex;
  ex.handle = h;
  ex.seq_id = id;
  ex.num_blocks = want;
  ex.tokens.assign(s->tokens.begin(), s->tokens.begin() + long(want * m.T));
  ex.opts = s->opts;
  ex.rows.assign(s->rows.begin(), s->rows.begin() + long(want * m.T * m.row_bytes()));
  // Its block ids and blob (the queries with hostile buffers follow).
  const SeqState& ss = m.last.seq(id);
  for (uint32_t g = 0; g < m.num_groups; ++g) {
    std::vector<int32_t> ids(want);
    size_t count = 0;
    ++g_count.check_calls;
    if (kvc_export_block_ids(h, g, ids.data(), ids.size(), &count) != KVC_OK || count != want)
      finding("kvc_export_block_ids of a new export: %s, count %zu of %llu", kvc_last_error_message(),
              count, (unsigned long long)want);
    // The exported blocks are those the sequence holds at those positions.
    for (uint64_t b = s->window_begin[g]; b < want; ++b)
      if (ss.ids[g][b] != ids[b])
        finding("export of sequence %llu: group %u position %llu is block %d, the sequence holds %d",
                (unsigned long long)id, g, (unsigned long long)b, ids[b], ss.ids[g][b]);
    ex.ids.push_back(std::move(ids));
  }
  const uint64_t keys_bytes = keys_size_of(want, m.T);
  ex.keys.assign(keys_bytes, 0);
  size_t size = 0;
  ++g_count.check_calls;
  if (kvc_export_keys(h, ex.keys.data(), ex.keys.size(), &size) != KVC_OK || size != keys_bytes)
    finding("kvc_export_keys of a new export: %s, %zu bytes, the format takes %llu",
            kvc_last_error_message(), size, (unsigned long long)keys_bytes);
  // The header's format: magic, version 1, T, N, then the tokens.
  uint32_t version = 0, tpb = 0;
  uint64_t nb = 0;
  std::memcpy(&version, &ex.keys[8], 4);
  std::memcpy(&tpb, &ex.keys[12], 4);
  std::memcpy(&nb, &ex.keys[24], 8);
  if (std::memcmp(ex.keys.data(), "KVCXFERK", 8) != 0 || version != 1 || tpb != m.T || nb != want ||
      std::memcmp(&ex.keys[32], ex.tokens.data(), 4 * want * m.T) != 0)
    finding("the key blob's header or tokens differ from the export's (version %u, T %u, blocks %llu)",
            version, tpb, (unsigned long long)nb);
  m.exports.push_back(std::move(ex));
  feedback(kTransfer, uint32_t(m.exports.size()), bucket(want));
  m.settle();  // verify() now knows the export's blocks: in use, in place, bytes kept
  check_export_queries(m, m.exports.back(), keys_bytes);
}

void Program::release_export() {
  CacheModel& m = c();
  const uint8_t b = in_.u8();
  set_current(m.index, "kvc_export_release");
  ++g_count.calls;
  if (m.exports.empty()) {
    kvc_export_release(nullptr);
    return;
  }
  const size_t i = b % m.exports.size();
  trace("c%d export_release(of sequence %llu)\n", m.index, (unsigned long long)m.exports[i].seq_id);
  kvc_export_release(m.exports[i].handle);
  ++g_count.exports_released;
  m.exports.erase(m.exports.begin() + long(i));
  m.settle();
}

void Program::query_export() {
  CacheModel& m = c();
  const uint8_t b = in_.u8();
  if (m.exports.empty()) return;
  ExportModel& e = m.exports[b % m.exports.size()];
  check_export_queries(m, e, e.keys.size());
}

void Program::import_blocks() {
  CacheModel& src = c();
  const uint8_t f = in_.u8(), v = in_.u8(), idb = in_.u8();
  const uint16_t at = uint16_t(in_.u16());
  CacheModel& dst = receiver();
  set_current(dst.index, "kvc_cache_import_begin");
  // The receiver's blocks freed by finished disk writes first, as add() does.
  if (!dst.disk_dir.empty()) {
    ++g_count.check_calls;
    if (kvc_cache_flush_tiers(dst.cache) != KVC_OK)
      finding("kvc_cache_flush_tiers: %s", kvc_last_error_message());
    dst.check_all();
  }
  if (src.exports.empty()) {  // a blob of the input's bytes: refused
    std::vector<unsigned char> blob(f % 64, 0);
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = uint8_t(at + i * 31);
    if (blob.size() >= 8) std::memcpy(blob.data(), "KVCXFERK", 8);
    const int32_t tokens[8] = {1, 2, 3, 0, 1, 2, 3, 0};
    Expect e;
    e.allow(KVC_ERR_INVALID_ARGUMENT);
    if (!dst.block_reuse && (v & 1) == 0) e.allow(KVC_ERR_UNSUPPORTED);
    kvc_import_t* imp = kImportSentinel;
    const kvc_status_t st = dst.call("kvc_cache_import_begin(a blob of the input)", e, false, [&] {
      return kvc_cache_import_begin(dst.cache, 100, tokens, 8, nullptr, (v & 1) ? nullptr : blob.data(),
                                    blob.size(), &imp);
    });
    if (imp != kImportSentinel) finding("a refused import wrote *out");
    ++g_count.imports_refused;
    (void)st;
    return;
  }
  ExportModel& x = src.exports[f % src.exports.size()];
  const uint64_t N = x.num_blocks, T = src.T;
  std::vector<int32_t> tokens = x.tokens;
  std::vector<unsigned char> blob = x.keys;
  size_t keys_size = blob.size();
  size_t num_tokens = tokens.size();
  const kvc_sequence_options_t* opts = x.opts->ptr();
  const int32_t* tp = tokens.data();
  const void* kp = blob.data();
  bool null_out = false;
  const uint32_t variant = v % 16;
  switch (variant) {
    case 9: tokens[at % tokens.size()] ^= 1; break;          // the receiver's prompt differs
    case 10: opts = other_salt(); break;                       // another scope
    case 11: keys_size = at % keys_size; break;                // truncated
    case 12: blob[at % blob.size()] ^= uint8_t(1u << ((v >> 4) & 7)); break;  // corrupted
    case 13: num_tokens = N * T - 1 - (at % T); break;         // tokens short of the blob
    case 14: if (v & 0x10) tp = nullptr; else kp = nullptr; break;
    case 15: null_out = true; break;
    default: break;
  }
  const bool hostile = variant >= 9;
  uint64_t id = 100 + idb % 8;
  if (idb >= 0xF8 && !dst.seqs.empty()) id = dst.seqs.begin()->first;  // taken
  else
    for (uint64_t k = 0; k < 16 && dst.seqs.count(id) != 0; ++k) id = 100 + (id + 1 - 100) % 16;
  const bool exists = dst.seqs.count(id) != 0;
  // The probe first: what the import's add must find (the tree's part).
  uint64_t probed = UINT64_MAX;
  if (!hostile) {
    Expect pe;
    pe.allow(KVC_OK);
    if (x.opts->unchecked_precondition) pe.allow(KVC_ERR_INVALID_ARGUMENT);
    uint64_t p = UINT64_MAX;
    set_current(dst.index, "kvc_cache_probe before an import");
    if (dst.call("kvc_cache_probe", pe, true,
                 [&] { return kvc_cache_probe(dst.cache, tp, num_tokens, opts, &p); }) == KVC_OK)
      probed = p;
  }
  Expect e;
  if (hostile || x.opts->unchecked_precondition) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (!hostile && exists) e.allow(KVC_ERR_ALREADY_EXISTS);
  if (!hostile && !exists) {
    if (dst.sets_fit_free(N + (dst.host ? 1 : 0))) e.allow(KVC_OK);
    else e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
  }
  const kvc_cache_stats_t before = dst.last.stats;
  kvc_import_t* imp = kImportSentinel;
  set_current(dst.index, "kvc_cache_import_begin");
  const kvc_status_t st = dst.call("kvc_cache_import_begin", e, false, [&] {
    return kvc_cache_import_begin(dst.cache, id, tp, num_tokens, opts, kp, keys_size,
                                  null_out ? nullptr : &imp);
  });
  trace("c%d import(id %llu, export of c%d's %llu, %llu blocks, variant %u) -> %s\n", dst.index,
        (unsigned long long)id, src.index, (unsigned long long)x.seq_id, (unsigned long long)N,
        variant, kvc_status_string(st));
  if (st != KVC_OK) {
    if (imp != kImportSentinel) finding("a refused import wrote *out");
    if (st == KVC_ERR_OUT_OF_BLOCKS) ++g_count.imports_no_room;
    else ++g_count.imports_refused;
    return;
  }
  if (probed == UINT64_MAX) finding("the import accepted what the probe just before refused");
  // Mid-import: the invariants hold; the import is not a lookup.
  ++g_count.check_calls;
  if (kvc_cache_check(dst.cache) != KVC_OK) finding("kvc_cache_check mid-import: %s", kvc_last_error_message());
  kvc_cache_stats_t now = KVC_CACHE_STATS_INIT;
  ++g_count.check_calls;
  if (kvc_cache_get_stats(dst.cache, &now) != KVC_OK) finding("kvc_cache_get_stats failed");
  if (now.reused_blocks != before.reused_blocks || now.missed_blocks != before.missed_blocks)
    finding("kvc_cache_import_begin counted reused %llu -> %llu, missed %llu -> %llu",
            (unsigned long long)before.reused_blocks, (unsigned long long)now.reused_blocks,
            (unsigned long long)before.missed_blocks, (unsigned long long)now.missed_blocks);
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ++g_count.check_calls;
  if (kvc_sequence_describe(dst.cache, id, &sd) != KVC_OK) finding("the import's sequence is not described");
  const uint64_t cached = sd.cached_tokens;
  if (cached != probed && (dst.disk_dir.empty() || cached < probed / T * T || cached % T != 0))
    finding("the import's add found %llu tokens cached, the probe just before %llu",
            (unsigned long long)cached, (unsigned long long)probed);
  const uint64_t first = std::min<uint64_t>(cached / T, N);
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  must_direct(kvc_import_describe(imp, &d), KVC_OK, "kvc_import_describe");
  if (d.num_groups != dst.num_groups || d.tokens_per_block != T || d.seq_id != id ||
      d.num_blocks != N || d.first_block != first || d.num_tokens != N * T || d.keys_bytes != 0 ||
      d.reserved != 0)
    finding("kvc_import_describe: groups %u T %u seq %llu blocks %llu first %llu tokens %llu keys "
            "%llu; expected first %llu of %llu", d.num_groups, d.tokens_per_block,
            (unsigned long long)d.seq_id, (unsigned long long)d.num_blocks,
            (unsigned long long)d.first_block, (unsigned long long)d.num_tokens,
            (unsigned long long)d.keys_bytes, (unsigned long long)first, (unsigned long long)N);
  must_direct(kvc_import_describe(imp, nullptr), KVC_ERR_INVALID_ARGUMENT, "kvc_import_describe(NULL out)");
  const uint64_t count = N - first;
  // Copy export position first + i of every group into import block i.
  uint64_t copied = 0;
  for (uint32_t g = 0; g < dst.num_groups; ++g) {
    std::vector<int32_t> ids(count + 1, -9);
    size_t got = 12345;
    if (count > 0) {
      must_direct(kvc_import_block_ids(imp, g, ids.data(), count - 1, &got), KVC_ERR_BUFFER_TOO_SMALL,
                  "kvc_import_block_ids one short");
      if (got != count || ids[0] != -9) finding("kvc_import_block_ids one short: count %zu of %llu", got,
                                                (unsigned long long)count);
    }
    must_direct(kvc_import_block_ids(imp, g, ids.data(), ids.size(), &got), KVC_OK, "kvc_import_block_ids");
    if (got != count || ids[count] != -9)
      finding("kvc_import_block_ids: count %zu of %llu, or wrote past it", got, (unsigned long long)count);
    const kvc_layer_view_t& sv = src.views[src.group_first_layer[g]];
    const kvc_layer_view_t& dv = dst.views[dst.group_first_layer[g]];
    if (src.group_block_bytes[g] != dst.group_block_bytes[g])
      finding("group %u: %llu block bytes here, %llu in the receiver", g,
              (unsigned long long)src.group_block_bytes[g], (unsigned long long)dst.group_block_bytes[g]);
    for (uint64_t i = 0; i < count; ++i) {
      if (ids[i] < 0) continue;
      if (uint64_t(ids[i]) >= dst.pools[dst.group_pool[g]].num_blocks)
        finding("kvc_import_block_ids: block %d outside the pool", ids[i]);
      std::memcpy(static_cast<unsigned char*>(dv.base) + uint64_t(ids[i]) * dv.block_stride,
                  static_cast<const unsigned char*>(sv.base) + uint64_t(x.ids[g][first + i]) * sv.block_stride,
                  src.group_block_bytes[g]);
      ++copied;
    }
  }
  must_direct(kvc_import_block_ids(imp, dst.num_groups, nullptr, 0, nullptr), KVC_ERR_INVALID_ARGUMENT,
              "kvc_import_block_ids(group = num_groups)");
  const uint32_t how = (v >> 4) % 8;
  feedback(kTransfer, 8 + (first == 0 ? 0 : first < N ? 1 : 2), std::min<uint32_t>(how, 5));
  if (how >= 6) {  // aborted, or destroyed open (which aborts)
    if (how == 6) {
      must_direct(kvc_import_abort(imp), KVC_OK, "kvc_import_abort");
      must_direct(kvc_import_abort(imp), KVC_ERR_INVALID_STATE, "kvc_import_abort after abort");
      must_direct(kvc_import_complete(imp, count), KVC_ERR_INVALID_STATE, "kvc_import_complete after abort");
    }
    ++g_count.calls;
    kvc_import_destroy(imp);
    ++g_count.imports_aborted;
    dst.settle();
    if (dst.last.stats.num_sequences != before.num_sequences ||
        (dst.disk_dir.empty() && dst.last.stats.in_use_blocks != before.in_use_blocks) ||
        dst.last.stats.reused_blocks != before.reused_blocks ||
        dst.last.stats.missed_blocks != before.missed_blocks)
      finding("an aborted import left %llu sequences, %llu blocks in use (before: %llu, %llu)",
              (unsigned long long)dst.last.stats.num_sequences,
              (unsigned long long)dst.last.stats.in_use_blocks,
              (unsigned long long)before.num_sequences, (unsigned long long)before.in_use_blocks);
    return;
  }
  if (how == 5) {
    must_direct(kvc_import_complete(imp, count + 1), KVC_ERR_INVALID_ARGUMENT,
                "kvc_import_complete with a wrong count");
    ++g_count.imports_wrong_count;
  }
  must_direct(kvc_import_complete(imp, count), KVC_OK, "kvc_import_complete");
  ++g_count.imports_ok;
  g_count.imported_blocks += copied;
  // The shadow: sequence `id` as an add of the prompt found `cached`, then
  // a commit of the blob's tokens; its bytes are the exporter's.
  SeqModel q;
  q.tokens = tokens;
  q.prompt_len = num_tokens;
  q.cached = q.committed = cached;
  q.prompt_priority = x.opts->prompt_priority;
  q.decode_priority = x.opts->decode_priority;
  q.scope = x.opts->scope_hash();
  q.extras = x.opts->extras;
  q.opts = x.opts;
  q.scope_index = x.opts->scope_index();
  q.window_begin.assign(dst.num_groups, 0);
  for (uint32_t g = 0; g < dst.num_groups; ++g)
    q.window_begin[g] = std::min(dst.first_needed(g, cached), cached / T);
  dst.fill(q, 0);
  dst.seqs[id] = std::move(q);
  after_commit(dst, id, N * T);  // settles: every byte checked against the shadow
  Expect ended;
  ended.allow(KVC_ERR_INVALID_STATE);
  dst.call("kvc_import_complete after complete", ended, true, [&] { return kvc_import_complete(imp, count); });
  dst.call("kvc_import_abort after complete", ended, true, [&] { return kvc_import_abort(imp); });
  ++g_count.calls;
  kvc_import_destroy(imp);

  // An add of the prompt and one more token reuses the imported blocks.
  if (!dst.disk_dir.empty()) {
    ++g_count.check_calls;
    if (kvc_cache_flush_tiers(dst.cache) != KVC_OK)
      finding("kvc_cache_flush_tiers: %s", kvc_last_error_message());
    dst.check_all();
  }
  uint64_t id2 = 100;
  while (dst.seqs.count(id2) != 0) ++id2;
  std::vector<int32_t> longer = tokens;
  longer.push_back(small_token());
  Expect pe;
  pe.allow(KVC_OK);
  if (x.opts->unchecked_precondition) pe.allow(KVC_ERR_INVALID_ARGUMENT);
  uint64_t p = UINT64_MAX;
  set_current(dst.index, "kvc_cache_probe after an import");
  if (dst.call("kvc_cache_probe", pe, true, [&] {
        return kvc_cache_probe(dst.cache, longer.data(), longer.size(), opts, &p);
      }) != KVC_OK)
    return;
  bool windows = false;
  for (uint32_t w : dst.window) windows = windows || w != 0;
  if (!windows && p < N * T)
    finding("after importing %llu blocks, a probe of the prompt finds %llu tokens", (unsigned long long)N,
            (unsigned long long)p);
  Expect ae;
  ae.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
  if (x.opts->unchecked_precondition) ae.allow(KVC_ERR_INVALID_ARGUMENT);
  uint64_t c2 = UINT64_MAX;
  set_current(dst.index, "kvc_sequence_add after an import");
  if (dst.call("kvc_sequence_add", ae, false, [&] {
        return kvc_sequence_add(dst.cache, id2, longer.data(), longer.size(), opts, nullptr, &c2);
      }) == KVC_OK) {
    if (c2 != p && (dst.disk_dir.empty() || c2 < p / T * T || c2 % T != 0))
      finding("add after an import found %llu tokens cached, the probe just before %llu",
              (unsigned long long)c2, (unsigned long long)p);
    if (c2 >= N * T) ++g_count.imports_reused;
    SeqModel r;
    r.tokens = longer;
    r.prompt_len = longer.size();
    r.cached = r.committed = c2;
    r.prompt_priority = x.opts->prompt_priority;
    r.decode_priority = x.opts->decode_priority;
    r.scope = x.opts->scope_hash();
    r.extras = x.opts->extras;
    r.opts = x.opts;
    r.scope_index = x.opts->scope_index();
    r.window_begin.assign(dst.num_groups, 0);
    for (uint32_t g = 0; g < dst.num_groups; ++g)
      r.window_begin[g] = std::min(dst.first_needed(g, c2), c2 / T);
    dst.fill(r, 0);
    dst.seqs[id2] = std::move(r);
    dst.settle({id2}, {0});  // the new token written; the reused ones compared
  }
  // Mostly gone again (their blocks cached, for later imports to find).
  if ((idb & 0x40) != 0 && dst.seqs.size() <= 2) return;
  for (uint64_t rid : {id, id2}) {
    if (dst.seqs.count(rid) == 0) continue;
    Expect ok;
    ok.allow(KVC_OK);
    set_current(dst.index, "kvc_sequence_remove after an import");
    dst.call("kvc_sequence_remove", ok, false, [&] { return kvc_sequence_remove(dst.cache, rid); });
    dst.seqs.erase(rid);
    dst.settle();
  }
}

ExportModel Program::finish_transfers(size_t* orphan_cache) {
  ExportModel orphan;
  *orphan_cache = SIZE_MAX;
  for (size_t i = 0; i < caches_.size(); ++i) {
    CacheModel& m = *caches_[i];
    if (m.twin) {
      drain(*m.twin);
      m.twin.reset();
    }
    // One in two programs that hold an export at the end leave it open
    // while its cache is destroyed (decided by its blob, so an input always
    // does the same).
    size_t keep = SIZE_MAX;
    if (orphan.handle == nullptr && !m.exports.empty() && (m.exports.back().keys.back() & 1) != 0)
      keep = m.exports.size() - 1;
    for (size_t k = 0; k < m.exports.size(); ++k) {
      if (k == keep) continue;
      ++g_count.check_calls;
      kvc_export_release(m.exports[k].handle);
      ++g_count.exports_released;
    }
    if (keep != SIZE_MAX) {
      orphan = m.exports[keep];
      *orphan_cache = i;
      m.exports.assign(1, orphan);
    } else {
      m.exports.clear();
    }
  }
  return orphan;
}

void Program::release_orphan(ExportModel& e) {
  set_current(0, "an export after its cache was destroyed");
  kvc_transfer_desc_t d = KVC_TRANSFER_DESC_INIT;
  must_direct(kvc_export_describe(e.handle, &d), KVC_OK, "kvc_export_describe after the cache's destruction");
  if (d.num_blocks != e.num_blocks || d.seq_id != e.seq_id || d.keys_bytes != e.keys.size())
    finding("kvc_export_describe after the cache's destruction: %llu blocks of sequence %llu",
            (unsigned long long)d.num_blocks, (unsigned long long)d.seq_id);
  std::vector<int32_t> ids(e.num_blocks);
  size_t count = 0;
  must_direct(kvc_export_block_ids(e.handle, 0, ids.data(), ids.size(), &count), KVC_OK,
              "kvc_export_block_ids after the cache's destruction");
  if (count != e.num_blocks || ids != e.ids[0]) finding("the block ids changed with the cache's destruction");
  std::vector<unsigned char> keys(e.keys.size());
  size_t size = 0;
  must_direct(kvc_export_keys(e.handle, keys.data(), keys.size(), &size), KVC_OK,
              "kvc_export_keys after the cache's destruction");
  if (keys != e.keys) finding("the key blob changed with the cache's destruction");
  ++g_count.calls;
  kvc_export_release(e.handle);
  ++g_count.exports_released;
  ++g_count.exports_orphaned;
  e.handle = nullptr;
}

}  // namespace kvc_fuzz
