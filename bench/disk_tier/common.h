// What the two parts of bench_disk_tier share (bench_disk_tier.cpp: the
// usage, the serving path and main; throughput.cpp: part 1): the clock,
// scratch directories, and the median and range of a repetition's samples.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace kvc_disk_bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::string make_dir(const std::string& base) {
  std::string t = base + "/kvc-bench-disk-XXXXXX";
  std::vector<char> b(t.begin(), t.end());
  b.push_back('\0');
  if (::mkdtemp(b.data()) == nullptr) {
    std::perror("mkdtemp");
    std::exit(1);
  }
  return b.data();
}

inline void remove_dir(const std::string& dir) {
  const std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
}

inline void must(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

struct Stat {
  double median = 0, lo = 0, hi = 0;
};
inline Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Part 1 (throughput.cpp): the disk store's write and read throughput
// against plain I/O of the same bytes, one table row per block size.
void throughput(const std::string& base, int reps);

}  // namespace kvc_disk_bench
