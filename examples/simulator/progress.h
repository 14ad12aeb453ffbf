// A one-line progress bar on stderr, drawn only when stderr is a terminal,
// so that logs and pipes (and ctest) get no control characters.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sim {

class Progress {
 public:
  Progress(bool wanted, std::string label);
  ~Progress();
  bool enabled() const { return enabled_; }
  // Redraws at most ten times a second.
  void update(uint64_t done, uint64_t total, double simulated_s, double hit_rate);
  void finish();

 private:
  bool enabled_;
  std::string label_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace sim
