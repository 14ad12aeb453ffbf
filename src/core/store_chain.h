// The block stores below the tree-resident tiers (block_store.h): the chain
// primary -> host (optional) -> stores (disk, then remote; each optional),
// and the two moves between the tree and the stores.
//
//  - Offload, write-through at commit (the default where the pools are host
//    memory: the CPU backend): when a commit publishes new full nodes, the
//    core hands each qualifying one to the record writer (RecordWriter,
//    block_store.h, a worker thread in src/store) as a small job: what its
//    key chains on (the parent's key, or the parent's job when that is still
//    out; the scope's digests), tokens, priority and its blocks' addresses;
//    the writer makes the key (portable hash and SHA-256 chain digest) and
//    stores it in the per-node key table (StoreKeys). No reference is
//    taken: each node written is stamped with its job's number (job_), and
//    the writer publishes how many jobs it finished (RecordWriter::finished,
//    monotone, in submission order). A block whose job is not finished is cached and
//    queued for eviction like any other (its sequence releases it as
//    without the tiers). Eviction skips it: a victim whose job is not
//    finished leaves the queue for the deferred list (defer(); Eviction's
//    evict_ahead and evict_one), and a drain queues it again, as the newest
//    of its priority, once its job is finished (what a hold's release did).
//    Every path that takes a node out of the primary tree calls
//    leaving(node) first (Eviction::retire: evict_node, evict_ahead, page
//    moves, evict_all; Eviction::on_moved_out: a host-tier offload), which
//    waits for the writer if the job is still not finished (a page move or
//    a host tier's victim: they do not skip; CPU copies, never I/O) and
//    clears the stamp. A resize and a reset settle() first. So nothing
//    frees or reuses a block while the worker copies it out, and a commit's
//    cost per block written is its copies and its stamp, not a hold; the
//    jobs whose blocks reach the queue's head before the writer is done
//    cost a defer and a requeue.
//    The blocks of one commit that follow one another at one priority go
//    as one run (RecordRun: one header naming its last node, count and
//    priority, and one publication in the ring; nothing per block): the
//    writer finds the run's nodes up the parent words of the tree's
//    records, reads each block's tokens and block ids there (NodeRecords)
//    and its bytes from the pools, which is safe because the stamp keeps
//    all three unchanged until the job is finished: the record's words are written at insert, before
//    the run's publication, and changed again only after leaving() (erase,
//    a host-tier move: HostTier::offload_node calls it before it renames
//    the node's blocks) or a settle() (a resize). The writer stores each
//    job's key in the core's key table at its node (StoreKeys), where it
//    is the node's key once the core has seen the job finished; the serving
//    thread reads the writer's count only when it must (a commit short of
//    ring room, a victim whose job it has not seen finished, deferred
//    victims to queue again, a flush: drain(), pending(), leaving()), and
//    a key only when it needs it (a run's parent, a lookup's start).
//    Why at commit: the serving call then does no hashing, copy, checksum
//    or queue copy (only the job, into the writer's ring without a lock),
//    an eviction of a stored block does nothing per block, and a
//    remote store shares the block while this engine still caches it.
//    Rules: a block qualifies when the priority its sequence releases it
//    with (Sequence::retention_of_block, known at commit: prompt, range and
//    decode priorities are set at add) is >= secondary_offload_min_priority.
//    A priority changed later (a duration that expires, a later sequence
//    reusing the node at another priority) does not write or unwrite it:
//    the record keeps the priority of its commit. A full writer queue (a
//    quarter of the primary block sets, 16 to kMaxWriteJobs) drops the
//    job, counted in the tier's drops, and never waits; so does a job past
//    the admission window (write_admission.h: cut when eviction defers a
//    victim, so that a writer behind eviction is not handed jobs it would
//    reach only after their blocks' turn to leave). Only nodes this commit
//    created (their blocks the sequence's) are written; nodes loaded from a
//    store are there already. Layouts with windowed groups, device pools
//    (CUDA) and set_direct_access(false) use the eviction offload below
//    instead; there (but with windowed groups) the same jobs make the
//    keys only (keys_at_commit: RecordWriter::set_keys_only).
//    THE RULE, and every path it covers (audit of 2026-11-28). The writer
//    reads a stamped node's record (tokens, block ids) and its blocks'
//    bytes until its job is finished, so nothing may erase the node, rename
//    or free one of its blocks, or write into them before leaving(node)
//    (which waits for the job and clears the stamp). Debug, sanitizer and
//    fuzz builds enforce it inline (PrefixIndex::erase and set_block refuse
//    a stamped node) and in the checker (block_manager_check.cpp: a stamped
//    node's blocks are its own and off the free list; count_holdings: it is
//    live, primary, full). The paths:
//     - Eviction::retire (evict_node: an add's or extend's alloc_block via
//       evict_one, a host tier's victim it drops, a page move's
//       empty_page/empty_range, a resize's make_room_below and cut, a
//       reset's evict_all; evict_ahead: an add's victims taken ahead):
//       leaving() before take_blocks and erase. A victim whose job is not
//       finished is deferred first (anchor_victim), so retire rarely waits.
//     - HostTier::offload_node (a host tier's move out of the primary
//       tier): Eviction::before_move_out -> leaving() before drop_cached and
//       set_block. The offload copy before it only reads the blocks.
//     - The add's partial reuse in place (sequence_add.cpp): leaving() before
//       the sequence takes the node's blocks over and the node is erased;
//       copy on partial reuse only reads them.
//     - A resize's move of cached blocks below the new end (pool_shrink.cpp,
//       move_cached_below): the resize settle()s first (Cache::resize), and
//       leaving() before each set_block. The copy writes only free blocks.
//     - A reset (BlockManager::reset_reuse): settle() then evict_all, each
//       victim through retire. set_write_through / set_direct_access /
//       flush settle() too.
//     - Destroy: ~StoreChain finishes the writer's accepted jobs first; it
//       is BlockManager's last member (destroyed first) and the pools
//       (RankPools) outlive the manager (Cache's members).
//     - Not stamped, so outside the rule: host-tier nodes (HostTier's
//       evict_node, drop_children, onboard_node, adopt: stamps are cleared
//       when a node moves out, and a stamped node is primary); windowed
//       slots (evict_window_slot, erase_if_unused, a rewind's or publish's
//       windowed set_block: a layout with windowed groups has no writer);
//       partial nodes (only full nodes are written).
//     - Refused configurations: stores with more than one rank (tensor
//       parallelism), with state resources, or on a stateful cache
//       (cache_config.cpp, stateful_api.cpp), so no other rank's pool or
//       state slot is involved.
//     - Reads only: export holds (hold_node), fork, pins, imports (an add),
//       event snapshots.
//     - Writes into a published block by the caller (kvc_store_kv or
//       kvc_copy_blocks to a block the tree holds) break the tree's reuse
//       with or without a writer: a caller contract, not checked here; a
//       rewound tail kept from the tree is copied before its next write.
//     The tree's records never move (fixed capacity) and the pools' bases
//     change only across a resize, which settles first.
//  - Offload at eviction (the rest): a full node that leaves the tree by
//    eviction from the lowest tree-resident tier (the host tier, or the
//    primary one without it; also a primary node dropped for want of host
//    room) with priority >= secondary_offload_min_priority is sealed into a
//    record and put into every store of the chain, on the serving call,
//    except the stores an add loaded it from (mark_loaded: they hold it,
//    and the load refreshed it there; when it is all of them, nothing is
//    copied or sealed). If such a store evicts the record while the tree
//    still caches the node, the block is not stored there again: a later
//    miss computes it. Its key (a SHA-256 chain digest, 0.4 us a block)
//    is made off the serving call: the commit that published the node
//    handed it to the record writer as a key job (the write-through jobs
//    above, stamped the same way, with the same deferral of a victim whose
//    job is not finished; the writer stores the key and writes no record),
//    and leaving() keeps that key memoized as the node's until it leaves
//    the tree (StoreKeys::keep_writer_key), through a move to the host
//    tier. A node no key job covered (its job dropped for want of room, a
//    node loaded or imported) is keyed on the call, as before. The copy
//    out of a device pool goes through pinned
//    staging blocks; within an add or an extend (OfferBatch) the offers are
//    deferred and their blocks copied out together into a staging slot, one
//    copy per group for up to offer_chunk_ of them (flush_offers), enqueued
//    on the call's stream before the call writes into any pool block (its
//    loads, a copy on partial reuse or on write, the host tier's onboard)
//    and before it returns, so that the call's and the caller's later work
//    on that stream comes after them (a call on another stream waits for
//    them: Device::order_after_tier_copies). The call waits for neither the
//    copies nor the sealing: the slot goes to the offer worker (a
//    BackgroundTasks thread of the store layer), which waits for the
//    copies (Device::wait_fence), seals each record and puts it (put_slot);
//    a copy and a synchronize per block cost a GPU cache's add several
//    milliseconds, and sealing a 2 MiB record on the call is a copy and a
//    checksum of it (bench/results/2026-11-29-gpu-offers-h200.md). The
//    kOfferSlots slots are filled in turn. When all are out and the oldest
//    is the call's own (it evicts more than they hold) the call waits for
//    it, CPU work and device copies, never the stores' I/O: dropping there
//    cost an 8B model's add that evicts hundreds of 2 MiB blocks 96% of
//    them (bench/results/2026-11-29-gpu-offer-worker-h200.md). When the
//    oldest is an earlier call's (the worker behind across calls) the
//    call's offers are dropped, counted: waiting there paced every step to
//    the worker's sealing speed (5.7-6.7 ms a step at 512 KiB blocks on
//    the H200: bench/results/
//    2026-12-01-disk-serving-make-room-vm-and-host.md). Outside a batch
//    the copies are waited for at once. A device copy that fails drops the
//    block, counted in the tier's drops.
//    put() never waits on I/O; a full queue drops it, counted by the store.
//    A node with an evicted windowed slot or a partial block is not stored.
//    A reset (evict_all) puts nothing.
//  - Onboard: kvc_sequence_add looks up, after the tree's match ends, the
//    prompt's remaining full blocks (the last token always recomputed) in
//    the stores, in chain order per block run: disk first, then remote from
//    the first block the disk lacks. Each record is checked against the
//    key made from the caller's own tokens and scope (check_record); the
//    first that fails ends the run and is rejected (counted, the disk
//    forgets it). The plan stages the first chunk (so a hit is known before
//    the plan, and a partial match of the tree gives way to it); apply
//    copies the records into the sequence's fresh primary blocks (the ones
//    it would have computed) and loads the following chunks the same way;
//    the caller then publishes them as a commit would. Loaded blocks take
//    no block the plan did not count, so the all-or-nothing rule holds: a
//    store that fails, times out or answers garbage is a miss.
//
// The core does no I/O and starts no thread: the stores, the record writer
// and the offer worker do, on their threads; this owner only calls their
// interfaces,
// under the cache's lock. Bytes move between the
// pools and the records through per-group pinned staging blocks
// (Device::allocate_host: copy_tier reaches only whole host allocations),
// one copy_tier per group and chunk; on the CPU backend, whose pools are
// host memory, records are copied to and from the pool blocks directly
// (set_direct_access(false) makes tests take the staging path there too).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/device.h"
#include "core/block_store.h"
#include "core/cache_config.h"
#include "core/group_layout.h"
#include "core/layer_groups.h"
#include "core/pool_memory.h"
#include "core/retention.h"
#include "core/store_keys.h"
#include "core/write_admission.h"
#include "kvcache/events.h"

namespace kvc {

class PrefixIndex;
class Eviction;
class EventLog;
struct Sequence;
struct Holdings;

// The record layout of a cache's blocks: its geometry fingerprint, tokens
// per block, and every group's block bytes.
RecordLayout store_record_layout(const CacheConfig& config, const LayerGrouping& grouping);

// One store's statistics with what the chain counted for it.
struct StoreTierReport {
  const char* name = "";
  StoreStats io;              // the store's own counts
  uint64_t onboarded_blocks = 0;  // records checked and copied into primary blocks
  uint64_t onboarded_bytes = 0;
  uint64_t offered_blocks = 0;    // puts the store accepted
};

class StoreChain {
 public:
  StoreChain(const CacheConfig& config, const GroupLayout& layout, const LayerGrouping& grouping,
             PrefixIndex& index, Device& device,
             const std::vector<std::unique_ptr<PoolMemory>>& memory,
             const std::vector<std::unique_ptr<PoolMemory>>& host_memory,
             std::vector<std::unique_ptr<BlockStore>> stores);
  ~StoreChain();
  StoreChain(const StoreChain&) = delete;
  StoreChain& operator=(const StoreChain&) = delete;

  StoreKeys& keys() { return keys_; }
  const RecordLayout& layout() const { return layout_; }
  size_t size() const { return stores_.size(); }
  BlockStore& store(size_t i) { return *stores_[i]; }

  // The eviction the chain belongs to: a drain queues the deferred victims
  // whose jobs finished there again (Eviction::requeue).
  void set_eviction(Eviction* eviction) { eviction_ = eviction; }

  // --- Offload ---------------------------------------------------------------
  // `node` is about to leave the tree (its blocks still valid, in its tier's
  // pools): put it into the stores if it qualifies and write-through did not
  // already. Never throws. A primary node of device pools is deferred: its
  // key, tokens and priority are kept and its blocks are copied out with
  // the batch's others (one copy per group per offer_chunk_ offers: up to
  // 1,024 within 8 MiB) by flush_offers(), at once outside an OfferBatch;
  // the offer worker seals and puts them.
  void offer(uint32_t node);
  // The host tier enqueued copies that write host blocks: a host node's
  // offer waits for the device again before it reads its blocks. Within an
  // OfferBatch one wait serves every host node offered until then (the host
  // tier's victims of a call: one device synchronize, not one each).
  void host_blocks_written() { host_settled_ = false; }
  // Enqueues the copies out of the offers deferred so far on the batch's
  // stream and hands them to the offer worker (which seals and puts them
  // once the copies are done). Called before anything writes into pool
  // blocks (copy_in, Residency::copy_set's callers, the host tier's
  // onboard) and when the batch ends: the blocks of a deferred offer are
  // free, but nothing is enqueued to write them before this. Never throws
  // (a failed copy drops the batch's blocks, counted).
  void flush_offers() noexcept {
    if (pending_ > 0) flush_offers_slow();
  }
  // The scope of one serving call that may evict many blocks (an add, an
  // extend, a batch of extends), whose copies go on `stream`: offers are
  // deferred within it and their copies enqueued on that stream when it
  // ends, before the call returns and the caller's kernels on the stream
  // may write into the evicted blocks. Nests (the outermost scope flushes;
  // its stream is the batch's).
  class OfferBatch {
   public:
    OfferBatch(StoreChain* chain, void* stream) : chain_(chain) {
      if (chain_ != nullptr && chain_->batch_depth_++ == 0) {
        chain_->batch_stream_ = stream;
        ++chain_->batch_serial_;
      }
    }
    ~OfferBatch() {
      if (chain_ == nullptr) return;
      // The outermost scope flushes while the batch is still open, so that
      // the copies are enqueued, not waited for (flush_offers_slow waits
      // only outside a batch).
      if (chain_->batch_depth_ == 1) {
        chain_->flush_offers();
        chain_->host_settled_ = false;
        chain_->batch_stream_ = nullptr;
      }
      --chain_->batch_depth_;
    }
    OfferBatch(const OfferBatch&) = delete;
    OfferBatch& operator=(const OfferBatch&) = delete;

   private:
    StoreChain* chain_;
  };
  // The commit hook (one call per commit): s's blocks [first, end) are
  // published; queue a write of each new qualifying node (write-through),
  // one job per run of consecutive blocks. Drains done jobs first when the
  // queue lacks room for them (drain()). Blocks [chain_begin, chain_end)
  // (within [first, end), or empty) are new nodes the commit linked as a
  // chain (Sequences::commit_chain: plain, full, primary, s's own blocks
  // in s's scope, each the child of block b-1's node): taken per stretch
  // of one priority, without a look at each node.
  void committed(const Sequence& s, uint64_t first, uint64_t end, uint64_t chain_begin = 0,
                 uint64_t chain_end = 0);
  // Reads the writer's count of finished jobs (one load of the worker's
  // line, nothing per job: their keys stay in the key table, StoreKeys),
  // frees their ring places and queues again the deferred victims whose
  // jobs are finished. A commit drains when the queue lacks room for its
  // blocks (so a decode loop that only commits still frees the queue).
  void drain();
  // Hints at the start of a serving call (RecordWriter::prefetch_submit):
  // a commit asks for the lines its submit writes, and for the writer's
  // count while jobs are out (a commit short of room drains); an add that
  // may evict, or an extend, for the count while jobs are out or victims
  // wait (its evictions and requeue_deferred_if_any read it).
  void prefetch_for_commit() const {
    if (writer_ == nullptr || muted_) return;
    writer_->prefetch_submit();
    if (submitted_ != finished_) writer_->prefetch_finished();
  }
  void prefetch_for_call() const {
    if (writer_ != nullptr && (submitted_ != finished_ || !deferred_.empty()))
      writer_->prefetch_finished();
  }
  // An add's look at the writer, when it may evict: only when victims wait
  // for their jobs (deferred), so that a call with none reads no line of
  // the worker's.
  void requeue_deferred_if_any() {
    if (!deferred_.empty()) drain();
  }
  // Between steps (kvc_cache_make_room, while the device runs): drains, so
  // that the step's commits find the queue's places free without reading
  // the worker's count, and wakes a worker in its deep sleep while jobs
  // are out (RecordWriter::nudge: the commits do not, below half a queue).
  void between_steps() {
    if (writer_ == nullptr) return;
    drain();
    writer_->nudge();
  }
  // Waits for every queued write and every offer slot's task (their copies
  // read pool blocks) and drains (a reset, a resize, a flush, tests).
  void settle();
  // `node` is about to leave the primary tree (evicted, or moved to the
  // host tier): its blocks may be freed and reused once this returns. Waits
  // for its write job if that is not finished yet (leave_slow), and forgets
  // the job (the key the writer stored for it is then no node's, StoreKeys).
  // A load and a compare unless the writer must be asked.
  void leaving(uint32_t node) {
    if (node >= job_.size() || job_[node] == 0) return;
    if (job_[node] <= finished_) {  // finished when last looked
      if (keys_only_) keys_.keep_writer_key(node);  // for its offer
      job_[node] = 0;
      deferred_flag_[node] = 0;  // a deferred entry of it is stale now
    } else {
      leave_slow(node);
    }
  }
  // Whether node's write job is not finished (asks the writer only when
  // the last count read says not finished).
  bool pending(uint32_t node) {
    if (node >= job_.size() || job_[node] <= finished_) return false;
    finished_ = writer_->finished();
    return job_[node] > finished_;
  }
  // Eviction: `node`, a cached leaf whose job is pending, left the queue; a
  // drain queues it again once the job is finished (Eviction::requeue).
  // The writer is behind eviction: the admission window shrinks
  // (write_admission.h; pending() read the writer's count just before).
  void defer(uint32_t node) {
    if (deferred_flag_[node]) return;
    deferred_flag_[node] = 1;
    deferred_.emplace_back(job_[node], node);
    std::push_heap(deferred_.begin(), deferred_.end(), std::greater<>());
    ++deferrals_;
    admission_.deferred(job_[node], submitted_ - finished_, submitted_);
  }
  // Nothing else to evict: waits for the oldest deferred victim's job and
  // queues again those whose jobs are finished; false when none is
  // deferred.
  bool wait_deferred();
  // The write-through stamps, per node (job_; nullptr without a writer):
  // the prefix index refuses, in debug builds, to erase or rename a stamped
  // node (PrefixIndex::set_write_stamps). The vector never reallocates.
  const std::vector<uint64_t>* stamps() const { return job_.empty() ? nullptr : &job_; }
  // The checker: node's write job (0: none), and whether the writer may
  // still be reading it (asks the writer).
  uint64_t stamp(uint32_t node) const { return node < job_.size() ? job_[node] : 0; }
  bool stamp_live(uint32_t node) const { return stamp(node) > writer_->finished(); }
  // The checker: whether node is on the deferred list.
  bool deferred(uint32_t node) const { return node < deferred_flag_.size() && deferred_flag_[node]; }
  // Tests: how many times leaving() waited for the writer, and how many
  // victims were deferred.
  uint64_t write_waits() const { return write_waits_; }
  uint64_t deferrals() const { return deferrals_; }
  // Jobs submitted and not seen finished (as the count was last read).
  uint64_t jobs_out() const { return submitted_ - finished_; }
  // Tests: the write-through admission window (write_admission.h).
  const WriteAdmission& admission() const { return admission_; }
  // Whether offer() does anything (not while writing through at commit):
  // without, eviction may take its fast path (Eviction::can_evict_ahead).
  bool offers_at_eviction() const { return !write_through(); }
  // Whether write jobs hold blocks that a settle() would give back (an add
  // or extend short of blocks settles then): never, since a job holds no
  // reference (leaving() waits for it instead). Kept for those callers.
  bool writes_pending() const { return false; }
  // Whether the writer writes records at commit (host-addressable pools,
  // read directly); else, with a writer, it makes the commits' keys only
  // and blocks are offered at eviction.
  bool write_through() const {
    return writer_ != nullptr && write_through_ && direct_ && records_ok_;
  }
  // Whether commits are keyed off the serving call for the offers at
  // eviction (a writer that makes keys only).
  bool keys_at_commit() const { return writer_ != nullptr && !write_through(); }
  // Tests: false makes a CPU cache offload at eviction as a device cache
  // does (its commits keyed by the writer); a paused writer takes no job
  // (deterministic races).
  void set_write_through(bool on) {
    settle();
    write_through_ = on;
    set_writer_mode();
  }
  // settle() (so also an add short of blocks, and flush) resumes it.
  void pause_writer(bool paused) {
    if (writer_) writer_->set_paused(paused);
    paused_ = paused && writer_ != nullptr;
  }
  // The checker: queued writes hold no references; checks the stamps
  // instead (every stamped node is live, primary and full, its job one
  // submitted). Throws Error(KVC_ERR_INTERNAL).
  void count_holdings(Holdings& h) const;
  // While muted (a reset) nothing is offered.
  void set_muted(bool muted) { muted_ = muted; }
  // Tests: deferred offers are copied out at most n at a time (before the
  // first one: their staging is allocated then).
  void set_offer_chunk(uint64_t n) {
    if (slots_.empty() && n > 0) offer_chunk_ = n;
  }
  // Tests: how many times a batch of offers waited for a slot's task
  // (every slot out: the worker behind).
  uint64_t offer_waits() const { return offer_waits_; }
  // Tests: how many offer slots hold their pinned staging (a device cache:
  // every one from its create; a CPU cache's tests: from their first use).
  size_t offer_slots_staged() const {
    size_t n = 0;
    for (const OfferSlot& slot : slots_) n += slot.staging.empty() ? 0 : 1;
    return n;
  }
  // Tests: the offer worker (started here if no offer started it), to hold
  // it with a task of the test's own.
  BackgroundTasks& offer_worker() {
    if (!offer_tasks_) offer_tasks_ = open_background_tasks();
    return *offer_tasks_;
  }
  // Tests: false makes a CPU cache move bytes through the staging blocks as
  // a device cache does.
  void set_direct_access(bool direct) {
    settle();
    direct_ = direct && host_pools_;
    set_writer_mode();
  }

  // --- KV events (events.h) ---------------------------------------------------
  // Events on: watches every store and announces what each holds now
  // (STORED, tier KVC_TIER_DISK or KVC_TIER_REMOTE); later changes are
  // announced by sync_events().
  void set_events(EventLog* log);
  // Takes the changes the stores' threads journaled since the last call and
  // emits them (STORED, REMOVED of a store tier); one
  // branch with events off, one atomic load per store when nothing changed.
  // Called where a call succeeds (the end of an add, a commit, a flush), so
  // that a failed call emits nothing. Not while the log is muted (the
  // changes wait).
  void sync_events() {
    if (events_ != nullptr) sync_events_slow();
  }
  // The store entries the events announced so far, appended to `out` (after
  // the tree's): per store in chain order, by hash.
  void snapshot(std::vector<kvc_snapshot_entry_t>& out) const;

  // --- Onboard ---------------------------------------------------------------
  // Plan: the prompt's blocks [first, first + want) follow tree node
  // `parent` (kRoot: first == 0). Looks up and checks the first chunk of
  // them; returns how many leading blocks are staged (0: none, nothing
  // more is looked up). `tokens` and `scope_bytes` must stay valid until
  // onboard() returns.
  uint64_t stage(uint32_t parent, const std::string& scope_bytes,
                 const std::vector<ExtraKey>& extras, const int32_t* tokens, uint64_t first,
                 uint64_t want);
  // Apply, after a stage() that returned > 0: copies the staged blocks into
  // blocks[g][first + i] (the sequence's fresh sets) and loads and copies
  // the following ones until a miss or `want`; returns how many leading
  // positions now hold their checked KV (enqueued on `stream`). Never throws:
  // a failed copy ends the run.
  // `extras`: stage()'s (the same keys; the caller may have moved them).
  uint64_t onboard(const std::vector<std::vector<uint32_t>>& blocks,
                   const std::vector<ExtraKey>& extras, void* stream);
  // After onboard() loaded blocks and the caller published them
  // (s.nodes[first, first + loaded), as far as s.published reaches): each
  // node is marked held by the store it was loaded from
  // (StoreKeys::mark_held), so that its eviction does not offer it back.
  void mark_loaded(const Sequence& s, uint64_t first);

  // Waits for every queued write and every store's queued puts (tests,
  // shutdown, kvc_cache_flush_tiers), releasing the writes' references.
  void flush();
  std::vector<StoreTierReport> reports() const;

 private:
  // Fills staging records [begin, begin + count) with checked records for
  // the prompt blocks whose keys are chunk_keys_[begin, begin + count);
  // returns the leading count.
  uint64_t fill(uint64_t begin, uint64_t count);
  // Checks records [begin, begin + got) of store s; rejects the first bad
  // one; returns the leading count that passed.
  uint64_t check_run(size_t s, uint64_t begin, uint64_t got);
  bool copy_in(uint64_t staged, uint64_t position,
               const std::vector<std::vector<uint32_t>>& blocks, void* stream);
  // The payload of `node` (its tier's blocks, in host memory: the host tier
  // or host pools) into `payload`.
  void copy_out(uint32_t node, bool primary, unsigned char* payload);
  // Seals `record` (its payload written) as `key`'s record and puts it into
  // every store not in `held`: the first store (the disk, where there is
  // one) takes the buffer itself and hands another back (put_buffer), the
  // later ones copy it, so they go first. Never throws: a store out of
  // memory drops it, counted. The serving thread's offers use
  // offer_record_, the offer worker's task_record_.
  void put_record(std::unique_ptr<unsigned char[]>& record, const StoreKey& key,
                  const int32_t* tokens, uint32_t priority, uint8_t held) noexcept;
  void defer_offer(uint32_t node, const StoreKey& key, uint32_t priority, uint8_t held);
  void flush_offers_slow() noexcept;
  // The slot deferred offers fill now, ready for them (its staging, its
  // task done: waited for when every slot is out); false when its pinned
  // memory cannot be had.
  bool claim_slot() noexcept;
  // The worker's task for slot i: waits for its copies, seals and puts.
  void put_slot(size_t i) noexcept;
  // Waits for every posted slot's task (flush, settle, destroy).
  void finish_offers() noexcept;
  void release_staging() noexcept;
  void sync_events_slow();
  void leave_slow(uint32_t node);
  void requeue_deferred();  // the deferred victims whose jobs are finished go back into the queue
  unsigned char* staged(uint64_t i) const { return staging_ + i * layout_.record_bytes(); }

  const GroupLayout& layout_groups_;
  PrefixIndex& index_;
  Device& device_;
  const std::vector<std::unique_ptr<PoolMemory>>& memory_;
  const std::vector<std::unique_ptr<PoolMemory>>& host_memory_;
  const uint32_t T_;
  const uint32_t min_priority_;
  const RecordLayout layout_;
  std::vector<uint64_t> group_offset_;  // per group: its bytes' offset in the payload
  std::vector<uint64_t> group_bytes_;   // per group: block bytes
  std::vector<std::unique_ptr<BlockStore>> stores_;
  std::vector<uint64_t> onboarded_;     // per store
  // Per store: puts it accepted of eviction offloads (the serving thread's
  // and the offer worker's).
  std::unique_ptr<std::atomic<uint64_t>[]> offered_;
  // Blocks dropped before any store: a failed device copy, no staging.
  std::atomic<uint64_t> dropped_{0};
  Eviction* eviction_ = nullptr;
  // Write-through (host-addressable pools), else the commits' keys only
  // (write_through(), keys_at_commit()).
  std::unique_ptr<RecordWriter> writer_;
  bool write_through_ = true;             // tests: set_write_through
  bool records_ok_ = false;               // the writer may read the pools' blocks
  // keys_at_commit(), kept for leaving(): only then is a finished job's key
  // kept for the node's offer (write-through never offers at eviction, so
  // its evictions read no key table entry).
  bool keys_only_ = false;
  // After a settle(): tells the writer whether it writes records or makes
  // keys only, and keeps keys_only_.
  void set_writer_mode() {
    keys_only_ = keys_at_commit();
    if (writer_) writer_->set_keys_only(keys_only_);
  }
  bool paused_ = false;                   // tests: pause_writer
  bool windowed_ = false;                 // a layout with windowed groups: no write-through
  // Per node: the number of its write job (1 for the first job the writer
  // accepted), 0 for none; cleared when the node leaves (leaving()). A job
  // j is finished once the writer's finished() >= j (finished_ caches the
  // last value read, with acquire: the key the writer stored for a node
  // stamped with a job <= finished_ is readable, StoreKeys::known).
  std::vector<uint64_t> job_;
  uint64_t submitted_ = 0;                // jobs the writer accepted
  WriteAdmission admission_{0};           // how many may be out (write_admission.h)
  // Jobs a commit may submit now: the ring's room and the window's.
  uint64_t admit_room() const {
    return std::min<uint64_t>(writer_->room(), admission_.room(submitted_ - finished_));
  }
  uint64_t finished_ = 0;                 // the writer's finished(), as last read
  uint64_t write_waits_ = 0;              // leaving() calls that waited
  uint64_t deferrals_ = 0;                // victims deferred
  // Victims out of the queue until their job is finished: a min-heap of
  // (job, node), so that a drain looks only at the jobs finished (an entry
  // whose node is no longer stamped with its job is stale and dropped).
  std::vector<std::pair<uint64_t, uint32_t>> deferred_;
  std::vector<uint8_t> deferred_flag_;    // per node: deferred with its current job
  // Scratch: the run of blocks a commit is building (RecordRun), its
  // blocks' tickets, priorities, tokens and addresses.
  RecordRun run_;
  std::vector<uint32_t> run_tickets_;            // the run's nodes: stamped once it is taken
  std::vector<int32_t> run_tokens_;             // an extra-key block's (submit)
  std::vector<const unsigned char*> run_parts_;  // its block addresses
  NodeRecords node_records_;                     // where the writer reads a run's blocks
  std::vector<const unsigned char*> node_bases_;  // per group: its pool's block 0
  void submit_run();  // submits run_ (if any blocks), stamps what the writer took
  // committed(): starts a run whose first block is a child of `parent`,
  // in the scope whose keys are sk.
  void start_run(uint32_t parent, const StoreKeys::ScopeKeys& sk);
  StoreKeys keys_;
  bool muted_ = false;
  // KV events: per store, the entries announced (hash -> priority), its tier.
  EventLog* events_ = nullptr;
  std::vector<std::unordered_map<uint64_t, uint32_t>> announced_;
  std::vector<uint32_t> event_tier_;
  uint64_t all_groups_ = 0;            // a record holds every group's block
  std::vector<StoreChange> changes_;   // scratch
  bool host_pools_ = false;  // primary pools in host memory (the CPU backend)
  bool direct_ = false;      // copy between records and pool blocks directly

  // Pinned staging: chunk_ records for loads, and per group chunk_ blocks
  // that copy_tier reads or writes.
  uint64_t chunk_ = 0;
  unsigned char* staging_ = nullptr;
  std::vector<unsigned char*> group_staging_;
  // The record of an offer the serving thread seals (a host-memory victim:
  // its payload memcpy'd; put_record may swap it).
  std::unique_ptr<unsigned char[]> offer_record_;
  // Deferred offers (OfferBatch) fill slot fill_, up to offer_chunk_ of
  // them (pending_). flush_offers() enqueues their blocks' copies into the
  // slot's pinned staging (offer_copies_[g]: block -> index) on the
  // batch's stream, records the slot's fence and posts the slot to
  // offer_tasks_, whose task (put_slot, on the store layer's thread) waits
  // for the fence, seals each record and puts it: the serving call waits
  // for neither the device nor the sealing. The slots are used in turn,
  // each filled again once its task is done (claim_slot: when all are out,
  // the wait or the drop of the offload rules above). A slot's staging and
  // fence are made at the cache's create where the pools are device memory
  // (pinning 8 MiB takes a serving call milliseconds), else at its first
  // use (a CPU cache's tests).
  static constexpr size_t kOfferSlots = 4;
  uint64_t offer_chunk_ = 0;
  struct PendingOffer {
    StoreKey key;
    uint32_t priority = 0;
    uint8_t held = 0;  // the stores not to put it into (StoreKeys::held_by)
  };
  struct OfferSlot {
    std::vector<unsigned char*> staging;  // per group: offer_chunk_ blocks, pinned
    void* fence = nullptr;
    std::vector<PendingOffer> offers;     // the worker's while the task is out
    std::vector<int32_t> tokens;          // T_ per offer
    uint64_t task = 0;                    // its task's number while out (0: none)
    uint64_t batch = 0;                   // the batch that filled it (0: none)
    // Per store: the slot's offers due there (not held by it), counted by
    // the serving thread as it fills the slot: writes waiting
    // (queued_blocks) until the task is done.
    std::vector<uint64_t> due;
  };
  std::vector<OfferSlot> slots_;  // kOfferSlots once an offer was deferred
  // Makes the slots, the worker and its record (throws; nothing kept then).
  void open_offer_slots();
  // Makes slot's pinned staging and fence (throws; the slot left unstaged).
  void stage_slot(OfferSlot& slot);
  // The filled slot's offers are dropped, counted (its copies failed or
  // its task could not be posted); the slot is empty again.
  void drop_slot(OfferSlot& slot) noexcept;
  size_t fill_ = 0;
  size_t pending_ = 0;            // offers in slot fill_ not flushed yet
  uint64_t posted_ = 0;           // the last slot task posted
  uint64_t offer_waits_ = 0;
  uint64_t batch_serial_ = 0;     // OfferBatch scopes opened (outermost)
  std::vector<std::vector<TierCopy>> offer_copies_;  // per group
  std::unique_ptr<BackgroundTasks> offer_tasks_;
  std::unique_ptr<unsigned char[]> task_record_;     // the worker's (put_buffer swaps it)
  uint32_t batch_depth_ = 0;
  void* batch_stream_ = nullptr;  // the outermost OfferBatch's
  bool host_settled_ = false;  // host_blocks_written()
  std::vector<TierCopy> copies_;

  // The lookup in progress (stage() to onboard()).
  struct Lookup {
    const std::string* scope_bytes = nullptr;
    const std::vector<ExtraKey>* extras = nullptr;
    const int32_t* tokens = nullptr;
    uint64_t first = 0;      // prompt block of staging record 0
    uint64_t begin = 0;      // the lookup's first block
    uint64_t end = 0;        // first + want
    uint64_t staged = 0;     // checked records in staging
    bool done = false;       // a miss ended the run
    StoreKey parent;         // the key the lookup chains on
    bool digest_pending = false;  // chunk_keys_[0] has its hash only (stage's first block)
  } look_;
  std::vector<StoreKey> chunk_keys_;
  std::vector<uint64_t> chunk_hashes_;
  std::vector<uint64_t> chunk_sums_;  // load_summed(): each staged record's checksum
  std::vector<unsigned char*> chunk_ptrs_;
  std::vector<uint8_t> chunk_store_;  // per staged record: the store it came from
  std::vector<uint8_t> loaded_from_;  // per block onboard() loaded: the store it came from
};

}  // namespace kvc
