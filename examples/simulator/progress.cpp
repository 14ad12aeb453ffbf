#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace sim {

Progress::Progress(bool wanted, std::string label)
    : enabled_(wanted && isatty(STDERR_FILENO)), label_(std::move(label)) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done, uint64_t total, double simulated_s, double hit_rate) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double share = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(share * kWidth);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  std::fprintf(stderr, "\r%-10s [%s] %5.1f%%  %llu/%llu requests  sim %.0f s  hit rate %.1f%%  ",
               label_.c_str(), bar, 100.0 * share, static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total), simulated_s, 100.0 * hit_rate);
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");  // erase the line: the table follows
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace sim
