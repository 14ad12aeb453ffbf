// The Redis client layer of the remote tier (src/store/redis_*): URL
// parsing, connecting (precise refusals), pipelined chain lookups, the
// write worker, the byte budget, and faults (killed, paused, restarted
// server) against a real redis-server on loopback.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "redis_fixture.h"
#include "store/redis_client.h"
#include "store/redis_url.h"

using kvc::RedisClient;
using kvc::RedisClientOptions;
using kvc::RedisUrl;
using std::chrono::milliseconds;

namespace {

// The message of the Error `f` throws, with its status.
template <class F>
std::pair<kvc_status_t, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const kvc::Error& e) {
    return {e.status(), e.what()};
  }
  return {KVC_OK, ""};
}

std::string url_error(const std::string& text) {
  return error_of([&] { kvc::parse_redis_url(text); }).second;
}

RedisClientOptions options_for(const std::string& url) {
  RedisClientOptions o;
  o.url = kvc::parse_redis_url(url);
  o.connect_timeout = milliseconds(2000);
  o.command_timeout = milliseconds(2000);
  o.byte_budget = 1ull << 30;
  o.backoff_min = milliseconds(5);
  o.backoff_max = milliseconds(50);
  return o;
}

// A value with bytes of every kind (zeros, CR LF) that depend on `seed`.
std::string value_of(int seed, size_t n) {
  std::string v(n, '\0');
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) % 256);
  return v;
}

// Looks up keys and returns the values the chain accepted.
std::vector<std::string> chain(RedisClient& c, const std::vector<std::string>& keys,
                               size_t chunk) {
  std::vector<std::string> got(keys.size());
  const size_t n = c.get_chain(keys.data(), keys.size(), chunk, [&](size_t i, size_t size) {
    got[i].resize(size);
    return reinterpret_cast<unsigned char*>(&got[i][0]);
  });
  got.resize(n);
  return got;
}

// A server on loopback that answers PING like Redis and every other
// command with `garbage`: a broken proxy or a foreign service on the port.
class GarbageServer {
 public:
  explicit GarbageServer(std::string garbage) : garbage_(std::move(garbage)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listen_, 8), 0);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~GarbageServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }

 private:
  void serve() {
    std::vector<pollfd> fds = {{listen_, POLLIN, 0}};
    while (!stop_) {
      if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!(fds[i].revents & POLLIN)) continue;
        if (i == 0) {
          fds.push_back({::accept(listen_, nullptr, nullptr), POLLIN, 0});
          continue;
        }
        char buf[4096];
        const ssize_t n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;  // poll ignores it
          continue;
        }
        const std::string got(buf, size_t(n));
        const std::string reply = got.find("PING") != std::string::npos ? "+PONG\r\n" : garbage_;
        (void)!::write(fds[i].fd, reply.data(), reply.size());
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].fd >= 0) ::close(fds[i].fd);
    }
  }

  std::string garbage_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST(RedisClientGarbage, AServerAnsweringGarbageGivesMissesAndErrorsNeverBytes) {
  if (!kvc::redis_built()) GTEST_SKIP() << kvc::kRedisUnavailableMessage;
  for (const std::string& garbage :
       {std::string("%%% not redis\r\n"), std::string("$4\r\nabcdEXTRA\r\n"),
        std::string("*1\r\n$1\r\nx\r\n")}) {
    GarbageServer server(garbage);
    RedisClientOptions o = options_for(server.url());
    o.command_timeout = milliseconds(500);
    RedisClient c(o);
    bool called = false;
    const std::vector<std::string> keys = {"k0", "k1"};
    std::string sink(16, '\0');
    const size_t n = c.get_chain(keys.data(), keys.size(), 2, [&](size_t, size_t) {
      called = true;
      return reinterpret_cast<unsigned char*>(&sink[0]);
    });
    EXPECT_EQ(n, 0u) << garbage;
    const auto k = c.counters();
    EXPECT_EQ(k.hits, 0u);
    EXPECT_GE(k.errors, 1u);
    EXPECT_FALSE(k.connected);
    (void)called;  // "$4\r\nabcd..." hands a destination, then fails at its end
  }
}

TEST(RedisUrl, ParsesEveryPart) {
  RedisUrl u = kvc::parse_redis_url("redis://alice:s%40cr%3At@cache.local:6380/3");
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "s@cr:t");
  EXPECT_TRUE(u.has_password);
  EXPECT_EQ(u.host, "cache.local");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 3u);
  EXPECT_EQ(u.display(), "redis://alice:***@cache.local:6380/3");

  u = kvc::parse_redis_url("redis://:pw@127.0.0.1:7000/0");
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "pw");
  u = kvc::parse_redis_url("redis://localhost");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0u);
  EXPECT_FALSE(u.has_password);
  u = kvc::parse_redis_url("redis://[::1]:7001/2");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7001);
  EXPECT_EQ(u.display(), "redis://[::1]:7001/2");
}

TEST(RedisUrl, RefusesMalformedUrlsNamingThePart) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"http://h:1/0", "the scheme must be redis://"},
      {"rediss://h:1/0", "TLS (rediss://) is not supported"},
      {"unix:///tmp/redis.sock", "Unix sockets"},
      {"redis://", "the host is empty"},
      {"redis://:1/0", "the host is empty"},
      {"redis://h:/0", "the port after ':' is empty"},
      {"redis://h:port/0", "the port \"port\" is not a number in 1..65535"},
      {"redis://h:0/0", "the port 0 is not in 1..65535"},
      {"redis://h:65536/0", "the port 65536 is not in 1..65535"},
      {"redis://h:1/", "the database after '/' is empty"},
      {"redis://h:1/x", "the database \"x\" is not a number"},
      {"redis://h:1/-1", "the database \"-1\" is not a number"},
      {"redis://h:1/0?timeout=1", "query or fragment"},
      {"redis://alice@h:1/0", "the user info has no password"},
      {"redis://alice:@h:1/0", "the password is empty"},
      {"redis://u:p%zz@h:1/0", "the password has a '%' not followed by two hex digits"},
      {"redis://[::1:1/0", "no closing ']'"},
      {"redis://h h:1/0", "the host has a ' '"},
  };
  for (const Case& c : cases) {
    const auto [status, message] = error_of([&] { kvc::parse_redis_url(c.url); });
    EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT) << c.url;
    EXPECT_NE(message.find(c.says), std::string::npos) << c.url << " -> " << message;
    EXPECT_NE(message.find("expected redis://[user:password@]host:port/db"), std::string::npos);
  }
  // The password never shows in a message.
  EXPECT_EQ(url_error("redis://u:hunter2@h:99999/0").find("hunter2"), std::string::npos);
}

TEST(RedisClientConnect, UnreachableServerIsAPreciseDeviceError) {
  if (!kvc::redis_built()) GTEST_SKIP() << kvc::kRedisUnavailableMessage;
  // A port nothing listens on: a server started and killed.
  const char* why = nullptr;
  if (kvc_test_redis_binary(&why) == nullptr) GTEST_SKIP() << why;
  int port;
  {
    kvc_test::RedisServer s;
    if (!s.ok()) GTEST_SKIP() << s.why();
    port = s.port();
  }
  const std::string url = "redis://127.0.0.1:" + std::to_string(port) + "/0";
  const auto [status, message] = error_of([&] { RedisClient c(options_for(url)); });
  EXPECT_EQ(status, KVC_ERR_DEVICE);
  EXPECT_NE(message.find("remote tier " + url + ": cannot connect within 2000 ms"),
            std::string::npos)
      << message;
}

class RedisClientTest : public RedisTest {};

class RedisClientAuthTest : public RedisTest {
 protected:
  const char* password() const override { return "s3cret"; }
};

TEST_F(RedisClientAuthTest, WrongOrMissingPasswordIsRefusedPrecisely) {
  const std::string base = "127.0.0.1:" + std::to_string(server().port()) + "/0";
  auto [status, message] = error_of([&] { RedisClient c(options_for("redis://:nope@" + base)); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("remote tier redis://:***@" + base + ": AUTH refused: WRONGPASS"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("nope"), std::string::npos);

  std::tie(status, message) = error_of([&] { RedisClient c(options_for("redis://" + base)); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("PING refused: NOAUTH"), std::string::npos) << message;
  EXPECT_NE(message.find("give the password in the URL"), std::string::npos) << message;

  RedisClient ok(options_for(server().url()));
  EXPECT_TRUE(ok.counters().connected);
}

TEST_F(RedisClientTest, SelectOfAMissingDatabaseIsRefused) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(server().port()) + "/99";
  const auto [status, message] = error_of([&] { RedisClient c(options_for(url)); });
  EXPECT_EQ(status, KVC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("SELECT 99 refused"), std::string::npos) << message;
}

TEST_F(RedisClientTest, ChainLookupIsPipelinedPerChunkAndStopsAtTheFirstMiss) {
  RedisClient c(options_for(server().url()));
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back("t:k" + std::to_string(i));
    if (i != 6) {
      ASSERT_TRUE(c.put(keys.back(), value_of(i, 1000 + i), 35));
    }
  }
  ASSERT_TRUE(c.flush(milliseconds(10000)));
  EXPECT_EQ(c.counters().stores, 9u);

  // 10 keys, 4 per round trip, the 7th absent: two round trips, 6 values.
  std::vector<std::string> got = chain(c, keys, 4);
  ASSERT_EQ(got.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i], value_of(i, 1000 + i)) << i;
  auto k = c.counters();
  EXPECT_EQ(k.lookups, 1u);
  EXPECT_EQ(k.lookup_round_trips, 2u);
  EXPECT_EQ(k.hits, 6u);
  EXPECT_EQ(k.misses, 1u);  // the absent key that ended the chain

  // All present: ceil(6 / 4) round trips.
  got = chain(c, std::vector<std::string>(keys.begin(), keys.begin() + 6), 4);
  EXPECT_EQ(got.size(), 6u);
  EXPECT_EQ(c.counters().lookup_round_trips, 4u);

  // A value the caller refuses ends the chain there and is counted.
  std::string scratch(4096, '\0');
  size_t n = c.get_chain(keys.data(), 6, 16, [&](size_t i, size_t) -> unsigned char* {
    return i < 3 ? reinterpret_cast<unsigned char*>(&scratch[0]) : nullptr;
  });
  EXPECT_EQ(n, 3u);
  k = c.counters();
  EXPECT_EQ(k.refused, 1u);
  EXPECT_EQ(k.errors, 0u);
}

TEST_F(RedisClientTest, ByteBudgetUnlinksTheLowestPriorityThenOldestOwnWrites) {
  RedisClientOptions o = options_for(server().url());
  o.byte_budget = 3 * 100;
  RedisClient c(o);
  // Priorities 50, 10, 50: a fourth key pushes out the priority 10 one,
  // a fifth the oldest of priority 50.
  const uint32_t priority[] = {50, 10, 50, 50, 50};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.put("q:" + std::to_string(i), value_of(i, 100), priority[i]));
    c.flush();
  }
  EXPECT_EQ(c.counters().deletes, 2u);
  EXPECT_EQ(server().command("EXISTS q:0"), ":0");
  EXPECT_EQ(server().command("EXISTS q:1"), ":0");
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(server().command("EXISTS q:" + std::to_string(i)), ":1") << i;
  }
}

TEST_F(RedisClientTest, ByteBudgetUnlinksTheOldestOwnWritesAndHitsRefreshThem) {
  RedisClientOptions o = options_for(server().url());
  o.byte_budget = 3 * 100;
  RedisClient c(o);
  std::vector<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    keys.push_back("b:" + std::to_string(i));
    ASSERT_TRUE(c.put(keys.back(), value_of(i, 100), 35));
  }
  ASSERT_TRUE(c.flush(milliseconds(10000)));
  // A hit on b:0 makes it the newest of this client's keys.
  ASSERT_EQ(chain(c, {keys[0]}, 1).size(), 1u);
  for (int i = 3; i < 5; ++i) {
    keys.push_back("b:" + std::to_string(i));
    ASSERT_TRUE(c.put(keys.back(), value_of(i, 100), 35));
    ASSERT_TRUE(c.flush(milliseconds(10000)));
  }
  const auto k = c.counters();
  EXPECT_EQ(k.owned_keys, 3u);
  EXPECT_EQ(k.owned_bytes, 300u);
  EXPECT_EQ(k.deletes, 2u);
  EXPECT_EQ(server().command("EXISTS b:0"), ":1");
  EXPECT_EQ(server().command("EXISTS b:1"), ":0");
  EXPECT_EQ(server().command("EXISTS b:2"), ":0");
  EXPECT_EQ(server().command("EXISTS b:3"), ":1");
  EXPECT_EQ(server().command("EXISTS b:4"), ":1");
}

TEST_F(RedisClientTest, KilledServerGivesMissesThenTheClientReconnects) {
  RedisClient c(options_for(server().url()));
  const std::vector<std::string> keys = {"r:0", "r:1"};
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(c.put(keys[i], value_of(int(i), 64), 35));
  ASSERT_TRUE(c.flush(milliseconds(10000)));
  ASSERT_EQ(chain(c, keys, 8).size(), 2u);

  ASSERT_TRUE(server().kill());
  // The lookup that meets the dead connection fails and counts an error;
  // later ones miss at once while the worker backs off.
  EXPECT_EQ(chain(c, keys, 8).size(), 0u);
  EXPECT_EQ(chain(c, keys, 8).size(), 0u);
  auto k = c.counters();
  EXPECT_GE(k.errors, 1u);
  EXPECT_FALSE(k.connected);
  EXPECT_FALSE(c.put("r:2", "x", 35));  // dropped while down
  EXPECT_GE(c.counters().drops, 1u);
  c.flush();  // returns: nothing queued survives a down server

  // Restarted without persistence: connected again, the old keys are gone.
  ASSERT_TRUE(server().restart()) << server().why();
  ASSERT_TRUE(c.wait_connected(milliseconds(20000)));
  EXPECT_GE(c.counters().reconnects, 1u);
  EXPECT_EQ(chain(c, keys, 8).size(), 0u);
  ASSERT_TRUE(c.put(keys[0], value_of(7, 64), 35));
  ASSERT_TRUE(c.flush(milliseconds(10000)));
  const std::vector<std::string> got = chain(c, keys, 8);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], value_of(7, 64));
}

TEST_F(RedisClientTest, PausedServerEndsALookupAtTheTimeoutAndDropsWritesWhenFull) {
  RedisClientOptions o = options_for(server().url());
  o.command_timeout = milliseconds(200);
  o.queue_bytes = 2 * 64;
  o.write_batch_bytes = 64;
  RedisClient c(o);
  const std::vector<std::string> keys = {"p:0"};
  ASSERT_TRUE(c.put(keys[0], value_of(1, 64), 35));
  ASSERT_TRUE(c.flush(milliseconds(10000)));

  ASSERT_TRUE(server().pause());
  // No answer: the lookup gives up at its deadline, a miss and an error.
  EXPECT_EQ(chain(c, keys, 1).size(), 0u);
  EXPECT_GE(c.counters().errors, 1u);
  // Writes: the queue holds two values; later ones are dropped.
  for (int i = 0; i < 10; ++i) c.put("p:w" + std::to_string(i), value_of(i, 64), 35);
  EXPECT_GE(c.counters().drops, 1u);

  ASSERT_TRUE(server().resume());
  ASSERT_TRUE(c.wait_connected(milliseconds(20000)));
  const std::vector<std::string> got = chain(c, keys, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], value_of(1, 64));
}
