// The program's block-transfer operations, export side (kvcache/transfer.h):
// export a sequence's committed blocks (held, in use, at their positions and
// with their bytes until released; fuzz_model_checks.cpp checks that after
// every call), query an export with hostile buffers, release one; and the end of
// a program's transfers (an export sometimes outliving its cache). Imports
// are in fuzz_import.cpp.
#include "fuzz_ops.h"

#include "fuzz_emit.h"
#include "fuzz_feedback.h"
#include "fuzz_transfer.h"

#include <algorithm>
#include <cstring>

namespace kvc_fuzz {

using namespace transfer;

void Program::transfer(uint8_t f) {
  if (emitting()) emit_line("/* a block-transfer operation (not written to the reproducer) */");
  switch (f % 8) {
    case 0:
    case 1:
    case 2:
      export_sequence();
      break;
    case 3:
    case 4:
    case 5:
      import_blocks();
      break;
    case 6:
      release_export();
      break;
    default:
      query_export();
      break;
  }
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
    finding(
        "kvc_export_describe: groups %u T %u seq %llu blocks %llu first %llu tokens %llu keys "
        "%llu; expected %u %u %llu %llu 0 %llu %llu",
        d.num_groups, d.tokens_per_block, (unsigned long long)d.seq_id,
        (unsigned long long)d.num_blocks, (unsigned long long)d.first_block,
        (unsigned long long)d.num_tokens, (unsigned long long)d.keys_bytes, m.num_groups, m.T,
        (unsigned long long)e.seq_id, (unsigned long long)N, (unsigned long long)(N * m.T),
        (unsigned long long)keys_bytes);
  m.call("kvc_export_describe(NULL out)", bad, true,
         [&] { return kvc_export_describe(e.handle, nullptr); });
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
    if (count != N)
      finding("kvc_export_block_ids with no room: count %zu, %llu blocks", count,
              (unsigned long long)N);
    count = 12345;
    m.call("kvc_export_block_ids(one short)", small, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), N - 1, &count); });
    if (count != N || ids[0] != -9)
      finding("kvc_export_block_ids one short: count %zu, ids written", count);
    m.call("kvc_export_block_ids(NULL count)", bad, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), ids.size(), nullptr); });
    m.call("kvc_export_block_ids", ok, true,
           [&] { return kvc_export_block_ids(e.handle, g, ids.data(), N + 1, &count); });
    if (count != N || ids[N] != -9 || ids[N + 1] != -9)
      finding("kvc_export_block_ids: count %zu of %llu, or wrote past them", count,
              (unsigned long long)N);
    ids.resize(N);
    if (e.ids[g] != ids)
      finding("kvc_export_block_ids of group %u changed while the export is held", g);
  }

  set_current(m.index, "kvc_export_keys");
  size_t size = 12345;
  m.call("kvc_export_keys(NULL, 0)", small, true,
         [&] { return kvc_export_keys(e.handle, nullptr, 0, &size); });
  if (size != keys_bytes)
    finding("kvc_export_keys sized %zu, describe says %llu", size, (unsigned long long)keys_bytes);
  std::vector<unsigned char> buf(keys_bytes + 8, kFill);
  size = 12345;
  m.call("kvc_export_keys(one short)", small, true,
         [&] { return kvc_export_keys(e.handle, buf.data(), keys_bytes - 1, &size); });
  if (size != keys_bytes || std::count(buf.begin(), buf.end(), kFill) != long(buf.size()))
    finding("kvc_export_keys one byte short: size %zu, or the buffer written", size);
  m.call("kvc_export_keys(NULL size)", bad, true,
         [&] { return kvc_export_keys(e.handle, buf.data(), buf.size(), nullptr); });
  m.call("kvc_export_keys(NULL)", bad, true,
         [&] { return kvc_export_keys(nullptr, buf.data(), buf.size(), &size); });
  m.call("kvc_export_keys", ok, true,
         [&] { return kvc_export_keys(e.handle, buf.data(), buf.size(), &size); });
  if (size != keys_bytes || buf[keys_bytes] != kFill)
    finding("kvc_export_keys: size %zu of %llu, or wrote past it", size,
            (unsigned long long)keys_bytes);
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
  if (!ready.empty() && pick < 0xC0)
    id = ready[pick % ready.size()];
  else
    id = live_id();
  const uint8_t f = in_.u8();
  const SeqModel* s = find(id);
  const uint64_t full = s ? s->committed / m.T : 0;
  uint64_t n = 0;
  bool null_out = false;
  switch (f % 8) {
    case 4:
      n = full > 0 ? (1 + (f >> 3) % full) * m.T : 0;
      break;  // a prefix of the blocks
    case 5:
      n = (full + 1) * m.T;
      break;  // a block past them
    case 6:
      n = (f & 0x80) ? UINT64_MAX : full * m.T + 1;
      break;  // not block aligned
    case 7:
      null_out = true;
      break;
    default:
      break;  // 0: every committed full block
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
  for (uint32_t g = 0; g < m.num_groups; ++g) {
    std::vector<int32_t> ids(want);
    size_t count = 0;
    ++g_count.check_calls;
    if (kvc_export_block_ids(h, g, ids.data(), ids.size(), &count) != KVC_OK || count != want)
      finding("kvc_export_block_ids of a new export: %s, count %zu of %llu",
              kvc_last_error_message(), count, (unsigned long long)want);
    // The exported blocks are the published ones at those positions: the
    // sequence's own where it published them, else the block published
    // first under the same key (the sequence computed a duplicate, as after
    // a partial reuse whose commit found the key taken). Not compared by id
    // therefore: verify() (settle below) checks each exported block's bytes
    // against the sequence's rows position by position (rows follow from
    // scope, tokens and position alone), and that it stays in use, in place.
    ex.ids.push_back(std::move(ids));
  }
  const uint64_t keys_bytes = keys_size_of(want, m.T);
  ex.keys.assign(keys_bytes, 0);
  size_t size = 0;
  ++g_count.check_calls;
  if (kvc_export_keys(h, ex.keys.data(), ex.keys.size(), &size) != KVC_OK || size != keys_bytes)
    finding("kvc_export_keys of a new export: %s, %zu bytes, the format takes %llu",
            kvc_last_error_message(), size, (unsigned long long)keys_bytes);
  // The header's format: magic, version 2, T, N, the scope check, then the
  // tokens.
  uint32_t version = 0, tpb = 0;
  uint64_t nb = 0;
  std::memcpy(&version, &ex.keys[8], 4);
  std::memcpy(&tpb, &ex.keys[12], 4);
  std::memcpy(&nb, &ex.keys[24], 8);
  if (std::memcmp(ex.keys.data(), "KVCXFERK", 8) != 0 || version != 2 || tpb != m.T || nb != want ||
      std::memcmp(&ex.keys[64], ex.tokens.data(), 4 * want * m.T) != 0)
    finding(
        "the key blob's header or tokens differ from the export's (version %u, T %u, blocks %llu)",
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
  must_direct(kvc_export_describe(e.handle, &d), KVC_OK,
              "kvc_export_describe after the cache's destruction");
  if (d.num_blocks != e.num_blocks || d.seq_id != e.seq_id || d.keys_bytes != e.keys.size())
    finding("kvc_export_describe after the cache's destruction: %llu blocks of sequence %llu",
            (unsigned long long)d.num_blocks, (unsigned long long)d.seq_id);
  std::vector<int32_t> ids(e.num_blocks);
  size_t count = 0;
  must_direct(kvc_export_block_ids(e.handle, 0, ids.data(), ids.size(), &count), KVC_OK,
              "kvc_export_block_ids after the cache's destruction");
  if (count != e.num_blocks || ids != e.ids[0])
    finding("the block ids changed with the cache's destruction");
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
