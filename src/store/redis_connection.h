// One connection to a Redis server through hiredis: connect with a
// timeout, AUTH, SELECT, then pipelined round trips that never outlast a
// deadline. Not synchronized: one thread uses a connection at a time. A
// round trip that fails (I/O error, timeout, EOF, a protocol error) leaves
// the connection broken; its owner drops it and connects anew.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "store/redis_reply_reader.h"
#include "store/redis_url.h"

struct redisContext;

namespace kvc {

// One argument of a command: bytes, not a C string (values hold zeros).
struct RedisArg {
  const char* data;
  size_t size;
  RedisArg(const char* d, size_t n) : data(d), size(n) {}
  RedisArg(const std::string& s) : data(s.data()), size(s.size()) {}  // NOLINT: implicit by design
  RedisArg(const char* s);                                            // NOLINT
};

// Whether this build has hiredis. Without it (redis_unavailable.cpp),
// RedisConnection::open throws KVC_ERR_UNSUPPORTED saying how to get it.
bool redis_built();
extern const char* const kRedisUnavailableMessage;

class RedisConnection {
 public:
  // Connects within `connect_timeout`, AUTHs and SELECTs as the URL says
  // and PINGs (a server that wants a password says so here). Throws
  // Error: KVC_ERR_DEVICE when the server cannot be reached or answers
  // nothing in time, KVC_ERR_INVALID_ARGUMENT when it refuses the URL's
  // credentials or database. Messages name the URL without its password.
  static std::unique_ptr<RedisConnection> open(const RedisUrl& url,
                                               std::chrono::milliseconds connect_timeout,
                                               std::chrono::milliseconds command_timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Queues a command for the next round trip (nothing is sent yet).
  void append(std::initializer_list<RedisArg> args);
  void append(const RedisArg* args, size_t n);
  size_t pending() const { return pending_; }

  // Sends every queued command and reads their replies in order, calling
  // visit(index, reply) for each, all before `deadline`. Returns false on
  // an I/O error, EOF, a protocol error or the deadline passing, with why
  // in *error; the connection is then broken (broken() is true) and the
  // replies not visited are lost.
  bool round_trip(RedisClock::time_point deadline,
                  const std::function<void(size_t, const RedisReplyView&)>& visit,
                  std::string* error);
  // The same for commands whose replies are flat (GET): read with
  // RespReader, so a bulk string goes straight to where(index, view)'s
  // answer (null: discarded). *complete: the replies read in full, also
  // on failure. Use one kind of round trip per connection: the two
  // readers do not share what they buffered.
  bool round_trip_values(RedisClock::time_point deadline,
                         const std::function<unsigned char*(size_t, const RedisReplyView&)>& where,
                         size_t* complete, std::string* error);

  bool broken() const { return broken_; }

 private:
  explicit RedisConnection(redisContext* ctx) : ctx_(ctx) {}
  bool wait_fd(short events, RedisClock::time_point deadline, std::string* error);
  bool send_pending(RedisClock::time_point deadline, std::string* error);
  bool break_with(const std::string& why, std::string* error);

  redisContext* ctx_;
  RespReader reader_;
  size_t pending_ = 0;
  bool broken_ = false;
};

}  // namespace kvc
