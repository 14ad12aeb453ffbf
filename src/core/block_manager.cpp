#include "core/block_manager.h"

#include <algorithm>
#include <string>

#include "core/block_hash.h"
#include "core/key_builder.h"
#include "base/error.h"

namespace kvc {

namespace {

uint64_t blocks_for(uint64_t tokens, uint32_t T) { return (tokens + T - 1) / T; }

std::string seq_name(uint64_t id) { return "sequence " + std::to_string(id); }

[[noreturn]] void not_found(uint64_t id) {
  fail(KVC_ERR_NOT_FOUND, "no " + seq_name(id) + " in this cache");
}

void check_priority(uint32_t v, const char* what) {
  if (v > kMaxPriority)
    invalid_argument(std::string(what) + " must be in 0..100, got " + std::to_string(v));
}

}  // namespace

namespace {

// Tree capacity. Without windows a node holds one block of each group, so
// a pool's share of one group bounds it (as before). With windows the
// anchor group may take a whole shared pool; without any anchor, nodes
// outlive their blocks while sequences name them, so allow twice the
// blocks (publishing stops, never fails, when the tree is full).
uint32_t tree_capacity(const LayerGrouping& grouping,
                       const std::vector<std::unique_ptr<PoolMemory>>& memory) {
  if (memory.empty()) return 0;
  uint32_t ref = 0;
  bool any_window = false, any_full = false;
  for (uint32_t g = 0; g < grouping.groups.size(); ++g) {
    if (grouping.groups[g].window != 0) any_window = true;
    else if (!any_full) any_full = true, ref = g;
  }
  const uint32_t pool = grouping.groups[ref].pool;
  if (!any_window) return uint32_t(memory[pool]->num_blocks() / grouping.pools[pool].groups.size());
  if (any_full) return uint32_t(memory[pool]->num_blocks());
  uint64_t total = 0;
  for (const auto& m : memory) total += m->num_blocks();
  return uint32_t(std::min<uint64_t>(2 * total, UINT32_MAX - 2));
}

// Block sets of the host tier: every host node holds one.
uint64_t sets_in(const std::vector<std::unique_ptr<PoolMemory>>& memory,
                 const LayerGrouping& grouping) {
  if (memory.empty()) return 0;
  const uint32_t p = grouping.groups[0].pool;
  return memory[p]->num_blocks() / grouping.pools[p].groups.size();
}

}  // namespace

BlockManager::BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
                           const std::vector<std::unique_ptr<PoolMemory>>& memory,
                           const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
                           Device& device, uint64_t arena_pages)
    : cfg_(config),
      grouping_(grouping),
      memory_(memory),
      host_memory_(host_memory),
      device_(device),
      T_(config.tokens_per_block),
      layout_(grouping, config.tokens_per_block),
      counters_(uint32_t(grouping.groups.size())),
      residency_(layout_, grouping, memory, device, arena_pages, counters_),
      index_(config, layout_, residency_,
             uint32_t(tree_capacity(grouping, memory) + sets_in(host_memory, grouping)),
             /*track_children=*/!host_memory.empty() || arena_pages != 0),
      tree_(index_.tree()),
      eviction_(layout_, index_, residency_, counters_, config.manual_clock) {
  const uint32_t G = uint32_t(grouping.groups.size());
  if (host_memory.empty())
    tier_ = std::make_unique<NoTier>(tree_);
  else
    tier_ = std::make_unique<HostTier>(layout_, grouping, index_, residency_, eviction_, counters_,
                                       device, memory, host_memory,
                                       config.secondary_offload_min_priority);
  eviction_.set_tier(*tier_);
  residency_.set_reclaimer(&eviction_);
  set_scratch_.resize(G);
  position_set_.resize(G);
  set_scratch3_.resize(G);
  window_begin_.resize(G);
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

bool BlockManager::have_sets(Reservation& r, uint64_t sets) {
  r.need_sets(sets, layout_.pool_groups);
  return residency_.have_blocks(r);
}

bool BlockManager::needs_copy_on_write(const Sequence& s) const {
  if (s.tail_private || s.length() % T_ == 0 || s.num_blocks() == 0) return false;
  // The tail is inside every window, so every group holds it; a windowed
  // block may sit in a node whose other blocks are not the sequence's.
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const BlockInfo& tail = residency_.info(g, s.blocks[g].back());
    if (tail.ref > 1 || tail.node != kNoNode) return true;
  }
  return false;
}

uint32_t BlockManager::lead_group(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (s.blocks[g][b] != kNoBlock) return g;
  return UINT32_MAX;
}

// Every group's block, not only one: a rewind gives a sequence back a
// windowed block it had lent a node (rewind()), and that block may be shared
// with a pin or a fork while the sequence's anchor blocks are its own.
bool BlockManager::holds_alone(const Sequence& s, uint64_t b) const {
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const uint32_t blk = s.blocks[g][b];
    if (blk == kNoBlock) continue;
    const BlockInfo& info = residency_.info(g, blk);
    if (info.ref != 1 || info.node != kNoNode) return false;
  }
  return true;
}

bool BlockManager::holds_anchor(const Sequence& s, uint64_t b) const {
  const uint32_t n = s.nodes[b];
  if (n == kNoNode) return false;
  if (layout_.anchors.empty()) return true;  // names the node: a holder
  return tree_.block(n, layout_.ref_group) != s.blocks[layout_.ref_group][b];
}

void BlockManager::grow(std::vector<int32_t>& v, uint64_t n) {
  if (v.capacity() < n) v.reserve(std::max<uint64_t>(n, 2 * v.capacity()));
}

void BlockManager::reserve_blocks(Sequence& s, uint64_t n) {
  if (s.nodes.capacity() >= n) return;
  const uint64_t cap = std::max<uint64_t>(n, 2 * s.nodes.capacity());
  for (auto& b : s.blocks) b.reserve(cap);
  s.nodes.reserve(cap);
}

void BlockManager::debug_check() const {
#ifndef NDEBUG
  check_invariants();
#endif
}

// ---------------------------------------------------------------------------
// Reference counting, eviction, allocation
// ---------------------------------------------------------------------------

void BlockManager::mark_published(uint32_t node, const Sequence& s, uint64_t b) {
  eviction_.mark_published(node, s.priority_of_block(b, T_));
}

void BlockManager::advance_clock(uint64_t ms) {
  const RetentionClock& time = eviction_.clock();
  if (!time.manual())
    fail(KVC_ERR_INVALID_STATE,
         "this cache reads the monotonic clock; kvc_cache_advance_clock needs a cache created "
         "with kvc_config_set_manual_clock(config, true)");
  if (ms > UINT64_MAX - time.now_ms())
    invalid_argument("milliseconds (" + std::to_string(ms) + ") would overflow the clock, now at " +
                     std::to_string(time.now_ms()) + " ms");
  eviction_.advance_clock(ms);
  debug_check();
}

void BlockManager::release_position(Sequence& s, uint64_t b) {
  const BlockRetention retention = s.retention_of_block(b, T_);
  const bool anchor = holds_anchor(s, b);
  for (uint32_t g = 0; g < num_groups(); ++g) position_set_[g] = s.blocks[g][b];
  eviction_.release_set(position_set_.data(), 1, retention);
  if (anchor) eviction_.release_anchor(s.nodes[b], retention);
}

void BlockManager::release_out_of_window(Sequence& s) {
  for (uint32_t g : layout_.windowed) {
    const uint64_t end = std::min<uint64_t>(first_needed(g, s.committed), s.num_blocks());
    for (uint64_t b = s.window_begin[g]; b < end; ++b) {
      const uint32_t blk = s.blocks[g][b];
      s.blocks[g][b] = kNoBlock;
      if (blk == kNoBlock) continue;
      ++counters_.groups[g].released_blocks;
      eviction_.release_window_block(g, blk, s.retention_of_block(b, T_));
    }
    if (end > s.window_begin[g]) s.window_begin[g] = end;
  }
}

void BlockManager::append_new_sets(Sequence& s, uint64_t count) {
  if (!eviction_.can_evict_ahead()) {
    for (uint64_t i = 0; i < count; ++i) append_new_set(s);
    return;
  }
  // Within the capacity reserved by the caller: no allocation.
  const uint64_t first = s.num_blocks();
  for (auto& v : s.blocks) v.resize(first + count);
  s.nodes.resize(first + count, kNoNode);
  eviction_.alloc_sets_ahead(s.blocks, first, count);
  if (count != 0) s.tail_private = true;
}

void BlockManager::append_new_set(Sequence& s) {
  residency_.alloc_set(set_scratch_.data());
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g].push_back(set_scratch_[g]);
  s.nodes.push_back(kNoNode);
  s.tail_private = true;
}

void BlockManager::copy_on_write(Sequence& s, void* stream) {
  const uint64_t b = s.num_blocks() - 1;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch3_[g] = s.blocks[g][b];
  residency_.alloc_set(set_scratch_.data());  // the old tail is held, so never evicted here
  residency_.copy_set(set_scratch3_.data(), set_scratch_.data(), uint32_t(s.length() % T_), stream);
  release_position(s, b);
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g][b] = set_scratch_[g];
  s.tail_private = true;
}

// ---------------------------------------------------------------------------
// Lookup
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------

const Sequence& BlockManager::sequence(uint64_t id) const {
  const Sequence* s = seqs_.find(id);
  if (s == nullptr) not_found(id);
  return *s;
}

Sequence& BlockManager::sequence(uint64_t id) {
  Sequence* s = seqs_.find(id);
  if (s == nullptr) not_found(id);
  return *s;
}

namespace {

void check_options(const SequenceOptions& o) {
  check_priority(o.prompt_priority, "options->prompt_priority");
  check_priority(o.decode_priority, "options->decode_priority");
  check_retention_ranges(o.retention_ranges);
  for (size_t i = 0; i < o.extra_keys.size(); ++i) {
    const ExtraKey& k = o.extra_keys[i];
    if (k.length == 0)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "].length must be > 0, got 0");
    if (k.offset > kMaxSequenceTokens || k.length > kMaxSequenceTokens)
      invalid_argument("options->extra_keys[" + std::to_string(i) + "] covers tokens " +
                       std::to_string(k.offset) + "+" + std::to_string(k.length) +
                       ", beyond the longest sequence (" + std::to_string(kMaxSequenceTokens) +
                       " tokens)");
  }
}

void check_length(uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens)
    invalid_argument(std::string(what) + " would make the sequence " + std::to_string(n) +
                     " tokens long; the limit is " + std::to_string(kMaxSequenceTokens));
}

// `n` more tokens on a sequence of `length` (<= kMaxSequenceTokens): compared
// without forming length + n, which wraps for n near UINT64_MAX.
void check_growth(uint64_t length, uint64_t n, const char* what) {
  if (n > kMaxSequenceTokens - length)
    invalid_argument(std::string(what) + " = " + std::to_string(n) + " on a sequence of " +
                     std::to_string(length) + " tokens would pass the limit of " +
                     std::to_string(kMaxSequenceTokens) + " tokens");
}

std::vector<ExtraKey> sorted_extras(const SequenceOptions& o) {
  std::vector<ExtraKey> keys = o.extra_keys;
  sort_extra_keys(keys);
  return keys;
}

}  // namespace

uint64_t BlockManager::add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream) {
  uint64_t cached = 0;
  if (!try_add(id, tokens, n, options, stream, &cached)) fail(reservation_.refusal.status, reservation_.refusal.message);
  return cached;
}

void BlockManager::extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  if (!try_extend(id, tokens, n, stream)) fail(reservation_.refusal.status, reservation_.refusal.message);
}

void BlockManager::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                void* stream) {
  if (!try_extend_batch(ids, tokens, count, stream)) fail(reservation_.refusal.status, reservation_.refusal.message);
}

bool BlockManager::try_add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream,
                           uint64_t* cached_tokens_out) {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  if (seqs_.find(id) != nullptr)
    fail(KVC_ERR_ALREADY_EXISTS, seq_name(id) + " already exists");

  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  std::vector<ExtraKey> extras = sorted_extras(options);
  PrefixMatch& m = match_;
  index_.match(tokens, n, index_.find_scope(scope_bytes), extras, m);
  const uint64_t num_blocks = blocks_for(n, T_);
  const uint64_t full = m.full.size();
  const uint64_t cached_tokens = full * T_ + m.partial_tokens;
  // Per group, the first reused position it holds (a windowed group needs
  // only the blocks the first computed token can attend to).
  for (uint32_t g = 0; g < num_groups(); ++g)
    window_begin_[g] = int64_t(std::min<uint64_t>(first_needed(g, cached_tokens), full));
  // Host-tier nodes are copied back (onboarded) into a fresh set each.
  const uint64_t onboards = tier_->count_held(m.full, m.partial);
  // Cached primary blocks this add takes into use are no longer evictable.
  Reservation& r = reservation_;
  r.begin("adding the prompt", Reservation::kNoId, residency_.num_pools());
  const uint64_t sets = num_blocks - full - (m.in_place ? 1 : 0) + onboards;
  r.need_sets(sets, layout_.pool_groups);
  uint64_t* taken = r.taken.data();
  // Reused nodes nobody holds stop being evictable; that can only matter
  // when the free blocks alone fall short (or pages may have to move).
  bool short_of_free = residency_.arena() != nullptr;
  for (size_t p = 0; p < residency_.num_pools(); ++p)
    short_of_free |= r.needed[p] > residency_.pool(p).num_free();
  for (uint32_t g = 0; g < num_groups() && short_of_free; ++g) {
    const BlockPool& pool = residency_.pool_of(g);
    for (uint64_t b = uint64_t(window_begin_[g]); b < full; ++b) {
      const uint32_t node = m.full[b];
      if (index_.in_primary(node))
        taken[layout_.group_pool[g]] += pool.info(tree_.block(node, g)).ref == 0 ? 1 : 0;
    }
    if (m.partial != kNoNode && index_.in_primary(m.partial))
      taken[layout_.group_pool[g]] += pool.info(tree_.block(m.partial, g)).ref == 0 ? 1 : 0;
  }
  if (!residency_.have_blocks(r)) return false;

  // Everything that allocates on the host, before the first change.
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->prompt_priority = uint8_t(options.prompt_priority);
  seq->decode_priority = uint8_t(options.decode_priority);
  seq->decode_duration_ms = options.decode_duration_ms;
  seq->retention = options.retention_ranges;
  seq->prompt_len = n;
  seq->token_base = full * T_;
  seq->tokens.assign(tokens + full * T_, tokens + n);
  seq->extra_keys = std::move(extras);
  seq->blocks.resize(num_groups());
  seq->window_begin.assign(num_groups(), 0);
  seq->slot_cursor.assign(num_groups(), 0);
  reserve_blocks(*seq, num_blocks + 1);
  seqs_.reserve_one();
  seq->scope = index_.intern_scope(scope_bytes);
  try {
    r.held = &m.full;
    r.partial = m.partial;
    r.window_begin = window_begin_.data();
    tier_->prepare(r, stream);  // onboard, offload
  } catch (...) {
    index_.unref_scope(seq->scope);
    throw;
  }

  // From here on nothing can fail (the vectors have their capacity).
  const uint32_t G = num_groups();
  if (layout_.windowed.empty()) {
    // Holding the reused nodes in bulk (hold_anchor of every group; the
    // tier brought back any from other tiers).
    seq->nodes.assign(m.full.begin(), m.full.end());
    eviction_.hold_chain(m.full.data(), full, seq->blocks);
  } else {
    for (uint64_t b = 0; b < full; ++b) {
      const uint32_t node = m.full[b];
      eviction_.hold_anchor(node);  // with full groups: the sequence's own anchor blocks
      for (uint32_t g = 0; g < G; ++g) {
        if (!windowed(g)) {
          seq->blocks[g].push_back(tree_.block(node, g));
        } else if (b >= uint64_t(window_begin_[g])) {
          eviction_.hold_slot(node, g);
          seq->blocks[g].push_back(tree_.block(node, g));
        } else {
          seq->blocks[g].push_back(kNoBlock);
        }
      }
      seq->nodes.push_back(node);
    }
    for (uint32_t g = 0; g < G; ++g)
      seq->window_begin[g] = windowed(g) ? uint64_t(window_begin_[g]) : 0;
  }
  for (uint32_t g = 0; g < G; ++g) {
    GroupStats& c = counters_.groups[g];
    c.reused_blocks += full - uint64_t(window_begin_[g]) + (m.partial != kNoNode ? 1 : 0);
    c.missed_blocks += num_blocks - full - (m.partial != kNoNode ? 1 : 0);
  }
  if (m.partial != kNoNode) eviction_.hold_node(m.partial);
  residency_.move_pages(reservation_);  // after the holds: idle pages are exact now
  if (m.partial != kNoNode) {
    if (m.in_place) {
      // Copy on partial reuse is off and nothing else uses the block: the
      // sequence takes it over, and it leaves the tree.
      const uint32_t parent = tree_.node(m.partial).parent;
      for (uint32_t g = 0; g < num_groups(); ++g) {
        const uint32_t blk = tree_.block(m.partial, g);
        residency_.set_node(g, blk, kNoNode);
        seq->blocks[g].push_back(blk);
      }
      seq->nodes.push_back(kNoNode);
      index_.erase(m.partial);
      if (layout_.anchors.empty()) eviction_.erase_if_unused(parent);
    } else {
      // Copy on partial reuse: a new block gets the matched rows.
      append_new_set(*seq);
      for (uint32_t g = 0; g < num_groups(); ++g) {
        set_scratch3_[g] = tree_.block(m.partial, g);
        set_scratch_[g] = seq->blocks[g].back();
      }
      residency_.copy_set(set_scratch3_.data(), set_scratch_.data(), m.partial_tokens, stream);
      const TreeNode& t = tree_.node(m.partial);
      eviction_.release_node(m.partial, {t.priority, t.duration_ms});
    }
  }
  append_new_sets(*seq, num_blocks - seq->num_blocks());

  const uint64_t reused = full + (m.partial != kNoNode ? 1 : 0);
  counters_.reused_blocks += reused;
  counters_.missed_blocks += num_blocks - reused;
  seq->published = full;
  seq->tail_private = true;  // new, copied or taken over: never shared
  seq->cached = cached_tokens;
  seq->committed = seq->cached;
  *cached_tokens_out = seq->cached;
  seqs_.insert(std::move(seq));
  debug_check();
  return true;
}

bool BlockManager::try_extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  Sequence& s = sequence(id);
  if (n == 0) return true;
  check_growth(s.length(), n, "num_tokens");
  const uint64_t len = s.length();
  const bool cow = needs_copy_on_write(s);
  const uint64_t new_blocks = blocks_for(len + n, T_) - s.num_blocks();
  reservation_.begin("extending", id, residency_.num_pools());
  if (!have_sets(reservation_, new_blocks + (cow ? 1 : 0))) return false;
  grow(s.tokens, s.tokens.size() + n);
  reserve_blocks(s, s.num_blocks() + new_blocks);
  tier_->prepare(reservation_, stream);
  residency_.move_pages(reservation_);

  if (cow) copy_on_write(s, stream);
  s.tokens.insert(s.tokens.end(), tokens, tokens + n);
  append_new_sets(s, new_blocks);
  debug_check();
  return true;
}

Sequence& BlockManager::sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch) {
  return claim_for_batch(seqs_.find(ids[i]), ids, i, epoch);
}

Sequence& BlockManager::claim_for_batch(Sequence* s, const uint64_t* ids, size_t i,
                                        uint64_t epoch) {
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: no " + seq_name(ids[i]) +
                                " in this cache");
  if (s->batch_mark == epoch)
    invalid_argument("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                     " appears twice in the batch");
  s->batch_mark = epoch;
  return *s;
}

namespace {

// The two lines of a sequence a decode step touches (sequence.h).
inline void prefetch_sequence(const Sequence* s) {
  __builtin_prefetch(s, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(s) + 64, 1);
}

}  // namespace

bool BlockManager::try_extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                    void* stream) {
  const uint64_t epoch = next_batch_epoch();
  // The lookups run ahead of the checks: table slots kSlotAhead ids ahead,
  // sequences (found, not yet claimed) kSeqAhead ahead, so that the chain
  // slot -> sequence -> token array costs no wait per sequence. Errors are
  // still raised in index order by claim_for_batch.
  constexpr size_t kSlotAhead = 16, kSeqAhead = 8;
  batch_scratch_.resize(count);
  Sequence** seqs = batch_scratch_.data();
  batch_cow_.resize(std::max(batch_cow_.size(), count));
  for (size_t j = 0; j < std::min(count, kSlotAhead); ++j) seqs_.prefetch(ids[j]);
  for (size_t j = 0; j < std::min(count, kSeqAhead); ++j) {
    seqs[j] = seqs_.find(ids[j]);
    if (seqs[j] != nullptr) prefetch_sequence(seqs[j]);
  }
  uint64_t needed = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i + kSlotAhead < count) seqs_.prefetch(ids[i + kSlotAhead]);
    if (i + kSeqAhead < count) {
      Sequence* ahead = seqs_.find(ids[i + kSeqAhead]);
      seqs[i + kSeqAhead] = ahead;
      if (ahead != nullptr) prefetch_sequence(ahead);
    }
    Sequence* s = &claim_for_batch(seqs[i], ids, i, epoch);
    if (s->length() >= kMaxSequenceTokens)  // the message is only built on failure
      check_length(s->length() + 1, ("ids[" + std::to_string(i) + "]").c_str());
    const bool cow = needs_copy_on_write(*s);
    batch_cow_[i] = cow;
    needed += (s->length() % T_ == 0 ? 1 : 0) + (cow ? 1 : 0);
    // Capacity only (no visible change), so it may happen before the checks end.
    grow(s->tokens, s->tokens.size() + 1);
    reserve_blocks(*s, s->num_blocks() + 1);
    // The line the token goes to, for the loop below.
    __builtin_prefetch(s->tokens.data() + s->tokens.size(), 1);
  }
  reservation_.begin("this decode step", Reservation::kNoId, residency_.num_pools());
  if (!have_sets(reservation_, needed)) return false;
  tier_->prepare(reservation_, stream);
  residency_.move_pages(reservation_);
  for (size_t i = 0; i < count; ++i) {
    if (i + kSeqAhead < count) {
      const Sequence* ahead = seqs[i + kSeqAhead];
      __builtin_prefetch(ahead->tokens.data() + ahead->tokens.size(), 1);
    }
    Sequence& s = *seqs[i];
    if (batch_cow_[i] && needs_copy_on_write(s)) copy_on_write(s, stream);  // a sibling may have copied first
    const bool new_block = s.length() % T_ == 0;
    s.tokens.push_back(tokens[i]);
    if (new_block) append_new_set(s);
  }
  debug_check();
  return true;
}

void BlockManager::link_new_node(uint32_t node) {
  for (uint32_t g = 0; g < num_groups(); ++g)
    if (set_scratch_[g] != kNoBlock) residency_.set_node(g, set_scratch_[g], node);
}

bool BlockManager::publish_full(Sequence& s, uint64_t b, const std::string& extra) {
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  const BlockKey key = index_.key(parent, s.scope, s.token_at(b * T_), T_, extra);
  const uint32_t found = index_.find(key);
  if (found != kNoNode && !index_.in_primary(found)) {
    // In another tier: the node takes this sequence's (equal) blocks and
    // comes back without a copy, if the sequence holds them alone (as for
    // a new node: publish waits).
    if (lead_group(s, b) == UINT32_MAX || !holds_alone(s, b)) return false;
    for (uint32_t g = 0; g < num_groups(); ++g) position_set_[g] = s.blocks[g][b];
    tier_->adopt(found, position_set_.data());
    s.nodes[b] = found;
    return true;
  }
  if (found != kNoNode) {
    // Already cached: keep our own copy, anchor the cached one.
    s.nodes[b] = found;
    if (holds_anchor(s, b)) eviction_.hold_anchor(found);
    // A windowed slot the node lost to eviction takes this sequence's block,
    // so the prefix is reusable again in that group; only a block this
    // sequence holds alone (a fork sibling may not hold the node's anchor).
    for (uint32_t g : layout_.windowed) {
      const uint32_t own = s.blocks[g][b];
      if (own == kNoBlock || tree_.block(found, g) != kNoBlock) continue;
      const BlockInfo& info = residency_.info(g, own);
      if (info.ref != 1 || info.node != kNoNode) continue;
      index_.set_block(found, g, own);
      residency_.set_node(g, own, found);
    }
    return true;
  }
  // A block shared with a fork sibling or a pin waits until this sequence
  // holds it alone: the sibling may not hold the ancestors it would be
  // linked under.
  if (lead_group(s, b) == UINT32_MAX || tree_.full()) return false;  // nothing to publish / no room
  if (!holds_alone(s, b)) return false;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  const uint32_t node = index_.insert(key, set_scratch_.data());
  link_new_node(node);
  mark_published(node, s, b);
  s.nodes[b] = node;
  if (layout_.anchors.empty()) ++index_.holders(node);
  return true;
}

void BlockManager::commit(uint64_t id, uint64_t num_computed) {
  Sequence& s = sequence(id);
  if (num_computed > s.length())
    invalid_argument("num_computed (" + std::to_string(num_computed) + ") exceeds the length (" +
                     std::to_string(s.length()) + " tokens) of " + seq_name(id));
  const uint64_t committed = std::max(s.committed, num_computed);
  if (cfg_.block_reuse) {
    // Publish every full computed block not yet published, in order (also
    // ones an earlier commit had to leave while a fork sibling shared them).
    const uint64_t first = s.published;
    const uint64_t end = committed / T_;
    if (end > first) {
      // Encode the extra keys of every block first: the only allocation.
      if (extras_scratch_.size() < end - first) extras_scratch_.resize(end - first);
      for (uint64_t b = first; b < end; ++b) {
        if (s.extra_keys.empty()) extras_scratch_[b - first].clear();
        else encode_block_extras(s.extra_keys, b * T_, (b + 1) * T_, extras_scratch_[b - first]);
      }
      while (s.published < end && publish_full(s, s.published, extras_scratch_[s.published - first]))
        ++s.published;
    }
  }
  s.committed = committed;
  if (!layout_.windowed.empty()) release_out_of_window(s);
  debug_check();
}

void BlockManager::rewind(uint64_t id, uint64_t n) {
  Sequence& s = sequence(id);
  if (n > s.length())
    invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + seq_name(id) +
                     " has only " + std::to_string(s.length()));
  if (n == 0) return;
  const uint64_t new_len = s.length() - n;
  for (uint32_t g : layout_.windowed) {
    // The blocks a windowed group released are gone: the new last token
    // must still see its whole window.
    const uint64_t begin = s.window_begin[g];
    if (begin == 0) continue;
    const uint64_t shortest = begin * T_ + layout_.window[g] - 1;
    if (new_len < shortest)
      invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + seq_name(id) +
                       " would be " + std::to_string(new_len) + " tokens long, but layer group " +
                       std::to_string(g) + " (window " + std::to_string(layout_.window[g]) +
                       ") has released the blocks before token " + std::to_string(begin * T_) +
                       ", so it can rewind at most " + std::to_string(s.length() - shortest) +
                       " tokens (rewind before committing rejected tokens)");
  }
  const uint64_t keep = blocks_for(new_len, T_);
  // Rewinding into the published blocks whose tokens only the tree keeps:
  // take the kept rows of the new tail back from its node. Reserve first.
  const bool rebase = new_len < s.token_base;
  const uint64_t base = new_len / T_ * T_;
  if (rebase) s.tokens.reserve(new_len - base);
  if (rebase) {
    const int32_t* kept = new_len > base ? tree_.tokens(s.nodes[new_len / T_]) : nullptr;
    s.tokens.assign(kept, kept + (new_len - base));
    s.token_base = base;
  }
  while (s.num_blocks() > keep) {
    const uint64_t b = s.num_blocks() - 1;
    release_position(s, b);
    for (auto& v : s.blocks) v.pop_back();
    s.nodes.pop_back();
  }
  if (new_len % T_ != 0) {
    // The tail is no longer full: it is no longer the published block. A
    // tree block kept as the tail is copied before the next write.
    const uint64_t b = keep - 1;
    const uint32_t node = s.nodes[b];
    if (node != kNoNode) {
      if (holds_anchor(s, b)) {
        // Windowed blocks this sequence gave the node go back to it: it no
        // longer holds the node's anchor blocks. A pin or fork sharing such
        // a block keeps it as a block of no node (holds_alone() then keeps
        // it out of any new node until one holder is left).
        for (uint32_t g : layout_.windowed) {
          const uint32_t own = s.blocks[g][b];
          if (own == kNoBlock || tree_.block(node, g) != own) continue;
          index_.set_block(node, g, kNoBlock);
          residency_.set_node(g, own, kNoNode);
        }
        eviction_.release_anchor(node, s.retention_of_block(b, T_));
      }
      s.nodes[b] = kNoNode;
    }
  }
  s.published = std::min<uint64_t>(s.published, new_len / T_);
  if (!rebase) s.tokens.resize(new_len - s.token_base);
  s.tail_private = false;  // the new tail may be a shared or published block
  s.committed = std::min(s.committed, new_len);
  s.cached = std::min(s.cached, new_len);
  for (uint64_t& c : s.slot_cursor) c = std::min(c, new_len);
  debug_check();
}

void BlockManager::fork(uint64_t parent, uint64_t child) {
  Sequence& p = sequence(parent);
  if (seqs_.find(child) != nullptr)
    fail(KVC_ERR_ALREADY_EXISTS, seq_name(child) + " already exists");
  auto c = std::make_unique<Sequence>(p);
  c->id = child;
  c->batch_mark = 0;
  c->tail_private = false;
  seqs_.reserve_one();
  p.tail_private = false;

  index_.ref_scope(c->scope);
  for (uint64_t b = 0; b < c->num_blocks(); ++b) {
    for (uint32_t g = 0; g < num_groups(); ++g)
      if (c->blocks[g][b] != kNoBlock) residency_.add_ref(g, c->blocks[g][b]);
    if (holds_anchor(*c, b)) eviction_.hold_anchor(c->nodes[b]);
  }
  seqs_.insert(std::move(c));
  debug_check();
}

void BlockManager::publish_tail(Sequence& s) {
  const uint64_t b = s.committed / T_;
  const uint32_t rows = uint32_t(s.committed % T_);
  if (rows == 0 || b >= s.num_blocks()) return;
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  if (parent == kNoNode) return;
  if (b != s.published) return;  // its parent is not published
  if (tree_.full()) return;
  if (!holds_alone(s, b)) return;  // shared or already in the tree
  if (any_extra_overlaps(s.extra_keys, b * T_, b * T_ + rows)) return;
  const std::string no_extra;
  const BlockKey key = index_.key(parent, s.scope, s.token_at(b * T_), rows, no_extra);
  if (index_.find(key) != kNoNode) return;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  const uint32_t node = index_.insert(key, set_scratch_.data());
  link_new_node(node);
  mark_published(node, s, b);
}

void BlockManager::remove(uint64_t id) {
  Sequence& s = sequence(id);
  if (cfg_.block_reuse && cfg_.partial_reuse) publish_tail(s);
  // Deepest first, so a parent is always released after its children.
  for (uint64_t b = s.num_blocks(); b > 0; --b) release_position(s, b - 1);
  index_.unref_scope(s.scope);
  seqs_.erase(id);
  debug_check();
}

void BlockManager::pin(uint64_t id) {
  Sequence& s = sequence(id);
  if (pins_.count(id) != 0) fail(KVC_ERR_ALREADY_EXISTS, seq_name(id) + " is already pinned");
  // The published blocks: the ones that outlive the sequence in the tree,
  // a chain from the root, so a pin never holds a node without its parent.
  Pin pin;
  const uint32_t G = num_groups();
  pin.blocks.reserve(s.published * G);
  pin.retention.reserve(s.published);
  for (uint64_t b = 0; b < s.published; ++b) {
    for (uint32_t g = 0; g < G; ++g) pin.blocks.push_back(tree_.block(s.nodes[b], g));
    pin.retention.push_back(s.retention_of_block(b, T_));
  }
  auto it = pins_.emplace(id, std::move(pin)).first;
  for (uint64_t b = 0; b < s.published; ++b) eviction_.hold_node(s.nodes[b]);
  (void)it;
  debug_check();
}

void BlockManager::unpin(uint64_t id) {
  auto it = pins_.find(id);
  if (it == pins_.end()) fail(KVC_ERR_NOT_FOUND, seq_name(id) + " is not pinned");
  const Pin& p = it->second;
  const uint32_t G = num_groups();
  for (size_t e = p.retention.size(); e > 0; --e)
    eviction_.release_set(&p.blocks[(e - 1) * G], 1, p.retention[e - 1]);
  pins_.erase(it);
  debug_check();
}

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------

uint64_t BlockManager::probe(const int32_t* tokens, uint64_t n,
                             const SequenceOptions& options) const {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  index_.match(tokens, n, index_.find_scope(scope_bytes), sorted_extras(options), match_);
  return uint64_t(match_.full.size()) * T_ + match_.partial_tokens;
}

uint64_t BlockManager::blocks_needed(uint64_t id, uint64_t n) const {
  const Sequence& s = sequence(id);
  if (n == 0) return 0;
  check_growth(s.length(), n, "num_tokens");
  return blocks_for(s.length() + n, T_) - s.num_blocks() + (needs_copy_on_write(s) ? 1 : 0);
}

void BlockManager::reset_reuse() {
  uint64_t in_use = 0;
  for (size_t p = 0; p < residency_.num_pools(); ++p) in_use += residency_.pool(p).num_in_use();
  if (in_use > 0)
    fail(KVC_ERR_INVALID_STATE, "cannot reset the reuse state while " + std::to_string(in_use) +
                                    " blocks are in use (by sequences or pins)");
  eviction_.evict_all();
  debug_check();
}

CacheStats BlockManager::stats() const {
  CacheStats s;
  s.reused_blocks = counters_.reused_blocks;
  s.missed_blocks = counters_.missed_blocks;
  s.evicted_blocks = counters_.evicted_blocks;
  residency_.add_stats(s);
  tier_->add_stats(s);
  s.num_sequences = seqs_.size();
  s.num_pinned = pins_.size();
  s.tree_nodes = tree_.size();
  return s;
}

GroupStats BlockManager::group_stats(uint32_t group) const {
  if (group >= num_groups())
    invalid_argument("group must be < num_groups (" + std::to_string(num_groups()) + "), got " +
                     std::to_string(group));
  return counters_.groups[group];
}

}  // namespace kvc
