// GoogleTest fixture for the remote tier's tests: a real redis-server
// (tests/support/redis_server.h) per test, or a skip that says why (no
// hiredis in this build, no redis-server binary, it would not start).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "redis_server.hpp"
#include "store/redis_connection.h"

class RedisTest : public ::testing::Test {
 protected:
  // The password the server requires ("" : none).
  virtual const char* password() const { return nullptr; }

  void SetUp() override {
    if (!kvc::redis_built()) {
      GTEST_SKIP() << kvc::kRedisUnavailableMessage;
    }
    const char* why = nullptr;
    if (kvc_test_redis_binary(&why) == nullptr) GTEST_SKIP() << why;
    server_ = std::make_unique<kvc_test::RedisServer>(password());
    if (!server_->ok()) GTEST_SKIP() << "redis-server did not start: " << server_->why();
  }

  kvc_test::RedisServer& server() { return *server_; }

 private:
  std::unique_ptr<kvc_test::RedisServer> server_;
};
