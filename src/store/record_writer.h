// The record writer (core/block_store.h, RecordWriter): one worker thread
// that keys the blocks a commit published (portable hash and SHA-256 chain
// digest), seals them into records and puts them into every store, so that
// the serving call only queues a job (the parent's key or job, the scope's
// digests, the tokens and the pool pointers) and never hashes, copies or
// checksums a block.
//
// Jobs live in a ring of max_jobs preallocated slots (submit() allocates
// nothing: it copies T tokens and G pointers per job under one lock); the
// worker works on the slot at the head in place, outside the lock, and
// frees it only when the job is done, so submit() never overwrites a slot in
// use. Done jobs (ticket and key) go to a vector the core swaps out at its
// next call; an atomic count lets take_done() return without the lock when
// it is empty. The worker remembers the keys of its last jobs (2 x max_jobs
// + 16: a job chains only on a job queued when it was submitted, so at most
// max_jobs others finish between the two) for jobs that chain on them.
#pragma once

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
                       std::vector<BlockStore*> stores, size_t max_jobs, uint64_t hash_seed);
  ~ThreadedRecordWriter() override;
  ThreadedRecordWriter(const ThreadedRecordWriter&) = delete;
  ThreadedRecordWriter& operator=(const ThreadedRecordWriter&) = delete;

  size_t submit(const RecordWrite* jobs, size_t n) override;
  void take_done(std::vector<WriteDone>& done) override;
  void flush() override;
  uint64_t dropped() const override;
  uint64_t accepted(size_t store) const override;
  uint64_t queued() const override;
  void set_paused(bool paused) override;

 private:
  struct Slot {
    RecordWrite job;  // tokens and parts point into the vectors below
    std::vector<int32_t> tokens;
    std::vector<const unsigned char*> parts;
  };
  void run();
  // The worker, outside the lock: the job's key (false: its parent job's is
  // unknown), then its record.
  bool key_of(const RecordWrite& job, StoreKey& key);
  void write(const Slot& slot, const StoreKey& key);

  const RecordLayout layout_;
  const std::vector<uint64_t> part_bytes_;
  const std::vector<BlockStore*> stores_;
  const PortableHasher hasher_;
  std::vector<unsigned char> record_;  // the worker's record
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

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for a job or resume
  std::condition_variable done_cv_;  // flush() waits for the ring to empty
  std::vector<Slot> ring_;
  size_t head_ = 0;   // the oldest job (the worker's)
  size_t count_ = 0;  // jobs in the ring, the one being written included
  bool paused_ = false;
  bool stop_ = false;
  uint64_t dropped_ = 0;
  std::vector<uint64_t> accepted_;  // per store
  std::vector<WriteDone> done_;
  std::atomic<size_t> done_count_{0};
  std::thread worker_;
};

}  // namespace kvc
