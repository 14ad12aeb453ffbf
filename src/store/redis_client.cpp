// RedisClient: the lookup path on the caller's thread, the worker thread
// for writes, reconnects and the byte budget.
#include "store/redis_client.h"

#include <algorithm>

#include "base/error.h"

namespace kvc {

namespace {
constexpr size_t kMaxTouches = 4096;  // hits remembered between worker passes
}

RedisClient::RedisClient(const RedisClientOptions& options)
    : options_(options), backoff_(options.backoff_min) {
  serve_conn_ = RedisConnection::open(options_.url, options_.connect_timeout,
                                      options_.command_timeout);
  write_conn_ = RedisConnection::open(options_.url, options_.connect_timeout,
                                      options_.command_timeout);
  worker_ = std::thread([this] { run_worker(); });
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
                              const std::function<bool(size_t, const char*, size_t)>& accept) {
  if (n == 0) return 0;
  if (chunk == 0) chunk = 1;
  std::unique_lock<std::mutex> lock(serve_mu_);
  if (down_.load() || !serve_conn_) {
    c_.misses += n;
    return 0;
  }
  const auto start = RedisClock::now();
  const auto deadline = start + options_.command_timeout;
  size_t accepted = 0;
  bool stopped = false;
  bool failed = false;
  std::string error;
  for (size_t begin = 0; begin < n && !stopped; begin += chunk) {
    const size_t end = std::min(n, begin + chunk);
    for (size_t i = begin; i < end; ++i) serve_conn_->append({"GET", keys[i]});
    ++c_.round_trips;
    const bool ok = serve_conn_->round_trip(
        deadline,
        [&](size_t j, const RedisReplyView& r) {
          if (stopped) return;
          const size_t i = begin + j;
          if (r.kind == RedisReplyView::kString) {
            if (accept(i, r.data, r.size)) {
              ++accepted;
              return;
            }
            ++c_.rejected;
          } else if (r.kind != RedisReplyView::kNil) {
            ++c_.errors;  // an error reply (LOADING, WRONGTYPE...) ends the chain
          }
          stopped = true;
        },
        &error);
    if (!ok) {
      failed = true;
      break;
    }
  }
  const auto took = RedisClock::now() - start;
  latency_.add(took);
  lookup_max_us_ = std::max<uint64_t>(
      lookup_max_us_,
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
  ++c_.lookups;
  c_.hits += accepted;
  c_.misses += n - accepted;
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

bool RedisClient::put(std::string key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stop_ || down_.load() || queue_bytes_ + value.size() > options_.queue_bytes) {
      ++c_.drops;
      return false;
    }
    queue_bytes_ += value.size();
    queue_.push_back(Write{std::move(key), std::move(value)});
  }
  wake_.notify_one();
  return true;
}

bool RedisClient::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  return drained_.wait_for(lock, timeout, [&] { return queue_.empty() && !busy_; });
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
    queue_.clear();
    queue_bytes_ = 0;
  }
  drained_.notify_all();
  wake_.notify_all();
}

bool RedisClient::reconnect() {
  std::unique_ptr<RedisConnection> serve, write;
  try {
    serve = RedisConnection::open(options_.url, options_.connect_timeout,
                                  options_.command_timeout);
    write = RedisConnection::open(options_.url, options_.connect_timeout,
                                  options_.command_timeout);
  } catch (const Error&) {
    ++c_.errors;
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
  std::vector<std::string> touched;
  std::unique_lock<std::mutex> lock(queue_mu_);
  RedisClock::time_point drain_deadline{};
  for (;;) {
    if (stop_ && drain_deadline == RedisClock::time_point{}) {
      drain_deadline = RedisClock::now() + options_.command_timeout;
    }
    if (stop_ && (down_.load() || queue_.empty() || RedisClock::now() >= drain_deadline)) {
      c_.drops += queue_.size();
      queue_.clear();
      queue_bytes_ = 0;
      break;
    }
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
    if (queue_.empty() && touches_.empty()) {
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
    busy_ = true;
    const auto deadline = stop_ ? drain_deadline : RedisClock::now() + options_.command_timeout;
    lock.unlock();
    write_batch(batch, touched, deadline);
    batch.clear();
    touched.clear();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
  busy_ = false;
  drained_.notify_all();
}

void RedisClient::write_batch(std::vector<Write>& batch, std::vector<std::string>& touched,
                              RedisClock::time_point deadline) {
  for (const std::string& key : touched) touch_owned(key);
  if (batch.empty()) return;
  for (const Write& w : batch) write_conn_->append({"SET", w.key, w.value});
  std::vector<bool> stored(batch.size(), false);
  std::string error;
  bool ok = write_conn_->round_trip(
      deadline,
      [&](size_t i, const RedisReplyView& r) {
        stored[i] = r.kind == RedisReplyView::kStatus;
      },
      &error);
  if (!ok) {
    ++c_.errors;
    c_.drops += batch.size();
    mark_down();
    return;
  }
  std::vector<std::string> evicted;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!stored[i]) {
      ++c_.errors;  // refused (maxmemory with noeviction, a read-only replica...)
      ++c_.drops;
      continue;
    }
    ++c_.stores;
    c_.stored_total_bytes += batch[i].value.size();
    record_owned(batch[i].key, batch[i].value.size(), evicted);
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

void RedisClient::record_owned(const std::string& key, uint64_t bytes,
                               std::vector<std::string>& evicted) {
  auto it = owned_index_.find(key);
  if (it != owned_index_.end()) {
    c_.stored_bytes -= it->second->bytes;
    it->second->bytes = bytes;
    owned_.splice(owned_.end(), owned_, it->second);
  } else {
    owned_.push_back(Owned{key, bytes});
    owned_index_.emplace(key, std::prev(owned_.end()));
    ++c_.stored_blocks;
  }
  c_.stored_bytes += bytes;
  while (c_.stored_bytes.load() > options_.byte_budget && owned_.size() > 1) {
    const Owned& oldest = owned_.front();
    evicted.push_back(oldest.key);
    c_.stored_bytes -= oldest.bytes;
    --c_.stored_blocks;
    owned_index_.erase(oldest.key);
    owned_.pop_front();
  }
}

void RedisClient::touch_owned(const std::string& key) {
  auto it = owned_index_.find(key);
  if (it != owned_index_.end()) owned_.splice(owned_.end(), owned_, it->second);
}

RedisClientCounters RedisClient::counters() const {
  RedisClientCounters out;
  out.stored_blocks = c_.stored_blocks;
  out.stored_bytes = c_.stored_bytes;
  out.lookups = c_.lookups;
  out.hits = c_.hits;
  out.misses = c_.misses;
  out.rejected = c_.rejected;
  out.lookup_round_trips = c_.round_trips;
  out.stores = c_.stores;
  out.stored_total_bytes = c_.stored_total_bytes;
  out.drops = c_.drops;
  out.deletes = c_.deletes;
  out.errors = c_.errors;
  out.reconnects = c_.reconnects;
  out.connected = !down_.load();
  std::lock_guard<std::mutex> lock(serve_mu_);
  out.lookup_p50_us = latency_.percentile_us(50);
  out.lookup_p99_us = latency_.percentile_us(99);
  out.lookup_max_us = lookup_max_us_;
  return out;
}

}  // namespace kvc
