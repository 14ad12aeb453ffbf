// Name resolution with a deadline, for the remote tier's connections.
// getaddrinfo has no timeout of its own (a slow or unreachable DNS server
// holds it for many seconds), and hiredis calls it for the URL's host. So
// the host is resolved here first, on a thread of its own that the caller
// stops waiting for at the deadline (the thread finishes in the background
// and frees what it shares), and hiredis is given the numeric address,
// which it parses without a lookup. A host already numeric (IPv4 or IPv6)
// is passed through.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace kvc {

// The lookup itself: the numeric address of `host` for TCP, or "" with
// *error set. getaddrinfo by default; tests pass one of their own.
using HostLookup = std::function<std::string(const std::string& host, std::string* error)>;
std::string getaddrinfo_lookup(const std::string& host, std::string* error);

struct Resolved {
  bool ok = false;
  std::string address;  // numeric (ok)
  std::string error;    // why not (!ok): the lookup's words, or the deadline
};

// Resolves `host` within `timeout` (a numeric host at once, without a lookup).
Resolved resolve_host(const std::string& host, std::chrono::milliseconds timeout,
                      const HostLookup& lookup = getaddrinfo_lookup);

}  // namespace kvc
