// RespReader: a line-at-a-time RESP2 reader for flat replies.
#include "store/redis_reply_reader.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvc {

namespace {

RespReader::Result wait_readable(int fd, RedisClock::time_point deadline, std::string* error) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RedisClock::now());
    if (left.count() <= 0) {
      *error = "timed out";
      return RespReader::Result::kTimeout;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return RespReader::Result::kOk;
    if (r == 0) {
      *error = "timed out";
      return RespReader::Result::kTimeout;
    }
    if (errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return RespReader::Result::kIoError;
    }
  }
}

// One recv of what has arrived (after poll said something did).
RespReader::Result recv_some(int fd, RedisClock::time_point deadline, char* dst, size_t n,
                             size_t* got, std::string* error) {
  for (;;) {
    const RespReader::Result w = wait_readable(fd, deadline, error);
    if (w != RespReader::Result::kOk) return w;
    const ssize_t r = ::recv(fd, dst, n, MSG_DONTWAIT);
    if (r > 0) {
      *got = static_cast<size_t>(r);
      return RespReader::Result::kOk;
    }
    if (r == 0) {
      *error = "connection closed by the server";
      return RespReader::Result::kEof;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    *error = std::string("recv: ") + std::strerror(errno);
    return RespReader::Result::kIoError;
  }
}

// Parses a decimal integer (with an optional '-') of exactly `n` chars.
bool parse_int(const char* s, size_t n, long long* out) {
  if (n == 0 || n > 19) return false;
  bool neg = s[0] == '-';
  size_t i = neg ? 1 : 0;
  if (i == n) return false;
  long long v = 0;
  for (; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = neg ? -v : v;
  return true;
}

}  // namespace

RespReader::Result RespReader::fill(int fd, RedisClock::time_point deadline, std::string* error) {
  if (pos_ == end_) {
    pos_ = end_ = 0;
  } else if (end_ == buf_.size()) {
    if (pos_ == 0) {
      *error = "protocol: a reply line longer than " + std::to_string(buf_.size()) + " bytes";
      return Result::kProtocol;
    }
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  size_t got = 0;
  const Result r = recv_some(fd, deadline, buf_.data() + end_, buf_.size() - end_, &got, error);
  if (r == Result::kOk) end_ += got;
  return r;
}

RespReader::Result RespReader::recv_into(int fd, RedisClock::time_point deadline,
                                         unsigned char* dst, size_t n, std::string* error) {
  // What already arrived first, then straight from the socket.
  const size_t have = std::min(n, end_ - pos_);
  if (dst != nullptr && have > 0) std::memcpy(dst, buf_.data() + pos_, have);
  pos_ += have;
  size_t done = have;
  while (done < n) {
    size_t got = 0;
    Result r;
    if (dst != nullptr) {
      r = recv_some(fd, deadline, reinterpret_cast<char*>(dst) + done, n - done, &got, error);
    } else {  // discard through the buffer
      pos_ = end_ = 0;
      r = recv_some(fd, deadline, buf_.data(), std::min(n - done, buf_.size()), &got, error);
    }
    if (r != Result::kOk) return r;
    done += got;
  }
  return Result::kOk;
}

RespReader::Result RespReader::line(int fd, RedisClock::time_point deadline, size_t* start,
                                    size_t* length, std::string* error) {
  size_t scanned = pos_;
  for (;;) {
    for (size_t i = scanned; i + 1 < end_; ++i) {
      if (buf_[i] == '\r' && buf_[i + 1] == '\n') {
        *start = pos_;
        *length = i - pos_;
        pos_ = i + 2;
        return Result::kOk;
      }
    }
    const size_t offset = end_ > pos_ ? end_ - pos_ - 1 : 0;  // rescan the last byte (a lone '\r')
    const Result r = fill(fd, deadline, error);
    if (r != Result::kOk) return r;
    scanned = pos_ + offset;
  }
}

RespReader::Result RespReader::read(int fd, RedisClock::time_point deadline,
                                    const std::function<unsigned char*(const RedisReplyView&)>& where,
                                    std::string* error) {
  size_t start = 0, length = 0;
  Result r = line(fd, deadline, &start, &length, error);
  if (r != Result::kOk) return r;
  if (length == 0) {
    *error = "protocol: an empty reply line";
    return Result::kProtocol;
  }
  const char type = buf_[start];
  const char* body = buf_.data() + start + 1;
  const size_t body_len = length - 1;
  RedisReplyView v;
  switch (type) {
    case '+':
    case '-':
      v.kind = type == '+' ? RedisReplyView::kStatus : RedisReplyView::kError;
      v.data = body;
      v.size = body_len;
      where(v);
      return Result::kOk;
    case ':':
      if (!parse_int(body, body_len, &v.integer)) break;
      v.kind = RedisReplyView::kInteger;
      where(v);
      return Result::kOk;
    case '$': {
      long long n = 0;
      if (!parse_int(body, body_len, &n) || n < -1) break;
      if (n == -1) {
        v.kind = RedisReplyView::kNil;
        where(v);
        return Result::kOk;
      }
      v.kind = RedisReplyView::kString;
      v.size = static_cast<size_t>(n);
      unsigned char* dst = where(v);
      r = recv_into(fd, deadline, dst, v.size, error);
      if (r != Result::kOk) return r;
      size_t crlf_start = 0, crlf_len = 0;
      r = line(fd, deadline, &crlf_start, &crlf_len, error);
      if (r != Result::kOk) return r;
      if (crlf_len != 0) {
        *error = "protocol: a bulk string longer than its length";
        return Result::kProtocol;
      }
      return Result::kOk;
    }
    default:
      break;
  }
  *error = std::string("protocol: unexpected reply starting with '") +
           (type >= 32 && type < 127 ? std::string(1, type) : "\\x" + std::to_string(type & 0xff)) +
           "'";
  return Result::kProtocol;
}

}  // namespace kvc
