// Adding a sequence: plan (what the prompt reuses, what it needs, whether
// the pools can give it), stage (every host allocation, the scope, the
// tier's copies), apply (hold the reused blocks, take the partial block,
// allocate the rest: nothing can fail). probe() is the plan's lookup alone.
#include <algorithm>
#include <string>

#include "core/sequences.h"

namespace kvc {

namespace {

uint64_t blocks_for(uint64_t tokens, uint32_t T) { return (tokens + T - 1) / T; }

std::vector<ExtraKey> sorted_extras(const SequenceOptions& o) {
  std::vector<ExtraKey> keys = o.extra_keys;
  sort_extra_keys(keys);
  return keys;
}

}  // namespace

void Sequences::check_add(uint64_t id, uint64_t n, const SequenceOptions& options) const {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  if (seqs_.find(id) != nullptr) fail(KVC_ERR_ALREADY_EXISTS, name(id) + " already exists");
}

bool Sequences::try_add(uint64_t id, const int32_t* tokens, uint64_t n,
                        const SequenceOptions& options, void* stream,
                        uint64_t* cached_tokens_out) {
  // An add that may evict reads the record writer's count (below): asked
  // for first. One that finds its blocks free (room made ahead) does not.
  const bool may_evict = residency_.free_sets() < blocks_for(n, T_);
  if (stores_ != nullptr && may_evict) stores_->prefetch_for_call();
  check_add(id, n, options);
  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  std::vector<ExtraKey> extras = sorted_extras(options);

  // Victims deferred for their write-through jobs go back to the eviction
  // queue once those are finished (only when there are any), when this add
  // may have to evict: otherwise it reads no line of the record writer's
  // (make_room and the next call that may evict requeue them).
  if (stores_ != nullptr && may_evict) stores_->requeue_deferred_if_any();
  Reservation& r = reservation_;
  AddPlan& plan = add_plan_;
  if (!plan_add(tokens, n, scope_bytes, extras, r, plan)) {
    // Short of blocks while write-through jobs hold some: they come back
    // once the writer is done (CPU work, never I/O); wait for it, plan again.
    if (stores_ == nullptr || !stores_->writes_pending()) return false;
    stores_->settle();
    if (!plan_add(tokens, n, scope_bytes, extras, r, plan)) return false;
  }
  std::unique_ptr<Sequence> seq =
      stage_add(id, tokens, n, options, std::move(extras), scope_bytes, r, plan, stream);
  apply_add(*seq, r, plan, stream);
  // Blocks the stores hold: copied into the fresh sets that would have
  // been computed, then published as a commit would publish them.
  const uint64_t loaded = plan.staged > 0 ? stores_->onboard(seq->blocks, seq->extra_keys, stream) : 0;
  Sequence& s = *seq;
  seqs_.insert(std::move(seq));
  if (loaded > 0) {
    const uint64_t full = plan.match.full.size();
    commit(id, (full + loaded) * T_, /*loaded=*/true);
    stores_->mark_loaded(s, full);
    s.cached = (full + loaded) * T_;
    counters_.reused_blocks += loaded;
    counters_.missed_blocks -= loaded;
    for (GroupStats& c : counters_.groups) {
      c.reused_blocks += loaded;
      c.missed_blocks -= loaded;
    }
  }
  // The stores' writes and evictions since the last call, as KV events.
  if (stores_ != nullptr) stores_->sync_events();
  *cached_tokens_out = s.cached;
  return true;
}

bool Sequences::plan_add(const int32_t* tokens, uint64_t n, const std::string& scope_bytes,
                         const std::vector<ExtraKey>& extras, Reservation& r, AddPlan& plan) {
  PrefixMatch& m = plan.match;
  index_.match(tokens, n, index_.find_scope(scope_bytes), extras, m);
  plan.num_blocks = blocks_for(n, T_);
  const uint64_t full = m.full.size();
  // Past the tree's match, the stores (the last prompt token is always
  // computed). A full block from a store beats a partial match.
  plan.staged = 0;
  if (stores_ != nullptr && cfg_.block_reuse && (n - 1) / T_ > full) {
    plan.staged = stores_->stage(full == 0 ? RadixTree::kRoot : m.full.back(), scope_bytes,
                                 extras, tokens, full, (n - 1) / T_ - full);
    if (plan.staged > 0) {
      m.partial = kNoNode;
      m.partial_tokens = 0;
      m.in_place = false;
    }
  }
  plan.cached_tokens = full * T_ + m.partial_tokens;
  // Per group, the first reused position it holds (a windowed group needs
  // only the blocks the first computed token can attend to).
  for (uint32_t g = 0; g < layout_.num_groups(); ++g)
    plan.window_begin[g] =
        int64_t(std::min<uint64_t>(layout_.first_needed(g, plan.cached_tokens), full));
  r.begin("adding the prompt", Reservation::kNoId, residency_.num_pools());
  r.held = &m.full;
  r.partial = m.partial;
  r.window_begin = plan.window_begin.data();
  // Nodes of other tiers are copied back (onboarded) into a fresh set each.
  const uint64_t onboards = tier_.count_held(m.full, m.partial);
  r.need_sets(plan.num_blocks - full - (m.in_place ? 1 : 0) + onboards, layout_.pool_groups);
  // Cached primary blocks this add takes into use are no longer evictable.
  // Reused nodes nobody holds stop being evictable; that can only matter
  // when the free blocks alone fall short (or pages may have to move).
  bool short_of_free = residency_.arena() != nullptr;
  for (size_t p = 0; p < residency_.num_pools(); ++p)
    short_of_free |= r.needed[p] > residency_.pool(p).num_free();
  for (uint32_t g = 0; g < layout_.num_groups() && short_of_free; ++g) {
    const BlockPool& pool = residency_.pool_of(g);
    uint64_t& taken = r.taken[layout_.group_pool[g]];
    for (uint64_t b = uint64_t(plan.window_begin[g]); b < full; ++b) {
      const uint32_t node = m.full[b];
      if (tree_.tier(node) == kPrimaryTier) taken += pool.info(tree_.block(node, g)).ref == 0 ? 1 : 0;
    }
    if (m.partial != kNoNode && tree_.tier(m.partial) == kPrimaryTier)
      taken += pool.info(tree_.block(m.partial, g)).ref == 0 ? 1 : 0;
  }
  return residency_.have_blocks(r);
}

std::unique_ptr<Sequence> Sequences::stage_add(uint64_t id, const int32_t* tokens, uint64_t n,
                                               const SequenceOptions& options,
                                               std::vector<ExtraKey>&& extras,
                                               const std::string& scope_bytes, Reservation& r,
                                               const AddPlan& plan, void* stream) {
  // Everything that allocates on the host, before the first change.
  const uint64_t full = plan.match.full.size();
  const uint32_t G = layout_.num_groups();
  std::unique_ptr<Sequence> seq = new_sequence(n - full * T_);
  seq->id = id;
  seq->prompt_priority = uint8_t(options.prompt_priority);
  seq->decode_priority = uint8_t(options.decode_priority);
  seq->decode_duration_ms = options.decode_duration_ms;
  seq->retention = options.retention_ranges;
  seq->prompt_len = n;
  seq->token_base = full * T_;
  // Room for decoding as well (a quarter more, at least a block), so the
  // first decode steps do not move a long prompt's tokens.
  const uint64_t own = n - full * T_;
  grow(seq->tokens, own + std::max<uint64_t>(T_, own / 4));
  seq->tokens.assign(tokens + full * T_, tokens + n);
  seq->extra_keys = std::move(extras);
  seq->blocks.resize(G);
  seq->window_begin.assign(G, 0);
  seq->slot_cursor.assign(G, 0);
  reserve_blocks(*seq, plan.num_blocks + 1 + plan.num_blocks / 4);
  seqs_.reserve_one();
  seq->scope = index_.intern_scope(scope_bytes);
  try {
    tier_.prepare(r, stream);  // onboard, offload
  } catch (...) {
    index_.unref_scope(seq->scope);
    recycle(std::move(seq));
    throw;
  }
  return seq;
}

void Sequences::apply_add(Sequence& s, Reservation& r, const AddPlan& plan, void* stream) {
  // Nothing can fail from here on (the vectors have their capacity).
  const PrefixMatch& m = plan.match;
  const uint64_t full = m.full.size();
  const uint32_t G = layout_.num_groups();
  if (layout_.windowed.empty()) {
    // Holding the reused nodes in bulk (hold_anchor of every group; the
    // tier brought back any from other tiers).
    s.nodes.assign(m.full.begin(), m.full.end());
    eviction_.hold_chain(m.full.data(), full, s.blocks);
  } else {
    for (uint64_t b = 0; b < full; ++b) {
      const uint32_t node = m.full[b];
      eviction_.hold_anchor(node);  // with full groups: the sequence's own anchor blocks
      for (uint32_t g = 0; g < G; ++g) {
        if (!layout_.is_windowed(g)) {
          s.blocks[g].push_back(tree_.block(node, g));
        } else if (b >= uint64_t(plan.window_begin[g])) {
          eviction_.hold_slot(node, g);
          s.blocks[g].push_back(tree_.block(node, g));
        } else {
          s.blocks[g].push_back(kNoBlock);
        }
      }
      s.nodes.push_back(node);
    }
    for (uint32_t g = 0; g < G; ++g)
      s.window_begin[g] = layout_.is_windowed(g) ? uint64_t(plan.window_begin[g]) : 0;
  }
  const bool partial = m.partial != kNoNode;
  for (uint32_t g = 0; g < G; ++g) {
    GroupStats& c = counters_.groups[g];
    c.reused_blocks += full - uint64_t(plan.window_begin[g]) + (partial ? 1 : 0);
    c.missed_blocks += plan.num_blocks - full - (partial ? 1 : 0);
  }
  if (partial) eviction_.hold_node(m.partial);
  residency_.move_pages(r);  // after the holds: idle pages are exact now
  if (partial) {
    if (m.in_place) {
      // Copy on partial reuse is off and nothing else uses the block: the
      // sequence takes it over (and writes its rows past the match), and it
      // leaves the tree. A write-through job still reading it is waited for
      // first (StoreChain::leaving; the node is not held by its job).
      if (stores_ != nullptr) stores_->leaving(m.partial);
      const uint32_t parent = tree_.node(m.partial).parent;
      for (uint32_t g = 0; g < G; ++g) {
        const uint32_t blk = tree_.block(m.partial, g);
        residency_.set_node(g, blk, kNoNode);
        s.blocks[g].push_back(blk);
      }
      s.nodes.push_back(kNoNode);
      index_.erase(m.partial);
      if (layout_.anchors.empty()) eviction_.erase_if_unused(parent);
    } else {
      // Copy on partial reuse: a new block gets the matched rows.
      append_new_set(s);
      for (uint32_t g = 0; g < G; ++g) {
        old_set_[g] = tree_.block(m.partial, g);
        new_set_[g] = s.blocks[g].back();
      }
      // The new block may be one an offer just left (StoreChain::offer).
      if (stores_ != nullptr) stores_->flush_offers();
      residency_.copy_set(old_set_.data(), new_set_.data(), m.partial_tokens, stream);
      const TreeNode& t = tree_.node(m.partial);
      eviction_.release_node(m.partial, {t.priority, t.duration_ms});
    }
  }
  append_new_sets(s, plan.num_blocks - s.num_blocks());

  const uint64_t reused = full + (partial ? 1 : 0);
  counters_.reused_blocks += reused;
  counters_.missed_blocks += plan.num_blocks - reused;
  s.published = full;
  s.tail_private = true;  // new, copied or taken over: never shared
  s.cached = plan.cached_tokens;
  s.committed = s.cached;
}

uint64_t Sequences::probe(const int32_t* tokens, uint64_t n, const SequenceOptions& options) const {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  index_.match(tokens, n, index_.find_scope(scope_bytes), sorted_extras(options), probe_match_);
  return uint64_t(probe_match_.full.size()) * T_ + probe_match_.partial_tokens;
}

}  // namespace kvc
