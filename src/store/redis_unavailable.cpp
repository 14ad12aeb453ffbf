// RedisConnection in a build without hiredis: open() refuses, saying how to
// get a remote tier; nothing else is reachable without a connection.
#include <cstring>

#include "base/error.h"
#include "store/redis_connection.h"

namespace kvc {

bool redis_built() { return false; }
const char* const kRedisUnavailableMessage =
    "remote tier: built without hiredis: install libhiredis-dev and rebuild";

RedisArg::RedisArg(const char* s) : data(s), size(std::strlen(s)) {}

std::unique_ptr<RedisConnection> RedisConnection::open(const RedisUrl&,
                                                       std::chrono::milliseconds,
                                                       std::chrono::milliseconds) {
  fail(KVC_ERR_UNSUPPORTED, kRedisUnavailableMessage);
}

RedisConnection::~RedisConnection() = default;
void RedisConnection::append(std::initializer_list<RedisArg>) {}
void RedisConnection::append(const RedisArg*, size_t) {}
bool RedisConnection::break_with(const std::string& why, std::string* error) {
  broken_ = true;
  if (error != nullptr) *error = why;
  return false;
}
bool RedisConnection::wait_fd(short, RedisClock::time_point, std::string* error) {
  return break_with("built without hiredis", error);
}
bool RedisConnection::send_pending(RedisClock::time_point, std::string* error) {
  return break_with("built without hiredis", error);
}
bool RedisConnection::round_trip_values(
    RedisClock::time_point, const std::function<unsigned char*(size_t, const RedisReplyView&)>&,
    size_t* complete, std::string* error) {
  *complete = 0;
  return break_with("built without hiredis", error);
}
bool RedisConnection::round_trip(RedisClock::time_point,
                                 const std::function<void(size_t, const RedisReplyView&)>&,
                                 std::string* error) {
  return break_with("built without hiredis", error);
}

}  // namespace kvc
