// XXH3-64 (seed 0) over bytes given in pieces (the hash of their
// concatenation), computed with the widest vector unit this CPU has: AVX2
// where the CPU reports it (x86-64), else the baseline the library is built
// for (SSE2 on x86-64, NEON or scalar elsewhere). The value is XXH3-64's, the
// same on every path (tests/cpp/test_xxh3_stream.cpp compares them); only
// the speed differs: about 1.7x on this project's dev VM for data in cache
// (bench/results/2026-11-28-disk-reads-vm-2cpu.md).
//
// Why: the system's libxxhash and xxhash.h's inline code are built for the
// baseline ISA, and every record a store returns is checksummed before it
// becomes KV (block_record.h), so the hash's speed bounds a disk hit's.
// The AVX2 code lives in its own translation unit (xxh3_stream_avx2.cpp,
// compiled with -mavx2 on x86-64 only, nothing else in it) and runs only on
// a CPU that has AVX2 (__builtin_cpu_supports, checked once).
#pragma once

#include <cstddef>
#include <cstdint>

// The build defines KVC_XXH3_AVX2 on x86-64 (CMakeLists.txt); the guard
// keeps the path out of any other target however it is configured.
#if defined(KVC_XXH3_AVX2) && (defined(__x86_64__) || defined(_M_X64))
#define KVC_XXH3_HAVE_AVX2 1
#else
#define KVC_XXH3_HAVE_AVX2 0
#endif

namespace kvc {

namespace xxh3_detail {
// One implementation of the streaming API over an opaque state.
struct Ops {
  void (*reset)(void* state);
  void (*update)(void* state, const void* data, size_t size);
  uint64_t (*digest)(const void* state);
};
// sizeof(XXH3_state_t) of xxHash 0.8 is 576; each implementation checks
// that its state fits.
constexpr size_t kStateBytes = 640;
constexpr size_t kStateAlign = 64;
extern const Ops kBaseline;
// Null where the library was not built with the AVX2 path (not x86-64).
extern const Ops* const kAvx2;
}  // namespace xxh3_detail

class Xxh3Stream {
 public:
  enum class Path : uint8_t { kBaseline, kAvx2 };
  // The path Xxh3Stream() takes: kAvx2 when built and the CPU has AVX2.
  static Path best();
  static bool available(Path path);
  static const char* name(Path path);

  // `path` must be available() (tests pick one; everything else takes best()).
  explicit Xxh3Stream(Path path = best());
  void update(const void* data, size_t size) { ops_->update(state_, data, size); }
  // Starts over (the hash of nothing so far), on the same path.
  void reset() { ops_->reset(state_); }
  // The hash of everything updated so far (the stream may go on).
  uint64_t digest() const { return ops_->digest(state_); }

 private:
  const xxh3_detail::Ops* ops_;
  alignas(xxh3_detail::kStateAlign) unsigned char state_[xxh3_detail::kStateBytes];
};

}  // namespace kvc
