#include "store/record_writer.h"

#include <cstring>

namespace kvc {

std::unique_ptr<RecordWriter> open_record_writer(const RecordLayout& layout,
                                                 std::vector<uint64_t> part_bytes,
                                                 std::vector<BlockStore*> stores, size_t max_jobs) {
  return std::make_unique<ThreadedRecordWriter>(layout, std::move(part_bytes), std::move(stores),
                                                max_jobs);
}

ThreadedRecordWriter::ThreadedRecordWriter(const RecordLayout& layout,
                                           std::vector<uint64_t> part_bytes,
                                           std::vector<BlockStore*> stores, size_t max_jobs)
    : layout_(layout),
      part_bytes_(std::move(part_bytes)),
      stores_(std::move(stores)),
      record_(layout.record_bytes()),
      ring_(max_jobs == 0 ? 1 : max_jobs),
      accepted_(stores_.size(), 0) {
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

bool ThreadedRecordWriter::submit(const RecordWrite& job) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == ring_.size() || stop_) {
      ++dropped_;
      return false;
    }
    Slot& s = ring_[(head_ + count_) % ring_.size()];
    s.ticket = job.ticket;
    s.lookup_hash = job.lookup_hash;
    s.digest = job.digest;
    s.priority = job.priority;
    std::memcpy(s.tokens.data(), job.tokens, s.tokens.size() * sizeof(int32_t));
    std::memcpy(s.parts.data(), job.parts, s.parts.size() * sizeof(const unsigned char*));
    wake = count_ == 0;
    ++count_;
  }
  if (wake) work_cv_.notify_one();
  return true;
}

void ThreadedRecordWriter::take_done(std::vector<uint64_t>& tickets) {
  if (done_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  tickets.insert(tickets.end(), done_.begin(), done_.end());
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

void ThreadedRecordWriter::write(const Slot& job) {
  // Blocks into the record's payload, then the header with its checksum.
  unsigned char* payload = record_.data() + layout_.header_bytes();
  for (size_t g = 0; g < part_bytes_.size(); ++g) {
    std::memcpy(payload, job.parts[g], part_bytes_[g]);
    payload += part_bytes_[g];
  }
  RecordKey key;
  key.lookup_hash = job.lookup_hash;
  key.digest = job.digest;
  key.tokens = job.tokens.data();
  seal_record(layout_, key, job.priority, record_.data());
}

void ThreadedRecordWriter::run() {
  std::vector<bool> took(stores_.size());
  for (;;) {
    const Slot* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return (count_ > 0 && !paused_) || (stop_ && count_ == 0); });
      if (count_ == 0) return;  // stopping, every accepted job done
      job = &ring_[head_];
    }
    write(*job);
    for (size_t s = 0; s < stores_.size(); ++s)
      took[s] = stores_[s]->put(job->lookup_hash, job->priority, record_.data());
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t s = 0; s < stores_.size(); ++s) accepted_[s] += took[s] ? 1 : 0;
      done_.push_back(job->ticket);
      done_count_.store(done_.size(), std::memory_order_release);
      head_ = (head_ + 1) % ring_.size();
      --count_;
      if (count_ == 0) done_cv_.notify_all();
    }
  }
}

}  // namespace kvc
