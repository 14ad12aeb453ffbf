// RespReader (src/store/redis_reply_reader.h) on crafted byte streams
// through a socket pair: every reply kind, values with CR LF inside, bulk
// strings read into the caller's memory or discarded, lines split across
// reads by a tiny buffer, and garbage, short values and silence refused
// with the right result.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "store/redis_reply_reader.h"

namespace kvc {
namespace {

using Result = RespReader::Result;

class Pair {
 public:
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd_), 0); }
  ~Pair() {
    ::close(fd_[0]);
    if (fd_[1] >= 0) ::close(fd_[1]);
  }
  void send(const std::string& bytes) {
    ASSERT_EQ(::write(fd_[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
  }
  void close_writer() {
    ::close(fd_[1]);
    fd_[1] = -1;
  }
  int reader() const { return fd_[0]; }

 private:
  int fd_[2] = {-1, -1};
};

struct Got {
  RedisReplyView::Kind kind = RedisReplyView::kOther;
  std::string text;  // status/error line, or the bulk string's bytes
  long long integer = 0;
};

// Reads one reply; bulk strings go into a fresh string (or are discarded).
Result read_one(RespReader& r, int fd, Got* got, bool discard = false,
                std::chrono::milliseconds wait = std::chrono::milliseconds(5000)) {
  std::string error;
  return r.read(
      fd, RedisClock::now() + wait,
      [&](const RedisReplyView& v) -> unsigned char* {
        got->kind = v.kind;
        got->integer = v.integer;
        if (v.kind == RedisReplyView::kStatus || v.kind == RedisReplyView::kError) {
          got->text.assign(v.data, v.size);
        }
        if (v.kind != RedisReplyView::kString || discard) return nullptr;
        got->text.assign(v.size, '?');
        return reinterpret_cast<unsigned char*>(&got->text[0]);
      },
      &error);
}

TEST(RespReader, ReadsEveryFlatReplyKindWithATinyBuffer) {
  for (size_t buffer : {size_t(10), size_t(11), size_t(16), size_t(65536)}) {
    Pair p;
    const std::string value("a\r\nb\0c\r\n", 8);
    p.send("+OK\r\n-ERR no\r\n:-42\r\n$-1\r\n$8\r\n" + value + "\r\n$0\r\n\r\n$3\r\nxyz\r\n:7\r\n");
    RespReader r(buffer);
    Got g;
    ASSERT_EQ(read_one(r, p.reader(), &g), Result::kOk) << buffer;
    EXPECT_EQ(g.kind, RedisReplyView::kStatus);
    EXPECT_EQ(g.text, "OK");
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kError);
    EXPECT_EQ(g.text, "ERR no");
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kInteger);
    EXPECT_EQ(g.integer, -42);
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kNil);
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kString);
    EXPECT_EQ(g.text, value);
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kString);
    EXPECT_EQ(g.text, "");
    // Discarded, and the stream stays in step.
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{}), true), Result::kOk);
    EXPECT_EQ(g.kind, RedisReplyView::kString);
    ASSERT_EQ(read_one(r, p.reader(), &(g = Got{})), Result::kOk);
    EXPECT_EQ(g.integer, 7);
    EXPECT_EQ(r.buffered(), 0u);
  }
}

TEST(RespReader, LargeValueArrivesStraightIntoTheCallersMemory) {
  Pair p;
  std::string value(200000, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = char(i * 7);
  RespReader r(1024);
  Got g;
  // Written from another thread: the socket pair's buffer is smaller.
  std::thread writer([&] { p.send("$200000\r\n" + value + "\r\n"); });
  ASSERT_EQ(read_one(r, p.reader(), &g), Result::kOk);
  writer.join();
  EXPECT_EQ(g.text, value);
}

TEST(RespReader, GarbageShortValuesAndSilenceAreRefused) {
  struct Case {
    std::string bytes;
    Result want;
  } cases[] = {
      {"hello\r\n", Result::kProtocol},
      {"*2\r\n$1\r\na\r\n$1\r\nb\r\n", Result::kProtocol},
      {"$5\r\nhelloX\r\n", Result::kProtocol},
      {"$abc\r\n", Result::kProtocol},
      {"$-2\r\n", Result::kProtocol},
      {":12x\r\n", Result::kProtocol},
      {"\r\n", Result::kProtocol},
      {std::string(100, '+'), Result::kProtocol},  // a line past the buffer
      {"$10\r\nshort", Result::kEof},
      {"+OK", Result::kEof},
  };
  for (const Case& c : cases) {
    Pair p;
    p.send(c.bytes);
    p.close_writer();
    RespReader r(64);
    Got g;
    EXPECT_EQ(read_one(r, p.reader(), &g), c.want) << c.bytes;
  }
  Pair silent;
  RespReader r;
  Got g;
  EXPECT_EQ(read_one(r, silent.reader(), &g, false, std::chrono::milliseconds(20)),
            Result::kTimeout);
}

}  // namespace
}  // namespace kvc
