// The state configuration (KVC_FUZZ_STATE): programs over a paged cache
// with state resources (state.h): SSM, conv and generic state in 2-4 state
// slots, 0-3 snapshot slots, a handful of 4-token blocks, so that slot
// refusals, snapshot evictions and block evictions (dropping snapshots)
// happen all the time. The mirror holds the expected bytes of every slot
// of every resource (what the harness wrote, what a restore or a fork
// copied in; a freed slot keeps its bytes), every live sequence's tokens
// and committed count, and for every prefix the bytes last published at
// it. A snapshot may be gone (evicted, dropped with its node): a shorter
// reuse or a refused rewind is allowed; restored bytes that differ from
// the last publish at that prefix, a reuse that ends where nothing was
// published, or any byte of any slot changing without a call that may
// write it are findings. kvc_cache_check after every call; a refused call
// must change nothing (slots, sequences, snapshot statistics). A quarter
// of the programs have a host tier with 1-2 host snapshot slots (state.h:
// a quarter of host_cache_bytes), so that full pools offload snapshots to
// the host pool and reuses and rewinds restore from it.
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "fuzz_feedback.h"
#include "fuzz_input.h"
#include "fuzz_model.h"
#include "fuzz_ops.h"
#include "fuzz_state.h"

namespace kvc_fuzz {

StateCounters g_state;

namespace {

constexpr uint32_t T = 4;            // tokens per block
constexpr uint32_t kMaxIds = 6;      // sequence ids 0..5
constexpr uint32_t kMaxPrompt = 20;  // tokens of a prompt

using Bytes = std::vector<unsigned char>;
using Tokens = std::vector<int32_t>;

void must(kvc_status_t st, const char* what) {
  ++g_count.check_calls;
  if (st != KVC_OK) finding("%s failed: %s: %s", what, kvc_status_string(st), kvc_last_error_message());
}

struct Seq {
  bool live = false;
  Tokens tokens;
  uint64_t committed = 0;
  std::vector<int32_t> slot;  // per resource
};

class StateProgram {
 public:
  explicit StateProgram(Input& in) : in_(in) {}
  ~StateProgram() {
    if (cache_ != nullptr) kvc_cache_destroy(cache_);
  }
  void run();

 private:
  // --- setup ------------------------------------------------------------
  bool create();
  // --- mirror -----------------------------------------------------------
  unsigned char* slot_ptr(uint32_t r, int32_t slot) const {
    return static_cast<unsigned char*>(res_[r].base) + uint64_t(slot) * res_[r].slot_stride;
  }
  Bytes read_slot(uint32_t r, int32_t slot) const {
    const unsigned char* p = slot_ptr(r, slot);
    return Bytes(p, p + res_[r].slot_bytes);
  }
  std::vector<Bytes> state_of(const Seq& s) const {
    std::vector<Bytes> v;
    for (uint32_t r = 0; r < nres_; ++r) v.push_back(read_slot(r, s.slot[r]));
    return v;
  }
  void set_state(const Seq& s, const std::vector<Bytes>& v) {
    for (uint32_t r = 0; r < nres_; ++r) {
      mirror_[r][s.slot[r]] = v[r];
      known_[r][s.slot[r]] = true;
    }
  }
  void learn_slots(uint64_t id);
  void verify(const char* what);
  kvc_snapshot_stats_t stats() const;
  void after(const char* what, kvc_status_t st, std::initializer_list<kvc_status_t> allowed);
  void unchanged(const char* what, const kvc_snapshot_stats_t& before);
  // --- operations -------------------------------------------------------
  Tokens prompt();
  uint64_t pick_id() { return in_.below(kMaxIds); }
  int live_count() const;
  void add();
  void write_state() { write_state(pick_id()); }
  void write_state(uint64_t id);
  void commit();
  void publish();
  void extend();
  void rewind();
  void fork();
  void remove();
  void reset_reuse();
  void bad_input();

  Input& in_;
  kvc_cache_t* cache_ = nullptr;
  uint32_t nres_ = 0, slots_ = 0, snapshots_ = 0, host_snapshots_ = 0;
  std::vector<kvc_resource_desc_t> res_;
  std::vector<std::vector<Bytes>> mirror_;  // [resource][slot]
  std::vector<std::vector<bool>> known_;
  Seq seqs_[kMaxIds];
  std::map<Tokens, std::vector<Bytes>> published_;  // prefix -> bytes of its last publish
  std::vector<Tokens> history_;                     // prompts seen, to build shared prefixes
  uint32_t nonce_ = 0;
};

bool StateProgram::create() {
  const uint8_t a = in_.u8(), b = in_.u8();
  kvc_config_t* cfg = nullptr;
  must(kvc_config_create(&cfg), "kvc_config_create");
  must(kvc_config_set_num_layers(cfg, 1), "set_num_layers");
  must(kvc_config_set_kv_heads(cfg, 1), "set_kv_heads");
  must(kvc_config_set_head_dim(cfg, 8), "set_head_dim");
  must(kvc_config_set_tokens_per_block(cfg, T), "set_tokens_per_block");
  uint32_t idx = 0;
  // SSM 1x2x4 f32 (32 bytes); conv managed (conv_dim 2 + 2*1*4 = 10) or
  // local (conv_dim 7: the n_groups constraint fails); a generic state of
  // 1-64 bytes; sometimes a second SSM of another shape (local).
  must(kvc_config_add_ssm_state(cfg, 1, 2, 4, KVC_DTYPE_F32, &idx), "add_ssm_state");
  must(kvc_config_add_conv_state(cfg, (a & 1) ? 7 : 10, 2, (a & 2) ? KVC_DTYPE_F16 : KVC_DTYPE_F32,
                                 &idx), "add_conv_state");
  must(kvc_config_add_generic_state(cfg, 1 + (b % 64), (a & 4) ? 512 : 0, &idx), "add_generic_state");
  if (a & 8) must(kvc_config_add_ssm_state(cfg, 2, 1, 3, KVC_DTYPE_BF16, &idx), "add_ssm_state 2");
  slots_ = 2 + (a >> 4) % 3;                                  // 2-4 sequences at once
  snapshots_ = (a >> 6) == 3 ? 0 : 1 + (a >> 6);              // 0-3 snapshots... 0 means none here
  must(kvc_config_set_max_state_slots(cfg, slots_), "set_max_state_slots");
  must(kvc_config_set_max_state_snapshots(cfg, snapshots_ == 0 ? KVC_STATE_SNAPSHOTS_NONE : snapshots_),
       "set_max_state_snapshots");
  // Budget: the slots and snapshots (each resource's stride at most 512
  // bytes) plus 6-21 blocks of 64 bytes (f16: 4 tokens x 8 x K and V).
  const uint64_t blocks = 6 + (b >> 4);
  const uint64_t per_slot = 512ull * (idx + 1);
  must(kvc_config_set_primary_bytes(cfg, (slots_ + snapshots_) * per_slot + blocks * 64), "set_primary_bytes");
  // A host tier (b & 3 == 1): 4 * per_slot buys at least one host snapshot
  // slot, twice that two; 8 host blocks of 64 bytes besides.
  host_snapshots_ = (b & 3) == 1 && snapshots_ > 0 ? 1 + ((b >> 2) & 1) : 0;
  if ((b & 3) == 1)
    must(kvc_config_set_host_cache_bytes(cfg, 4 * per_slot * (1 + ((b >> 2) & 1)) + 8 * 64),
         "set_host_cache_bytes");
  ++g_count.calls;
  set_current(0, "kvc_cache_create");
  must(kvc_cache_create(cfg, &cache_), "kvc_cache_create of a state config");
  kvc_config_destroy(cfg);
  nres_ = idx + 1;
  res_.resize(nres_);
  mirror_.assign(nres_, std::vector<Bytes>(slots_));
  known_.assign(nres_, std::vector<bool>(slots_, false));
  for (uint32_t r = 0; r < nres_; ++r) {
    kvc_resource_desc_init(&res_[r]);
    must(kvc_cache_describe_resource(cache_, r, &res_[r]), "kvc_cache_describe_resource");
    if (res_[r].num_slots != slots_) finding("resource %u has %u slots, configured %u", r, res_[r].num_slots, slots_);
  }
  const kvc_snapshot_stats_t s = stats();
  if (s.num_slots != snapshots_) finding("snapshot pool of %u slots, configured %u", s.num_slots, snapshots_);
  if (s.host_num_slots < host_snapshots_ || (host_snapshots_ == 0 && s.host_num_slots != 0))
    finding("host snapshot pool of %u slots, expected %s%u", s.host_num_slots,
            host_snapshots_ == 0 ? "" : "at least ", host_snapshots_);
  if (host_snapshots_ > 0) ++g_state.host_caches;
  if (g_trace)
    std::printf("state cache: %u resources (conv %s), %u slots, %u snapshots, %llu blocks budgeted\n", nres_,
                res_[1].managed ? "managed" : "local", slots_, snapshots_, (unsigned long long)blocks);
  return true;
}

kvc_snapshot_stats_t StateProgram::stats() const {
  kvc_snapshot_stats_t s;
  kvc_snapshot_stats_init(&s);
  must(kvc_cache_get_snapshot_stats(cache_, &s), "kvc_cache_get_snapshot_stats");
  return s;
}

void StateProgram::learn_slots(uint64_t id) {
  Seq& s = seqs_[id];
  s.slot.assign(nres_, -1);
  must(kvc_batch_state_slots(cache_, &id, 1, KVC_STATE_ALL, s.slot.data()), "kvc_batch_state_slots");
  for (uint32_t r = 0; r < nres_; ++r) {
    if (s.slot[r] < 0 || uint32_t(s.slot[r]) >= slots_) finding("sequence %llu: slot %d of resource %u", (unsigned long long)id, s.slot[r], r);
    for (uint64_t o = 0; o < kMaxIds; ++o)
      if (o != id && seqs_[o].live && seqs_[o].slot[r] == s.slot[r])
        finding("sequences %llu and %llu share slot %d of resource %u", (unsigned long long)id,
                (unsigned long long)o, s.slot[r], r);
  }
}

// Every slot byte the mirror knows, every live sequence's length and
// committed count, the pools' use, and the invariant checker.
void StateProgram::verify(const char* what) {
  must(kvc_cache_check(cache_), "kvc_cache_check");
  for (uint32_t r = 0; r < nres_; ++r)
    for (uint32_t k = 0; k < slots_; ++k)
      if (known_[r][k] && std::memcmp(slot_ptr(r, int32_t(k)), mirror_[r][k].data(), res_[r].slot_bytes) != 0)
        finding("after %s: slot %u of resource %u does not hold the bytes it should", what, k, r);
  uint32_t live = 0;
  for (uint64_t id = 0; id < kMaxIds; ++id) {
    kvc_sequence_desc_t d;
    kvc_sequence_desc_init(&d);
    ++g_count.check_calls;
    const kvc_status_t st = kvc_sequence_describe(cache_, id, &d);
    if (!seqs_[id].live) {
      if (st != KVC_ERR_NOT_FOUND) finding("after %s: sequence %llu exists", what, (unsigned long long)id);
      continue;
    }
    ++live;
    if (st != KVC_OK || d.num_tokens != seqs_[id].tokens.size() || d.committed_tokens != seqs_[id].committed)
      finding("after %s: sequence %llu has %llu tokens, %llu committed (mirror %zu, %llu)", what,
              (unsigned long long)id, (unsigned long long)d.num_tokens,
              (unsigned long long)d.committed_tokens, seqs_[id].tokens.size(),
              (unsigned long long)seqs_[id].committed);
  }
  for (uint32_t r = 0; r < nres_; ++r) {
    kvc_resource_desc_t d;
    kvc_resource_desc_init(&d);
    must(kvc_cache_describe_resource(cache_, r, &d), "kvc_cache_describe_resource");
    if (d.slots_used != live || d.base != res_[r].base)
      finding("after %s: resource %u has %u slots used, %u sequences live", what, r, d.slots_used, live);
  }
  const kvc_snapshot_stats_t s = stats();
  if (s.slots_used > s.num_slots) finding("after %s: %u snapshots in %u slots", what, s.slots_used, s.num_slots);
  if (s.host_slots_used > s.host_num_slots)
    finding("after %s: %u host snapshots in %u slots", what, s.host_slots_used, s.host_num_slots);
}

void StateProgram::after(const char* what, kvc_status_t st, std::initializer_list<kvc_status_t> allowed) {
  bool ok = false;
  for (kvc_status_t a : allowed) ok |= a == st;
  if (!ok) finding("%s: unexpected %s: %s", what, kvc_status_string(st), kvc_last_error_message());
  if (st != KVC_OK) {
    ++g_count.failed_calls;
    if (kvc_last_error_message()[0] == '\0') finding("%s failed with an empty message", what);
  }
  feedback(kOpStatus, g_op, uint32_t(st) & 31);
}

void StateProgram::unchanged(const char* what, const kvc_snapshot_stats_t& b) {
  const kvc_snapshot_stats_t a = stats();
  if (std::memcmp(&a, &b, sizeof a) != 0) finding("refused %s changed the snapshot statistics", what);
  verify(what);
}

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

void StateProgram::run() {
  if (!create()) return;
  verify("kvc_cache_create");
  for (int i = 0; i < kMaxCalls && !in_.empty(); ++i) {
    const uint8_t op = in_.u8();
    g_op = op % 16;
    ++g_state.ops[g_op];
    switch (op % 16) {
      case 0: case 1: case 2: add(); break;
      case 3: case 4: write_state(); break;
      case 5: case 6: commit(); break;
      case 7: case 8: publish(); break;
      case 9: extend(); break;
      case 10: case 11: rewind(); break;
      case 12: fork(); break;
      case 13: remove(); break;
      case 14: if (op & 0x80) reset_reuse(); else bad_input(); break;
      default: {
        // Prefill: commit a sequence to its length and publish at each
        // block boundary after writing the state "computed" there.
        const uint64_t id = pick_id();
        Seq& s = seqs_[id];
        if (!s.live) break;
        for (uint64_t p = (s.committed / T + 1) * T; p <= s.tokens.size(); p += T) {
          write_state(id);  // the state computed up to p
          must(kvc_sequence_commit(cache_, id, p), "commit in a prefill");
          s.committed = std::max(s.committed, p);
          if (snapshots_ == 0) continue;
          ++g_count.calls;
          const kvc_status_t st = kvc_sequence_publish_state(cache_, id, p, nullptr);
          after("publish in a prefill", st, {KVC_OK, KVC_ERR_INVALID_STATE});
          if (st == KVC_OK) {
            published_[Tokens(s.tokens.begin(), s.tokens.begin() + p)] = state_of(s);
            ++g_state.publishes;
          }
          verify("a prefill's publish");
        }
        break;
      }
    }
  }
}

}  // namespace

void state_one_input(Input& in) {
  StateProgram p(in);
  p.run();
}

void state_report() {
  std::fprintf(stderr,
               "kvcache_fuzz state: %llu adds restored a snapshot (%llu tokens), %llu cold, %llu refused; "
               "%llu state writes; %llu publishes (%llu evicted another), %llu refused at a bad position, "
               "%llu at an unpublished block; %llu rewinds restored, %llu refused; %llu forks; %llu resets; %llu bad inputs; "
               "%llu programs with host snapshots, %llu publishes offloaded one, %llu restores from the host\n",
               (unsigned long long)g_state.restored_adds, (unsigned long long)g_state.restored_tokens,
               (unsigned long long)g_state.adds_cold, (unsigned long long)g_state.adds_refused,
               (unsigned long long)g_state.writes, (unsigned long long)g_state.publishes,
               (unsigned long long)g_state.publish_evictions, (unsigned long long)g_state.publish_refused,
               (unsigned long long)g_state.publish_unpublished_block,
               (unsigned long long)g_state.rewinds_restored, (unsigned long long)g_state.rewinds_refused,
               (unsigned long long)g_state.forks, (unsigned long long)g_state.resets,
               (unsigned long long)g_state.bad_inputs, (unsigned long long)g_state.host_caches,
               (unsigned long long)g_state.publish_offloads, (unsigned long long)g_state.onboards);
  std::fprintf(stderr, "kvcache_fuzz state ops:");
  for (int i = 0; i < 16; ++i) std::fprintf(stderr, " %llu", (unsigned long long)g_state.ops[i]);
  std::fprintf(stderr, "\n");
}

}  // namespace kvc_fuzz
