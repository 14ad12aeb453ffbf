// The sequences of a cache and what they do: add, extend (one sequence or
// a decode batch), commit, rewind, fork, remove, pin. Owns the sequence
// table, the pins and the Reservation every call that takes blocks plans
// in. Each call is written as plan, then apply: the plan checks every
// argument and, for a call that takes blocks, fills the Reservation (block
// sets, per-pool needs, cached blocks it takes, the nodes it will hold) and
// asks Residency whether the pools can give them; only a plan that holds is
// applied, and applying cannot fail (the host allocations it needs are made
// before: vectors reserved, the scope interned, the tier's copies done).
// Running out of blocks is a refusal the try_ calls return (the
// Reservation's refusal says why), not an exception.
//
// The methods live by concept: sequences.cpp (lookups, argument checks,
// block-position helpers), sequence_add.cpp, sequence_extend.cpp,
// sequence_publish.cpp (commit), sequence_release.cpp (rewind, fork,
// remove, pins), sequences_check.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "core/block_key.h"
#include "core/cache_config.h"
#include "core/cache_stats.h"
#include "core/eviction.h"
#include "core/group_layout.h"
#include "core/prefix_index.h"
#include "core/reservation.h"
#include "core/residency.h"
#include "core/retention.h"
#include "core/sequence.h"
#include "core/sequence_table.h"
#include "core/store_chain.h"
#include "core/tier.h"

namespace kvc {

class CommitHashes;  // sequence_publish.cpp

// Longest sequence, in tokens: lengths and offsets are int32 in the tables
// attention kernels take.
constexpr uint64_t kMaxSequenceTokens = 0x7fffffff;

struct SequenceOptions {
  uint32_t prompt_priority = kDefaultPriority;
  uint32_t decode_priority = kDefaultPriority;
  uint64_t decode_duration_ms = kNoDuration;
  std::vector<RetentionRange> retention_ranges;  // prompt token ranges, in order
  bool has_salt = false;  // absent differs from empty
  std::string salt;
  bool has_lora = false;  // absent differs from LoRA 0
  uint64_t lora_id = 0;
  std::vector<ExtraKey> extra_keys;
};

// What an export holds and names (Sequences::hold_published).
struct ExportHold {
  uint64_t key = 0;
  uint64_t num_blocks = 0;
  std::vector<uint32_t> blocks;  // [b * num_groups + g]
  std::vector<int32_t> tokens;   // num_blocks * T
  std::string scope_bytes;
  std::vector<ExtraKey> extras;  // sorted
};

// What sequences and pins hold, recounted by the invariant checker.
struct Holdings {
  std::vector<std::vector<uint32_t>> refs;      // per pool, per block: owners found
  std::vector<std::vector<uint32_t>> group_of;  // per pool, per block: the group it serves
  std::vector<uint32_t> holders;                // per node: sequences naming it (no anchors)
  std::vector<uint64_t> scope_refs;             // per scope: sequences in it
};

class Sequences {
 public:
  Sequences(const CacheConfig& config, const GroupLayout& layout, PrefixIndex& index,
            Residency& residency, Eviction& eviction, Tier& tier, CacheCounters& counters);
  // The block stores an add looks a prompt up in past the tree's match
  // (nullptr: none); set once.
  void set_stores(StoreChain* stores) { stores_ = stores; }

  // --- Calls that take blocks (false: refused, nothing changed, refusal()
  // says why; every other error throws) -------------------------------------
  bool try_add(uint64_t id, const int32_t* tokens, uint64_t num_tokens,
               const SequenceOptions& options, void* stream, uint64_t* cached_tokens);
  bool try_extend(uint64_t id, const int32_t* tokens, uint64_t num_tokens, void* stream);
  bool try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count, void* stream);
  const Refusal& refusal() const { return reservation_.refusal; }

  // --- The others -----------------------------------------------------------
  // loaded: the blocks to publish are those an add just loaded from the
  // block stores (store_chain.h), which hold them: not written through again.
  void commit(uint64_t id, uint64_t num_computed, bool loaded = false);
  void rewind(uint64_t id, uint64_t num_tokens);
  void fork(uint64_t parent, uint64_t child);
  void remove(uint64_t id);
  void pin(uint64_t id);
  void unpin(uint64_t id);
  // Export holds (block_export.cpp): the first num_tokens / T published
  // blocks of sequence `id` (num_tokens 0: every committed full block;
  // else block aligned and <= committed) held as a pin holds them (past
  // the sequence's removal, eviction and reset_reuse) until
  // release_hold(out.key). Fills `out` (blocks, tokens, scope). Throws
  // Error naming what is wrong, nothing changed.
  void hold_published(uint64_t id, uint64_t num_tokens, ExportHold& out);
  void release_hold(uint64_t key);
  uint64_t num_holds() const { return holds_.size(); }

  // --- Queries --------------------------------------------------------------
  uint64_t probe(const int32_t* tokens, uint64_t num_tokens, const SequenceOptions& options) const;
  uint64_t blocks_needed(uint64_t id, uint64_t num_tokens) const;
  const Sequence& sequence(uint64_t id) const;
  Sequence& sequence(uint64_t id);
  const Sequence* find(uint64_t id) const { return seqs_.find(id); }
  uint64_t size() const { return seqs_.size(); }
  uint64_t num_pins() const { return pins_.size(); }
  uint64_t next_batch_epoch() { return ++batch_epoch_; }
  Sequence& sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch);
  Sequence& claim_for_batch(Sequence* s, const uint64_t* ids, size_t i, uint64_t epoch);
  // Every ids[i] claimed for one batch call (sequence_for_batch's checks,
  // in index order), the lookups pipelined as in a decode step; the
  // sequences, valid until the next batch call.
  Sequence* const* claim_batch(const uint64_t* ids, size_t count);

  // The checker (sequences_check.cpp): each sequence's own invariants, and
  // what sequences and pins hold, into h (sized by the caller).
  void count_holdings(Holdings& h) const;

  // Refuses options an add would refuse (Error(KVC_ERR_INVALID_ARGUMENT)
  // naming the field); kvc_block_hashes() checks its options so too.
  static void check_options(const SequenceOptions& o);
  // The checks of try_add that come before any change (an empty prompt,
  // its length, the options, an id in use), in its order: a caller that may
  // refuse the add for its own reason (state slots) refuses only after them.
  void check_add(uint64_t id, uint64_t n, const SequenceOptions& options) const;

 private:
  struct Pin {
    std::vector<uint32_t> blocks;           // num_groups per entry
    std::vector<BlockRetention> retention;  // per entry
  };
  // An add's plan besides its Reservation: what the prompt reuses.
  struct AddPlan {
    PrefixMatch match;
    std::vector<int64_t> window_begin;  // per group: the first reused position it holds
    uint64_t num_blocks = 0;
    uint64_t cached_tokens = 0;
    uint64_t staged = 0;  // leading blocks past the match the stores hold (staged)
  };

  // sequence_add.cpp
  bool plan_add(const int32_t* tokens, uint64_t n, const std::string& scope_bytes,
                const std::vector<ExtraKey>& extras, Reservation& r, AddPlan& plan);
  std::unique_ptr<Sequence> stage_add(uint64_t id, const int32_t* tokens, uint64_t n,
                                      const SequenceOptions& options,
                                      std::vector<ExtraKey>&& extras,
                                      const std::string& scope_bytes, Reservation& r,
                                      const AddPlan& plan, void* stream);
  void apply_add(Sequence& s, Reservation& r, const AddPlan& plan, void* stream);

  // sequence_extend.cpp
  // Plans `sets` fresh block sets for the call r began.
  bool reserve_sets(Reservation& r, uint64_t sets);
  bool needs_copy_on_write(const Sequence& s) const;
  void copy_on_write(Sequence& s, void* stream);
  void append_new_set(Sequence& s);
  // append_new_set `count` times (s has the capacity); where every eviction
  // takes whole nodes, through Eviction::alloc_sets_ahead.
  void append_new_sets(Sequence& s, uint64_t count);

  // sequence_publish.cpp
  // Publishes block b whose key has `extra` and `hash` (hash_blocks).
  bool publish_full(Sequence& s, uint64_t b, const std::string& extra, uint64_t hash,
                    uint64_t now_ms);
  void publish_tail(Sequence& s);
  // Publishes blocks from s.published on while each is a new node under
  // the one before (which the caller found childless) that s holds alone,
  // in a model without windowed groups, extra keys or events (commit's
  // lean loop); stops at `end`, at a full tree or at the first other block.
  void commit_chain(Sequence& s, CommitHashes& hashes, uint64_t end, uint64_t now);
  // A new node for s's block b under `key`, published at now_ms: its blocks
  // point to it.
  uint32_t link_new_node(Sequence& s, uint64_t b, const BlockKey& key, uint64_t now_ms);
  // The hash block `first`'s key chains on: block first-1's (0 at the start).
  uint64_t chain_start_hash(const Sequence& s, uint64_t first) const;
  // block_hashes_[b - first] = the chained hash of block b's key, for
  // b in [first, end), with block_extras_ (already encoded).
  void hash_blocks_with_extras(const Sequence& s, uint64_t first, uint64_t end);

  // sequence_release.cpp
  void release_position(Sequence& s, uint64_t b);
  // Releases a windowed group's blocks that left the window.
  void release_out_of_window(Sequence& s);

  // sequences.cpp: argument checks (Error(KVC_ERR_INVALID_ARGUMENT)).
  static std::string name(uint64_t id);  // "sequence 7"
  // A sequence of n tokens.
  static void check_length(uint64_t n, const char* what);
  // n more tokens on a sequence of `length`, compared without forming
  // length + n (which wraps for n near UINT64_MAX).
  static void check_growth(uint64_t length, uint64_t n, const char* what);

  // sequences.cpp: positions of a sequence.
  // The first group still holding position b of s (UINT32_MAX: none).
  uint32_t lead_group(const Sequence& s, uint64_t b) const;
  // Whether s holds every block it has at position b alone, none in a node.
  bool holds_alone(const Sequence& s, uint64_t b) const;
  // Whether sequence s holds node s.nodes[b] apart from its own blocks.
  bool holds_anchor(const Sequence& s, uint64_t b) const;
  // position_[g] = s.blocks[g][b].
  const uint32_t* position(const Sequence& s, uint64_t b);
  // A sequence object for an add or a fork of `tokens` own tokens: the
  // recycled one whose token capacity fits best (its vectors keep their
  // capacity), else a new one. May allocate.
  std::unique_ptr<Sequence> new_sequence(uint64_t tokens);
  // The spare whose token capacity is the smallest that holds `tokens`,
  // else the largest (spares_ not empty).
  size_t spare_for(uint64_t tokens) const;
  // A removed sequence, kept for reuse while fewer than kSpares wait.
  void recycle(std::unique_ptr<Sequence> s);
  static constexpr size_t kSpares = 128;
  // Capacity for n tokens (no visible change). A buffer too small is
  // swapped for a spare's that holds n (the smallest such), memory an
  // earlier prompt touched, else doubled: a new buffer of a long prompt's
  // tokens takes its page faults in the call (chunked prefill grows one
  // chunk at a time).
  void grow(std::vector<int32_t>& v, uint64_t n) {
    if (v.capacity() < n) grow_slow(v, n);
  }
  void grow_slow(std::vector<int32_t>& v, uint64_t n);
  // Capacity for n block positions (no visible change).
  static void reserve_blocks(Sequence& s, uint64_t n) {
    if (s.nodes.capacity() >= n) return;
    const uint64_t cap = std::max<uint64_t>(n, 2 * s.nodes.capacity());
    for (auto& b : s.blocks) b.reserve(cap);
    s.nodes.reserve(cap);
  }

  const CacheConfig& cfg_;
  const GroupLayout& layout_;
  const uint32_t T_;
  PrefixIndex& index_;
  const RadixTree& tree_;  // index_'s, read
  Residency& residency_;
  Eviction& eviction_;
  Tier& tier_;
  StoreChain* stores_ = nullptr;
  CacheCounters& counters_;
  SequenceTable seqs_;
  std::vector<std::unique_ptr<Sequence>> spares_;  // removed sequences, reset
  std::unordered_map<uint64_t, Pin> pins_;
  std::unordered_map<uint64_t, Pin> holds_;  // exports (hold_published)
  uint64_t next_hold_ = 0;
  uint64_t batch_epoch_ = 0;

  // What the calls plan and apply with (capacity kept: no allocation on
  // the hot paths).
  Reservation reservation_;
  AddPlan add_plan_;
  mutable PrefixMatch probe_match_;
  std::vector<uint32_t> new_set_;   // a block set being allocated
  std::vector<uint32_t> old_set_;   // the set a copy reads
  std::vector<uint32_t> position_;  // one position's blocks
  std::vector<Sequence*> batch_seqs_;
  std::vector<uint8_t> batch_cow_;
  std::vector<std::string> block_extras_;  // commit: each block's encoded extra keys
  std::vector<uint64_t> block_hashes_;     // commit: each block's chained hash
};

// Inline: publish calls them once a block (a commit of a long prompt, in
// its loop).
inline uint32_t Sequences::lead_group(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    if (s.blocks[g][b] != kNoBlock) return g;
  return UINT32_MAX;
}

// Every group's block, not only one: a rewind gives a sequence back a
// windowed block it had lent a node (rewind()), and that block may be shared
// with a pin or a fork while the sequence's anchor blocks are its own.
inline bool Sequences::holds_alone(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) {
    const uint32_t blk = s.blocks[g][b];
    if (blk == kNoBlock) continue;
    const BlockInfo& info = residency_.info(g, blk);
    if (info.ref != 1 || info.node != kNoNode) return false;
  }
  return true;
}

inline const uint32_t* Sequences::position(const Sequence& s, uint64_t b) {
  for (uint32_t g = 0; g < layout_.num_groups(); ++g) position_[g] = s.blocks[g][b];
  return position_.data();
}

}  // namespace kvc
