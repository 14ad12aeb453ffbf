#include "core/block_manager.h"

#include <algorithm>
#include <string>

#include "core/block_hash.h"
#include "core/error.h"

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

// Block sets of a tier: every node holds one.
uint64_t sets_in(const std::vector<std::unique_ptr<PoolMemory>>& memory,
                 const LayerGrouping& grouping) {
  if (memory.empty()) return 0;
  const uint32_t p = grouping.groups[0].pool;
  return memory[p]->num_blocks() / grouping.pools[p].groups.size();
}

std::vector<uint64_t> blocks_of(const std::vector<std::unique_ptr<PoolMemory>>& memory) {
  std::vector<uint64_t> v;
  for (const auto& m : memory) v.push_back(m->num_blocks());
  return v;
}

}  // namespace

BlockManager::BlockManager(const CacheConfig& config, const LayerGrouping& grouping,
                           const std::vector<std::unique_ptr<PoolMemory>>& memory,
                           const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
                           Device& device)
    : cfg_(config),
      grouping_(grouping),
      memory_(memory),
      host_memory_(host_memory),
      device_(device),
      T_(config.tokens_per_block),
      tree_(uint32_t(sets_in(memory, grouping) + sets_in(host_memory, grouping)),
            config.tokens_per_block, uint32_t(grouping.groups.size())),
      policy_(tree_.id_bound()),
      host_(blocks_of(host_memory), tree_.id_bound(), config.secondary_offload_min_priority),
      time_(config.manual_clock),
      expiry_(tree_.id_bound()) {
  for (const LayerGroup& g : grouping.groups) group_pool_.push_back(g.pool);
  for (size_t p = 0; p < grouping.pools.size(); ++p) {
    pool_groups_.push_back(uint32_t(grouping.pools[p].groups.size()));
    pools_.emplace_back(memory[p]->num_blocks());
  }
  set_scratch_.resize(group_pool_.size());
  set_scratch2_.resize(group_pool_.size());
  set_scratch3_.resize(group_pool_.size());
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

uint32_t BlockManager::node_ref(uint32_t node) const {
  if (tree_.node(node).tier != kPrimaryTier) return 0;  // host nodes are never in use
  return pools_[group_pool_[0]].info(tree_.block(node, 0)).ref;
}

uint64_t BlockManager::free_sets() const {
  uint64_t n = UINT64_MAX;
  for (size_t p = 0; p < pools_.size(); ++p)
    n = std::min<uint64_t>(n, pools_[p].num_free() / pool_groups_[p]);
  return n;
}

uint64_t BlockManager::cached_sets() const {
  uint64_t n = UINT64_MAX;
  for (size_t p = 0; p < pools_.size(); ++p)
    n = std::min<uint64_t>(n, pools_[p].num_cached() / pool_groups_[p]);
  return n;
}

void BlockManager::require_sets(uint64_t needed, uint64_t taken_from_cached,
                                const std::string& what) const {
  const uint64_t available = free_sets() + cached_sets() - taken_from_cached;
  if (needed > available)
    fail(KVC_ERR_OUT_OF_BLOCKS,
         what + " needs " + std::to_string(needed) +
             " blocks per layer group but only " + std::to_string(available) + " are free (" +
             std::to_string(free_sets()) + ") or evictable (" +
             std::to_string(cached_sets() - taken_from_cached) + ")");
}

bool BlockManager::needs_copy_on_write(const Sequence& s) const {
  if (s.tail_private || s.length() % T_ == 0 || s.num_blocks() == 0) return false;
  const BlockInfo& tail = pools_[group_pool_[0]].info(s.blocks[0].back());
  return tail.ref > 1 || tail.node != kNoNode;
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

void BlockManager::hold_node(uint32_t node) {
  if (policy_.contains(node)) policy_.remove(node);
  expiry_.cancel(node);  // in use: its priority is set again on release
  for (uint32_t g = 0; g < num_groups(); ++g)
    pools_[group_pool_[g]].add_ref(tree_.block(node, g));
}

void BlockManager::on_cached(uint32_t node, BlockRetention r) {
  TreeNode& t = tree_.node(node);
  t.priority = r.priority;
  t.duration_ms = r.duration_ms;
  t.age = ++clock_;
  if (r.duration_ms != kNoDuration && r.priority != kDefaultPriority) {
    // The duration counts from when the block became reusable.
    const uint64_t at = revert_moment(t.reusable_at, r.duration_ms);
    if (at <= time_.now_ms()) t.priority = kDefaultPriority;
    else expiry_.schedule(node, at);
  }
  if (primary_leaf(node)) policy_.push_newest(node, t.priority, t.age);
}

void BlockManager::expire_due() {
  if (expiry_.empty()) return;
  const uint64_t now = time_.now_ms();
  while (!expiry_.empty() && expiry_.next_moment() <= now) {
    const uint32_t node = expiry_.next_node();
    expiry_.cancel(node);
    TreeNode& t = tree_.node(node);
    t.priority = kDefaultPriority;
    if (policy_.contains(node)) {
      policy_.remove(node);
      policy_.insert_by_age(node, kDefaultPriority, t.age);
    } else if (host_.enabled() && host_.policy.contains(node)) {
      host_.policy.remove(node);
      host_.policy.insert_by_age(node, kDefaultPriority, t.age);
    }
  }
}

void BlockManager::mark_published(uint32_t node, const Sequence& s, uint64_t b) {
  TreeNode& t = tree_.node(node);
  t.priority = s.priority_of_block(b, T_);
  t.reusable_at = time_.now_ms();
}

void BlockManager::advance_clock(uint64_t ms) {
  if (!time_.manual())
    fail(KVC_ERR_INVALID_STATE,
         "this cache reads the monotonic clock; kvc_cache_advance_clock needs a cache created "
         "with kvc_config_set_manual_clock(config, true)");
  if (ms > UINT64_MAX - time_.now_ms())
    invalid_argument("milliseconds (" + std::to_string(ms) + ") would overflow the clock, now at " +
                     std::to_string(time_.now_ms()) + " ms");
  time_.advance(ms);
  expire_due();
  debug_check();
}

void BlockManager::release_set(const uint32_t* blocks, size_t stride, BlockRetention r) {
  uint32_t cached = kNoNode;
  for (uint32_t g = 0; g < num_groups(); ++g) {
    BlockPool& pool = pools_[group_pool_[g]];
    const uint32_t b = blocks[g * stride];
    if (pool.release(b)) cached = pool.info(b).node;
  }
  if (cached != kNoNode) on_cached(cached, r);
}

void BlockManager::release_node(uint32_t node, BlockRetention r) {
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch2_[g] = tree_.block(node, g);
  release_set(set_scratch2_.data(), 1, r);
}

void BlockManager::release_position(Sequence& s, uint64_t b) {
  const BlockRetention retention = s.retention_of_block(b, T_);
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch2_[g] = s.blocks[g][b];
  release_set(set_scratch2_.data(), 1, retention);
  const uint32_t n = s.nodes[b];
  if (n != kNoNode && tree_.block(n, 0) != s.blocks[0][b]) release_node(n, retention);  // anchor
}

void BlockManager::evict_node(uint32_t node) {
  policy_.remove(node);
  expiry_.cancel(node);
  if (host_.host_children[node] != 0) drop_host_children(node);  // useless without it
  const TreeNode& t = tree_.node(node);
  const uint32_t parent = t.parent;
  for (uint32_t g = 0; g < num_groups(); ++g) pools_[group_pool_[g]].evict(tree_.block(node, g));
  scopes_.unref(t.scope);
  tree_.erase(node);
  ++counters_.evicted_blocks;
  // A cached parent left without primary children becomes evictable at its age.
  if (parent != RadixTree::kRoot && primary_leaf(parent) && node_ref(parent) == 0) {
    const TreeNode& p = tree_.node(parent);
    policy_.insert_by_age(parent, p.priority, p.age);
  }
  // The next victim is most often this parent or the next oldest leaf.
  const uint32_t next = policy_.victim();
  if (next != kNoNode) tree_.prefetch_erase(next);
}

void BlockManager::alloc_set(uint32_t* out) {
  for (uint32_t g = 0; g < num_groups(); ++g) {
    BlockPool& pool = pools_[group_pool_[g]];
    if (pool.num_free() == 0) expire_due();  // the victim order must be current
    while (pool.num_free() == 0) evict_node(policy_.victim());
    out[g] = pool.acquire_free();
  }
}

void BlockManager::copy_set(const uint32_t* src, const uint32_t* dst, uint32_t rows,
                            void* stream) {
  for (uint32_t g = 0; g < num_groups(); ++g) {
    const BlockCopy c{src[g], dst[g], rows};
    device_.copy_blocks(memory_[group_pool_[g]]->base(), grouping_.groups[g].geometry, &c, 1,
                        stream);
  }
}

void BlockManager::append_new_set(Sequence& s) {
  alloc_set(set_scratch_.data());
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g].push_back(set_scratch_[g]);
  s.nodes.push_back(kNoNode);
  s.tail_private = true;
}

void BlockManager::copy_on_write(Sequence& s, void* stream) {
  const uint64_t b = s.num_blocks() - 1;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch3_[g] = s.blocks[g][b];
  alloc_set(set_scratch_.data());  // the old tail is held, so never evicted here
  copy_set(set_scratch3_.data(), set_scratch_.data(), uint32_t(s.length() % T_), stream);
  release_position(s, b);
  for (uint32_t g = 0; g < num_groups(); ++g) s.blocks[g][b] = set_scratch_[g];
  s.tail_private = true;
}

// ---------------------------------------------------------------------------
// Lookup
// ---------------------------------------------------------------------------

BlockManager::Match BlockManager::match_prefix(const int32_t* tokens, uint64_t n, uint32_t scope,
                                               const std::vector<ExtraKey>& extras) const {
  match_full_.clear();
  Match m;
  if (!cfg_.block_reuse || scope == ScopeTable::kNone || n < 2) return m;
  const uint64_t limit = n - 1;  // the last prompt token is always recomputed
  const uint64_t scope_digest = scopes_.digest(scope);
  uint32_t parent = RadixTree::kRoot;
  uint64_t parent_hash = 0;
  const uint64_t max_full = limit / T_;
  if (extras.empty()) {
    // Hash a chunk of blocks ahead (the per-block hashes are independent),
    // prefetch their buckets, then walk the chain.
    constexpr uint64_t kChunk = 32;
    extra_scratch_.clear();
    uint64_t hashes[kChunk];
    for (uint64_t first = 0; first < max_full; first += kChunk) {
      const uint64_t count = std::min(kChunk, max_full - first);
      for (uint64_t i = 0; i < count; ++i)
        hashes[i] = hash_tokens(scope_digest, 0, tokens + (first + i) * T_, T_);
      uint64_t h = parent_hash;
      for (uint64_t i = 0; i < count; ++i) {
        h = chain_hash(h, hashes[i]);
        hashes[i] = h;
        tree_.prefetch_bucket(h);
      }
      for (uint64_t i = 0; i < count; ++i) {
        if (i + 4 < count) tree_.prefetch_head(hashes[i + 4]);
        const uint32_t node =
            tree_.find(parent, scope, tokens + (first + i) * T_, T_, extra_scratch_, hashes[i]);
        if (node == kNoNode) goto matched;
        match_full_.push_back(node);
        parent = node;
        parent_hash = hashes[i];
      }
    }
  } else {
    for (uint64_t b = 0; b < max_full; ++b) {
      const int32_t* toks = tokens + b * T_;
      encode_block_extras(extras, b * T_, (b + 1) * T_, extra_scratch_);
      const uint64_t extra_digest =
          extra_scratch_.empty() ? 0 : hash_bytes(extra_scratch_.data(), extra_scratch_.size());
      const uint64_t h = hash_block(parent_hash, scope_digest, extra_digest, toks, T_);
      const uint32_t node = tree_.find(parent, scope, toks, T_, extra_scratch_, h);
      if (node == kNoNode) break;
      match_full_.push_back(node);
      parent = node;
      parent_hash = h;
    }
  }
matched:
  if (!cfg_.partial_reuse) return m;
  const uint64_t begin = uint64_t(match_full_.size()) * T_;
  if (begin >= limit) return m;
  const uint32_t room = uint32_t(std::min<uint64_t>(T_, limit - begin));
  if (any_extra_overlaps(extras, begin, begin + room)) return m;
  const int32_t* want = tokens + begin;
  tree_.for_each_first_token_match(parent, scope, want[0], [&](uint32_t node) {
    const TreeNode& t = tree_.node(node);
    if (!t.extra.empty()) return;
    const bool usable = cfg_.copy_on_partial_reuse || (node_ref(node) == 0 && tree_.is_leaf(node));
    if (!usable) return;
    const int32_t* have = tree_.tokens(node);
    const uint32_t most = std::min<uint32_t>(room, t.num_tokens);
    uint32_t k = 0;
    while (k < most && have[k] == want[k]) ++k;
    if (k > m.partial_tokens) {
      m.partial = node;
      m.partial_tokens = k;
    }
  });
  m.in_place = m.partial != kNoNode && !cfg_.copy_on_partial_reuse;
  return m;
}

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

std::vector<ExtraKey> sorted_extras(const SequenceOptions& o) {
  std::vector<ExtraKey> keys = o.extra_keys;
  sort_extra_keys(keys);
  return keys;
}

}  // namespace

uint64_t BlockManager::add(uint64_t id, const int32_t* tokens, uint64_t n,
                           const SequenceOptions& options, void* stream) {
  if (n == 0) invalid_argument("num_tokens must be > 0: a prompt cannot be empty");
  check_length(n, "num_tokens");
  check_options(options);
  if (seqs_.find(id) != nullptr)
    fail(KVC_ERR_ALREADY_EXISTS, seq_name(id) + " already exists");

  const std::string scope_bytes =
      encode_scope(options.has_salt, options.salt, options.has_lora, options.lora_id);
  std::vector<ExtraKey> extras = sorted_extras(options);
  const Match m = match_prefix(tokens, n, scopes_.find(scope_bytes), extras);
  const uint64_t num_blocks = blocks_for(n, T_);
  const uint64_t full = match_full_.size();
  // Cached primary blocks the sequence takes; host-tier ones need a fresh
  // set each to be copied back into.
  const uint64_t onboards = count_in_host(match_full_, m.partial);
  uint64_t taken = 0;
  for (uint32_t node : match_full_) taken += node_ref(node) == 0 ? 1 : 0;
  if (m.partial != kNoNode && node_ref(m.partial) == 0) ++taken;
  taken -= onboards;  // node_ref() is 0 for them too
  const uint64_t sets = num_blocks - full - (m.in_place ? 1 : 0) + onboards;
  require_sets(sets, taken, "adding the prompt");

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
  seq->slot_cursor.assign(num_groups(), 0);
  reserve_blocks(*seq, num_blocks + 1);
  seqs_.reserve_one();
  seq->scope = scopes_.intern(scope_bytes);
  try {
    prepare_sets(sets, match_full_, m.partial, stream);  // host tier: onboard, offload
  } catch (...) {
    scopes_.unref(seq->scope);
    throw;
  }

  // From here on nothing can fail.
  for (uint32_t node : match_full_) {
    hold_node(node);
    for (uint32_t g = 0; g < num_groups(); ++g) seq->blocks[g].push_back(tree_.block(node, g));
    seq->nodes.push_back(node);
  }
  if (m.partial != kNoNode) {
    hold_node(m.partial);
    if (m.in_place) {
      // Copy on partial reuse is off and nothing else uses the block: the
      // sequence takes it over, and it leaves the tree.
      for (uint32_t g = 0; g < num_groups(); ++g) {
        const uint32_t blk = tree_.block(m.partial, g);
        pools_[group_pool_[g]].set_node(blk, kNoNode);
        seq->blocks[g].push_back(blk);
      }
      seq->nodes.push_back(kNoNode);
      scopes_.unref(tree_.node(m.partial).scope);
      tree_.erase(m.partial);
    } else {
      // Copy on partial reuse: a new block gets the matched rows.
      append_new_set(*seq);
      for (uint32_t g = 0; g < num_groups(); ++g) {
        set_scratch3_[g] = tree_.block(m.partial, g);
        set_scratch_[g] = seq->blocks[g].back();
      }
      copy_set(set_scratch3_.data(), set_scratch_.data(), m.partial_tokens, stream);
      const TreeNode& t = tree_.node(m.partial);
      release_node(m.partial, {t.priority, t.duration_ms});
    }
  }
  while (seq->num_blocks() < num_blocks) append_new_set(*seq);

  const uint64_t reused = full + (m.partial != kNoNode ? 1 : 0);
  counters_.reused_blocks += reused;
  counters_.missed_blocks += num_blocks - reused;
  seq->published = full;
  seq->tail_private = true;  // new, copied or taken over: never shared
  seq->cached = full * T_ + m.partial_tokens;
  seq->committed = seq->cached;
  const uint64_t cached = seq->cached;
  seqs_.insert(std::move(seq));
  debug_check();
  return cached;
}

void BlockManager::extend(uint64_t id, const int32_t* tokens, uint64_t n, void* stream) {
  Sequence& s = sequence(id);
  if (n == 0) return;
  check_length(s.length() + n, "num_tokens");
  const uint64_t len = s.length();
  const bool cow = needs_copy_on_write(s);
  const uint64_t new_blocks = blocks_for(len + n, T_) - s.num_blocks();
  require_sets(new_blocks + (cow ? 1 : 0), 0, "extending " + seq_name(id));
  grow(s.tokens, s.tokens.size() + n);
  reserve_blocks(s, s.num_blocks() + new_blocks);
  prepare_sets(new_blocks + (cow ? 1 : 0), no_nodes_, kNoNode, stream);

  if (cow) copy_on_write(s, stream);
  s.tokens.insert(s.tokens.end(), tokens, tokens + n);
  for (uint64_t i = 0; i < new_blocks; ++i) append_new_set(s);
  debug_check();
}

Sequence& BlockManager::sequence_for_batch(const uint64_t* ids, size_t i, uint64_t epoch) {
  Sequence* s = seqs_.find(ids[i]);
  if (s == nullptr)
    fail(KVC_ERR_NOT_FOUND, "ids[" + std::to_string(i) + "]: no " + seq_name(ids[i]) +
                                " in this cache");
  if (s->batch_mark == epoch)
    invalid_argument("ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                     " appears twice in the batch");
  s->batch_mark = epoch;
  return *s;
}

void BlockManager::extend_batch(const uint64_t* ids, const int32_t* tokens, size_t count,
                                void* stream) {
  const uint64_t epoch = next_batch_epoch();
  batch_scratch_.clear();
  batch_scratch_.reserve(count);
  batch_cow_.resize(std::max(batch_cow_.size(), count));
  uint64_t needed = 0;
  for (size_t i = 0; i < count; ++i) {
    Sequence* s = &sequence_for_batch(ids, i, epoch);
    if (s->length() >= kMaxSequenceTokens)  // the message is only built on failure
      check_length(s->length() + 1, ("ids[" + std::to_string(i) + "]").c_str());
    const bool cow = needs_copy_on_write(*s);
    batch_cow_[i] = cow;
    needed += (s->length() % T_ == 0 ? 1 : 0) + (cow ? 1 : 0);
    // Capacity only (no visible change), so it may happen before the checks end.
    grow(s->tokens, s->tokens.size() + 1);
    reserve_blocks(*s, s->num_blocks() + 1);
    batch_scratch_.push_back(s);
  }
  require_sets(needed, 0, "this decode step");
  prepare_sets(needed, no_nodes_, kNoNode, stream);
  for (size_t i = 0; i < count; ++i) {
    Sequence& s = *batch_scratch_[i];
    if (batch_cow_[i] && needs_copy_on_write(s)) copy_on_write(s, stream);  // a sibling may have copied first
    const bool new_block = s.length() % T_ == 0;
    s.tokens.push_back(tokens[i]);
    if (new_block) append_new_set(s);
  }
  debug_check();
}

bool BlockManager::publish_full(Sequence& s, uint64_t b, const std::string& extra) {
  const uint32_t parent = b == 0 ? RadixTree::kRoot : s.nodes[b - 1];
  const int32_t* toks = s.token_at(b * T_);
  const uint64_t extra_digest = extra.empty() ? 0 : hash_bytes(extra.data(), extra.size());
  const uint64_t h =
      hash_block(tree_.node(parent).hash, scopes_.digest(s.scope), extra_digest, toks, T_);
  const uint32_t found = tree_.find(parent, s.scope, toks, T_, extra, h);
  if (found != kNoNode && in_host_tier(found)) return adopt_host_node(s, b, found);
  if (found != kNoNode) {
    // Already cached: keep our own copy, anchor the cached one.
    if (tree_.block(found, 0) != s.blocks[0][b]) hold_node(found);
    s.nodes[b] = found;
    return true;
  }
  // A block shared with a fork sibling waits until this sequence holds it
  // alone: the sibling may not hold the ancestors it would be linked under.
  const BlockInfo& own = pools_[group_pool_[0]].info(s.blocks[0][b]);
  if (own.ref != 1 || own.node != kNoNode) return false;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  std::string key_extra = extra;  // small or empty: no allocation in the common case
  const uint32_t node =
      tree_.insert(parent, s.scope, toks, T_, std::move(key_extra), h, set_scratch_.data());
  for (uint32_t g = 0; g < num_groups(); ++g)
    pools_[group_pool_[g]].set_node(set_scratch_[g], node);
  mark_published(node, s, b);
  scopes_.ref(s.scope);
  s.nodes[b] = node;
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
  debug_check();
}

void BlockManager::rewind(uint64_t id, uint64_t n) {
  Sequence& s = sequence(id);
  if (n > s.length())
    invalid_argument("cannot rewind " + std::to_string(n) + " tokens: " + seq_name(id) +
                     " has only " + std::to_string(s.length()));
  if (n == 0) return;
  const uint64_t new_len = s.length() - n;
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
      if (tree_.block(node, 0) != s.blocks[0][b]) release_node(node, s.retention_of_block(b, T_));
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

  scopes_.ref(c->scope);
  for (uint64_t b = 0; b < c->num_blocks(); ++b) {
    for (uint32_t g = 0; g < num_groups(); ++g) pools_[group_pool_[g]].add_ref(c->blocks[g][b]);
    const uint32_t node = c->nodes[b];
    if (node != kNoNode && tree_.block(node, 0) != c->blocks[0][b]) hold_node(node);
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
  const BlockInfo& own = pools_[group_pool_[0]].info(s.blocks[0][b]);
  if (own.ref != 1 || own.node != kNoNode) return;  // shared or already in the tree
  if (any_extra_overlaps(s.extra_keys, b * T_, b * T_ + rows)) return;
  const int32_t* toks = s.token_at(b * T_);
  const uint64_t h = hash_block(tree_.node(parent).hash, scopes_.digest(s.scope), 0, toks, rows);
  extra_scratch_.clear();
  if (tree_.find(parent, s.scope, toks, rows, extra_scratch_, h) != kNoNode) return;
  for (uint32_t g = 0; g < num_groups(); ++g) set_scratch_[g] = s.blocks[g][b];
  const uint32_t node =
      tree_.insert(parent, s.scope, toks, rows, std::string(), h, set_scratch_.data());
  for (uint32_t g = 0; g < num_groups(); ++g)
    pools_[group_pool_[g]].set_node(set_scratch_[g], node);
  mark_published(node, s, b);
  scopes_.ref(s.scope);
}

void BlockManager::remove(uint64_t id) {
  Sequence& s = sequence(id);
  if (cfg_.block_reuse && cfg_.partial_reuse) publish_tail(s);
  // Deepest first, so a parent is always released after its children.
  for (uint64_t b = s.num_blocks(); b > 0; --b) release_position(s, b - 1);
  scopes_.unref(s.scope);
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
  for (uint64_t b = 0; b < s.published; ++b) hold_node(s.nodes[b]);
  (void)it;
  debug_check();
}

void BlockManager::unpin(uint64_t id) {
  auto it = pins_.find(id);
  if (it == pins_.end()) fail(KVC_ERR_NOT_FOUND, seq_name(id) + " is not pinned");
  const Pin& p = it->second;
  const uint32_t G = num_groups();
  for (size_t e = p.retention.size(); e > 0; --e)
    release_set(&p.blocks[(e - 1) * G], 1, p.retention[e - 1]);
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
  const Match m = match_prefix(tokens, n, scopes_.find(scope_bytes), sorted_extras(options));
  return uint64_t(match_full_.size()) * T_ + m.partial_tokens;
}

uint64_t BlockManager::blocks_needed(uint64_t id, uint64_t n) const {
  const Sequence& s = sequence(id);
  if (n == 0) return 0;
  check_length(s.length() + n, "num_tokens");
  return blocks_for(s.length() + n, T_) - s.num_blocks() + (needs_copy_on_write(s) ? 1 : 0);
}

void BlockManager::reset_reuse() {
  uint64_t in_use = 0;
  for (const BlockPool& p : pools_) in_use += p.num_in_use();
  if (in_use > 0)
    fail(KVC_ERR_INVALID_STATE, "cannot reset the reuse state while " + std::to_string(in_use) +
                                    " blocks are in use (by sequences or pins)");
  const uint64_t evicted = counters_.evicted_blocks;
  for (uint32_t v = policy_.victim(); v != kNoNode; v = policy_.victim()) evict_node(v);
  for (uint32_t v = host_.policy.victim(); v != kNoNode; v = host_.policy.victim())
    evict_host_node(v);
  counters_.evicted_blocks = evicted;  // a reset is not an eviction
  debug_check();
}

CacheStats BlockManager::stats() const {
  CacheStats s = counters_;
  s.num_blocks = s.free_blocks = s.cached_blocks = s.in_use_blocks = 0;
  for (const BlockPool& p : pools_) {
    s.num_blocks += p.capacity();
    s.free_blocks += p.num_free();
    s.cached_blocks += p.num_cached();
    s.in_use_blocks += p.num_in_use();
  }
  s.host = host_.counters;
  for (const BlockPool& p : host_.pools) {
    s.host_blocks += p.capacity();
    s.host_free_blocks += p.num_free();
    s.host_cached_blocks += p.num_cached();
  }
  s.num_sequences = seqs_.size();
  s.num_pinned = pins_.size();
  s.tree_nodes = tree_.size();
  return s;
}

}  // namespace kvc
