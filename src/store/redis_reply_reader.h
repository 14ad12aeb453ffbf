// Reads RESP replies (the Redis protocol) from a socket, putting the bytes
// of a bulk string (a GET's value) straight into memory the caller names as
// they arrive: one copy from the kernel, none through a parser's buffer.
// hiredis's reader copies a value three times (its read buffer, its
// growing input buffer, the reply object) and moves the input buffer after
// each reply, which a pipeline of large values pays dearly for
// (bench/results/2026-11-25-redis-tier-vm-2cpu.md). Every read waits for
// the socket with poll() against one deadline. Not synchronized.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvc {

using RedisClock = std::chrono::steady_clock;

// A reply as the reader hands it over. For kString, `size` is the value's
// length and `data` is null (the bytes come later, into the destination the
// caller returns); for kStatus and kError, `data` holds the line during the
// call.
struct RedisReplyView {
  enum Kind { kNil, kString, kInteger, kStatus, kError, kOther };
  Kind kind = kOther;
  const char* data = nullptr;
  size_t size = 0;
  long long integer = 0;  // kInteger
};

class RespReader {
 public:
  enum class Result { kOk, kTimeout, kEof, kIoError, kProtocol };

  explicit RespReader(size_t buffer_bytes = size_t(64) << 10) : buf_(buffer_bytes) {}

  // Reads one reply from `fd` before `deadline`. where(view) is called once
  // the reply's kind is known; for a bulk string it returns where its
  // view.size bytes go (null: read and discard them), for the others its
  // return is ignored. Nested replies (arrays, maps) are kProtocol: a GET
  // never answers one. Any result but kOk leaves the stream out of step.
  Result read(int fd, RedisClock::time_point deadline,
              const std::function<unsigned char*(const RedisReplyView&)>& where,
              std::string* error);

  // Bytes received and not consumed yet.
  size_t buffered() const { return end_ - pos_; }

 private:
  Result fill(int fd, RedisClock::time_point deadline, std::string* error);
  Result recv_into(int fd, RedisClock::time_point deadline, unsigned char* dst, size_t n,
                   std::string* error);
  Result line(int fd, RedisClock::time_point deadline, size_t* start, size_t* length,
              std::string* error);

  std::vector<char> buf_;
  size_t pos_ = 0;  // first unconsumed byte
  size_t end_ = 0;  // one past the last received byte
};

}  // namespace kvc
