#include "store/disk_store.h"

#include "store/background_thread.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "base/hex.h"
#include "base/small_buffer.h"

namespace kvc {

namespace {

constexpr uint64_t kDefaultQueueBytes = uint64_t(64) << 20;

uint32_t queue_capacity(const DiskStoreOptions& o, size_t record_bytes) {
  if (o.queue_records != 0) return o.queue_records;
  const uint64_t fit = kDefaultQueueBytes / record_bytes;
  return static_cast<uint32_t>(std::max<uint64_t>(2, std::min<uint64_t>(fit, 1u << 16)));
}

constexpr uint64_t kNoSlot = UINT64_MAX;

}  // namespace

DiskStore::DiskStore(const std::string& directory, uint64_t capacity_bytes,
                     const RecordLayout& layout, DiskStoreOptions options)
    : dir_(directory),
      layout_(layout),
      capacity_bytes_(capacity_bytes),
      max_records_(capacity_bytes / layout.record_bytes()),
      queue_capacity_(queue_capacity(options, layout.record_bytes())),
      options_(std::move(options)),
      batch_records_(std::max<uint64_t>(
          1, std::min<uint64_t>(queue_capacity_ / 2, (uint64_t(4) << 20) / layout.record_bytes()))),
      filter_(std::min<uint64_t>(max_records_, uint64_t(1) << 21) + queue_capacity_) {
  if (dir_.empty()) invalid_argument("disk cache directory must not be empty");
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0)
    invalid_argument("disk cache directory '" + dir_ + "' cannot be used: " +
                     std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    invalid_argument("disk cache directory '" + dir_ + "' is not a directory");
  if (max_records_ == 0)
    invalid_argument("disk cache bytes " + std::to_string(capacity_bytes) +
                     " is below one block record (" + std::to_string(layout.record_bytes()) +
                     " bytes for this model's geometry)");
  const std::string lock = dir_ + "/.kvc-" + hex16(layout.fingerprint) + ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    invalid_argument("disk cache directory '" + dir_ + "' is not writable: " +
                     std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(lock_fd_);
    invalid_argument("disk cache directory '" + dir_ +
                     "' is in use by another cache of this geometry (" + lock + ": " +
                     std::strerror(e) + ")");
  }
  // A probe write: a directory the lock file already existed in may still be
  // read-only (a read-only mount).
  const std::string probe = dir_ + "/.tmp-" + hex16(layout.fingerprint) + "-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    ::close(lock_fd_);
    invalid_argument("disk cache directory '" + dir_ + "' is not writable: " + std::strerror(e));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  counters_.capacity_bytes = capacity_bytes_;
  try {
    slabs_ = std::make_unique<SlabFiles>(dir_, layout_.fingerprint, layout_.record_bytes(),
                                         max_records_, options_.slab_bytes);
  } catch (...) {
    ::close(lock_fd_);
    throw;
  }
  open_index();
  worker_ = std::thread([this] { worker(); });
}

DiskStore::~DiskStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
  slabs_.reset();
  ::close(lock_fd_);  // releases the flock
}

bool DiskStore::place_of(uint64_t hash, Place* place) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(hash);
  if (it == index_.end() || it->second.batch_pos != kWritten) return false;
  place->slot = it->second.slot;
  place->path = slabs_->path(it->second.slot / slabs_->slots_per_slab());
  place->offset = slabs_->offset_of(it->second.slot);
  return true;
}

bool DiskStore::filter_consistent() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> hashes;
  for (const auto& kv : pending_) hashes.push_back(kv.first);
  for (const auto& kv : index_) hashes.push_back(kv.first);
  return filter_.matches(hashes);
}

uint64_t DiskStore::forget_locked(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return kNoSlot;
  const uint64_t slot = it->second.slot;
  if (it->second.announced) journal_locked(hash, 0, false);
  lru_.erase(LruKey{it->second.priority, it->second.age, hash});
  index_.erase(it);
  filter_.remove(hash);
  ++generation_[size_t(slot)];
  return slot;
}

uint64_t DiskStore::new_slot_locked() {
  if (!free_slots_.empty()) {
    const uint64_t s = *free_slots_.begin();
    free_slots_.erase(free_slots_.begin());
    return s;
  }
  if (generation_.size() < max_records_) {
    generation_.push_back(0);
    return generation_.size() - 1;
  }
  return kNoSlot;
}

bool DiskStore::put(uint64_t hash, uint32_t priority, const unsigned char* record) {
  const size_t size = layout_.record_bytes();
  std::unique_ptr<unsigned char[]> buf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= queue_capacity_ || stop_) {
      ++counters_.drops;
      return false;
    }
    if (!spare_.empty()) {
      buf = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  // The copy runs outside the lock (the worker keeps writing meanwhile);
  // the queue can only have shrunk since.
  if (!buf) buf.reset(new unsigned char[size]);
  std::memcpy(buf.get(), record, size);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = enqueue_locked(hash, priority, std::move(buf));
  }
  if (wake) work_cv_.notify_one();
  return true;
}

bool DiskStore::put_buffer(uint64_t hash, uint32_t priority,
                           std::unique_ptr<unsigned char[]>& record) {
  std::unique_ptr<unsigned char[]> next;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= queue_capacity_ || stop_) {
      ++counters_.drops;
      return false;  // the caller keeps its buffer
    }
    wake = enqueue_locked(hash, priority, std::move(record));
    if (!spare_.empty()) {
      next = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  if (wake) work_cv_.notify_one();
  // Not touched here: a new buffer costs its page faults where the caller
  // first writes it.
  record = next ? std::move(next) : std::unique_ptr<unsigned char[]>(new unsigned char[layout_.record_bytes()]);
  return true;
}

bool DiskStore::enqueue_locked(uint64_t hash, uint32_t priority,
                               std::unique_ptr<unsigned char[]> bytes) {
  const auto ins = pending_.insert_or_assign(hash, bytes.get());
  if (ins.second) filter_.add(hash);
  Item item;
  item.hash = hash;
  item.priority = std::min<uint32_t>(priority, 100);
  item.bytes = std::move(bytes);
  queue_.push_back(std::move(item));
  ++enqueued_;
  return worker_waiting_ || (lingering_ && queue_.size() >= batch_records_);
}

size_t DiskStore::load(const uint64_t* hashes, size_t n, unsigned char* const* out) {
  return load_records(hashes, n, out, nullptr);
}

size_t DiskStore::load_summed(const uint64_t* hashes, size_t n, unsigned char* const* out,
                              uint64_t* sums) {
  return load_records(hashes, n, out, sums);
}

size_t DiskStore::load_records(const uint64_t* hashes, size_t n, unsigned char* const* out,
                               uint64_t* sums) {
  if (n > 0 && !filter_.maybe_contains(hashes[0])) {  // not held: no lock, no clock
    fast_misses_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const size_t size = layout_.record_bytes();
  struct Want {
    uint64_t slot;  // kNoSlot: copied from the queue
    uint32_t generation;
  };
  SmallBuffer<Want, 16> plan(n);
  // 1. Under the lock: where each leading record is.
  size_t resolved = 0;
  bool missed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (; resolved < n; ++resolved) {
      const uint64_t hash = hashes[resolved];
      auto p = pending_.find(hash);
      if (p != pending_.end()) {  // still queued: the newest put
        std::memcpy(out[resolved], p->second, size);
        plan[resolved] = Want{kNoSlot, 0};
        continue;
      }
      auto it = index_.find(hash);
      if (it == index_.end() || it->second.batch_pos != kWritten) {
        missed = true;
        break;
      }
      plan[resolved] = Want{it->second.slot, generation_[size_t(it->second.slot)]};
    }
    if (resolved == 0) {  // a miss at the first block (most lookups): one lock
      if (missed) ++counters_.misses;
      load_latency_.add(micros_since(start));
      return 0;
    }
  }
  // 2. Without it: runs of consecutive slots of one slab, one preadv each.
  const uint64_t per_slab = slabs_->slots_per_slab();
  size_t readable = resolved;  // records before the first failed read
  // With sums, each record is hashed as it is read (in cache); a record
  // copied from the queue, after the lock.
  for (size_t i = 0; i < resolved && readable == resolved;) {
    if (plan[i].slot == kNoSlot) {
      if (sums != nullptr) sums[i] = record_checksum(out[i], size);
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < resolved && plan[j].slot != kNoSlot && plan[j].slot == plan[j - 1].slot + 1 &&
           plan[j].slot / per_slab == plan[i].slot / per_slab)
      ++j;
    if (slabs_->read(plan[i].slot, out + i, j - i, sums != nullptr ? sums + i : nullptr) != 0) {
      // Which one: the first that cannot be read alone.
      readable = i;
      while (readable < j &&
             slabs_->read(plan[readable].slot, out + readable, 1,
                          sums != nullptr ? sums + readable : nullptr) == 0)
        ++readable;
    }
    i = j;
  }
  // 3. Under the lock: keep the records whose slot was not reassigned meanwhile.
  std::lock_guard<std::mutex> lock(mu_);
  size_t got = 0;
  for (; got < readable; ++got) {
    if (plan[got].slot == kNoSlot) {
      ++counters_.hits;
      continue;
    }
    if (generation_[size_t(plan[got].slot)] != plan[got].generation) break;  // raced: a miss
    auto it = index_.find(hashes[got]);
    lru_.erase(LruKey{it->second.priority, it->second.age, hashes[got]});
    it->second.age = ++clock_;
    lru_.emplace(it->second.priority, it->second.age, hashes[got]);
    ++counters_.hits;
  }
  if (got < readable) {
    ++counters_.misses;
  } else if (readable < resolved) {
    // Unreadable (a slab cut short behind the store's back, EIO): an error,
    // and the record is forgotten.
    ++counters_.errors;
    if (generation_[size_t(plan[got].slot)] == plan[got].generation) {
      const uint64_t slot = forget_locked(hashes[got]);
      if (slot != kNoSlot) free_slots_.insert(slot);
    }
  } else if (missed) {
    ++counters_.misses;
  }
  load_latency_.add(micros_since(start));
  return got;
}

void DiskStore::reject(uint64_t hash, RecordCheck) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.rejected;
    if (pending_.count(hash) != 0) return;  // a newer record is on its way
    auto it = index_.find(hash);
    if (it == index_.end() || it->second.batch_pos != kWritten) return;
    // Its slot is zeroed by the worker before it is free: a restart must not
    // find the record again.
    invalidate_.push_back(forget_locked(hash));
    ++enqueued_;
    wake = worker_waiting_;
  }
  if (wake) work_cv_.notify_one();
}

void DiskStore::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  ++flushers_;
  if (lingering_) work_cv_.notify_all();  // no need to wait for more puts
  done_cv_.wait(lock, [&] { return finished_ >= target; });
  --flushers_;
}

StoreStats DiskStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  StoreStats s = counters_;
  s.blocks = index_.size();
  s.bytes = index_.size() * layout_.record_bytes();
  s.queued = queue_.size();
  s.load = load_latency_.summary();
  const uint64_t fast = fast_misses_.load(std::memory_order_relaxed);
  s.misses += fast;
  s.load.count += fast;
  s.write = write_latency_.summary();
  return s;
}

void DiskStore::watch(std::vector<StoreChange>& held) {
  std::lock_guard<std::mutex> lock(mu_);
  held.clear();
  for (const auto& [hash, e] : index_)
    if (e.announced) held.push_back(StoreChange{hash, e.priority, true});
  watched_ = true;
}

void DiskStore::take_changes(std::vector<StoreChange>& out) {
  if (journal_size_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  out.insert(out.end(), journal_.begin(), journal_.end());
  journal_.clear();
  journal_size_.store(0, std::memory_order_relaxed);
}

void DiskStore::assign_slot_locked(std::vector<Item>& batch, uint32_t pos) {
  Item& item = batch[pos];
  auto it = index_.find(item.hash);
  if (it != index_.end()) {  // replaced in place
    Entry& e = it->second;
    if (e.batch_pos != kWritten) batch[e.batch_pos].cancelled = true;  // an older put of this batch
    lru_.erase(LruKey{e.priority, e.age, item.hash});
    ++generation_[size_t(e.slot)];
    e.priority = item.priority;
    e.age = ++clock_;
    e.batch_pos = pos;
    lru_.emplace(e.priority, e.age, item.hash);
    item.slot = e.slot;
    return;
  }
  uint64_t slot = new_slot_locked();
  if (slot == kNoSlot) {
    // Room: the lowest (priority, age) record goes, and its slot is reused.
    // With no record to evict (every slot being zeroed) the put is dropped.
    if (lru_.empty()) {
      item.cancelled = true;
      item.error = ENOSPC;
      return;
    }
    const uint64_t victim = std::get<2>(*lru_.begin());
    const Entry& v = index_[victim];
    if (v.batch_pos != kWritten) batch[v.batch_pos].cancelled = true;  // written, then evicted
    slot = forget_locked(victim);
    ++counters_.evictions;
  }
  index_[item.hash] = Entry{item.priority, ++clock_, slot, pos};
  filter_.add(item.hash);
  lru_.emplace(item.priority, clock_, item.hash);
  item.slot = slot;
}

void DiskStore::write_batch(std::vector<Item>& batch) {
  std::vector<uint32_t> live;
  for (uint32_t pos = 0; pos < batch.size(); ++pos) {
    Item& item = batch[pos];
    if (item.cancelled) continue;
    if (options_.write_fault) item.error = options_.write_fault(item.hash);
    if (item.error == 0) item.error = slabs_->reserve(item.slot);
    if (item.error == 0) live.push_back(pos);
  }
  std::sort(live.begin(), live.end(),
            [&](uint32_t a, uint32_t b) { return batch[a].slot < batch[b].slot; });
  const uint64_t per_slab = slabs_->slots_per_slab();
  std::vector<const unsigned char*> run;
  for (size_t i = 0; i < live.size();) {
    size_t j = i + 1;
    while (j < live.size() && batch[live[j]].slot == batch[live[j - 1]].slot + 1 &&
           batch[live[j]].slot / per_slab == batch[live[i]].slot / per_slab)
      ++j;
    run.clear();
    for (size_t k = i; k < j; ++k) run.push_back(batch[live[k]].bytes.get());
    const auto start = std::chrono::steady_clock::now();
    const int error = slabs_->write(batch[live[i]].slot, run.data(), run.size());
    const uint64_t us = micros_since(start) / (j - i);
    for (size_t k = i; k < j; ++k) {
      batch[live[k]].error = error;
      batch[live[k]].write_us = us;
    }
    i = j;
  }
  // A slot a write failed on may still hold the record it last held (an
  // evicted one): zeroed where possible, so that a restart does not find it.
  for (Item& item : batch)
    if (!item.cancelled && item.error != 0) slabs_->invalidate(item.slot);
}

void DiskStore::worker() {
  run_as_background_thread();
  std::vector<Item> batch;
  std::vector<uint64_t> zero;
  for (;;) {
    batch.clear();
    zero.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      worker_waiting_ = true;
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty() || !invalidate_.empty(); });
      worker_waiting_ = false;
      // Linger (at most kLinger) for a batch worth a large write, unless a
      // flush waits or the store stops: a worker woken by the first put would
      // otherwise write the records one or two at a time as they come.
      if (!stop_ && flushers_ == 0 && invalidate_.empty() && queue_.size() < batch_records_) {
        lingering_ = true;
        work_cv_.wait_for(lock, kLinger, [&] {
          return stop_ || flushers_ > 0 || queue_.size() >= batch_records_;
        });
        lingering_ = false;
      }
      if (queue_.empty() && invalidate_.empty()) return;  // stopping, everything written
      zero.swap(invalidate_);
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    // Rejected records' slots are zeroed first, so the batch may reuse them.
    uint64_t zero_errors = 0;
    for (uint64_t slot : zero) zero_errors += slabs_->invalidate(slot) != 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      counters_.errors += zero_errors;
      for (uint64_t slot : zero) free_slots_.insert(slot);
      for (uint32_t pos = 0; pos < batch.size(); ++pos) assign_slot_locked(batch, pos);
    }
    write_batch(batch);
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t pos = 0; pos < batch.size(); ++pos) {
      Item& item = batch[pos];
      auto it = index_.find(item.hash);
      const bool mine = it != index_.end() && it->second.batch_pos == pos;
      if (item.error == 0) {  // written (or replaced or evicted within the batch: as if written)
        if (mine) {
          it->second.batch_pos = kWritten;
          // Held now (again, after a replacement in place: maybe at another
          // priority).
          it->second.announced = true;
          journal_locked(item.hash, it->second.priority, true);
        }
        ++counters_.stores;
        if (!item.cancelled) write_latency_.add(item.write_us);
      } else {
        // Not written, or its slot holds a torn mix: forgotten, the slot free.
        if (mine) free_slots_.insert(forget_locked(item.hash));
        ++counters_.drops;
        if (item.error != ENOSPC || !item.cancelled) ++counters_.errors;
      }
      auto p = pending_.find(item.hash);
      if (p != pending_.end() && p->second == item.bytes.get()) {
        pending_.erase(p);
        filter_.remove(item.hash);
      }
      // Kept for reuse up to a full queue plus a batch in flight: a buffer
      // freed and allocated again costs its page faults again.
      if (spare_.size() < 2 * size_t(queue_capacity_)) spare_.push_back(std::move(item.bytes));
    }
    finished_ += batch.size() + zero.size();
    done_cv_.notify_all();
  }
}

}  // namespace kvc
