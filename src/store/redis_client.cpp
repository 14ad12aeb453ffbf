// RedisClient: the lookup path on the caller's thread, the worker thread
// for writes, deletions, reconnects and the byte budget.
#include "store/redis_client.h"

#include <algorithm>

#include "base/error.h"

namespace kvc {

namespace {
constexpr size_t kMaxTouches = 4096;  // hits remembered between worker passes
constexpr size_t kMaxUnlinks = 4096;  // deletions asked for between passes
}  // namespace

RedisClient::RedisClient(const RedisClientOptions& options)
    : options_(options), backoff_(options.backoff_min) {
  try {
    serve_conn_ = RedisConnection::open(options_.url, options_.connect_timeout,
                                        options_.command_timeout);
    write_conn_ = RedisConnection::open(options_.url, options_.connect_timeout,
                                        options_.command_timeout);
  } catch (const Error& e) {
    if (!options_.start_down_on_failure || e.status() == KVC_ERR_UNSUPPORTED) throw;
    serve_conn_.reset();
    write_conn_.reset();
    last_connect_error_ = e.what();
    ++c_.errors;
    down_ = true;
    next_attempt_ = RedisClock::now() + backoff_;
  }
  worker_ = std::thread([this] { run_worker(); });
}

std::string RedisClient::last_connect_error() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return last_connect_error_;
}

RedisClient::~RedisClient() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

size_t RedisClient::get_chain(const std::string* keys, size_t n, size_t chunk,
                              const std::function<unsigned char*(size_t, size_t)>& where) {
  if (n == 0) return 0;
  if (chunk == 0) chunk = 1;
  std::unique_lock<std::mutex> lock(serve_mu_);
  if (down_.load() || !serve_conn_) {
    ++c_.misses;
    return 0;
  }
  const auto start = RedisClock::now();
  const auto deadline = start + options_.command_timeout;
  size_t accepted = 0;
  bool stopped = false;
  bool absent = false;
  bool failed = false;
  std::string error;
  for (size_t begin = 0; begin < n && !stopped; begin += chunk) {
    const size_t end = std::min(n, begin + chunk);
    for (size_t i = begin; i < end; ++i) serve_conn_->append({"GET", keys[i]});
    ++c_.round_trips;
    size_t accepted_here = 0;  // a prefix of this chunk's replies
    size_t complete = 0;
    const bool ok = serve_conn_->round_trip_values(
        deadline,
        [&](size_t j, const RedisReplyView& r) -> unsigned char* {
          if (stopped) return nullptr;
          if (r.kind == RedisReplyView::kString) {
            if (unsigned char* dst = where(begin + j, r.size)) {
              ++accepted_here;
              return dst;
            }
            ++c_.refused;
          } else if (r.kind == RedisReplyView::kNil) {
            absent = true;
          } else {
            ++c_.errors;  // an error reply (LOADING, WRONGTYPE...) ends the chain
          }
          stopped = true;
          return nullptr;
        },
        &complete, &error);
    if (!ok) {
      accepted += std::min(accepted_here, complete);  // a value cut short is no value
      failed = true;
      break;
    }
    accepted += accepted_here;
  }
  lookup_latency_.add(micros_since(start));
  ++c_.lookups;
  c_.hits += accepted;
  if (absent) ++c_.misses;
  if (failed) {
    ++c_.errors;
    serve_conn_.reset();
    lock.unlock();
    mark_down();
    return accepted;
  }
  lock.unlock();
  if (accepted > 0) {
    std::lock_guard<std::mutex> q(queue_mu_);
    for (size_t i = 0; i < accepted && touches_.size() < kMaxTouches; ++i) {
      touches_.push_back(keys[i]);
    }
  }
  return accepted;
}

bool RedisClient::put(std::string key, std::string value, uint32_t priority) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stop_ || down_.load() || queue_bytes_ + value.size() > options_.queue_bytes) {
      ++c_.drops;
      return false;
    }
    queue_bytes_ += value.size();
    ++enqueued_;
    queue_.push_back(Write{std::move(key), std::move(value), std::min<uint32_t>(priority, 100)});
  }
  wake_.notify_one();
  return true;
}

void RedisClient::unlink(std::string key) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (unlinks_.size() >= kMaxUnlinks) return;  // the value stays; the next hit refuses it again
    unlinks_.push_back(std::move(key));
    ++enqueued_;
  }
  wake_.notify_one();
}

void RedisClient::flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  const uint64_t target = enqueued_;
  done_.wait(lock, [&] { return finished_ >= target; });
}

bool RedisClient::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  const uint64_t target = enqueued_;
  return done_.wait_for(lock, timeout, [&] { return finished_ >= target; });
}

bool RedisClient::wait_connected(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  return connected_.wait_for(lock, timeout, [&] { return !down_.load(); });
}

void RedisClient::mark_down() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!down_.load()) {
      down_ = true;
      next_attempt_ = RedisClock::now() + backoff_;
    }
    c_.drops += queue_.size();
    finished_ += queue_.size() + unlinks_.size();
    queue_.clear();
    queue_bytes_ = 0;
    unlinks_.clear();
  }
  done_.notify_all();
  wake_.notify_all();
}

bool RedisClient::reconnect() {
  std::unique_ptr<RedisConnection> serve, write;
  try {
    serve = RedisConnection::open(options_.url, options_.connect_timeout,
                                  options_.command_timeout);
    write = RedisConnection::open(options_.url, options_.connect_timeout,
                                  options_.command_timeout);
  } catch (const Error& e) {
    ++c_.errors;
    std::lock_guard<std::mutex> lock(queue_mu_);
    last_connect_error_ = e.what();
    return false;
  }
  write_conn_ = std::move(write);
  {
    std::lock_guard<std::mutex> lock(serve_mu_);
    serve_conn_ = std::move(serve);
  }
  ++c_.reconnects;
  return true;
}

void RedisClient::run_worker() {
  std::vector<Write> batch;
  std::vector<std::string> touched, unlinks;
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    if (stop_ && (down_.load() || (queue_.empty() && unlinks_.empty()))) break;
    if (down_.load()) {
      if (RedisClock::now() < next_attempt_) {
        wake_.wait_until(lock, next_attempt_);
        continue;
      }
      lock.unlock();
      const bool ok = reconnect();
      lock.lock();
      if (ok) {
        backoff_ = options_.backoff_min;
        down_ = false;
        connected_.notify_all();
      } else {
        backoff_ = std::min(backoff_ * 2, options_.backoff_max);
        next_attempt_ = RedisClock::now() + backoff_;
      }
      continue;
    }
    if (queue_.empty() && touches_.empty() && unlinks_.empty()) {
      wake_.wait(lock);
      continue;
    }
    uint64_t bytes = 0;
    while (!queue_.empty() && (batch.empty() || bytes + queue_.front().value.size() <=
                                                    options_.write_batch_bytes)) {
      bytes += queue_.front().value.size();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queue_bytes_ -= bytes;
    touched.swap(touches_);
    unlinks.swap(unlinks_);
    const auto deadline = RedisClock::now() + options_.command_timeout;
    lock.unlock();
    write_batch(batch, touched, unlinks, deadline);
    lock.lock();
    finished_ += batch.size() + unlinks.size();
    batch.clear();
    touched.clear();
    unlinks.clear();
    done_.notify_all();
  }
  // Stopping while down: what is left is dropped.
  c_.drops += queue_.size();
  finished_ += queue_.size() + unlinks_.size();
  unlinks_.clear();
  queue_.clear();
  queue_bytes_ = 0;
  done_.notify_all();
}

void RedisClient::write_batch(std::vector<Write>& batch, std::vector<std::string>& touched,
                              std::vector<std::string>& unlinks,
                              RedisClock::time_point deadline) {
  for (const std::string& key : touched) touch_owned(key);
  if (batch.empty() && unlinks.empty()) return;
  const auto start = RedisClock::now();
  for (const Write& w : batch) write_conn_->append({"SET", w.key, w.value});
  for (const std::string& key : unlinks) write_conn_->append({"UNLINK", key});
  std::vector<bool> stored(batch.size(), false);
  std::string error;
  bool ok = write_conn_->round_trip(
      deadline,
      [&](size_t i, const RedisReplyView& r) {
        if (i < batch.size()) stored[i] = r.kind == RedisReplyView::kStatus;
      },
      &error);
  if (!ok) {
    ++c_.errors;
    c_.drops += batch.size();
    mark_down();
    return;
  }
  const uint64_t took = micros_since(start);
  c_.unlinks += unlinks.size();
  for (const std::string& key : unlinks) forget_owned(key);
  std::vector<std::string> evicted;
  size_t written = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!stored[i]) {
      ++c_.errors;  // refused (maxmemory with noeviction, a read-only replica...)
      ++c_.drops;
      continue;
    }
    ++written;
    record_owned(batch[i].key, batch[i].priority, batch[i].value.size(), evicted);
  }
  c_.stores += written;
  if (written > 0) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (size_t i = 0; i < written; ++i) write_latency_.add(took);
  }
  if (evicted.empty()) return;
  for (const std::string& key : evicted) write_conn_->append({"UNLINK", key});
  ok = write_conn_->round_trip(deadline, [](size_t, const RedisReplyView&) {}, &error);
  if (!ok) {
    ++c_.errors;
    mark_down();
    return;
  }
  c_.deletes += evicted.size();
}

void RedisClient::record_owned(const std::string& key, uint32_t priority, uint64_t bytes,
                               std::vector<std::string>& evicted) {
  forget_owned(key, false);
  owned_.emplace(key, Owned{priority, ++owned_clock_, bytes});
  journal(key, priority, true);
  owned_order_.emplace(priority, owned_clock_, key);
  ++c_.owned_keys;
  c_.owned_bytes += bytes;
  while (c_.owned_bytes.load() > options_.byte_budget && owned_.size() > 1) {
    const std::string victim = std::get<2>(*owned_order_.begin());
    forget_owned(victim);
    evicted.push_back(victim);
  }
}

void RedisClient::forget_owned(const std::string& key, bool journaled) {
  auto it = owned_.find(key);
  if (it == owned_.end()) return;
  if (journaled) journal(key, 0, false);
  owned_order_.erase(OwnedOrder{it->second.priority, it->second.age, key});
  --c_.owned_keys;
  c_.owned_bytes -= it->second.bytes;
  owned_.erase(it);
}

void RedisClient::journal(const std::string& key, uint32_t priority, bool held) {
  std::lock_guard<std::mutex> lock(journal_mu_);
  if (!watched_) return;
  journal_.push_back(KeyChange{key, priority, held});
  journal_size_.store(journal_.size(), std::memory_order_release);
}

void RedisClient::watch() {
  std::lock_guard<std::mutex> lock(journal_mu_);
  watched_ = true;
}

void RedisClient::take_changes(std::vector<KeyChange>& out) {
  if (journal_size_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(journal_mu_);
  for (KeyChange& c : journal_) out.push_back(std::move(c));
  journal_.clear();
  journal_size_.store(0, std::memory_order_relaxed);
}

void RedisClient::touch_owned(const std::string& key) {
  auto it = owned_.find(key);
  if (it == owned_.end()) return;
  owned_order_.erase(OwnedOrder{it->second.priority, it->second.age, key});
  it->second.age = ++owned_clock_;
  owned_order_.emplace(it->second.priority, it->second.age, key);
}

RedisClientCounters RedisClient::counters() const {
  RedisClientCounters out;
  out.owned_keys = c_.owned_keys;
  out.owned_bytes = c_.owned_bytes;
  out.lookups = c_.lookups;
  out.lookup_round_trips = c_.round_trips;
  out.hits = c_.hits;
  out.misses = c_.misses;
  out.refused = c_.refused;
  out.stores = c_.stores;
  out.drops = c_.drops;
  out.deletes = c_.deletes;
  out.unlinks = c_.unlinks;
  out.errors = c_.errors;
  out.reconnects = c_.reconnects;
  out.connected = !down_.load();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    out.queued = queue_.size();
    out.write = write_latency_.summary();
  }
  std::lock_guard<std::mutex> lock(serve_mu_);
  out.lookup = lookup_latency_.summary();
  return out;
}

}  // namespace kvc
