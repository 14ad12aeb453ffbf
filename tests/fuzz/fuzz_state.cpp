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
#include "fuzz_state_program.h"

namespace kvc_fuzz {

StateCounters g_state;

namespace state_program {

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

}  // namespace state_program

void state_one_input(Input& in) {
  state_program::StateProgram p(in);
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
