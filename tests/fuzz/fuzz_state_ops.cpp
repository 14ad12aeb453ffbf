// The state configuration's operations (fuzz_state_program.h): what each
// call the input picks does to the cache and to the mirror, and the calls
// with bad arguments.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "fuzz_feedback.h"
#include "fuzz_model.h"
#include "fuzz_state.h"
#include "fuzz_state_program.h"

namespace kvc_fuzz {
namespace state_program {

int StateProgram::live_count() const {
  int n = 0;
  for (const Seq& s : seqs_) n += s.live;
  return n;
}

// A prompt: often a prefix of an earlier one (a whole number of blocks or
// not) and a tail from a 3-token alphabet, so that prefixes are shared.
Tokens StateProgram::prompt() {
  Tokens t;
  const uint8_t k = in_.u8();
  if (!history_.empty() && (k & 3) != 0) {
    const Tokens& h = history_[in_.below(uint32_t(history_.size()))];
    size_t n = (k & 3) == 3 ? h.size() : std::min<size_t>(h.size(), T * (1 + (k >> 2) % 4));
    t.assign(h.begin(), h.begin() + n);
  }
  const uint32_t tail = t.empty() ? 1 + (k >> 4) % kMaxPrompt : (k >> 5) % 6;
  for (uint32_t i = 0; i < tail && t.size() < kMaxPrompt; ++i) t.push_back(int32_t(1 + in_.below(3)));
  if (t.empty()) t.push_back(1);
  return t;
}

void StateProgram::add() {
  uint64_t id = pick_id();
  // Mostly a free id (a live one is refused, checked all the same).
  if (seqs_[id].live && !in_.one_in(4))
    for (uint64_t i = 1; i < kMaxIds && seqs_[id].live; ++i) id = (id + 1) % kMaxIds;
  const Tokens t = prompt();
  uint64_t probed = 999;
  ++g_count.check_calls;
  if (kvc_cache_probe(cache_, t.data(), t.size(), nullptr, &probed) != KVC_OK)
    finding("kvc_cache_probe failed: %s", kvc_last_error_message());
  const kvc_snapshot_stats_t before = stats();
  uint64_t cached = 12345;
  ++g_count.calls;
  set_current(0, "kvc_sequence_add");
  const kvc_status_t st = kvc_sequence_add(cache_, id, t.data(), t.size(), nullptr, nullptr, &cached);
  if (g_trace) std::printf("add %llu (%zu tokens): %s, cached %llu\n", (unsigned long long)id, t.size(), kvc_status_string(st), (unsigned long long)cached);
  if (seqs_[id].live) after("add of a live id", st, {KVC_ERR_ALREADY_EXISTS});
  else if (live_count() >= int(slots_)) after("add with every state slot held", st, {KVC_ERR_OUT_OF_BLOCKS});
  else after("kvc_sequence_add", st, {KVC_OK, KVC_ERR_OUT_OF_BLOCKS});
  if (st != KVC_OK) {
    if (cached != 12345) finding("refused add wrote cached_tokens");
    ++g_state.adds_refused;
    return unchanged("kvc_sequence_add", before);
  }
  history_.push_back(t);
  if (history_.size() > 16) history_.erase(history_.begin());
  Seq& s = seqs_[id];
  s.live = true;
  s.tokens = t;
  s.committed = cached;
  learn_slots(id);
  if (cached != probed) finding("add reused %llu tokens, the probe said %llu", (unsigned long long)cached, (unsigned long long)probed);
  if (cached % T != 0 || cached >= t.size()) finding("add reused %llu of %zu tokens", (unsigned long long)cached, t.size());
  if (cached > 0) {
    const Tokens prefix(t.begin(), t.begin() + cached);
    auto it = published_.find(prefix);
    if (it == published_.end())
      finding("add reused %llu tokens but no state was ever published at that prefix", (unsigned long long)cached);
    const std::vector<Bytes> got = state_of(s);
    for (uint32_t r = 0; r < nres_; ++r)
      if (got[r] != it->second[r])
        finding("add reused %llu tokens: resource %u's restored bytes differ from the snapshot published there",
                (unsigned long long)cached, r);
    set_state(s, it->second);
    ++g_state.restored_adds;
    if (stats().onboarded > before.onboarded) ++g_state.onboards;
    g_state.restored_tokens += cached;
  } else {
    ++g_state.adds_cold;
  }
  feedback(kAddScope, cached == 0 ? 0 : cached < t.size() - T ? 1 : 2, live_count());
  verify("kvc_sequence_add");
}

// The caller's kernels computing the state: known bytes into every slot.
void StateProgram::write_state(uint64_t id) {
  Seq& s = seqs_[id];
  if (!s.live) return;
  const uint32_t seed = ++nonce_ * 2654435761u ^ in_.u8();
  for (uint32_t r = 0; r < nres_; ++r) {
    unsigned char* p = slot_ptr(r, s.slot[r]);
    for (uint64_t i = 0; i < res_[r].slot_bytes; ++i) p[i] = (unsigned char)(seed * 131 + i * 7 + r * 31 + (seed >> 13));
    mirror_[r][s.slot[r]] = read_slot(r, s.slot[r]);
    known_[r][s.slot[r]] = true;
  }
  ++g_state.writes;
  verify("a write of the state slots");
}

void StateProgram::commit() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  const uint64_t n = s.live ? std::min<uint64_t>(in_.below(uint32_t(s.tokens.size()) + 2), s.tokens.size() + (in_.one_in(8) ? 1 : 0)) : 1;
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_commit");
  const kvc_status_t st = kvc_sequence_commit(cache_, id, n);
  if (!s.live) after("commit of an absent id", st, {KVC_ERR_NOT_FOUND});
  else if (n > s.tokens.size()) after("commit past the length", st, {KVC_ERR_INVALID_ARGUMENT});
  else after("kvc_sequence_commit", st, {KVC_OK});
  if (st != KVC_OK) return unchanged("kvc_sequence_commit", before);
  s.committed = std::max(s.committed, n);
  verify("kvc_sequence_commit");
}

void StateProgram::publish() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  const uint8_t k = in_.u8();
  uint64_t p;
  switch (k % 8) {
    case 0: p = 0; break;
    case 1: p = s.committed + 1 + k / 8 % 5; break;            // past the committed tokens
    case 2: p = 1 + (k / 8) % (kMaxPrompt + 3); break;         // anything, aligned or not
    default: p = T * (1 + (k / 8) % std::max<uint64_t>(1, s.committed / T)); break;  // a committed boundary
  }
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_publish_state");
  const kvc_status_t st = kvc_sequence_publish_state(cache_, id, p, nullptr);
  if (g_trace) std::printf("publish %llu at %llu: %s\n", (unsigned long long)id, (unsigned long long)p, kvc_status_string(st));
  const bool valid = s.live && p > 0 && p % T == 0 && p <= s.committed;
  if (!s.live) after("publish of an absent id", st, {KVC_ERR_NOT_FOUND});
  else if (!valid) after("publish at a bad position", st, {KVC_ERR_INVALID_ARGUMENT});
  else if (snapshots_ == 0) after("publish without snapshot slots", st, {KVC_ERR_INVALID_STATE});
  else after("kvc_sequence_publish_state", st, {KVC_OK, KVC_ERR_INVALID_STATE});  // a duplicate block is not in the tree
  if (st != KVC_OK) {
    ++(valid ? g_state.publish_unpublished_block : g_state.publish_refused);
    return unchanged("kvc_sequence_publish_state", before);
  }
  const kvc_snapshot_stats_t a = stats();
  if (a.published != before.published + 1) finding("publish did not count");
  if (a.evicted > before.evicted) ++g_state.publish_evictions;
  if (a.offloaded > before.offloaded) ++g_state.publish_offloads;
  if (a.offloaded + a.evicted > before.offloaded + before.evicted + 1)
    finding("one publish evicted or offloaded %llu snapshots",
            (unsigned long long)(a.offloaded + a.evicted - before.offloaded - before.evicted));
  published_[Tokens(s.tokens.begin(), s.tokens.begin() + p)] = state_of(s);
  ++g_state.publishes;
  verify("kvc_sequence_publish_state");
}

void StateProgram::extend() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  Tokens t;
  for (uint32_t i = 0, n = 1 + in_.below(6); i < n; ++i) t.push_back(int32_t(1 + in_.below(3)));
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_extend");
  const kvc_status_t st = kvc_sequence_extend(cache_, id, t.data(), t.size(), nullptr);
  if (!s.live) after("extend of an absent id", st, {KVC_ERR_NOT_FOUND});
  else after("kvc_sequence_extend", st, {KVC_OK, KVC_ERR_OUT_OF_BLOCKS});
  if (st != KVC_OK) return unchanged("kvc_sequence_extend", before);
  s.tokens.insert(s.tokens.end(), t.begin(), t.end());
  verify("kvc_sequence_extend");
}

void StateProgram::rewind() {
  const uint64_t id = pick_id();
  Seq& s = seqs_[id];
  const uint8_t k = in_.u8();
  uint64_t n;
  const uint64_t len = s.tokens.size();
  if (k % 4 == 0) n = 1 + (k / 4) % 7;                         // anywhere
  else if (k % 4 == 1) n = len + 1;                             // too many
  else if (k % 4 == 2) n = 0;                                   // a no-op
  else n = len - std::min<uint64_t>(len, T * ((k / 4) % (1 + len / T)));  // to a block boundary
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_rewind");
  const kvc_status_t st = kvc_sequence_rewind(cache_, id, n);
  if (g_trace) std::printf("rewind %llu by %llu of %llu: %s\n", (unsigned long long)id, (unsigned long long)n, (unsigned long long)len, kvc_status_string(st));
  if (!s.live) { after("rewind of an absent id", st, {KVC_ERR_NOT_FOUND}); return unchanged("rewind", before); }
  if (n > len) { after("rewind past the start", st, {KVC_ERR_INVALID_ARGUMENT}); return unchanged("rewind", before); }
  if (n == 0) { after("rewind by 0", st, {KVC_OK}); return verify("rewind by 0"); }
  const uint64_t to = len - n;
  const Tokens prefix(s.tokens.begin(), s.tokens.begin() + to);
  auto it = published_.find(prefix);
  const bool maybe = to > 0 && to % T == 0 && to <= s.committed && it != published_.end();
  if (!maybe) after("rewind to a position without a snapshot", st, {KVC_ERR_INVALID_STATE});
  else after("kvc_sequence_rewind", st, {KVC_OK, KVC_ERR_INVALID_STATE});  // the snapshot may be gone
  if (st != KVC_OK) {
    ++g_state.rewinds_refused;
    return unchanged("kvc_sequence_rewind", before);
  }
  const std::vector<Bytes> got = state_of(s);
  for (uint32_t r = 0; r < nres_; ++r)
    if (got[r] != it->second[r])
      finding("rewind to %llu: resource %u's restored bytes differ from the snapshot published there", (unsigned long long)to, r);
  set_state(s, it->second);
  s.tokens.resize(to);
  s.committed = std::min(s.committed, to);
  ++g_state.rewinds_restored;
  if (stats().onboarded > before.onboarded) ++g_state.onboards;
  verify("kvc_sequence_rewind");
}

void StateProgram::fork() {
  const uint64_t parent = pick_id(), child = pick_id();
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_fork");
  const kvc_status_t st = kvc_sequence_fork(cache_, parent, child);
  if (!seqs_[parent].live) after("fork of an absent parent", st, {KVC_ERR_NOT_FOUND});
  else if (seqs_[child].live) after("fork into a live id", st, {KVC_ERR_ALREADY_EXISTS});
  else if (live_count() >= int(slots_)) after("fork with every state slot held", st, {KVC_ERR_OUT_OF_BLOCKS});
  else after("kvc_sequence_fork", st, {KVC_OK, KVC_ERR_OUT_OF_BLOCKS});
  if (st != KVC_OK) return unchanged("kvc_sequence_fork", before);
  Seq& c = seqs_[child];
  c = seqs_[parent];
  learn_slots(child);
  const std::vector<Bytes> want = state_of(seqs_[parent]), got = state_of(c);
  for (uint32_t r = 0; r < nres_; ++r)
    if (got[r] != want[r]) finding("fork: resource %u's slot bytes of the child differ from the parent's", r);
  set_state(c, want);
  ++g_state.forks;
  verify("kvc_sequence_fork");
}

void StateProgram::remove() {
  const uint64_t id = pick_id();
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_sequence_remove");
  const kvc_status_t st = kvc_sequence_remove(cache_, id);
  if (!seqs_[id].live) { after("remove of an absent id", st, {KVC_ERR_NOT_FOUND}); return unchanged("remove", before); }
  after("kvc_sequence_remove", st, {KVC_OK});
  seqs_[id].live = false;  // its slots keep their bytes
  verify("kvc_sequence_remove");
}

void StateProgram::reset_reuse() {
  const kvc_snapshot_stats_t before = stats();
  ++g_count.calls;
  set_current(0, "kvc_cache_reset_reuse");
  const kvc_status_t st = kvc_cache_reset_reuse(cache_);
  // Refused while sequences hold blocks; else every node and snapshot goes.
  if (live_count() > 0) {
    after("kvc_cache_reset_reuse with live sequences", st, {KVC_ERR_INVALID_STATE});
    return unchanged("kvc_cache_reset_reuse", before);
  }
  after("kvc_cache_reset_reuse", st, {KVC_OK});
  const kvc_snapshot_stats_t s = stats();
  if (s.slots_used != 0) finding("reset_reuse left %u snapshots", s.slots_used);
  ++g_state.resets;
  verify("kvc_cache_reset_reuse");
}

// Bad input: NULLs and out-of-range arguments, refused, nothing changed.
void StateProgram::bad_input() {
  const kvc_snapshot_stats_t before = stats();
  const uint8_t k = in_.u8();
  kvc_status_t st = KVC_OK, want = KVC_ERR_INVALID_ARGUMENT;
  ++g_count.calls;
  set_current(0, "a state call with a bad argument");
  switch (k % 7) {
    case 0: st = kvc_sequence_publish_state(nullptr, 0, T, nullptr); break;
    case 1: st = kvc_cache_get_snapshot_stats(cache_, nullptr); break;
    case 2: {
      kvc_snapshot_stats_t s;
      kvc_snapshot_stats_init(&s);
      s.struct_size = 0;
      st = kvc_cache_get_snapshot_stats(cache_, &s);
      break;
    }
    case 3: {
      kvc_resource_desc_t d;
      kvc_resource_desc_init(&d);
      st = kvc_cache_describe_resource(cache_, nres_ + k / 7, &d);
      break;
    }
    case 4: {
      uint64_t id = 0;
      int32_t slot = 77;
      st = kvc_batch_state_slots(cache_, &id, 1, nres_ + k / 7, &slot);
      if (slot != 77) finding("refused kvc_batch_state_slots wrote its output");
      break;
    }
    case 5: st = kvc_batch_state_slots(cache_, nullptr, 1, 0, nullptr); break;
    default: {
      // An unaligned publish on a live sequence, or one on an absent id.
      uint64_t id = kMaxIds + k;
      for (uint64_t i = 0; i < kMaxIds; ++i)
        if (seqs_[i].live && seqs_[i].committed > 1) id = i;
      if (id >= kMaxIds) want = KVC_ERR_NOT_FOUND;
      st = kvc_sequence_publish_state(cache_, id, id < kMaxIds ? 1 + (k / 7) % (T - 1) : T, nullptr);
      break;
    }
  }
  after("a state call with a bad argument", st, {want});
  ++g_state.bad_inputs;
  unchanged("a state call with a bad argument", before);
}

}  // namespace state_program
}  // namespace kvc_fuzz
