#include "store/record_writer.h"

#include <cstring>

namespace kvc {

std::unique_ptr<RecordWriter> open_record_writer(const RecordLayout& layout,
                                                 std::vector<uint64_t> part_bytes,
                                                 std::vector<BlockStore*> stores, size_t max_jobs,
                                                 uint64_t hash_seed) {
  return std::make_unique<ThreadedRecordWriter>(layout, std::move(part_bytes), std::move(stores),
                                                max_jobs, hash_seed);
}

ThreadedRecordWriter::ThreadedRecordWriter(const RecordLayout& layout,
                                           std::vector<uint64_t> part_bytes,
                                           std::vector<BlockStore*> stores, size_t max_jobs,
                                           uint64_t hash_seed)
    : layout_(layout),
      part_bytes_(std::move(part_bytes)),
      stores_(std::move(stores)),
      hasher_(hash_seed),
      record_(layout.record_bytes()),
      ring_(max_jobs == 0 ? 1 : max_jobs),
      accepted_(stores_.size(), 0) {
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
    paused_ = false;  // accepted jobs are finished: the core still holds their blocks
  }
  work_cv_.notify_all();
  worker_.join();
}

size_t ThreadedRecordWriter::submit(const RecordWrite* jobs, size_t n) {
  size_t took = 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake = count_ == 0;
    for (; took < n && count_ < ring_.size() && !stop_; ++took) {
      Slot& s = ring_[(head_ + count_) % ring_.size()];
      s.job = jobs[took];
      std::memcpy(s.tokens.data(), jobs[took].tokens, s.tokens.size() * sizeof(int32_t));
      std::memcpy(s.parts.data(), jobs[took].parts, s.parts.size() * sizeof(const unsigned char*));
      s.job.tokens = s.tokens.data();
      s.job.parts = s.parts.data();
      ++count_;
    }
    dropped_ += n - took;
    wake = wake && took > 0;
  }
  if (wake) work_cv_.notify_one();
  return took;
}

void ThreadedRecordWriter::take_done(std::vector<WriteDone>& done) {
  if (done_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  done.insert(done.end(), done_.begin(), done_.end());
  done_.clear();
  done_count_.store(0, std::memory_order_relaxed);
}

void ThreadedRecordWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return count_ == 0; });
}

uint64_t ThreadedRecordWriter::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

uint64_t ThreadedRecordWriter::accepted(size_t store) const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_[store];
}

uint64_t ThreadedRecordWriter::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void ThreadedRecordWriter::set_paused(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
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
  unsigned char* payload = record_.data() + layout_.header_bytes();
  for (size_t g = 0; g < part_bytes_.size(); ++g) {
    std::memcpy(payload, slot.parts[g], part_bytes_[g]);
    payload += part_bytes_[g];
  }
  RecordKey rk;
  rk.lookup_hash = key.hash;
  rk.digest = key.digest;
  rk.tokens = slot.tokens.data();
  seal_record(layout_, rk, slot.job.priority, record_.data());
}

void ThreadedRecordWriter::run() {
  std::vector<bool> took(stores_.size());
  for (;;) {
    const Slot* slot = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return (count_ > 0 && !paused_) || (stop_ && count_ == 0); });
      if (count_ == 0) return;  // stopping, every accepted job done
      slot = &ring_[head_];
    }
    WriteDone done;
    done.ticket = slot->job.ticket;
    done.keyed = key_of(slot->job, done.key);
    if (done.keyed) {
      write(*slot, done.key);
      for (size_t s = 0; s < stores_.size(); ++s)
        took[s] = stores_[s]->put(done.key.hash, slot->job.priority, record_.data());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t s = 0; s < stores_.size(); ++s) accepted_[s] += done.keyed && took[s] ? 1 : 0;
      if (!done.keyed) ++dropped_;
      done_.push_back(done);
      done_count_.store(done_.size(), std::memory_order_release);
      head_ = (head_ + 1) % ring_.size();
      --count_;
      if (count_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace kvc
