// The program's block-transfer operations, import side (kvcache/transfer.h):
// import an export into the receiver, a second cache of the same
// configuration (the twin, made by the first import), so that the import's
// blocks are fresh and the bytes the harness copies into them (memcpy
// through the layer views, as the CPU transport of tests/c/test_transfer.c)
// are what a later add reuses. A blob with a token flipped, another salt,
// truncated or with a bit flipped, and receiver tokens short of the blob,
// are refused and change nothing.
#include "fuzz_ops.h"

#include "fuzz_feedback.h"
#include "fuzz_transfer.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvc_fuzz {

using namespace transfer;

namespace {

// The receiver's options for "another salt": the scope check differs from
// any scope the decoder makes.
const kvc_sequence_options_t* other_salt() {
  static kvc_sequence_options_t o;
  static const char salt[] = "\xfe kvc fuzz: another salt";
  kvc_sequence_options_init(&o);
  o.salt = salt;
  o.salt_size = sizeof(salt) - 1;
  return &o;
}

// The receiver's options for "another extra key": the sender's salt, LoRA
// id and extra keys plus one key over token `at` of the exported blocks
// that no decoded option has; the scope check differs.
const kvc_sequence_options_t* another_extra_key(const Options& o, uint64_t at) {
  static kvc_sequence_options_t r;
  static std::vector<kvc_extra_key_t> keys;
  static const char image[] = "\xfe kvc fuzz: another image";
  kvc_sequence_options_init(&r);
  if (o.has_salt) {
    r.salt = o.salt.data();
    r.salt_size = o.salt.size();
  }
  r.has_lora = o.has_lora;
  r.lora_id = o.lora_id;
  keys.clear();
  for (const ExtraKeyModel& k : o.extras)
    keys.push_back(kvc_extra_key_t{k.offset, k.length, k.data.data(), k.data.size()});
  keys.push_back(kvc_extra_key_t{at, 1, image, sizeof(image) - 1});
  r.extra_keys = keys.data();
  r.num_extra_keys = keys.size();
  return &r;
}

}  // namespace

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
  m.twin = std::make_unique<CacheModel>(m.index + 2, m.config, m.host, m.manual_clock,
                                        m.block_reuse, m.events);
  m.twin->disk_dir = dir;
#if KVC_FUZZ_DISK
  m.twin->disk_mode = m.disk_mode;
  if (m.disk_mode == 2) disk_pause_writer(m.twin->cache, true);
  if (m.disk_mode == 3) disk_offload_at_eviction(m.twin->cache);
#endif
  return *m.twin;
}

void Program::import_blocks() {
  CacheModel& src = c();
  const uint8_t f = in_.u8(), v = in_.u8(), idb = in_.u8();
  const uint16_t at = uint16_t(in_.u16());
  CacheModel& dst = receiver();
  set_current(dst.index, "kvc_cache_import_begin");
  // The receiver's disk writes done first in disk mode 0, as add() does.
  if (!dst.disk_dir.empty() && dst.disk_mode == 0) {
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
      return kvc_cache_import_begin(dst.cache, 100, tokens, 8, nullptr,
                                    (v & 1) ? nullptr : blob.data(), blob.size(), &imp);
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
    case 8:
      opts = another_extra_key(*x.opts, at % (N * T));
      break;  // another extra key inside the blocks
    case 9:
      tokens[at % tokens.size()] ^= 1;
      break;  // the receiver's prompt differs
    case 10:
      opts = other_salt();
      break;  // another scope
    case 11:
      keys_size = at % keys_size;
      break;  // truncated
    case 12:
      blob[at % blob.size()] ^= uint8_t(1u << ((v >> 4) & 7));
      break;  // corrupted
    case 13:
      num_tokens = N * T - 1 - (at % T);
      break;  // tokens short of the blob
    case 14:
      if (v & 0x10)
        tp = nullptr;
      else
        kp = nullptr;
      break;
    case 15:
      null_out = true;
      break;
    default:
      break;
  }
  const bool hostile = variant >= 8;
  uint64_t id = 100 + idb % 8;
  if (idb >= 0xF8 && !dst.seqs.empty())
    id = dst.seqs.begin()->first;  // taken
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
    if (dst.sets_fit_free(N + (dst.host ? 1 : 0)))
      e.allow(KVC_OK);
    else
      e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
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
    if (st == KVC_ERR_OUT_OF_BLOCKS)
      ++g_count.imports_no_room;
    else
      ++g_count.imports_refused;
    return;
  }
  if (probed == UINT64_MAX) finding("the import accepted what the probe just before refused");
  // Mid-import: the invariants hold; the import is not a lookup.
  ++g_count.check_calls;
  if (kvc_cache_check(dst.cache) != KVC_OK)
    finding("kvc_cache_check mid-import: %s", kvc_last_error_message());
  kvc_cache_stats_t now = KVC_CACHE_STATS_INIT;
  ++g_count.check_calls;
  if (kvc_cache_get_stats(dst.cache, &now) != KVC_OK) finding("kvc_cache_get_stats failed");
  if (now.reused_blocks != before.reused_blocks || now.missed_blocks != before.missed_blocks)
    finding("kvc_cache_import_begin counted reused %llu -> %llu, missed %llu -> %llu",
            (unsigned long long)before.reused_blocks, (unsigned long long)now.reused_blocks,
            (unsigned long long)before.missed_blocks, (unsigned long long)now.missed_blocks);
  kvc_sequence_desc_t sd = KVC_SEQUENCE_DESC_INIT;
  ++g_count.check_calls;
  if (kvc_sequence_describe(dst.cache, id, &sd) != KVC_OK)
    finding("the import's sequence is not described");
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
    finding(
        "kvc_import_describe: groups %u T %u seq %llu blocks %llu first %llu tokens %llu keys "
        "%llu; expected first %llu of %llu",
        d.num_groups, d.tokens_per_block, (unsigned long long)d.seq_id,
        (unsigned long long)d.num_blocks, (unsigned long long)d.first_block,
        (unsigned long long)d.num_tokens, (unsigned long long)d.keys_bytes,
        (unsigned long long)first, (unsigned long long)N);
  must_direct(kvc_import_describe(imp, nullptr), KVC_ERR_INVALID_ARGUMENT,
              "kvc_import_describe(NULL out)");
  const uint64_t count = N - first;
  // Copy export position first + i of every group into import block i.
  uint64_t copied = 0;
  for (uint32_t g = 0; g < dst.num_groups; ++g) {
    std::vector<int32_t> ids(count + 1, -9);
    size_t got = 12345;
    if (count > 0) {
      must_direct(kvc_import_block_ids(imp, g, ids.data(), count - 1, &got),
                  KVC_ERR_BUFFER_TOO_SMALL, "kvc_import_block_ids one short");
      if (got != count || ids[0] != -9)
        finding("kvc_import_block_ids one short: count %zu of %llu", got,
                (unsigned long long)count);
    }
    must_direct(kvc_import_block_ids(imp, g, ids.data(), ids.size(), &got), KVC_OK,
                "kvc_import_block_ids");
    if (got != count || ids[count] != -9)
      finding("kvc_import_block_ids: count %zu of %llu, or wrote past it", got,
              (unsigned long long)count);
    const kvc_layer_view_t& sv = src.views[src.group_first_layer[g]];
    const kvc_layer_view_t& dv = dst.views[dst.group_first_layer[g]];
    if (src.group_block_bytes[g] != dst.group_block_bytes[g])
      finding("group %u: %llu block bytes here, %llu in the receiver", g,
              (unsigned long long)src.group_block_bytes[g],
              (unsigned long long)dst.group_block_bytes[g]);
    for (uint64_t i = 0; i < count; ++i) {
      if (ids[i] < 0) continue;
      if (uint64_t(ids[i]) >= dst.pools[dst.group_pool[g]].num_blocks)
        finding("kvc_import_block_ids: block %d outside the pool", ids[i]);
      std::memcpy(static_cast<unsigned char*>(dv.base) + uint64_t(ids[i]) * dv.block_stride,
                  static_cast<const unsigned char*>(sv.base) +
                      uint64_t(x.ids[g][first + i]) * sv.block_stride,
                  src.group_block_bytes[g]);
      ++copied;
    }
  }
  must_direct(kvc_import_block_ids(imp, dst.num_groups, nullptr, 0, nullptr),
              KVC_ERR_INVALID_ARGUMENT, "kvc_import_block_ids(group = num_groups)");
  const uint32_t how = (v >> 4) % 8;
  trace("c%d import of %llu blocks from position %llu: %llu block copies, then %s\n", dst.index,
        (unsigned long long)N, (unsigned long long)first, (unsigned long long)copied,
        how == 7   ? "destroy (open)"
        : how == 6 ? "abort"
        : how == 5 ? "a wrong count, complete"
                   : "complete");
  feedback(kTransfer, 8 + (first == 0 ? 0 : first < N ? 1 : 2), std::min<uint32_t>(how, 5));
  if (how >= 6) {  // aborted, or destroyed open (which aborts)
    if (how == 6) {
      must_direct(kvc_import_abort(imp), KVC_OK, "kvc_import_abort");
      must_direct(kvc_import_abort(imp), KVC_ERR_INVALID_STATE, "kvc_import_abort after abort");
      must_direct(kvc_import_complete(imp, count), KVC_ERR_INVALID_STATE,
                  "kvc_import_complete after abort");
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
  dst.call("kvc_import_complete after complete", ended, true,
           [&] { return kvc_import_complete(imp, count); });
  dst.call("kvc_import_abort after complete", ended, true, [&] { return kvc_import_abort(imp); });
  ++g_count.calls;
  kvc_import_destroy(imp);

  // An add of the prompt and one more token reuses the imported blocks.
  if (!dst.disk_dir.empty() && dst.disk_mode == 0) {
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
    finding("after importing %llu blocks, a probe of the prompt finds %llu tokens",
            (unsigned long long)N, (unsigned long long)p);
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

}  // namespace kvc_fuzz
