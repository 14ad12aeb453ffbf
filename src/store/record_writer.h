// The record writer (core/block_store.h, RecordWriter): one worker thread
// that seals the blocks a commit published into records and puts them into
// every store, so that the serving call only queues a job (a key, the
// tokens and the pool pointers) and never copies or checksums a block.
//
// Jobs live in a ring of max_jobs preallocated slots (submit() allocates
// nothing: it copies T tokens and G pointers under the lock); the worker
// works on the slot at the head in place, outside the lock, and frees it
// only when the job is done, so submit() never overwrites a slot in use.
// Done tickets go to a vector the core swaps out at its next call; an
// atomic count lets take_done() return without the lock when it is empty.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/block_store.h"

namespace kvc {

class ThreadedRecordWriter final : public RecordWriter {
 public:
  ThreadedRecordWriter(const RecordLayout& layout, std::vector<uint64_t> part_bytes,
                       std::vector<BlockStore*> stores, size_t max_jobs);
  ~ThreadedRecordWriter() override;
  ThreadedRecordWriter(const ThreadedRecordWriter&) = delete;
  ThreadedRecordWriter& operator=(const ThreadedRecordWriter&) = delete;

  bool submit(const RecordWrite& job) override;
  void take_done(std::vector<uint64_t>& tickets) override;
  void flush() override;
  uint64_t dropped() const override;
  uint64_t accepted(size_t store) const override;
  uint64_t queued() const override;
  void set_paused(bool paused) override;

 private:
  struct Slot {
    uint64_t ticket = 0;
    uint64_t lookup_hash = 0;
    ChainDigest digest;
    uint32_t priority = 0;
    std::vector<int32_t> tokens;
    std::vector<const unsigned char*> parts;
  };
  void run();
  void write(const Slot& job);  // the worker, outside the lock

  const RecordLayout layout_;
  const std::vector<uint64_t> part_bytes_;
  const std::vector<BlockStore*> stores_;
  std::vector<unsigned char> record_;  // the worker's record

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
  std::vector<uint64_t> done_;
  std::atomic<size_t> done_count_{0};
  std::thread worker_;
};

}  // namespace kvc
