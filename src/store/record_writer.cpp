#include "store/record_writer.h"

#include "store/background_thread.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"

namespace kvc {

std::unique_ptr<RecordWriter> open_record_writer(const RecordLayout& layout,
                                                 std::vector<uint64_t> part_bytes,
                                                 std::vector<BlockStore*> stores, size_t max_jobs,
                                                 uint64_t hash_seed, StoreKey* key_table,
                                                 size_t key_table_size) {
  return std::make_unique<ThreadedRecordWriter>(layout, std::move(part_bytes), std::move(stores),
                                                max_jobs, hash_seed, key_table, key_table_size);
}

namespace {

// An idle worker's poll (a submit below half the ring does not wake it),
// how many empty polls it makes before it sleeps longer, and that longer
// sleep's bound (a submit wakes such a worker unless it read its state from
// before the worker went to sleep: the jobs then wait for the timeout).
// 250 us, not 1 ms: an engine that commits every few hundred us then finds
// the worker back before half the ring is queued, so its commits do not pay
// the wake (a futex syscall, 2-60 us of the serving thread's CPU on a VM;
// bench/results/2026-11-29-disk-serving-r9-handoff-h200-host.md). The cost:
// up to 64 more timed waits of the worker's own after its last job.
constexpr auto kPoll = std::chrono::microseconds(250);
constexpr int kIdlePolls = 64;
constexpr auto kDeepPoll = std::chrono::milliseconds(50);

}  // namespace

ThreadedRecordWriter::ThreadedRecordWriter(const RecordLayout& layout,
                                           std::vector<uint64_t> part_bytes,
                                           std::vector<BlockStore*> stores, size_t max_jobs,
                                           uint64_t hash_seed, StoreKey* key_table,
                                           size_t key_table_size)
    : layout_(layout),
      part_bytes_(std::move(part_bytes)),
      stores_(std::move(stores)),
      hasher_(hash_seed),
      cap_(max_jobs == 0 ? 1 : max_jobs),
      tickets_(cap_),
      priorities_(cap_),
      key_table_(key_table),
      key_table_size_(key_table_size),
      tokens_(cap_ * layout.tokens_per_block),
      parts_(cap_ * part_bytes_.size()),
      runs_(cap_),
      run_bases_(cap_ * part_bytes_.size()),
      bases_(part_bytes_.size()),
      accepted_(new std::atomic<uint64_t>[stores_.size()]),
      record_(new unsigned char[layout.record_bytes()]) {
  for (size_t s = 0; s < stores_.size(); ++s) accepted_[s].store(0, std::memory_order_relaxed);
  run_nodes_.resize(cap_);
  recent_cap_ = 2 * cap_ + 16;
  recent_.reserve(recent_cap_ + 1);
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

namespace {

// Copies n items of `each` elements from `from` into the ring array `to`
// (ring entries of `each` elements, `cap` of them) from entry `at` on:
// one memcpy, two where it wraps.
template <typename T>
void copy_into_ring(T* to, size_t cap, size_t each, uint64_t at, const T* from, size_t n) {
  const size_t first = size_t(at % cap);
  const size_t before_wrap = std::min(n, cap - first);
  std::memcpy(to + first * each, from, before_wrap * each * sizeof(T));
  if (n > before_wrap) std::memcpy(to, from + before_wrap * each, (n - before_wrap) * each * sizeof(T));
}

}  // namespace

void ThreadedRecordWriter::check_ticket(uint64_t ticket) const {
  if (ticket >= key_table_size_)
    fail(KVC_ERR_INTERNAL, "record writer: ticket " + std::to_string(ticket) +
                               " is outside the key table (" + std::to_string(key_table_size_) +
                               " entries)");
}

size_t ThreadedRecordWriter::submit(const RecordWrite* jobs, size_t n) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const size_t took = std::min(n, room());
  for (size_t i = 0; i < took; ++i) check_ticket(jobs[i].ticket);  // before anything changes
  const size_t T = layout_.tokens_per_block, G = part_bytes_.size(), cap = cap_;
  for (size_t i = 0; i < took; ++i) {  // each its own run
    const RecordWrite& j = jobs[i];
    RunHead& h = next_head();
    h.parent_ticket = j.parent_ticket;
    h.parent = j.parent;
    h.scope_hash = j.scope_hash;
    h.scope_digest = j.scope_digest;
    h.extra_hash = j.extra_hash;
    h.extra_digest = j.extra_digest;
    h.records = nullptr;
    h.count = 1;
    tickets_[(tail + i) % cap] = j.ticket;
    priorities_[(tail + i) % cap] = j.priority;
    copy_into_ring(tokens_.data(), cap, T, tail + i, j.tokens, 1);
    copy_into_ring(parts_.data(), cap, G, tail + i, j.parts, 1);
  }
  if (n > took) count_refused(n - took);
  if (took > 0) publish(tail, took);
  return took;
}

size_t ThreadedRecordWriter::submit_run(const RecordRun& run) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const size_t took = std::min(run.count, room());
  if (took > 0 && run.nodes != nullptr) check_ticket(run.last);  // before anything changes
  for (size_t i = 0; i < took && run.nodes == nullptr; ++i) check_ticket(run.tickets[i]);
  if (run.count > took) count_refused(run.count - took);
  if (took == 0) return 0;
  const size_t T = layout_.tokens_per_block, G = part_bytes_.size(), cap = cap_;
  RunHead& h = next_head();
  h.parent_ticket = run.parent_ticket;
  h.parent = run.parent;
  h.scope_hash = run.scope_hash;
  h.scope_digest = run.scope_digest;
  h.extra_hash = 0;
  h.extra_digest = ChainDigest{};
  h.records = nullptr;
  h.count = uint32_t(took);
  if (run.nodes != nullptr) {
    // The worker finds the nodes (up from the last one's record) and reads
    // their tokens and block addresses there: the header is all this call
    // writes. Blocks past the room are the last ones: skipped.
    h.records = run.nodes->records;
    h.stride = run.nodes->stride;
    h.parent_at = run.nodes->parent_at;
    h.blocks_at = run.nodes->blocks_at;
    h.last = run.last;
    h.skip = uint32_t(run.count - took);
    h.priority = run.priority;
    std::copy(run.nodes->bases, run.nodes->bases + G,
              run_bases_.begin() + ptrdiff_t(((runs_submitted_ - 1) % runs_.size()) * G));
  } else {
    for (size_t i = 0; i < took; ++i) {
      tickets_[(tail + i) % cap] = run.tickets[i];
      priorities_[(tail + i) % cap] = run.priorities[i];
    }
    copy_into_ring(tokens_.data(), cap, T, tail, run.tokens, took);
    copy_into_ring(parts_.data(), cap, G, tail, run.parts, took);
  }
  publish(tail, took);
  return took;
}

void ThreadedRecordWriter::publish(uint64_t tail, size_t took) {
  // A release store, no fence: the ring's lines this call wrote (which the
  // worker read on the ring's last lap) need not be owned again before the
  // call returns. So the load of sleep_ may be served before the store is
  // seen, and miss a worker going to sleep: it then finds the jobs at its
  // timeout (kPoll, kDeepPoll). A worker awake finds them itself.
  // sleep_ and written_ (the worker's lines) are read only when the ring is
  // half used by the serving thread's own count: below that the jobs wait
  // for the worker's next poll or for nudge() between steps.
  tail_.store(tail + took, std::memory_order_release);
  if (2 * (tail + took - head_) < cap_) return;
  const int sleep = sleep_.load(std::memory_order_relaxed);
  if (sleep == kDeep ||
      (sleep == kPolling && 2 * (tail + took - written_.load(std::memory_order_relaxed)) >= cap_))
    wake();
}

void ThreadedRecordWriter::nudge() {
  // Only a worker in its deep sleep (kDeepPoll): one that polls finds the
  // jobs within kPoll, and waking it costs the caller a futex syscall and
  // the worker's lock (make_room took 3 us at p50 without it and 33 us with
  // it on the 2-core VM, a wake every step).
  if (sleep_.load(std::memory_order_relaxed) == kDeep &&
      written_.load(std::memory_order_relaxed) != tail_.load(std::memory_order_relaxed))
    wake();
}

void ThreadedRecordWriter::wake() {
  std::lock_guard<std::mutex> lock(mu_);  // the worker is waiting or about to
  work_cv_.notify_one();
}

void ThreadedRecordWriter::flush() { wait_finished(tail_.load(std::memory_order_relaxed)); }

void ThreadedRecordWriter::wait_finished(uint64_t n) {
  if (written_.load(std::memory_order_acquire) >= n) return;
  std::unique_lock<std::mutex> lock(mu_);
  flushing_.store(true, std::memory_order_seq_cst);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return written_.load(std::memory_order_seq_cst) >= n; });
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

void ThreadedRecordWriter::begin_job(uint64_t at) {
  const size_t i = size_t(at % cap_);
  starts_run_ = run_left_ == 0;
  if (starts_run_) {  // the run's header (every job is in one)
    const size_t slot = size_t(runs_taken_++ % runs_.size());
    run_ = runs_[slot];
    run_left_ = run_.count;
    run_at_ = 0;
    if (run_.records != nullptr) {
      const size_t G = part_bytes_.size();
      std::copy(run_bases_.begin() + ptrdiff_t(slot * G),
                run_bases_.begin() + ptrdiff_t((slot + 1) * G), bases_.begin());
      // Its nodes, root-down: each block's node is the parent of the next
      // one's, so they are the last one and its parents (past those
      // skipped).
      uint32_t n = run_.last;
      for (uint32_t k = 0; k < run_.skip; ++k) n = record_of(n)[run_.parent_at];
      for (uint32_t k = run_.count; k-- > 0; n = record_of(n)[run_.parent_at]) run_nodes_[k] = n;
    }
  }
  ticket_ = run_.records != nullptr ? run_nodes_[run_at_] : tickets_[i];
  priority_ = run_.records != nullptr ? run_.priority : priorities_[i];
  ++run_at_;
  --run_left_;
}

bool ThreadedRecordWriter::key_of(uint64_t at, StoreKey& key) {
  const StoreKey* parent = &last_key_;
  if (starts_run_) {
    parent = &run_.parent;
    if (run_.parent_ticket != RecordWrite::kNoTicket) {
      const auto it = recent_.find(run_.parent_ticket);
      parent = it == recent_.end() ? nullptr : &it->second.key;
    }
  } else if (!last_keyed_) {
    parent = nullptr;  // the block before it was not keyed
  }
  last_keyed_ = parent != nullptr;
  if (!last_keyed_) return false;
  const uint32_t T = layout_.tokens_per_block;
  const int32_t* tokens = tokens_of(at);
  key.hash = hasher_.block(parent->hash, run_.scope_hash, run_.extra_hash, tokens, T);
  key.digest = block_chain_digest(parent->digest, run_.scope_digest, run_.extra_digest, tokens, T);
  remember(ticket_, key);
  last_key_ = key;
  return true;
}

const int32_t* ThreadedRecordWriter::tokens_of(uint64_t at) const {
  const size_t i = size_t(at % cap_);
  if (run_.records == nullptr) return tokens_.data() + i * layout_.tokens_per_block;
  // A node record begins with its tokens (radix_tree.h).
  return reinterpret_cast<const int32_t*>(record_of(ticket_));
}

const unsigned char* ThreadedRecordWriter::part_of(uint64_t at, size_t g) const {
  const size_t i = size_t(at % cap_);
  if (run_.records == nullptr) return parts_[i * part_bytes_.size() + g];
  const uint32_t block = record_of(ticket_)[run_.blocks_at + g];
  return bases_[g] + uint64_t(block) * part_bytes_[g];
}

void ThreadedRecordWriter::write(uint64_t at, const StoreKey& key) {
  // Blocks into the record's payload, then the header with its checksum.
  unsigned char* payload = record_.get() + layout_.header_bytes();
  for (size_t g = 0; g < part_bytes_.size(); ++g) {
    std::memcpy(payload, part_of(at, g), part_bytes_[g]);
    payload += part_bytes_[g];
  }
  RecordKey rk;
  rk.lookup_hash = key.hash;
  rk.digest = key.digest;
  rk.tokens = tokens_of(at);
  seal_record(layout_, rk, priority_, record_.get());
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
      const bool paused = paused_.load();
      const bool deep = paused || idle >= kIdlePolls;
      sleep_.store(deep ? kDeep : kPolling, std::memory_order_seq_cst);
      auto ready = [&] {
        return stop_ || (!paused_.load() && tail_.load(std::memory_order_seq_cst) != at);
      };
      // Paused: until resumed (set_paused wakes it under the lock).
      if (paused)
        work_cv_.wait(lock, ready);
      else
        work_cv_.wait_for(lock, deep ? kDeepPoll : kPoll, ready);
      sleep_.store(kAwake, std::memory_order_relaxed);
      if (tail_.load(std::memory_order_acquire) == at) {
        if (stop_ && !paused_.load()) return;  // stopping, every accepted job done
        ++idle;
        continue;
      }
      if (paused_.load()) continue;
    }
    idle = 0;
    begin_job(at);
    StoreKey key;
    const bool is_keyed = key_of(at, key);
    const bool keys_only = keys_only_.load(std::memory_order_relaxed);
    if (is_keyed && !keys_only) {
      write(at, key);
      // The later stores copy the record; the first (the disk, where there
      // is one) takes the buffer itself and hands back another: no copy.
      for (size_t s = stores_.size(); s-- > 0;) {
        took[s] = s == 0 ? stores_[s]->put_buffer(key.hash, priority_, record_)
                         : stores_[s]->put(key.hash, priority_, record_.get());
        if (took[s]) accepted_[s].fetch_add(1, std::memory_order_relaxed);
      }
    } else if (!is_keyed) {
      key = StoreKey{};  // all zero: not keyed
      if (!keys_only) dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    key_table_[ticket_] = key;  // zero: not keyed
    written_.store(at + 1, std::memory_order_seq_cst);
    if (flushing_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
}

}  // namespace kvc
