// A Redis server's address as the remote tier's config names it:
// redis://[user:password@]host[:port][/db]. Parsed once at create; every
// malformed part is refused with a message naming it. The password never
// appears in a message (display() masks it).
#pragma once

#include <cstdint>
#include <string>

namespace kvc {

struct RedisUrl {
  std::string user;      // empty: the default user (AUTH with the password alone)
  std::string password;  // empty: no AUTH
  bool has_password = false;
  std::string host;      // a name or an address; IPv6 without its brackets
  uint16_t port = 6379;
  uint32_t db = 0;       // SELECTed after connecting when not 0

  // The URL with the password replaced by "***", for messages.
  std::string display() const;
};

// Parses `text`; throws Error(KVC_ERR_INVALID_ARGUMENT) naming the part at
// fault (scheme, user info, host, port, database, trailing text). User and
// password may carry %XX escapes (for '@', ':' or '/' in a password).
RedisUrl parse_redis_url(const std::string& text);

}  // namespace kvc
