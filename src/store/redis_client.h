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
// client adds: it keeps its own writes in prioritized LRU order, as every
// tier evicts (lowest priority first, oldest first among equals; a hit
// refreshes a key), and UNLINKs the first past the budget. Other writers'
// keys are never deleted for the budget, and no TTL is set (an idle block
// stays until one of the two evictions takes it).
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
#include "store/latency_window.h"
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
  // When the first connect fails (unreachable, credentials or database
  // refused): false, the constructor throws; true, the client starts down
  // and its worker keeps trying with backoff, each failure an error.
  bool start_down_on_failure = false;
};

// A snapshot of the client's counters (RedisStore maps them to StoreStats).
struct RedisClientCounters {
  uint64_t owned_keys = 0;     // keys this client wrote and has not deleted
  uint64_t owned_bytes = 0;    // their value bytes
  uint64_t lookups = 0;        // get_chain calls that reached the server
  uint64_t lookup_round_trips = 0;  // their pipelined round trips (one per chunk)
  uint64_t hits = 0;           // values found and accepted
  uint64_t misses = 0;         // get_chain calls ended by an absent key or a down server
  uint64_t refused = 0;        // values found and refused by accept()
  uint64_t stores = 0;         // values written
  uint64_t drops = 0;          // values not written: queue full, server down, failed batch
  uint64_t deletes = 0;        // keys UNLINKed to keep within the byte budget
  uint64_t unlinks = 0;        // keys UNLINKed on request (unlink())
  uint64_t errors = 0;         // failed connects and round trips, error replies
  uint64_t reconnects = 0;     // successful connects after an error
  uint64_t queued = 0;         // values waiting for the worker now
  bool connected = false;
  LatencySummary lookup;       // one get_chain that reached the server
  LatencySummary write;        // a value's SET, from its batch's send to the reply
};

class RedisClient {
 public:
  // Connects (both connections) or throws RedisConnection::open's error
  // (with start_down_on_failure, only KVC_ERR_UNSUPPORTED: no hiredis).
  explicit RedisClient(const RedisClientOptions& options);
  // Writes what is queued (each batch within one command timeout; a
  // failing server drops the rest), then stops the worker.
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Looks up keys[0..n) in order, `chunk` keys per round trip. For each
  // value found, in order, where(i, size) says where its `size` bytes go
  // (read there straight from the socket) or refuses it (null); the chain
  // ends at the first absent key or refused value. Returns how many values
  // it read in full: a prefix of the keys. Returns within the command
  // timeout; an error or a timeout ends the lookup there (the values read
  // in full stay). While the client is down it returns 0 at once. Never
  // throws Error.
  size_t get_chain(const std::string* keys, size_t n, size_t chunk,
                   const std::function<unsigned char*(size_t, size_t)>& where);

  // Queues SET key value; `priority` (0..100) orders this client's own
  // deletions (lowest first, oldest first among equals). False when
  // dropped (queue full or server down). Never waits on I/O.
  bool put(std::string key, std::string value, uint32_t priority);
  // Queues UNLINK key (a value the caller found corrupt).
  void unlink(std::string key);

  // Waits until every write and unlink queued before the call is done or
  // dropped.
  // Bounded: each batch ends within one command timeout.
  void flush();
  // The same, up to `timeout`; true when done.
  bool flush(std::chrono::milliseconds timeout);
  // Waits until the client is connected (after a reconnect), up to
  // `timeout`. True when it is.
  bool wait_connected(std::chrono::milliseconds timeout);

  RedisClientCounters counters() const;

  // KV events: a change of this client's own keys (held true: written;
  // false: deleted for the budget or on request). A client starts knowing no
  // keys (it never learns of those it did not write), so watching starts an
  // empty set. After watch(), every change is journaled; take_changes()
  // appends them in order and empties the journal (one atomic load when
  // empty).
  struct KeyChange {
    std::string key;
    uint32_t priority = 0;
    bool held = false;
  };
  void watch();
  void take_changes(std::vector<KeyChange>& out);

  const RedisClientOptions& options() const { return options_; }
  // Why the last connect failed ("" when none has).
  std::string last_connect_error() const;

 private:
  struct Write {
    std::string key;
    std::string value;
    uint32_t priority = 0;
  };
  struct Owned {  // one of this client's keys
    uint32_t priority = 0;
    uint64_t age = 0;
    uint64_t bytes = 0;
  };
  using OwnedOrder = std::tuple<uint32_t, uint64_t, std::string>;  // priority, age, key

  void run_worker();
  bool reconnect();  // worker thread, without queue_mu_
  void write_batch(std::vector<Write>& batch, std::vector<std::string>& touched,
                   std::vector<std::string>& unlinks, RedisClock::time_point deadline);
  void mark_down();  // after an error; drops the queue, wakes the worker
  // Worker thread: this client's record of its keys.
  void record_owned(const std::string& key, uint32_t priority, uint64_t bytes,
                    std::vector<std::string>& evicted);
  // `journal`: false when the key is written again at once (a replacement).
  void forget_owned(const std::string& key, bool journal = true);
  void journal(const std::string& key, uint32_t priority, bool held);
  void touch_owned(const std::string& key);

  const RedisClientOptions options_;

  // The lookup connection: the serving threads' (one at a time).
  mutable std::mutex serve_mu_;
  std::unique_ptr<RedisConnection> serve_conn_;
  LatencyWindow lookup_latency_;  // under serve_mu_

  // The worker's own state.
  std::unique_ptr<RedisConnection> write_conn_;
  std::unordered_map<std::string, Owned> owned_;
  std::set<OwnedOrder> owned_order_;  // eviction order: lowest priority, oldest first
  uint64_t owned_clock_ = 0;

  // Shared with the worker, under queue_mu_.
  mutable std::mutex queue_mu_;
  std::condition_variable wake_;       // worker: work, down, stop
  std::condition_variable done_;       // flush: writes finished
  std::condition_variable connected_;  // wait_connected: down_ went false
  std::deque<Write> queue_;
  uint64_t queue_bytes_ = 0;
  uint64_t enqueued_ = 0;  // writes and unlinks ever queued
  uint64_t finished_ = 0;  // those done or dropped
  std::vector<std::string> touches_;  // keys hit since the worker last looked
  std::vector<std::string> unlinks_;  // keys to delete
  std::chrono::milliseconds backoff_;
  RedisClock::time_point next_attempt_;
  LatencyWindow write_latency_;
  std::string last_connect_error_;
  bool stop_ = false;
  std::atomic<bool> down_{false};

  struct Counters {
    std::atomic<uint64_t> owned_keys{0}, owned_bytes{0}, lookups{0}, round_trips{0}, hits{0},
        misses{0}, refused{0}, stores{0}, drops{0}, deletes{0}, unlinks{0}, errors{0},
        reconnects{0};
  } c_;

  // KV events: the worker appends, the core's thread takes.
  std::mutex journal_mu_;
  bool watched_ = false;
  std::vector<KeyChange> journal_;
  std::atomic<size_t> journal_size_{0};

  std::thread worker_;
};

}  // namespace kvc
