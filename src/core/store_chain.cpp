#include "core/store_chain.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "core/event_log.h"
#include "core/eviction.h"
#include "core/prefix_index.h"
#include "core/sequence.h"
#include "core/sequences.h"

namespace kvc {

namespace {

constexpr uint64_t kStagingBytes = uint64_t(32) << 20;  // records looked up per chunk
constexpr uint64_t kMaxChunk = 64;
// Deferred offers copied out at once into one slot (StoreChain::flush_offers),
// within kOfferSlotBytes of pinned staging (kOfferSlots of them): one
// slot per call for an add's victims unless they are many or large.
constexpr uint64_t kMaxOfferChunk = 1024;
constexpr uint64_t kOfferSlotBytes = uint64_t(8) << 20;
// Write-through jobs queued at most (each holds one block set): a full queue
// drops the job rather than waiting (store_chain.h); at most a quarter of
// the primary blocks (16 at least), so that an add rarely finds the pool
// short for them.
constexpr size_t kMaxWriteJobs = 4096;

}  // namespace

RecordLayout store_record_layout(const CacheConfig& config, const LayerGrouping& grouping) {
  RecordLayout l;
  l.fingerprint = geometry_fingerprint(config, grouping);
  l.tokens_per_block = config.tokens_per_block;
  for (const LayerGroup& g : grouping.groups) l.payload_bytes += grouping.pools[g.pool].block_bytes;
  return l;
}

StoreChain::StoreChain(const CacheConfig& config, const GroupLayout& layout,
                       const LayerGrouping& grouping, PrefixIndex& index, Device& device,
                       const std::vector<std::unique_ptr<PoolMemory>>& memory,
                       const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
                       std::vector<std::unique_ptr<BlockStore>> stores)
    : layout_groups_(layout),
      index_(index),
      device_(device),
      memory_(memory),
      host_memory_(host_memory),
      T_(config.tokens_per_block),
      min_priority_(config.secondary_offload_min_priority),
      layout_(store_record_layout(config, grouping)),
      stores_(std::move(stores)),
      onboarded_(stores_.size(), 0),
      offered_(new std::atomic<uint64_t>[stores_.size()]),
      keys_(index, index.tree().id_bound(), config.tokens_per_block, config.event_hash_seed) {
  // StoreKeys::mark_held keeps a bit per store in a byte (there are two:
  // disk and remote).
  if (stores_.size() > 8) fail(KVC_ERR_INTERNAL, "a cache takes at most 8 block stores");
  for (size_t s = 0; s < stores_.size(); ++s) offered_[s].store(0, std::memory_order_relaxed);
  uint64_t offset = 0;
  for (const LayerGroup& g : grouping.groups) {
    group_offset_.push_back(offset);
    group_bytes_.push_back(grouping.pools[g.pool].block_bytes);
    offset += grouping.pools[g.pool].block_bytes;
  }
  const size_t record = layout_.record_bytes();
  chunk_ = std::max<uint64_t>(1, std::min<uint64_t>(kMaxChunk, kStagingBytes / record));
  offer_chunk_ =
      std::max<uint64_t>(1, std::min<uint64_t>(kMaxOfferChunk, kOfferSlotBytes / record));
  host_pools_ = device.kind() == KVC_DEVICE_CPU;
  direct_ = host_pools_;
  try {
    staging_ = static_cast<unsigned char*>(device_.allocate_host(chunk_ * record));
    offer_record_.reset(new unsigned char[record]);
    for (uint64_t bytes : group_bytes_)
      group_staging_.push_back(static_cast<unsigned char*>(device_.allocate_host(chunk_ * bytes)));
  } catch (...) {
    release_staging();
    throw;
  }
  chunk_keys_.resize(chunk_);
  chunk_hashes_.resize(chunk_);
  chunk_sums_.resize(chunk_);
  chunk_ptrs_.resize(chunk_);
  chunk_store_.resize(chunk_);
  for (uint64_t i = 0; i < chunk_; ++i) chunk_ptrs_[i] = staged(i);
  // Write-through needs block addresses the writer's thread can read: host
  // pools (the CPU backend), and no windowed groups (whose slots a commit
  // may release at once).
  windowed_ = !layout.windowed.empty();
  // The writer finds a block at its pool's base + id * the group's block
  // bytes (NodeRecords): so every pool's stride must be those bytes.
  bool strides_match = true;
  for (uint32_t g = 0; g < layout.num_groups(); ++g)
    strides_match = strides_match && memory[layout.group_pool[g]]->block_bytes() == group_bytes_[g];
  // Without them (device pools, other strides) the writer makes the
  // commits' keys only: the blocks are offered at eviction, keyed then
  // without hashing on the serving call.
  records_ok_ = host_pools_ && strides_match;
  if (!windowed_ && !stores_.empty()) {
    std::vector<BlockStore*> raw;
    for (auto& st : stores_) raw.push_back(st.get());
    uint64_t sets = UINT64_MAX;  // block sets: the smallest pool's blocks
    for (const auto& pm : memory) sets = std::min(sets, pm->num_blocks());
    const size_t jobs = size_t(std::min<uint64_t>(kMaxWriteJobs, std::max<uint64_t>(16, sets / 4)));
    job_.assign(index.tree().id_bound(), 0);
    keys_.attach_writer(&job_, &finished_);
    writer_ = open_record_writer(layout_, group_bytes_, std::move(raw), jobs,
                                 config.event_hash_seed, keys_.key_table(), keys_.key_table_size());
    set_writer_mode();
    admission_ = WriteAdmission(jobs);
    deferred_flag_.assign(index.tree().id_bound(), 0);
  }
  // Device pools offer every evicted block through the slots' pinned
  // staging: made now, so that no serving call pins memory (8 MiB a slot,
  // milliseconds) or starts the offer worker.
  if (!host_pools_ && !stores_.empty()) {
    try {
      open_offer_slots();
      for (OfferSlot& slot : slots_) stage_slot(slot);
    } catch (...) {
      release_staging();
      throw;
    }
  }
}

StoreChain::~StoreChain() {
  flush_offers();  // (none are left outside an OfferBatch)
  finish_offers();
  offer_tasks_.reset();
  writer_.reset();  // finishes the accepted jobs while the pools still exist
  release_staging();
}

void StoreChain::release_staging() noexcept {
  for (unsigned char* p : group_staging_) device_.deallocate_host(p);
  group_staging_.clear();
  for (OfferSlot& slot : slots_) {
    for (unsigned char* p : slot.staging) device_.deallocate_host(p);
    slot.staging.clear();
    device_.destroy_fence(slot.fence);
    slot.fence = nullptr;
  }
  if (staging_ != nullptr) device_.deallocate_host(staging_);
  staging_ = nullptr;
}

// ---------------------------------------------------------------------------
// Offload
// ---------------------------------------------------------------------------

void StoreChain::committed(const Sequence& s, uint64_t first, uint64_t end,
                           uint64_t chain_begin, uint64_t chain_end) {
  if (writer_ && admit_room() < end - first) drain();
  sync_events();
  // Write-through, or (offers at eviction) the keys only: the same jobs.
  if (!writer_ || muted_ || end <= first) return;
  const RadixTree& tree = index_.tree();
  const uint32_t G = layout_groups_.num_groups();
  // One run per stretch of consecutive new blocks of one scope and one
  // priority (no extra keys: a block with extra keys is a job of its own):
  // the writer's ring takes a run as one header (its last node, count and
  // priority) and one publication; each block costs its job stamp here (no
  // hold, no copy of its tokens or block addresses, no ring entry).
  const size_t n = size_t(end - first);
  if (run_tickets_.size() < n) {
    run_tickets_.resize(n);
    run_tokens_.resize(T_);  // an extra-key block's, copied (a job of its own)
    run_parts_.resize(G);
    node_bases_.resize(G);
  }
  // The writer reads each run block's tokens and block addresses from its
  // tree record (NodeRecords): the commit hands it node ids and priorities
  // only. The records and the pools stay in place while jobs are out
  // (settle() before a resize), and a written node's record words and
  // blocks do not change until leaving() saw its job finished.
  node_records_.records = tree.record_words();
  node_records_.stride = tree.record_stride();
  node_records_.parent_at = tree.record_parent_at();
  node_records_.blocks_at = tree.record_blocks_at();
  for (uint32_t g = 0; g < G; ++g) node_bases_[g] = memory_[layout_groups_.group_pool[g]]->block(0);
  node_records_.bases = node_bases_.data();
  run_ = RecordRun{};
  uint32_t scope = UINT32_MAX;
  StoreKeys::ScopeKeys sk;
  uint32_t run_scope = UINT32_MAX;  // the run's scope (its last block: run_.last)
  // Blocks past the queue's room (or the admission window's,
  // write_admission.h) are not built, only counted (dropped): an overloaded
  // writer costs the commit a check per block, no key or copy.
  size_t room = size_t(admit_room());
  uint64_t no_room = 0;
  const uint32_t* const nodes = s.nodes.data();
  // The blocks whose first token is in the prompt (their priority the
  // prompt's unless a retention range says otherwise), the rest decode's.
  const uint64_t prompt_blocks = (s.prompt_len + T_ - 1) / T_;
  for (uint64_t b = first; b < end; ++b) {
    if (b == chain_begin && chain_end > chain_begin) {
      // The commit's chain: every node new, plain, full, primary, made of
      // s's blocks in s's scope, the child of block b-1's node. Per stretch
      // of one priority: one check, then the node ids appended.
      if (s.scope != scope) {
        scope = s.scope;
        sk = keys_.scope_keys(index_.scope_bytes(scope));
      }
      for (uint64_t c = chain_begin; c < chain_end;) {
        uint64_t stop = chain_end;
        uint8_t priority;
        if (c >= prompt_blocks) {
          priority = s.decode_priority;
        } else if (s.retention.empty()) {
          priority = s.prompt_priority;
          stop = std::min(stop, prompt_blocks);
        } else {
          priority = s.retention_of_block(c, T_).priority;
          stop = c + 1;
        }
        if (priority < min_priority_) {
          c = stop;
          continue;
        }
#if !defined(NDEBUG) || defined(KVC_CHECK_WRITE_STAMPS)
        for (uint64_t i = c; i < stop; ++i) {
          const TreeNode& t = tree.node(nodes[i]);
          bool own = t.live && t.num_tokens == T_ && t.tier == kPrimaryTier && t.extra.empty() &&
                     t.scope == s.scope && t.parent == nodes[i - 1] && job_[nodes[i]] == 0;
          for (uint32_t g = 0; g < G && own; ++g) own = tree.block(nodes[i], g) == s.blocks[g][i];
          if (!own)
            fail(KVC_ERR_INTERNAL, "cache invariant broken: block " + std::to_string(i) +
                                       " of the commit's chain is not a new node of its own");
        }
#endif
        const uint64_t take = std::min<uint64_t>(stop - c, room);
        no_room += stop - c - take;
        room -= size_t(take);
        if (take > 0) {
          if (run_.count > 0 &&
              (run_.last != nodes[c - 1] || run_scope != scope || run_.priority != priority))
            submit_run();
          if (run_.count == 0) {
            start_run(nodes[c - 1], sk);
            run_scope = scope;
            run_.priority = priority;
          }
          std::copy(nodes + c, nodes + c + take, run_tickets_.begin() + ptrdiff_t(run_.count));
          run_.count += size_t(take);
          run_.last = nodes[c + take - 1];
        }
        c = stop;
      }
      b = chain_end - 1;
      continue;
    }
    const BlockRetention r = s.retention_of_block(b, T_);
    if (r.priority < min_priority_) continue;
    const uint32_t node = nodes[b];
    if (node == kNoNode || job_[node] != 0) continue;  // written (or queued) already
    const TreeNode& t = tree.node(node);
    if (t.num_tokens != T_ || t.tier != kPrimaryTier) continue;
    // Only a node made of this sequence's blocks is new (a node found under
    // the key keeps its own, written when it was committed or loaded).
    bool own = true;
    for (uint32_t g = 0; g < G && own; ++g) {
      const uint32_t blk = tree.block(node, g);
      own = blk != kNoBlock && blk == s.blocks[g][b];
    }
    if (!own) continue;
    if (room == 0) {  // counted, nothing more (the writer is behind)
      ++no_room;
      continue;
    }
    --room;
    if (t.scope != scope) {
      scope = t.scope;
      sk = keys_.scope_keys(index_.scope_bytes(scope));
    }
    const bool extra = !t.extra.empty();
    if (run_.count > 0 &&
        (extra || t.parent != run_.last || t.scope != run_scope || run_.priority != r.priority))
      submit_run();
    if (run_.count == 0) {
      start_run(t.parent, sk);
      run_scope = t.scope;
      run_.priority = r.priority;
    }
    run_tickets_[run_.count] = node;
    ++run_.count;
    run_.last = node;
    if (extra) {  // a job of its own, with its extra keys, its tokens and addresses copied
      const unsigned char** parts = run_parts_.data();
      for (uint32_t g = 0; g < G; ++g)
        parts[g] = memory_[layout_groups_.group_pool[g]]->block(tree.block(node, g));
      std::memcpy(run_tokens_.data(), tree.tokens(node), T_ * sizeof(int32_t));
      const StoreKeys::ScopeKeys ek = keys_.extra_keys(t.extra);
      RecordWrite w;
      w.ticket = node;
      w.parent_ticket = run_.parent_ticket;
      w.parent = run_.parent;
      w.scope_hash = sk.hash;
      w.scope_digest = sk.digest;
      w.extra_hash = ek.hash;
      w.extra_digest = ek.digest;
      w.priority = r.priority;
      w.tokens = &run_tokens_[0];
      w.parts = parts;
      if (writer_->submit(&w, 1) == 1) job_[node] = ++submitted_;
      run_.count = 0;
    }
  }
  submit_run();
  if (no_room > 0) writer_->count_dropped(no_room);
}

void StoreChain::start_run(uint32_t parent, const StoreKeys::ScopeKeys& sk) {
  // What its first block chains on. A parent whose own job was not seen
  // finished (its key the writer's) chains on that job's key: the writer
  // remembers it (the job is one of the last ring's worth).
  run_.parent_ticket = RecordWrite::kNoTicket;
  run_.parent = StoreKey{};
  if (parent != RadixTree::kRoot && job_[parent] > finished_)
    run_.parent_ticket = parent;
  else run_.parent = keys_.node_key(parent);  // memoized (the writer's), or made now
  run_.scope_hash = sk.hash;
  run_.scope_digest = sk.digest;
}

void StoreChain::submit_run() {
  if (run_.count == 0) return;
  // The writer finds the run's nodes up from the last one's record (each
  // block's node is the next one's parent), and their tokens and blocks.
  run_.nodes = &node_records_;
  // No lock: the run goes into the writer's ring (a prefix of it, the rest
  // dropped and counted by the writer: none here, as room() said), so no job
  // taken chains on a dropped one.
  const size_t took = writer_->submit_run(run_);
  // Each block taken is stamped with its job's number (the writer numbers
  // accepted jobs consecutively): one store per block, no reference.
  for (size_t i = 0; i < took; ++i) job_[run_tickets_[i]] = submitted_ + i + 1;
  submitted_ += took;
  run_.count = 0;
}

void StoreChain::requeue_deferred() {
  if (deferred_.front().first > finished_) finished_ = writer_->finished();
  while (!deferred_.empty() && deferred_.front().first <= finished_) {
    const auto [job, n] = deferred_.front();
    std::pop_heap(deferred_.begin(), deferred_.end(), std::greater<>());
    deferred_.pop_back();
    // Stale unless the node is still stamped with the job (it may have left
    // by a page move, its id reused since): requeue() queues only a cached
    // primary leaf that is not queued.
    if (job_[n] != job || !deferred_flag_[n]) continue;
    deferred_flag_[n] = 0;
    eviction_->requeue(n);
  }
}

bool StoreChain::wait_deferred() {
  if (deferred_.empty()) return false;
  const uint64_t oldest = deferred_.front().first;
  if (oldest > writer_->finished()) {
    ++write_waits_;
    if (paused_) pause_writer(false);
    writer_->wait_finished(oldest);
  }
  finished_ = writer_->finished();
  requeue_deferred();
  return true;
}

void StoreChain::leave_slow(uint32_t node) {
  const uint64_t job = job_[node];
  deferred_flag_[node] = 0;  // a deferred entry of it is stale now
  if (job > finished_) finished_ = writer_->finished();
  if (job > finished_) {
    // Not finished: the worker may be copying the blocks out. Wait for it
    // (CPU work; the writer is resumed if a test paused it).
    ++write_waits_;
    if (paused_) pause_writer(false);
    writer_->wait_finished(job);
    finished_ = writer_->finished();
  }
  // With keys only, the key the writer made stays the node's until it
  // leaves the tree (StoreKeys::forget), for its offer; the stamp no longer
  // names a job.
  if (keys_only_) keys_.keep_writer_key(node);
  job_[node] = 0;
}

void StoreChain::set_events(EventLog* log) {
  events_ = log;
  const uint32_t G = layout_groups_.num_groups();
  all_groups_ = G >= 64 ? ~uint64_t(0) : (uint64_t(1) << G) - 1;
  announced_.assign(stores_.size(), {});
  event_tier_.clear();
  for (auto& st : stores_) {
    event_tier_.push_back(std::string(st->name()) == "remote" ? KVC_TIER_REMOTE : KVC_TIER_DISK);
    std::vector<StoreChange> held;
    st->watch(held);
    const size_t s = event_tier_.size() - 1;
    for (const StoreChange& c : held) {
      announced_[s][c.hash] = c.priority;
      events_->store_stored(c.hash, event_tier_[s], all_groups_, T_, c.priority);
    }
  }
}

void StoreChain::sync_events_slow() {
  if (events_->muted()) return;
  for (size_t s = 0; s < stores_.size(); ++s) {
    changes_.clear();
    stores_[s]->take_changes(changes_);
    auto& held = announced_[s];
    for (const StoreChange& c : changes_) {
      auto it = held.find(c.hash);
      if (c.held) {
        if (it == held.end()) {
          held.emplace(c.hash, c.priority);
          events_->store_stored(c.hash, event_tier_[s], all_groups_, T_, c.priority);
        } else if (it->second != c.priority) {
          // Written again at another priority: REMOVED then STORED (a
          // PRIORITY_CHANGED names the tree's entry only, events.h).
          it->second = c.priority;
          events_->store_removed(c.hash, event_tier_[s], all_groups_);
          events_->store_stored(c.hash, event_tier_[s], all_groups_, T_, c.priority);
        }
      } else if (it != held.end()) {
        held.erase(it);
        events_->store_removed(c.hash, event_tier_[s], all_groups_);
      }
    }
  }
}

void StoreChain::snapshot(std::vector<kvc_snapshot_entry_t>& out) const {
  std::vector<std::pair<uint64_t, uint32_t>> sorted;
  for (size_t s = 0; s < announced_.size(); ++s) {
    sorted.assign(announced_[s].begin(), announced_[s].end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [hash, priority] : sorted) {
      kvc_snapshot_entry_t e{};
      e.hash = hash;
      e.groups = all_groups_;
      e.tier = event_tier_[s];
      e.priority = priority;
      e.num_tokens = T_;
      out.push_back(e);
    }
  }
}

void StoreChain::drain() {
  if (!writer_) return;
  // The jobs finished give their ring places back; their keys stay where
  // the writer put them (the key table, read when a key is needed), so a
  // drain reads the worker's count and nothing per job.
  finished_ = writer_->finished();
  writer_->release(finished_);
  if (finished_ == submitted_) admission_.writer_idle();
  if (!deferred_.empty()) requeue_deferred();
}

void StoreChain::settle() {
  finish_offers();  // their device copies read pool blocks (a resize settles first)
  if (!writer_) return;
  if (paused_) pause_writer(false);
  writer_->flush();
  drain();
}

void StoreChain::count_holdings(Holdings&) const {
  // Deferred offers read blocks that are free again: only within the call
  // that made them (OfferBatch), never across calls.
  if (batch_depth_ == 0 && pending_ > 0)
    fail(KVC_ERR_INTERNAL, "cache invariant broken: " + std::to_string(pending_) +
                               " deferred offers outlived their call");
  // Queued writes hold no block (leaving() waits for them instead): nothing
  // to count. Their stamps: every stamped node is live, in the primary tier
  // and full (a node leaves only through leaving(), which clears it), and
  // stamped with a job the writer accepted.
  if (!writer_) return;
  const RadixTree& tree = index_.tree();
  if (finished_ > submitted_)
    fail(KVC_ERR_INTERNAL, "cache invariant broken: write jobs finished " +
                               std::to_string(finished_) + " > submitted " +
                               std::to_string(submitted_));
  for (uint32_t n = 0; n < job_.size(); ++n) {
    if (deferred_flag_[n] && job_[n] == 0)
      fail(KVC_ERR_INTERNAL, "cache invariant broken: tree node " + std::to_string(n) +
                                 " is deferred without a write job");
    if (job_[n] == 0) continue;
    const std::string who = "tree node " + std::to_string(n) + " (write job " +
                            std::to_string(job_[n]) + ")";
    if (job_[n] > submitted_)
      fail(KVC_ERR_INTERNAL, "cache invariant broken: " + who + " was never submitted");
    if (n == RadixTree::kRoot || !tree.node(n).live)
      fail(KVC_ERR_INTERNAL, "cache invariant broken: " + who + " is stamped but not live");
    if (tree.node(n).tier != kPrimaryTier || tree.node(n).num_tokens != T_)
      fail(KVC_ERR_INTERNAL,
           "cache invariant broken: " + who + " is stamped but not a full primary node");
    for (uint32_t g = 0; g < layout_groups_.num_groups(); ++g)
      if (tree.block(n, g) == kNoBlock)
        fail(KVC_ERR_INTERNAL, "cache invariant broken: " + who + " lacks its group " +
                                   std::to_string(g) + " block");
  }
}

void StoreChain::flush() {
  flush_offers();
  settle();  // finishes the offers' tasks too
  for (auto& s : stores_) s->flush();
  sync_events();
}

std::vector<StoreTierReport> StoreChain::reports() const {
  std::vector<StoreTierReport> out;
  for (size_t s = 0; s < stores_.size(); ++s) {
    StoreTierReport r;
    r.name = stores_[s]->name();
    r.io = stores_[s]->stats();
    r.onboarded_blocks = onboarded_[s];
    r.onboarded_bytes = onboarded_[s] * layout_.payload_bytes;
    r.offered_blocks = offered_[s].load(std::memory_order_relaxed);
    // Blocks that never reached a store count as drops of every tier.
    r.io.drops += dropped_.load(std::memory_order_relaxed);
    if (writer_) {
      r.offered_blocks += writer_->accepted(s);
      r.io.drops += writer_->dropped();
      if (write_through()) r.io.queued += writer_->queued();  // (key jobs queue no block)
    }
    // Offers in a slot (filling, or posted and not put yet) are writes
    // waiting too.
    const uint64_t done = offer_tasks_ ? offer_tasks_->done() : 0;
    for (const OfferSlot& slot : slots_)
      if (slot.task == 0 || slot.task > done) r.io.queued += slot.due[s];
    out.push_back(r);
  }
  return out;
}

}  // namespace kvc
