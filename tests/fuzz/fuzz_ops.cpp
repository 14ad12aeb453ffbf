// The program's operations that change sequences: add, extend, decode
// steps, commit, rewind, fork, remove, pin, unpin (those on the whole cache,
// reset, resize, the clock and the drain, in fuzz_cache_ops.cpp).
#include "fuzz_ops.h"

#include "fuzz_emit.h"
#include "fuzz_feedback.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <set>

namespace kvc_fuzz {

namespace {

int g_emit_n = 0;  // names the options of each add in the C reproducer


std::string tokens_str(const int32_t* t, uint64_t n) {
  if (!g_trace || t == nullptr) return t == nullptr ? "NULL" : "";
  std::string s = "{";
  for (uint64_t i = 0; i < n && i < 64; ++i) s += (i ? "," : "") + std::to_string(t[i]);
  return s + (n > 64 ? ",...}" : "}");
}


}  // namespace

// --- the program --------------------------------------------------------------

void Program::run() {
  for (int i = 0; i < kMaxCalls && !in_.empty(); ++i) {
    const uint8_t op = in_.u8();
    cur_ = caches_.size() > 1 ? (op >> 5) & 1 : 0;
    g_op = op % 32;
    switch (op % 32) {
      case 0: case 1: case 2: case 3: add(false); break;
      case 4: case 5: case 6: add(true); break;  // and commit it: an engine's prefill
      case 7: case 8: case 9: case 10: extend(); break;
      case 11: case 12: batch_extend(); break;
      case 13: case 14: case 15: commit(); break;
      case 16: case 17: rewind(); break;
      case 18: case 19: fork(); break;
      case 20: case 21: case 22: remove(); break;
      case 23: pin(); break;
      case 24: unpin(); break;
      case 25:  // the disk configuration: a flush where the op's top bits are set
        if (KVC_FUZZ_DISK && (op >> 6) == 3) flush_tiers();
        else probe();
        break;
      case 26: blocks_needed(); break;
      case 27: switch (in_.below(4)) {
          case 0: block_table(); break;
          case 1: block_table_csr(); break;
          case 2: lengths(); break;
          default: slot_mapping(); break;
        }
        break;
      case 28: switch (in_.below(4)) {
          case 0: stats(); break;
          case 1: describe_sequence(); break;
          case 2: block_ids(); break;
          default: describe_cache(); break;
        }
        break;
      case 29:
        // The disk configuration, the op's top bits set and no export held:
        // every sequence and pin removed, the writes flushed and the tree
        // emptied (the end-of-input drain: in use 0, reset accepted), so
        // that later adds of recent prompts load their blocks from the disk
        // (checked bit for bit as any reuse).
        if (KVC_FUZZ_DISK && (op >> 6) == 3 && c().exports.empty()) {
          drain_and_reload();
        } else {
          switch (in_.below(3)) {
            case 0: reset_reuse(); break;
            case 1: resize(); break;
            default: make_room(); break;
          }
        }
        break;
      case 30: {
        // Block transfer (fuzz_export.cpp, fuzz_import.cpp) shares this
        // slot with the clock: caches without the manual clock (where the
        // clock call was only ever refused) get a transfer operation; with
        // it, the byte values 0xC0-0xEF of its argument do (the rest still
        // advance it).
        const uint8_t f = in_.u8();
        if (!c().manual_clock || (f >= 0xC0 && f < 0xF0)) transfer(f);
        else advance_clock(f);
        break;
      }
      default: kernels(); break;
    }
#if KVC_FUZZ_DISK
    after_call_disk();
#endif
  }
}

// The disk configuration's operations are in fuzz_disk.cpp (its target only).
#if !KVC_FUZZ_DISK
void Program::after_call_disk() {}
void Program::flush_tiers() {}
void Program::drain_and_reload() {}
#endif

void Program::add(bool and_commit) {
  CacheModel& m = c();
  uint64_t id = read_id();
  if (m.seqs.count(id) != 0 && in_.u8() < 0xC0)  // mostly a new id (0..7) instead
    for (uint64_t k = 0; k < 8; ++k)
      if (m.seqs.count(k) == 0) {
        id = k;
        break;
      }
  std::vector<int32_t> tokens = prompt();
  std::shared_ptr<const Options> opts;
  if (forced_opts_) opts.swap(forced_opts_);
  else opts = Options::decode(in_);
  const uint8_t f = in_.u8();
  const int32_t* tp = tokens.data();
  uint64_t n = tokens.size();
  bool want_cached = true;
  switch (f % 32) {  // zero bytes (common in mutations) give the normal call
    case 31: tp = nullptr; break;
    case 30: n = 0; break;
    case 29: n = (f & 0x80) ? UINT64_MAX : kMaxTokens + 1; break;
    case 28: case 27: want_cached = false; break;
    default: break;
  }
  const bool bad_args = (tp == nullptr && n > 0) || n == 0 || n > kMaxTokens;
  const bool exists = m.seqs.count(id) != 0;
  remember(tokens);
  const int on = ++g_emit_n;
  if (emitting()) {
    if (!opts->c_decl(on).empty()) emit_line("%s", opts->c_decl(on).c_str());
    emit_line("const int32_t *t%d = %s;", on, c_ints(tp, std::min<uint64_t>(n, tokens.size())).c_str());
  }
  // With a disk tier the add's count is always asked (it may exceed the
  // probe's). In disk mode 0 its queue is written first, so what the add
  // loads does not depend on the writer thread's timing; in the others the
  // add may meet blocks whose write jobs are pending (fuzz_disk.h).
  if (!m.disk_dir.empty()) {
    want_cached = true;
    if (m.disk_mode == 0) {
      ++g_count.check_calls;
      if (emitting()) emit_line("kvc_cache_flush_tiers(c[%d]);", m.index);
      const kvc_status_t fs = kvc_cache_flush_tiers(m.cache);
      if (fs != KVC_OK) finding("kvc_cache_flush_tiers: %s", kvc_last_error_message());
      m.check_all();
    }
  }
  // The probe first: what the add must find (the tree's part).
  uint64_t probed = UINT64_MAX;
  if (tp != nullptr && n > 0 && n <= kMaxTokens) {
    if (emitting())
      emit_call(m.index, "kvc_cache_probe(c[" + std::to_string(m.index) + "], t" + std::to_string(on) +
                ", " + c_u64(n) + ", " + opts->c_arg(on) + ", &u64)", "probe");
    Expect pe;
    if (opts->invalid || opts->unchecked_precondition) pe.allow(KVC_ERR_INVALID_ARGUMENT);
    if (!opts->invalid) pe.allow(KVC_OK);
    set_current(m.index, "kvc_cache_probe before an add");
    uint64_t p = UINT64_MAX;
    const kvc_status_t st = m.call("kvc_cache_probe", pe, true,
                                   [&] { return kvc_cache_probe(m.cache, tp, n, opts->ptr(), &p); });
    if (st == KVC_OK) {
      if (p >= n || (!m.block_reuse && p != 0))
        finding("probe of %llu tokens found %llu cached", (unsigned long long)n, (unsigned long long)p);
      probed = p;
    }
  }
  Expect e;
  if (bad_args || opts->invalid || opts->unchecked_precondition) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (exists) e.allow(KVC_ERR_ALREADY_EXISTS);
  const uint64_t nb = m.blocks_for(n);
  if (!bad_args && !opts->invalid && !exists) {
    const uint64_t lower = nb - std::min<uint64_t>(nb, (n - 1) / m.T + 1);
    // At most a set per block, and with a host tier one more: a partly
    // matched block found there is onboarded, then copied.
    if (m.sets_exceed_all(lower)) e.allow(KVC_ERR_OUT_OF_BLOCKS);
    else if (m.sets_fit_free(nb + (m.host ? 1 : 0))) e.allow(KVC_OK);
    else e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
  }
  uint64_t cached = UINT64_MAX;
  set_current(m.index, "kvc_sequence_add");
  if (emitting())
    emit_call(m.index, "kvc_sequence_add(c[" + std::to_string(m.index) + "], " + c_u64(id) + ", t" +
              std::to_string(on) + ", " + c_u64(n) + ", " + opts->c_arg(on) + ", NULL, " +
              (want_cached ? "&u64)" : "NULL)"), "add " + std::to_string(id));
  const kvc_cache_stats_t before = m.last.stats;
  const std::vector<kvc_group_stats_t> gbefore = m.last.groups;
  const kvc_status_t st = m.call("kvc_sequence_add", e, false, [&] {
    return kvc_sequence_add(m.cache, id, tp, n, opts->ptr(), nullptr, want_cached ? &cached : nullptr);
  });
  trace("c%d add(id %llu, %llu tokens %s, %s) -> %s cached %lld\n", m.index,
        (unsigned long long)id, (unsigned long long)n, tokens_str(tp, std::min<uint64_t>(n, tokens.size())).c_str(),
        opts->describe().c_str(), kvc_status_string(st), (long long)(st == KVC_OK ? probed : -1));
  if (st != KVC_OK) return;
  if (probed == UINT64_MAX) finding("the add accepted what the probe just before refused");
  if (want_cached && cached != probed) {
    // Only blocks loaded from a disk tier may add to the probe's count:
    // whole blocks, the partial match (if any) given up for them.
    if (m.disk_dir.empty() || cached < probed / m.T * m.T || cached % m.T != 0)
      finding("add found %llu tokens cached, the probe just before %llu", (unsigned long long)cached,
              (unsigned long long)probed);
    else {
      feedback(kTierMoves, 36, bucket((cached - probed) / m.T));  // disk loads
      ++g_count.disk_loads;
      g_count.disk_blocks += (cached - probed / m.T * m.T) / m.T;
    }
    probed = cached;
  }
  SeqModel s;
  s.tokens = tokens;
  s.prompt_len = n;
  s.cached = s.committed = probed;
  s.prompt_priority = opts->prompt_priority;
  s.decode_priority = opts->decode_priority;
  s.scope = opts->scope_hash();
  s.extras = opts->extras;
  s.opts = opts;
  s.window_begin.assign(m.num_groups, 0);
  for (uint32_t g = 0; g < m.num_groups; ++g)
    s.window_begin[g] = std::min(m.first_needed(g, probed), probed / m.T);
  s.scope_index = opts->scope_index();
  feedback(kAddScope, s.scope_index, probed == 0 ? 0 : probed % m.T ? 1 : 2);
  const auto prev = m.committed_scope.find(tokens[0]);
  if (prev != m.committed_scope.end()) feedback(kScopePair, s.scope_index, prev->second);
  m.fill(s, 0);
  m.seqs[id] = std::move(s);
  m.settle({id}, {0}, (f & 0x20) != 0);
  // Reuse counts: whole positions found, the rest computed.
  const uint64_t reused = m.blocks_for(probed);
  const kvc_cache_stats_t& now = m.last.stats;
  if (now.reused_blocks - before.reused_blocks != reused ||
      now.missed_blocks - before.missed_blocks != nb - reused)
    finding("add of %llu tokens with %llu cached counted %llu reused and %llu missed blocks, "
            "expected %llu and %llu", (unsigned long long)n, (unsigned long long)probed,
            (unsigned long long)(now.reused_blocks - before.reused_blocks),
            (unsigned long long)(now.missed_blocks - before.missed_blocks),
            (unsigned long long)reused, (unsigned long long)(nb - reused));
  for (uint32_t g = 0; g < m.num_groups; ++g) {
    const uint64_t r = probed / m.T - m.seqs.at(id).window_begin[g] + (probed % m.T ? 1 : 0);
    if (m.last.groups[g].reused_blocks - gbefore[g].reused_blocks != r ||
        m.last.groups[g].missed_blocks - gbefore[g].missed_blocks != nb - reused)
      finding("add: group %u counted %llu reused, %llu missed; expected %llu, %llu", g,
              (unsigned long long)(m.last.groups[g].reused_blocks - gbefore[g].reused_blocks),
              (unsigned long long)(m.last.groups[g].missed_blocks - gbefore[g].missed_blocks),
              (unsigned long long)r, (unsigned long long)(nb - reused));
  }
  if (!and_commit) return;
  set_current(m.index, "kvc_sequence_commit of a prompt");
  if (emitting())
    emit_call(m.index, "kvc_sequence_commit(c[" + std::to_string(m.index) + "], " + c_u64(id) + ", " +
              c_u64(n) + ")", "commit " + std::to_string(id));
  Expect ok;
  ok.allow(KVC_OK);
  m.call("kvc_sequence_commit", ok, false, [&] { return kvc_sequence_commit(m.cache, id, n); });
  trace("c%d commit(id %llu, %llu) -> KVC_OK\n", m.index, (unsigned long long)id,
        (unsigned long long)n);
  after_commit(id, n);
}

void Program::extend() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8();
  std::vector<int32_t> tokens(8);
  for (auto& t : tokens) t = small_token();
  const SeqModel* s = find(id);
  const uint64_t len = s ? s->length() : 0;
  uint64_t n = f % 6;
  const int32_t* tp = tokens.data();
  if ((f >> 3) % 8 == 7) {
    if (f & 0x80) tp = nullptr, n = 1 + n % 3;
    else n = hostile_count(in_, len);
  }
  Expect e;
  if (tp == nullptr && n > 0) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (s == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  if (e.empty()) {
    if (n == 0) {
      e.allow(KVC_OK);
    } else if (n > kMaxTokens - len) {
      e.allow(KVC_ERR_INVALID_ARGUMENT);
    } else {
      const uint64_t sets = m.blocks_for(len + n) - m.blocks_for(len);
      if (m.sets_exceed_all(sets)) e.allow(KVC_ERR_OUT_OF_BLOCKS);
      else if (m.sets_fit_free(sets + 1)) e.allow(KVC_OK);
      else e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
    }
  }
  if (emitting())
    emit_call(m.index, "kvc_sequence_extend(c[" + std::to_string(m.index) + "], " + c_u64(id) + ", " + c_ints(tp, std::min<uint64_t>(n, 8)) + ", " + c_u64(n) + ", NULL)", "extend " + std::to_string(id));
  set_current(m.index, "kvc_sequence_extend");
  const kvc_status_t st = m.call("kvc_sequence_extend", e, n == 0,
                                 [&] { return kvc_sequence_extend(m.cache, id, tp, n, nullptr); });
  trace("c%d extend(id %llu, %llu tokens %s) -> %s\n", m.index, (unsigned long long)id,
        (unsigned long long)n, tokens_str(tp, std::min<uint64_t>(n, 8)).c_str(), kvc_status_string(st));
  if (st != KVC_OK || n == 0) return;
  SeqModel& q = m.seqs.at(id);
  q.tokens.insert(q.tokens.end(), tokens.begin(), tokens.begin() + long(n));
  m.fill(q, len);
  m.settle({id}, {len}, (f & 0x40) != 0);
}

void Program::batch_extend() {
  CacheModel& m = c();
  bool unknown, repeated;
  std::vector<uint64_t> ids = batch_ids(&unknown, &repeated);
  std::vector<int32_t> tokens(ids.size() + 1);
  for (auto& t : tokens) t = small_token();
  const uint8_t f = in_.u8();
  const uint64_t* ip = ids.data();
  const int32_t* tp = tokens.data();
  if (f % 16 == 15) ip = nullptr;
  if (f % 16 == 14) tp = nullptr;
  Expect e;
  const size_t count = ids.size();
  if (count > 0 && (ip == nullptr || tp == nullptr)) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (count > 0 && unknown) e.allow(KVC_ERR_NOT_FOUND);
  if (count > 0 && repeated) e.allow(KVC_ERR_INVALID_ARGUMENT);
  if (e.empty()) {
    uint64_t sets = 0;
    for (uint64_t id : ids) sets += m.seqs.at(id).length() % m.T == 0 ? 1 : 0;
    if (m.sets_exceed_all(sets)) e.allow(KVC_ERR_OUT_OF_BLOCKS);
    else if (m.sets_fit_free(sets + count)) e.allow(KVC_OK);
    else e.allow(KVC_OK).allow(KVC_ERR_OUT_OF_BLOCKS);
  }
  if (emitting())
    emit_call(m.index, "kvc_batch_extend(c[" + std::to_string(m.index) + "], " + c_ids(ip, count) + ", " + c_ints(tp, count) + ", " + std::to_string(count) + ", NULL)", "batch_extend");
  set_current(m.index, "kvc_batch_extend");
  const kvc_status_t st = m.call("kvc_batch_extend", e, count == 0,
                                 [&] { return kvc_batch_extend(m.cache, ip, tp, count, nullptr); });
  if (g_trace) {
    std::string s;
    for (size_t i = 0; i < count; ++i) s += std::to_string(ids[i]) + ":" + std::to_string(tokens[i]) + " ";
    trace("c%d batch_extend(%s%s%s) -> %s\n", m.index, s.c_str(), ip ? "" : "ids NULL ",
          tp ? "" : "tokens NULL", kvc_status_string(st));
  }
  if (st != KVC_OK || count == 0) return;
  std::vector<uint64_t> from;
  for (size_t i = 0; i < count; ++i) {
    SeqModel& q = m.seqs.at(ids[i]);
    from.push_back(q.length());
    q.tokens.push_back(tokens[i]);
    m.fill(q, q.length() - 1);
  }
  m.settle(ids, from, (f & 0x10) != 0);
}

void Program::commit() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8();
  const SeqModel* s = find(id);
  const uint64_t len = s ? s->length() : 0;
  uint64_t n = len;
  switch (f % 8) {
    case 4: n = len - std::min<uint64_t>(len, (f >> 3) % 5); break;
    case 5: n = (f >> 3) % (len + 1); break;
    case 6: n = len + 1 + (f >> 3) % 3; break;
    case 7: n = (f & 0x80) ? UINT64_MAX : kMaxTokens + 1; break;
    default: break;
  }
  Expect e;
  if (s == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  else if (n > len) e.allow(KVC_ERR_INVALID_ARGUMENT);
  else e.allow(KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_sequence_commit(c[" + std::to_string(m.index) + "], " + c_u64(id) + ", " + c_u64(n) + ")", "commit " + std::to_string(id));
  set_current(m.index, "kvc_sequence_commit");
  const kvc_status_t st =
      m.call("kvc_sequence_commit", e, false, [&] { return kvc_sequence_commit(m.cache, id, n); });
  trace("c%d commit(id %llu, %llu) -> %s\n", m.index, (unsigned long long)id,
        (unsigned long long)n, kvc_status_string(st));
  if (st != KVC_OK) return;
  after_commit(id, n);
}

void Program::after_commit(CacheModel& m, uint64_t id, uint64_t n) {
  SeqModel& q = m.seqs.at(id);
  const uint64_t len = q.length();
  q.committed = std::max(q.committed, n);
  uint64_t released = 0;
  for (uint32_t g = 0; g < m.num_groups; ++g) {
    const uint64_t begin = std::max(q.window_begin[g],
                                    std::min(m.first_needed(g, q.committed), m.blocks_for(len)));
    released += begin - q.window_begin[g];
    q.window_begin[g] = begin;
  }
  if (q.committed >= m.T) m.committed_scope[q.tokens[0]] = q.scope_index;
  feedback(kWindowRelease, bucket(released));
  m.settle();
}

void Program::rewind() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  const uint8_t f = in_.u8();
  const SeqModel* s = find(id);
  const uint64_t len = s ? s->length() : 0;
  uint64_t n = (f >> 3) % (std::min<uint64_t>(len, 6) + 1);
  switch (f % 8) {
    case 5: n = len; break;
    case 6: n = len + 1; break;
    case 7: n = (f & 0x80) ? UINT64_MAX : uint64_t(1) << 40; break;
    default: break;
  }
  Expect e;
  if (s == nullptr) {
    e.allow(KVC_ERR_NOT_FOUND);
  } else if (n > len) {
    e.allow(KVC_ERR_INVALID_ARGUMENT);
  } else {
    // A windowed group that released blocks keeps a whole window before
    // the new last token.
    bool refused = false;
    for (uint32_t g = 0; g < m.num_groups && n > 0; ++g) {
      const uint64_t begin = s->window_begin[g];
      if (begin != 0 && len - n < begin * m.T + m.window[g] - 1) refused = true;
    }
    e.allow(refused ? KVC_ERR_INVALID_ARGUMENT : KVC_OK);
  }
  if (emitting())
    emit_call(m.index, "kvc_sequence_rewind(c[" + std::to_string(m.index) + "], " + c_u64(id) + ", " + c_u64(n) + ")", "rewind " + std::to_string(id));
  set_current(m.index, "kvc_sequence_rewind");
  const kvc_status_t st =
      m.call("kvc_sequence_rewind", e, n == 0, [&] { return kvc_sequence_rewind(m.cache, id, n); });
  trace("c%d rewind(id %llu, %llu) -> %s\n", m.index, (unsigned long long)id,
        (unsigned long long)n, kvc_status_string(st));
  if (st != KVC_OK || n == 0) return;
  SeqModel& q = m.seqs.at(id);
  const uint64_t keep = len - n;
  feedback(kRewindShape, keep < q.committed, keep % m.T != 0);
  q.tokens.resize(keep);
  q.hash.resize(keep);
  m.fill(q, keep);  // shrinks the rows
  q.cached = std::min(q.cached, keep);
  q.committed = std::min(q.committed, keep);
  m.settle();
}

void Program::fork() {
  CacheModel& m = c();
  const uint64_t parent = live_id();
  const uint64_t child = read_id();
  Expect e;
  if (find(parent) == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  if (find(child) != nullptr) e.allow(KVC_ERR_ALREADY_EXISTS);
  if (e.empty()) e.allow(KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_sequence_fork(c[" + std::to_string(m.index) + "], " + c_u64(parent) + ", " + c_u64(child) + ")", "fork " + std::to_string(parent) + " -> " + std::to_string(child));
  set_current(m.index, "kvc_sequence_fork");
  const kvc_status_t st = m.call("kvc_sequence_fork", e, false,
                                 [&] { return kvc_sequence_fork(m.cache, parent, child); });
  trace("c%d fork(%llu -> %llu) -> %s\n", m.index, (unsigned long long)parent,
        (unsigned long long)child, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.seqs.at(parent).shared = true;
  SeqModel& q = m.seqs[child] = m.seqs.at(parent);
  q.fork_depth = std::min<uint32_t>(q.fork_depth + 1, 7);
  feedback(kForkDepth, q.fork_depth, m.window.size() > 1 || m.window[0] != 0);
  m.settle();
}

void Program::remove() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  Expect e;
  e.allow(find(id) == nullptr ? KVC_ERR_NOT_FOUND : KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_sequence_remove(c[" + std::to_string(m.index) + "], " + c_u64(id) + ")", "remove " + std::to_string(id));
  set_current(m.index, "kvc_sequence_remove");
  const kvc_status_t st =
      m.call("kvc_sequence_remove", e, false, [&] { return kvc_sequence_remove(m.cache, id); });
  trace("c%d remove(%llu) -> %s\n", m.index, (unsigned long long)id, kvc_status_string(st));
  if (st != KVC_OK) return;
  remember(m.seqs.at(id).tokens);
  m.seqs.erase(id);
  m.settle();
}

void Program::pin() {
  CacheModel& m = c();
  const uint64_t id = live_id();
  Expect e;
  if (find(id) == nullptr) e.allow(KVC_ERR_NOT_FOUND);
  if (m.pins.count(id) != 0) e.allow(KVC_ERR_ALREADY_EXISTS);
  if (e.empty()) e.allow(KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_sequence_pin(c[" + std::to_string(m.index) + "], " + c_u64(id) + ")", "pin " + std::to_string(id));
  set_current(m.index, "kvc_sequence_pin");
  const kvc_status_t st =
      m.call("kvc_sequence_pin", e, false, [&] { return kvc_sequence_pin(m.cache, id); });
  trace("c%d pin(%llu) -> %s\n", m.index, (unsigned long long)id, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.pins.insert(id);
  m.settle();
}

void Program::unpin() {
  CacheModel& m = c();
  uint64_t id = read_id();
  const uint8_t b = in_.u8();
  if (!m.pins.empty() && b < 0xE0) {
    auto it = m.pins.begin();
    std::advance(it, b % m.pins.size());
    id = *it;
  }
  Expect e;
  e.allow(m.pins.count(id) == 0 ? KVC_ERR_NOT_FOUND : KVC_OK);
  if (emitting())
    emit_call(m.index, "kvc_sequence_unpin(c[" + std::to_string(m.index) + "], " + c_u64(id) + ")", "unpin " + std::to_string(id));
  set_current(m.index, "kvc_sequence_unpin");
  const kvc_status_t st =
      m.call("kvc_sequence_unpin", e, false, [&] { return kvc_sequence_unpin(m.cache, id); });
  trace("c%d unpin(%llu) -> %s\n", m.index, (unsigned long long)id, kvc_status_string(st));
  if (st != KVC_OK) return;
  m.pins.erase(id);
  m.settle();
}

}  // namespace kvc_fuzz
