#include "store/host_resolver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace kvc {

namespace {

bool numeric(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// What the lookup thread and the caller share; the last of them frees it.
struct Pending {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  Resolved result;
};

}  // namespace

std::string getaddrinfo_lookup(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    *error = gai_strerror(rc);
    return "";
  }
  std::string address;
  for (const addrinfo* a = list; a != nullptr && address.empty(); a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* at = nullptr;
    if (a->ai_family == AF_INET) at = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    if (a->ai_family == AF_INET6) at = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    if (at != nullptr && inet_ntop(a->ai_family, at, text, sizeof(text)) != nullptr) address = text;
  }
  freeaddrinfo(list);
  if (address.empty()) *error = "no IPv4 or IPv6 address";
  return address;
}

Resolved resolve_host(const std::string& host, std::chrono::milliseconds timeout,
                      const HostLookup& lookup) {
  if (numeric(host)) return Resolved{true, host, ""};
  auto pending = std::make_shared<Pending>();
  try {
    std::thread([pending, host, lookup] {
      Resolved r;
      r.address = lookup(host, &r.error);
      r.ok = !r.address.empty();
      std::lock_guard<std::mutex> lock(pending->mu);
      pending->result = std::move(r);
      pending->done = true;
      pending->done_cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    return Resolved{false, "", std::string("cannot start a lookup thread: ") + e.what()};
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  if (!pending->done_cv.wait_for(lock, timeout, [&] { return pending->done; }))
    return Resolved{false, "", "no answer from the name lookup within " +
                                   std::to_string(timeout.count()) + " ms"};
  return pending->result;
}

}  // namespace kvc
