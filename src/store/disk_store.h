// The disk tier: a BlockStore (core/block_store.h) of block files under a
// directory, persistent across processes, with a byte budget kept by its own
// prioritized LRU.
//
// Files. One file per block, `<fingerprint>-<lookup hash>.kvb` (16 hex digits
// each), holding exactly one record (core/block_record.h). One file per
// block rather than slabs: a stored block is a whole tree position (every
// layer's K and V: tens of KiB to MiB), so the file system's per-file cost
// is small; each record is replaced, evicted (unlink) and made crash safe on
// its own without slab compaction or a free-space map; and the index is
// rebuilt from file names and headers alone.
//
// Crash safety. A record is written to a temporary file (`.tmp-...`) and
// renamed over its name, so a crashed writer leaves a temporary file (removed
// at the next open), never a torn block file. There is no fsync: after a
// power loss a block file may be short or hold garbage; the size check at
// open and the checksum at load turn it into a miss (counted), never into KV.
//
// Persistence. At open the index is rebuilt from the files whose name
// carries this cache's geometry fingerprint and whose header is sound (size,
// magic, version, fingerprint, the hash of the name); recency starts in file
// modification order. Files of another geometry are left alone and not
// counted. A lock file (`.kvc-<fingerprint>.lock`, flock) keeps a second
// cache of the same geometry from using the directory at the same time.
//
// Budget. At most capacity_bytes / record_bytes records; a write that needs
// room evicts the lowest (priority, age) record first, as every tier does.
//
// Threads. put() copies the record into a bounded queue (capacity in records)
// and returns; one worker thread writes the queue in order. When the queue is
// full the put is dropped (counted); a failed write (disk full, unwritable)
// is dropped and counted as an error too. load() reads on the caller's
// thread (a queued record is served from the queue). One mutex guards the
// index, the queue and the counters; no file I/O runs under it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/block_store.h"
#include "store/latency_window.h"

namespace kvc {

struct DiskStoreOptions {
  // Queue capacity in records; 0: as many as fit in 64 MiB, at least 2.
  uint32_t queue_records = 0;
  // Tests: called by the worker before each write with the record's hash;
  // a non-zero errno fails that write as the file system would.
  std::function<int(uint64_t)> write_fault;
};

class DiskStore final : public BlockStore {
 public:
  // Opens `directory` (which must exist and be writable) for records of
  // `layout`, rebuilding the index from the files there. Throws
  // Error(KVC_ERR_INVALID_ARGUMENT) naming the directory or the budget when
  // the directory is missing, not a directory, not writable, in use by
  // another cache, or the budget is below one record.
  DiskStore(const std::string& directory, uint64_t capacity_bytes, const RecordLayout& layout,
            DiskStoreOptions options = {});
  // Writes what is queued, then stops the worker.
  ~DiskStore() override;

  const char* name() const override { return "disk"; }
  const RecordLayout& layout() const override { return layout_; }
  bool put(uint64_t lookup_hash, uint32_t priority, const unsigned char* record) override;
  size_t load(const uint64_t* hashes, size_t n, unsigned char* const* out) override;
  void reject(uint64_t lookup_hash, RecordCheck why) override;
  void flush() override;
  StoreStats stats() const override;

  // The file of the record stored under `lookup_hash` (tests corrupt it).
  std::string path_of(uint64_t lookup_hash) const;
  uint64_t max_records() const { return max_records_; }

 private:
  struct Entry {
    uint32_t priority = 0;
    uint64_t age = 0;
  };
  struct Item {
    uint64_t hash = 0;
    uint32_t priority = 0;
    std::unique_ptr<unsigned char[]> bytes;
  };
  using LruKey = std::tuple<uint32_t, uint64_t, uint64_t>;  // priority, age, hash

  void open_index();
  void worker();
  // Under mu_: drops `hash` from the index (its file is the caller's to unlink).
  void forget_locked(uint64_t hash);
  bool write_file(const Item& item, int* error);

  const std::string dir_;
  const RecordLayout layout_;
  const uint64_t capacity_bytes_;
  const uint64_t max_records_;
  const uint32_t queue_capacity_;
  const DiskStoreOptions options_;
  std::string prefix_;  // "<fingerprint>-"
  int lock_fd_ = -1;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for items or stop
  std::condition_variable done_cv_;  // flush waits for written items
  std::deque<Item> queue_;
  std::vector<std::unique_ptr<unsigned char[]>> spare_;  // record buffers to reuse
  std::unordered_map<uint64_t, const unsigned char*> pending_;  // hash -> newest queued record
  std::unordered_map<uint64_t, Entry> index_;
  std::set<LruKey> lru_;
  uint64_t clock_ = 0;     // ages
  uint64_t enqueued_ = 0;  // items ever queued
  uint64_t finished_ = 0;  // items written or dropped by the worker
  bool stop_ = false;
  bool worker_waiting_ = false;  // a put wakes it only then (no syscall per put)
  StoreStats counters_;
  LatencyWindow load_latency_, write_latency_;
  std::thread worker_;
};

}  // namespace kvc
