// The disk tier: a BlockStore (core/block_store.h) of block records in slab
// files under a directory, persistent across processes, with a byte budget
// kept by its own prioritized LRU.
//
// Slots. Records live in fixed-size slots (one record, record_bytes, each) of
// a few large slab files (slab_files.h: `<fingerprint>-<n>.slab`, up to
// 1 GiB each, grown in 64 MiB steps up to the budget). Not one file per
// block: a file's creation, rename and unlink cost the file system more than
// writing a 32 KiB record does (bench/results/*disk-tier*). The worker takes
// every queued record at once, gives each a slot and writes runs of
// consecutive slots with one pwritev; a load reads runs of consecutive slots
// with one preadv.
//
// Slot reuse. A record replacing one under the same hash is written over
// that record's slot; a new record takes a free slot, a never used one below
// the budget, or the slot of the record it evicts (lowest priority, then
// least recently used), overwritten at once. Evicting is therefore only
// forgetting the record in memory: its bytes are gone as soon as the new
// record is written. A slot freed otherwise (a record the core rejected, a
// duplicate or an overflow at open) has its magic zeroed before it is free.
// So, barring a crash, the slabs hold exactly the indexed records, and a
// restart finds exactly what the store held (no evicted record comes back).
//
// Crash safety (no fsync, as before). Every record carries its full key and
// an XXH3 checksum over all its bytes (block_record.h). A slot overwritten in
// place holds the old record, the new one, or a mix of the two after a crash;
// a mix fails the checksum whatever order the bytes reached the disk in
// (header first, payload first, pages out of order), because the checksum
// covers the header (with the lookup hash and the chain digest) and the
// payload together. An intact old record is that record under its own key,
// never the new key's: the index is rebuilt from the headers, and the core
// checks the full key and the checksum of every record it loads. Hence no
// ordering of header and payload writes is needed; a mix is a counted miss
// (the core rejects it), and a slot a writer failed on (disk full, EIO) is
// forgotten, never indexed under the new key.
//
// Readers and the writer. The worker writes a slot only after the slot has
// left the index (or, in place, while the newest record is served from the
// queue); every slot has a generation, bumped whenever it is reassigned, and
// a load that raced with a reassignment (generation changed while it read)
// is a miss, never the bytes of another record.
//
// Persistence. At open the index is rebuilt by reading the header of every
// slot of this geometry's slabs (magic, version, fingerprint, sizes); the
// checksum is checked at load by the core. Recency starts in slot order.
// Slabs of another geometry are left alone and not counted; files of the
// former one-file-per-block format of this geometry are removed. A lock file
// (`.kvc-<fingerprint>.lock`, flock) keeps a second cache of the same
// geometry from using the directory at the same time.
//
// Budget. At most capacity_bytes / record_bytes records (slots); a smaller
// budget than last time evicts the lowest at open, moves the survivors below
// the new slot count and truncates the slabs.
//
// Threads. put() copies the record into a bounded queue (capacity in records)
// and returns; put_buffer() queues the caller's buffer itself and hands it a
// spare one back (the record writer's way: no copy of the record on its way
// to the disk but the kernel's); one worker thread writes the queue in
// batches. A worker woken
// by a put lingers up to 1 ms for 4 MiB of records (at most half the queue)
// before it takes the queue, unless a flush waits: otherwise it takes the
// records one or two at a time as they come, one short pwritev each. When the queue
// is full the put is dropped (counted); a failed write (disk full,
// unwritable) is dropped and counted as an error too. load() reads on the
// caller's thread (a queued record is served from the queue); a lookup
// whose first hash the store does not hold is answered without the lock,
// but for the filter's rare "maybe" (filter_, hash_filter.h). One mutex
// guards the index, the slots, the queue and the counters; no file I/O runs
// under it (except at open, before the worker starts).
#pragma once

#include <atomic>
#include <chrono>
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
#include "store/hash_filter.h"
#include "store/latency_window.h"
#include "store/slab_files.h"

namespace kvc {

struct DiskStoreOptions {
  // Queue capacity in records; 0: as many as fit in 64 MiB, at least 2.
  uint32_t queue_records = 0;
  // Tests: called by the worker before each write with the record's hash;
  // a non-zero errno fails that write as the file system would.
  std::function<int(uint64_t)> write_fault;
  // Bytes per slab file, rounded down to whole records (at least one); 0:
  // SlabFiles::kSlabBytes. Tests use small slabs to have several files; it
  // must be the same at every open of a directory (it places the slots).
  uint64_t slab_bytes = 0;
};

class DiskStore final : public BlockStore {
 public:
  // Opens `directory` (which must exist and be writable) for records of
  // `layout`, rebuilding the index from the slabs there. Throws
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
  // Queues the buffer itself (no copy) and hands back a spare one.
  bool put_buffer(uint64_t lookup_hash, uint32_t priority,
                  std::unique_ptr<unsigned char[]>& record) override;
  size_t load(const uint64_t* hashes, size_t n, unsigned char* const* out) override;
  // Hashes each record in pieces as it reads them (SlabFiles::read with sums).
  size_t load_summed(const uint64_t* hashes, size_t n, unsigned char* const* out,
                     uint64_t* sums) override;
  void reject(uint64_t lookup_hash, RecordCheck why) override;
  void flush() override;
  StoreStats stats() const override;
  void watch(std::vector<StoreChange>& held) override;
  void take_changes(std::vector<StoreChange>& out) override;

  // Where the record stored under `lookup_hash` lies (tests corrupt it):
  // false when the store does not hold it on disk.
  struct Place {
    std::string path;
    uint64_t offset = 0;
    uint64_t slot = 0;
  };
  bool place_of(uint64_t lookup_hash, Place* place) const;
  uint64_t max_records() const { return max_records_; }
  // Tests: the lookup filter counts exactly the queued and indexed hashes.
  bool filter_consistent() const;

 private:
  static constexpr uint32_t kWritten = UINT32_MAX;
  struct Entry {
    uint32_t priority = 0;
    uint64_t age = 0;
    uint64_t slot = 0;
    uint32_t batch_pos = kWritten;  // else: being written as item batch_pos of the worker's batch
    bool announced = false;  // written once (held, for the journal): its forgetting is a change
  };
  struct Item {
    uint64_t hash = 0;
    uint32_t priority = 0;
    std::unique_ptr<unsigned char[]> bytes;
    uint64_t slot = 0;        // the worker's
    bool cancelled = false;   // the worker's: replaced or evicted within its batch
    int error = 0;            // the worker's
    uint64_t write_us = 0;    // the worker's: its run's write, per record
  };
  using LruKey = std::tuple<uint32_t, uint64_t, uint64_t>;  // priority, age, hash

  void open_index();
  // load() and load_summed() (sums null: none).
  size_t load_records(const uint64_t* hashes, size_t n, unsigned char* const* out, uint64_t* sums);
  // Under mu_: queues `bytes` (a sealed record) under `hash`; returns
  // whether the worker is to be woken.
  bool enqueue_locked(uint64_t hash, uint32_t priority, std::unique_ptr<unsigned char[]> bytes);
  void worker();
  // Under mu_: gives batch[pos] a slot (its own in place, a free one, a new
  // one or an evicted record's).
  void assign_slot_locked(std::vector<Item>& batch, uint32_t pos);
  // Writes the batch's live items (slots assigned), runs of consecutive slots
  // at a time; sets each item's error.
  void write_batch(std::vector<Item>& batch);
  // Under mu_: drops `hash` from the index; returns its slot (or UINT64_MAX),
  // whose generation is bumped. The slot is the caller's to free.
  uint64_t forget_locked(uint64_t hash);
  uint64_t new_slot_locked();
  // Under mu_: appends a change to the journal while watched.
  void journal_locked(uint64_t hash, uint32_t priority, bool held) {
    if (!watched_) return;
    journal_.push_back(StoreChange{hash, priority, held});
    journal_size_.store(journal_.size(), std::memory_order_release);
  }

  const std::string dir_;
  const RecordLayout layout_;
  const uint64_t capacity_bytes_;
  const uint64_t max_records_;
  const uint32_t queue_capacity_;
  const DiskStoreOptions options_;
  int lock_fd_ = -1;
  std::unique_ptr<SlabFiles> slabs_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for items or stop
  std::condition_variable done_cv_;  // flush waits for written items
  std::deque<Item> queue_;
  std::vector<uint64_t> invalidate_;  // slots to zero before they are free (the worker's job)
  // Record buffers to reuse: the queue holds at most queue_capacity_ records
  // and the worker a batch of as many more, so at most twice that exist.
  std::vector<std::unique_ptr<unsigned char[]>> spare_;
  std::unordered_map<uint64_t, const unsigned char*> pending_;  // hash -> newest queued record
  std::unordered_map<uint64_t, Entry> index_;
  std::set<LruKey> lru_;
  std::set<uint64_t> free_slots_;      // below used_slots_, neither indexed nor being zeroed
  std::vector<uint32_t> generation_;   // per slot below used_slots_
  uint64_t clock_ = 0;     // ages
  uint64_t enqueued_ = 0;  // items (and slots to zero) ever queued
  uint64_t finished_ = 0;  // those the worker is done with
  bool stop_ = false;
  bool worker_waiting_ = false;  // a put wakes it only then (no syscall per put)
  // A woken worker lingers up to kLinger for batch_records_ queued records
  // (4 MiB of them, at most half the queue, at least 1): a put wakes it
  // early only once they are there; a flush at once.
  static constexpr std::chrono::microseconds kLinger{1000};
  const uint64_t batch_records_;
  bool lingering_ = false;
  uint32_t flushers_ = 0;  // flush() calls waiting
  StoreStats counters_;
  // KV events: changes of the held records since the core last took them.
  bool watched_ = false;
  std::vector<StoreChange> journal_;
  std::atomic<size_t> journal_size_{0};
  LatencyWindow load_latency_, write_latency_;
  // The hashes queued (pending_) or indexed (index_), changed under mu_,
  // read by load() without it (hash_filter.h): a lookup whose first hash
  // the store does not hold (the serving call's common case) takes no lock
  // but in the filter's rare "maybe" (0.1-0.4% of them at the records the
  // budget holds), so it does not wait for the record writer's puts or the
  // worker, which hold mu_ while they queue or book a batch. Those lookups
  // are counted in misses and in load.count, not sampled for the load
  // latency. On lines of their own: the serving thread reads the filter and
  // counts at every lookup, the worker writes the latencies above at every
  // batch.
  alignas(64) HashFilter filter_;
  alignas(64) std::atomic<uint64_t> fast_misses_{0};
  std::thread worker_;
};

}  // namespace kvc
