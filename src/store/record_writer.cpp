#include "store/record_writer.h"

#include "store/background_thread.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace kvc {

std::unique_ptr<RecordWriter> open_record_writer(const RecordLayout& layout,
                                                 std::vector<uint64_t> part_bytes,
                                                 std::vector<BlockStore*> stores, size_t max_jobs,
                                                 uint64_t hash_seed) {
  return std::make_unique<ThreadedRecordWriter>(layout, std::move(part_bytes), std::move(stores),
                                                max_jobs, hash_seed);
}

namespace {

// An idle worker's poll (a submit below half the ring does not wake it) and
// how many empty polls it makes before it sleeps until woken.
constexpr auto kPoll = std::chrono::milliseconds(1);
constexpr int kIdlePolls = 64;

}  // namespace

ThreadedRecordWriter::ThreadedRecordWriter(const RecordLayout& layout,
                                           std::vector<uint64_t> part_bytes,
                                           std::vector<BlockStore*> stores, size_t max_jobs,
                                           uint64_t hash_seed)
    : layout_(layout),
      part_bytes_(std::move(part_bytes)),
      stores_(std::move(stores)),
      hasher_(hash_seed),
      record_(new unsigned char[layout.record_bytes()]),
      ring_(max_jobs == 0 ? 1 : max_jobs),
      accepted_(new std::atomic<uint64_t>[stores_.size()]) {
  for (size_t s = 0; s < stores_.size(); ++s) accepted_[s].store(0, std::memory_order_relaxed);
  recent_cap_ = 2 * ring_.size() + 16;
  recent_.reserve(recent_cap_ + 1);
  for (Slot& s : ring_) {
    s.tokens.resize(layout_.tokens_per_block);
    s.parts.resize(part_bytes_.size());
  }
  worker_ = std::thread([this] { run(); });
}

ThreadedRecordWriter::~ThreadedRecordWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    paused_.store(false);  // accepted jobs are finished: the core still holds their blocks
  }
  work_cv_.notify_all();
  worker_.join();
}

size_t ThreadedRecordWriter::submit(const RecordWrite* jobs, size_t n) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const size_t took = std::min(n, room());
  for (size_t i = 0; i < took; ++i) {
    Slot& s = ring_[(tail + i) % ring_.size()];
    s.job = jobs[i];
    std::memcpy(s.tokens.data(), jobs[i].tokens, s.tokens.size() * sizeof(int32_t));
    std::memcpy(s.parts.data(), jobs[i].parts, s.parts.size() * sizeof(const unsigned char*));
    s.job.tokens = s.tokens.data();
    s.job.parts = s.parts.data();
  }
  if (n > took) dropped_.fetch_add(n - took, std::memory_order_relaxed);
  if (took == 0) return 0;
  // seq_cst store, then load: pairs with the worker's sleep_ store and its
  // load of tail_ (one of the two sees the other). A worker awake finds the
  // jobs itself; one polling finds them within kPoll unless the ring is
  // half full.
  tail_.store(tail + took, std::memory_order_seq_cst);
  const int sleep = sleep_.load(std::memory_order_seq_cst);
  const uint64_t pending = tail + took - written_.load(std::memory_order_relaxed);
  if (sleep == kDeep || (sleep == kPolling && 2 * pending >= ring_.size())) {
    std::lock_guard<std::mutex> lock(mu_);  // the worker is waiting or about to
    work_cv_.notify_one();
  }
  return took;
}

void ThreadedRecordWriter::take_done(std::vector<WriteDone>& done) {
  const uint64_t written = written_.load(std::memory_order_acquire);
  for (; head_ < written; ++head_) done.push_back(ring_[head_ % ring_.size()].done);
}

void ThreadedRecordWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  flushing_.store(true, std::memory_order_seq_cst);
  work_cv_.notify_one();
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  done_cv_.wait(lock, [&] { return written_.load(std::memory_order_seq_cst) >= tail; });
  flushing_.store(false, std::memory_order_relaxed);
}

void ThreadedRecordWriter::set_paused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_.store(paused);
  }
  work_cv_.notify_all();
}

void ThreadedRecordWriter::remember(uint64_t ticket, const StoreKey& key) {
  const uint64_t job = ++jobs_keyed_;
  recent_[ticket] = Recent{key, job};
  recent_order_.emplace_back(ticket, job);
  if (recent_order_.size() <= recent_cap_) return;
  const auto oldest = recent_order_.front();
  recent_order_.pop_front();
  const auto it = recent_.find(oldest.first);
  if (it != recent_.end() && it->second.job == oldest.second) recent_.erase(it);
}

bool ThreadedRecordWriter::key_of(const RecordWrite& job, StoreKey& key) {
  const StoreKey* parent = &job.parent;
  if (job.parent_ticket != RecordWrite::kNoTicket) {
    const auto it = recent_.find(job.parent_ticket);
    if (it == recent_.end()) return false;
    parent = &it->second.key;
  }
  const uint32_t T = layout_.tokens_per_block;
  key.hash = hasher_.block(parent->hash, job.scope_hash, job.extra_hash, job.tokens, T);
  key.digest = block_chain_digest(parent->digest, job.scope_digest, job.extra_digest, job.tokens, T);
  remember(job.ticket, key);
  return true;
}

void ThreadedRecordWriter::write(const Slot& slot, const StoreKey& key) {
  // Blocks into the record's payload, then the header with its checksum.
  unsigned char* payload = record_.get() + layout_.header_bytes();
  for (size_t g = 0; g < part_bytes_.size(); ++g) {
    std::memcpy(payload, slot.parts[g], part_bytes_[g]);
    payload += part_bytes_[g];
  }
  RecordKey rk;
  rk.lookup_hash = key.hash;
  rk.digest = key.digest;
  rk.tokens = slot.tokens.data();
  seal_record(layout_, rk, slot.job.priority, record_.get());
}

void ThreadedRecordWriter::run() {
  run_as_background_thread();
  std::vector<bool> took(stores_.size());
  int idle = 0;
  for (;;) {
    const uint64_t at = written_.load(std::memory_order_relaxed);
    // tail_ before paused_: a job seen is one submitted after any pause
    // that came before it (set_paused, then submit), so a paused writer never
    // takes a job submitted while paused.
    const bool have = tail_.load(std::memory_order_acquire) != at;
    if (!have || paused_.load(std::memory_order_acquire)) {
      std::unique_lock<std::mutex> lock(mu_);
      const bool deep = paused_.load() || idle >= kIdlePolls;
      sleep_.store(deep ? kDeep : kPolling, std::memory_order_seq_cst);
      auto ready = [&] {
        return stop_ || (!paused_.load() && tail_.load(std::memory_order_seq_cst) != at);
      };
      if (deep) work_cv_.wait(lock, ready);
      else work_cv_.wait_for(lock, kPoll, ready);
      sleep_.store(kAwake, std::memory_order_relaxed);
      if (tail_.load(std::memory_order_acquire) == at) {
        if (stop_ && !paused_.load()) return;  // stopping, every accepted job done
        ++idle;
        continue;
      }
      if (paused_.load()) continue;
    }
    idle = 0;
    Slot& slot = ring_[at % ring_.size()];
    WriteDone& done = slot.done;
    done = WriteDone{};
    done.ticket = slot.job.ticket;
    done.keyed = key_of(slot.job, done.key);
    if (done.keyed) {
      write(slot, done.key);
      // The later stores copy the record; the first (the disk, where there
      // is one) takes the buffer itself and hands back another: no copy.
      for (size_t s = stores_.size(); s-- > 0;) {
        took[s] = s == 0 ? stores_[s]->put_buffer(done.key.hash, slot.job.priority, record_)
                         : stores_[s]->put(done.key.hash, slot.job.priority, record_.get());
        if (took[s]) accepted_[s].fetch_add(1, std::memory_order_relaxed);
      }
    } else {
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    written_.store(at + 1, std::memory_order_seq_cst);
    if (flushing_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

}  // namespace kvc
