// parse_redis_url: a small hand parser; std::regex would accept less
// precisely and say less about what is wrong.
#include "store/redis_url.h"

#include <cctype>
#include <cstdlib>

#include "base/error.h"

namespace kvc {

namespace {

[[noreturn]] void bad_url(const std::string& text, const std::string& why) {
  // The password may be in `text`: name the URL only by what is safe.
  std::string shown = text;
  const size_t scheme_end = shown.find("://");
  const size_t at = shown.rfind('@');
  if (scheme_end != std::string::npos && at != std::string::npos && at > scheme_end) {
    shown = shown.substr(0, scheme_end + 3) + "***@" + shown.substr(at + 1);
  }
  invalid_argument("remote tier URL \"" + shown + "\": " + why +
                   " (expected redis://[user:password@]host:port/db)");
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(const std::string& text, const std::string& part,
                           const std::string& url) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int hi = i + 1 < text.size() ? hex_value(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) bad_url(url, "the " + part + " has a '%' not followed by two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

RedisUrl parse_redis_url(const std::string& text) {
  RedisUrl url;
  const std::string scheme = "redis://";
  if (text.compare(0, scheme.size(), scheme) != 0) {
    if (text.compare(0, 9, "rediss://") == 0) {
      bad_url(text, "TLS (rediss://) is not supported; use redis:// on a trusted network");
    }
    if (text.compare(0, 7, "unix://") == 0) {
      bad_url(text, "Unix sockets (unix://) are not supported; use redis://host:port");
    }
    bad_url(text, "the scheme must be redis://");
  }
  std::string rest = text.substr(scheme.size());
  if (rest.find_first_of("?#") != std::string::npos) {
    bad_url(text, "query or fragment ('?', '#') is not supported");
  }
  // The path: "/db" or nothing.
  std::string path;
  const size_t slash = rest.find('/', rest.rfind('@') == std::string::npos ? 0 : rest.rfind('@'));
  std::string authority = rest;
  if (slash != std::string::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  // User info.
  const size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    const std::string info = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = info.find(':');
    if (colon == std::string::npos) {
      bad_url(text, "the user info has no password (write user:password@ or :password@)");
    }
    url.user = percent_decode(info.substr(0, colon), "user", text);
    url.password = percent_decode(info.substr(colon + 1), "password", text);
    if (url.password.empty()) bad_url(text, "the password is empty");
    url.has_password = true;
  }
  // Host and port.
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) bad_url(text, "the IPv6 host has no closing ']'");
    url.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad_url(text, "text after the IPv6 host must be ':port'");
      port_text = after.substr(1);
      if (port_text.empty()) bad_url(text, "the port after ':' is empty");
    }
  } else {
    const size_t colon = authority.find(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) bad_url(text, "the port after ':' is empty");
    }
  }
  if (url.host.empty()) bad_url(text, "the host is empty");
  for (char c : url.host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '@' || c == '/' ||
        (c == ':' && authority[0] != '[')) {
      bad_url(text, std::string("the host has a '") + c + "'");
    }
  }
  if (!port_text.empty()) {
    if (!all_digits(port_text) || port_text.size() > 5) {
      bad_url(text, "the port \"" + port_text + "\" is not a number in 1..65535");
    }
    const unsigned long port = std::strtoul(port_text.c_str(), nullptr, 10);
    if (port < 1 || port > 65535) {
      bad_url(text, "the port " + port_text + " is not in 1..65535");
    }
    url.port = static_cast<uint16_t>(port);
  }
  // Database.
  if (slash != std::string::npos) {
    if (path.empty()) bad_url(text, "the database after '/' is empty");
    if (!all_digits(path) || path.size() > 9) {
      bad_url(text, "the database \"" + path + "\" is not a number in 0..999999999");
    }
    url.db = static_cast<uint32_t>(std::strtoul(path.c_str(), nullptr, 10));
  }
  return url;
}

std::string RedisUrl::display() const {
  std::string out = "redis://";
  if (has_password) out += user + ":***@";
  const bool v6 = host.find(':') != std::string::npos;
  out += v6 ? "[" + host + "]" : host;
  out += ":" + std::to_string(port) + "/" + std::to_string(db);
  return out;
}

}  // namespace kvc
