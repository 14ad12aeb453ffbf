// The remote tier's name lookup with a deadline (src/store/host_resolver.h):
// numeric hosts pass through without a lookup, a name resolves, a failed
// lookup says why, and a lookup that does not answer ends at the deadline
// while it is still blocked (a fake lookup held on a latch: no timing).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "store/host_resolver.h"

namespace kvc {
namespace {

using std::chrono::milliseconds;

TEST(HostResolver, NumericHostsNeedNoLookup) {
  int lookups = 0;
  const HostLookup count = [&](const std::string&, std::string*) {
    ++lookups;
    return std::string("10.0.0.1");
  };
  for (const char* host : {"127.0.0.1", "::1", "2001:db8::7"}) {
    const Resolved r = resolve_host(host, milliseconds(1000), count);
    EXPECT_TRUE(r.ok) << host;
    EXPECT_EQ(r.address, host);
  }
  EXPECT_EQ(lookups, 0);
}

TEST(HostResolver, LocalhostResolvesThroughGetaddrinfo) {
  const Resolved r = resolve_host("localhost", milliseconds(10000));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.address == "127.0.0.1" || r.address == "::1") << r.address;
}

TEST(HostResolver, AFailedLookupSaysWhy) {
  const Resolved r = resolve_host("no-such-host.invalid", milliseconds(10000));
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.error.empty());
  const Resolved fake = resolve_host("x", milliseconds(10000), [](const std::string&, std::string* e) {
    *e = "Name or service not known";
    return std::string();
  });
  EXPECT_FALSE(fake.ok);
  EXPECT_EQ(fake.error, "Name or service not known");
}

// The lookup is held until the caller has its answer: the only way the call
// can return is the deadline.
TEST(HostResolver, ALookupThatDoesNotAnswerEndsAtTheDeadline) {
  struct Latch {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    bool finished = false;
  };
  auto latch = std::make_shared<Latch>();
  const HostLookup blocked = [latch](const std::string&, std::string*) {
    std::unique_lock<std::mutex> lock(latch->mu);
    latch->cv.wait(lock, [&] { return latch->open; });
    latch->finished = true;
    latch->cv.notify_all();
    return std::string("10.0.0.1");
  };
  const Resolved r = resolve_host("slow.example", milliseconds(20), blocked);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "no answer from the name lookup within 20 ms");
  // Let the abandoned lookup finish before the test ends (it shares only
  // what it owns a reference to).
  std::unique_lock<std::mutex> lock(latch->mu);
  latch->open = true;
  latch->cv.notify_all();
  latch->cv.wait(lock, [&] { return latch->finished; });
}

}  // namespace
}  // namespace kvc
