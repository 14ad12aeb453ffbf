// C++ face of the test redis-server (redis_server.h): started by the
// constructor, stopped by the destructor.
#pragma once

#include <string>

#include "redis_server.h"

namespace kvc_test {

class RedisServer {
 public:
  explicit RedisServer(const char* password = nullptr) {
    ok_ = kvc_test_redis_start(&r_, password) == 0;
  }
  ~RedisServer() { kvc_test_redis_stop(&r_); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return ok_; }
  std::string why() const { return r_.why; }
  std::string url() const { return r_.url; }
  int port() const { return r_.port; }
  int pid() const { return static_cast<int>(r_.pid); }
  bool kill() { return kvc_test_redis_kill(&r_) == 0; }
  bool restart() { return kvc_test_redis_restart(&r_) == 0; }
  bool pause() { return kvc_test_redis_pause(&r_) == 0; }
  bool resume() { return kvc_test_redis_resume(&r_) == 0; }
  // The first line of the reply to an inline command ("" when none came).
  std::string command(const std::string& line) {
    char out[1024] = "";
    if (kvc_test_redis_command(&r_, line.c_str(), out, sizeof out) != 0) return "";
    return out;
  }

 private:
  kvc_test_redis r_{};
  bool ok_ = false;
};

}  // namespace kvc_test
