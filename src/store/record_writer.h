// The record writer (core/block_store.h, RecordWriter): one worker thread
// that keys the blocks a commit published (portable hash and SHA-256 chain
// digest), seals them into records and puts them into every store, so that
// the serving call only queues a job (the parent's key or job, the scope's
// digests, the tokens and the pool pointers) and never hashes, copies or
// checksums a block.
//
// Jobs (one block each) live in a ring of max_jobs preallocated entries,
// handed between the serving thread and the worker without a lock (single
// producer, single consumer): submit() and submit_run() fill the entries
// after tail_ and publish tail_ once per call; the worker works on the entry
// at written_ in place, stores the job's key in the core's key table at its
// ticket (never a line of the ring's) and publishes written_; the core
// reads the key there once finished() says the job is done, and frees the
// places with release() (head_).
// What a run's blocks share (parent, scope, extra keys, how many jobs it
// holds, and where its blocks are read) is one header in runs_, read by the
// worker at the run's first job. A run handed over with node records
// (RecordRun::nodes, the core's write-through) costs the serving thread
// that header and one publication, nothing per block: the worker finds the
// run's nodes (its tickets) up the parent words of the records from the
// last one, and reads each block's tokens and block ids from its node's
// record (block_store.h, NodeRecords) and its bytes from the pools. Other
// jobs (submit(), a run of copies) have their tickets, priorities, tokens
// and block addresses copied into flat arrays (tickets_, priorities_,
// tokens_, parts_: a run's are a few memcpys). A header's slot is free
// again once its run's first job is done, always so by the time it comes
// round (a run holds at least one job, and the ring at most max_jobs). So
// an entry is free again only once the core released it, the serving
// thread never takes a lock, waits for one or allocates, and the two
// threads share two counters, each written by one of them, on cache lines
// of their own. The serving thread reads the worker's count only when it
// asks finished() (a commit short of room, a victim whose job it did not
// see finished): a call that hands jobs over reads no line the worker
// writes, and writes tail_ with a release store (no fence).
//
// Waking the worker. A submit never wakes a worker that is awake. An idle
// worker sleeps on a condition variable with a timeout (kPoll, or kDeepPoll
// once it has been idle for kIdlePolls polls). A submit looks at the
// worker's state (sleep_, a line the worker writes as it sleeps and wakes:
// a transfer between the cores at each call, about 640 cycles on the 2-core
// VM) only when the ring is at least half used by its own count
// (tail_ - head_), and then wakes a sleeping worker (a futex syscall);
// otherwise the worker finds the jobs at its next poll (kPoll), or, in its
// deep sleep, when nudge() wakes it: the core calls that between steps
// (kvc_cache_make_room, which an engine calls while the device runs). The
// submit publishes without a fence, so it may read the worker's state from
// before the worker went to sleep and not wake it: the timeouts bound how
// long such jobs wait (kDeepPoll at most). flush(), wait_finished(),
// set_paused() and the destructor always wake it (under the lock). The
// worker runs as a background thread (background_thread.h).
//
// The worker remembers the keys of its last jobs (2 x max_jobs + 16: a job
// chains only on a job queued when it was submitted, so at most max_jobs
// others finish between the two) for jobs that chain on them.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/block_store.h"
#include "core/portable_hash.h"

namespace kvc {

class ThreadedRecordWriter final : public RecordWriter {
 public:
  ThreadedRecordWriter(const RecordLayout& layout, std::vector<uint64_t> part_bytes,
                       std::vector<BlockStore*> stores, size_t max_jobs, uint64_t hash_seed,
                       StoreKey* key_table, size_t key_table_size);
  ~ThreadedRecordWriter() override;
  ThreadedRecordWriter(const ThreadedRecordWriter&) = delete;
  ThreadedRecordWriter& operator=(const ThreadedRecordWriter&) = delete;

  size_t submit(const RecordWrite* jobs, size_t n) override;
  size_t submit_run(const RecordRun& run) override;
  size_t room() const override {
    return cap_ - size_t(tail_.load(std::memory_order_relaxed) - head_);
  }
  void count_dropped(uint64_t n) override { count_refused(n); }
  void release(uint64_t n) override { head_ = std::max(head_, n); }
  void nudge() override;
  void flush() override;
  uint64_t finished() const override { return written_.load(std::memory_order_acquire); }
  void prefetch_submit() const override {
    __builtin_prefetch(&tail_, 1);
    __builtin_prefetch(&runs_[runs_submitted_ % runs_.size()], 1);
  }
  void prefetch_finished() const override { __builtin_prefetch(&written_, 0); }
  void wait_finished(uint64_t n) override;
  uint64_t dropped() const override {
    return dropped_.load(std::memory_order_relaxed) + refused_.load(std::memory_order_relaxed);
  }
  uint64_t accepted(size_t store) const override {
    return accepted_[store].load(std::memory_order_relaxed);
  }
  uint64_t queued() const override {
    return tail_.load(std::memory_order_relaxed) - written_.load(std::memory_order_acquire);
  }
  void set_paused(bool paused) override;
  void set_keys_only(bool keys_only) override {
    keys_only_.store(keys_only, std::memory_order_relaxed);  // no job is out
  }

 private:
  // A job, as the serving thread wrote it (i: its place in the ring): its
  // ticket tickets_[i], priority priorities_[i], tokens tokens_[i * T,
  // (i + 1) * T) and block addresses parts_[i * G, (i + 1) * G), unless its
  // run is one of node records (RecordRun::nodes): then the run's header
  // says all, and the worker finds each job's node (its ticket) and reads
  // the rest from its record. Its key goes to key_table_[ticket].
  // What a run's blocks share (every job is in one: the first `count` jobs
  // not yet in a run are this one's); the first chains on parent_ticket's
  // job or on parent, each next one on the block before it.
  struct RunHead {
    uint64_t parent_ticket = RecordWrite::kNoTicket;
    StoreKey parent;
    uint64_t scope_hash = 0;
    ChainDigest scope_digest;
    uint64_t extra_hash = 0;
    ChainDigest extra_digest;
    uint32_t count = 0;
    // Node records (RecordRun::nodes), or null: the ring's copies; the
    // pools' bases are run_bases_[slot * G, (slot + 1) * G). The run's
    // blocks are the `count` nodes that end `skip` parents above `last`.
    const uint32_t* records = nullptr;
    uint32_t stride = 0;
    uint32_t parent_at = 0;
    uint32_t blocks_at = 0;
    uint32_t last = 0;
    uint32_t skip = 0;
    uint32_t priority = 0;
  };
  void run();
  // The serving thread: the next run's header, and making `took` entries
  // after `tail` visible (waking the worker if it must).
  RunHead& next_head() { return runs_[runs_submitted_++ % runs_.size()]; }
  void publish(uint64_t tail, size_t took);
  // Wakes a worker asleep on work_cv_ (publish and nudge decide whether).
  void wake();
  // Throws Error(KVC_ERR_INTERNAL) for a ticket outside the key table.
  void check_ticket(uint64_t ticket) const;
  // The worker, outside the lock: job `at`'s run (its header taken at the
  // run's first job), ticket and priority; its key (false: its parent's is
  // unknown), then its record.
  void begin_job(uint64_t at);
  bool key_of(uint64_t at, StoreKey& key);
  void write(uint64_t at, const StoreKey& key);

  // The members fall in groups by who writes them, each group on lines of
  // its own: a line one thread writes at every job and the other reads at
  // every call moves between the cores each time (bench/results/
  // 2026-11-29-disk-serving-r6-vm-2cpu.md: the serving thread's head_ and
  // the ring's vectors used to share lines with the worker's last_key_ and
  // jobs_keyed_, the worker's accepted_ with the serving thread's drops).

  // Set at construction, read by both (the vectors' elements are the
  // ring's: each written by one side, as said at each).
  const RecordLayout layout_;
  const std::vector<uint64_t> part_bytes_;
  const std::vector<BlockStore*> stores_;
  const PortableHasher hasher_;
  const size_t cap_;                  // the ring's places (max_jobs)
  std::vector<uint64_t> tickets_;     // cap_: the jobs' tickets (copies)
  std::vector<uint32_t> priorities_;  // cap_: their priorities (copies)
  StoreKey* const key_table_;         // the core's: job keys by ticket (the worker writes)
  const size_t key_table_size_;
  std::vector<int32_t> tokens_;                  // cap_ * T
  std::vector<const unsigned char*> parts_;      // cap_ * G
  std::vector<RunHead> runs_;                    // cap_
  std::vector<const unsigned char*> run_bases_;  // runs_.size() * G
  std::vector<const unsigned char*> bases_;  // G: the worker's run's pools' bases
  std::unique_ptr<std::atomic<uint64_t>[]> accepted_;  // per store (the worker adds)

  // The worker's record, sealed in place; handed to the first store
  // (put_buffer), which gives another buffer back.
  alignas(64) std::unique_ptr<unsigned char[]> record_;
  // The worker's: keys of its last jobs by ticket, oldest first in order_.
  // A ticket (a tree node) may come again once its node is gone: an entry
  // leaves with the job that made it (its number), not a later one's.
  struct Recent {
    StoreKey key;
    uint64_t job = 0;  // the job's number
  };
  void remember(uint64_t ticket, const StoreKey& key);
  std::unordered_map<uint64_t, Recent> recent_;
  std::deque<std::pair<uint64_t, uint64_t>> recent_order_;  // (ticket, job number)
  size_t recent_cap_ = 0;
  uint64_t jobs_keyed_ = 0;
  // The worker's: headers taken, the run it is in (its nodes, root-down,
  // for a run of node records; jobs left, the next one's place in it), the
  // job's ticket and priority, its last block's key.
  uint64_t runs_taken_ = 0;
  RunHead run_;
  std::vector<uint32_t> run_nodes_;  // cap_
  uint32_t run_left_ = 0, run_at_ = 0;
  bool starts_run_ = false;
  uint64_t ticket_ = 0;
  uint32_t priority_ = 0;
  // The worker: node n's record in the run's node records; job `at`'s
  // tokens and its group g block's address.
  const uint32_t* record_of(uint64_t n) const { return run_.records + n * run_.stride; }
  const int32_t* tokens_of(uint64_t at) const;
  const unsigned char* part_of(uint64_t at, size_t g) const;
  bool last_keyed_ = false;
  StoreKey last_key_;

  // The serving thread's: jobs released (entries [head_, tail_) are in
  // use), run headers written, and the jobs it refused or did not build
  // for want of room (its own count: a plain add and store, no locked
  // instruction; the serving calls are serialized by the cache's lock).
  alignas(64) uint64_t head_ = 0;
  uint64_t runs_submitted_ = 0;
  std::atomic<uint64_t> refused_{0};
  void count_refused(uint64_t n) {
    if (keys_only_.load(std::memory_order_relaxed)) return;  // no record was due
    refused_.store(refused_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Jobs submitted (written by the serving thread) and jobs done (by the
  // worker), each on a cache line of its own.
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) std::atomic<uint64_t> written_{0};
  // Sleeping and waking (never on the serving thread's common path but
  // sleep_'s relaxed load in publish(): a line the worker writes only when
  // it goes to sleep or wakes).
  alignas(64) std::atomic<uint64_t> dropped_{0};  // the worker's: jobs it could not key
  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker sleeps for jobs, resume or stop
  std::condition_variable done_cv_;  // flush() and wait_finished() wait for written_
  static constexpr int kAwake = 0, kPolling = 1, kDeep = 2;
  std::atomic<int> sleep_{kAwake};        // the worker: awake, polling (kPoll) or asleep until woken
  std::atomic<bool> flushing_{false};     // a flush() or wait_finished() waits
  std::atomic<bool> paused_{false};
  // set_keys_only: read by the worker per job, set while none is out (the
  // job's publication, a release store of tail_, orders it before).
  std::atomic<bool> keys_only_{false};
  bool stop_ = false;                     // under mu_
  std::thread worker_;
};

}  // namespace kvc
