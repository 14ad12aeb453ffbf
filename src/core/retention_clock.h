// The clock retention durations are measured on: the monotonic clock, or a
// manual one that only advance() moves (tests check expiry without sleeping).
#pragma once

#include <chrono>
#include <cstdint>

namespace kvc {

class RetentionClock {
 public:
  explicit RetentionClock(bool manual) : manual_(manual), start_(std::chrono::steady_clock::now()) {}

  bool manual() const { return manual_; }
  // Milliseconds since the cache was created.
  uint64_t now_ms() const {
    if (manual_) return manual_ms_;
    return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count());
  }
  // Manual clock only.
  void advance(uint64_t ms) { manual_ms_ += ms; }

 private:
  bool manual_;
  std::chrono::steady_clock::time_point start_;
  uint64_t manual_ms_ = 0;
};

}  // namespace kvc
