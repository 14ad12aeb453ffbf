// Minimal checks for the simulator tests: print the failed expression with
// its values and exit non-zero (ctest reports the output).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#define SIM_CHECK(cond)                                                   \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)

#define SIM_CHECK_EQ(a, b)                                                      \
  do {                                                                          \
    auto va_ = (a);                                                             \
    auto vb_ = (b);                                                             \
    if (!(va_ == vb_)) {                                                        \
      std::ostringstream m_;                                                    \
      m_ << #a << " == " << #b << " (" << va_ << " vs " << vb_ << ")";          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,     \
                   m_.str().c_str());                                           \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
