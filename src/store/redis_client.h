// The remote tier's client of one Redis server: pipelined lookups of a
// prompt's chain on the caller's thread, bounded by the command timeout;
// stores queued to a worker thread of its own (a bounded queue: when full,
// or while the server is down, a store is dropped and counted); the
// worker reconnects with exponential backoff after an error, and while it
// backs off lookups are immediate misses. It owns both connections, the
// queue, the record of what it wrote (the byte budget) and the counters.
// Keys and values are opaque bytes here: what they mean is RedisStore's.
//
// Eviction: the server's own (maxmemory with allkeys-lru, set by whoever
// runs it) bounds what all writers share. The byte budget bounds what this
// client adds: it keeps its own writes in LRU order (a hit refreshes one)
// and UNLINKs the oldest past the budget. Other writers' keys are never
// deleted here, and no TTL is set (an idle block stays until one of the
// two evictions takes it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/latency_histogram.h"
#include "store/redis_connection.h"
#include "store/redis_url.h"

namespace kvc {

struct RedisClientOptions {
  RedisUrl url;
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds command_timeout{1000};
  uint64_t byte_budget = 0;              // bytes of values this client keeps stored
  uint64_t queue_bytes = 64ull << 20;    // values waiting for the worker; more are dropped
  uint64_t write_batch_bytes = 8ull << 20;  // values per pipelined write round trip
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{2000};
};

// A snapshot of the client's counters.
struct RedisClientCounters {
  uint64_t stored_blocks = 0;  // keys this client wrote and has not deleted
  uint64_t stored_bytes = 0;   // their value bytes
  uint64_t lookups = 0;        // get_chain calls that reached the server
  uint64_t lookup_round_trips = 0;  // their pipelined round trips (one per chunk)
  uint64_t hits = 0;           // values found and accepted
  uint64_t misses = 0;         // keys asked for and not returned (absent, after a miss, down)
  uint64_t rejected = 0;       // values found and refused by the caller's check (counted in misses)
  uint64_t stores = 0;         // values written
  uint64_t stored_total_bytes = 0;  // bytes of the values written
  uint64_t drops = 0;          // values not written: queue full, server down, failed batch
  uint64_t deletes = 0;        // keys UNLINKed to keep within the byte budget
  uint64_t errors = 0;         // failed connects and round trips
  uint64_t reconnects = 0;     // successful connects after an error
  bool connected = false;
  uint64_t lookup_p50_us = 0;  // latency of the lookups that reached the server
  uint64_t lookup_p99_us = 0;
  uint64_t lookup_max_us = 0;
};

class RedisClient {
 public:
  // Connects (both connections) or throws RedisConnection::open's error.
  explicit RedisClient(const RedisClientOptions& options);
  // Writes what is queued, within one command timeout; the rest is dropped.
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Looks up keys[0..n) in order, `chunk` keys per round trip, and calls
  // accept(i, data, size) for each value in order until the first absent
  // key or the first value accept() refuses. Returns how many it
  // accepted: a prefix of the keys. Returns within the command timeout;
  // an error or a timeout ends the lookup there (what was accepted stays).
  // While the client is down it returns 0 at once.
  size_t get_chain(const std::string* keys, size_t n, size_t chunk,
                   const std::function<bool(size_t, const char*, size_t)>& accept);

  // Queues SET key value. False when dropped (queue full or server down).
  bool put(std::string key, std::string value);

  // Waits until every queued write is done or dropped, up to `timeout`.
  // True when the queue emptied.
  bool flush(std::chrono::milliseconds timeout);
  // Waits until the client is connected (after a reconnect), up to
  // `timeout`. True when it is.
  bool wait_connected(std::chrono::milliseconds timeout);

  RedisClientCounters counters() const;
  const RedisClientOptions& options() const { return options_; }

 private:
  struct Write {
    std::string key;
    std::string value;
  };
  struct Owned {  // one of this client's keys, in LRU order
    std::string key;
    uint64_t bytes;
  };

  void run_worker();
  bool reconnect();  // worker thread, without queue_mu_
  void write_batch(std::vector<Write>& batch, std::vector<std::string>& touched,
                   RedisClock::time_point deadline);
  void mark_down();  // after an error; wakes the worker
  void record_owned(const std::string& key, uint64_t bytes, std::vector<std::string>& evicted);
  void touch_owned(const std::string& key);

  const RedisClientOptions options_;

  // The lookup connection: the serving threads' (one at a time).
  mutable std::mutex serve_mu_;
  std::unique_ptr<RedisConnection> serve_conn_;
  LatencyHistogram latency_;   // under serve_mu_
  uint64_t lookup_max_us_ = 0; // under serve_mu_

  // The worker's state.
  std::unique_ptr<RedisConnection> write_conn_;  // worker thread only
  std::list<Owned> owned_;                       // worker thread only, oldest first
  std::unordered_map<std::string, std::list<Owned>::iterator> owned_index_;
  std::chrono::milliseconds backoff_;
  RedisClock::time_point next_attempt_;

  // Shared with the worker.
  mutable std::mutex queue_mu_;
  std::condition_variable wake_;     // worker: work, down, stop
  std::condition_variable drained_;  // flush: the queue emptied
  std::condition_variable connected_;  // wait_connected: down_ went false
  std::deque<Write> queue_;
  uint64_t queue_bytes_ = 0;
  std::vector<std::string> touches_;  // keys hit since the worker last looked
  bool busy_ = false;                 // a batch in flight
  bool stop_ = false;
  std::atomic<bool> down_{false};

  struct Counters {
    std::atomic<uint64_t> stored_blocks{0}, stored_bytes{0}, lookups{0}, hits{0}, misses{0},
        rejected{0}, round_trips{0}, stores{0}, stored_total_bytes{0}, drops{0}, deletes{0}, errors{0},
        reconnects{0};
  } c_;

  std::thread worker_;
};

}  // namespace kvc
