#include "core/xxh3_stream.h"

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace kvc {

namespace xxh3_detail {
namespace {

#include "core/xxh3_ops.inc"

}  // namespace

const Ops kBaseline{reset, update, digest};

#if !KVC_XXH3_HAVE_AVX2
const Ops* const kAvx2 = nullptr;
#endif

}  // namespace xxh3_detail

namespace {

bool cpu_has_avx2() {
#if KVC_XXH3_HAVE_AVX2 && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

}  // namespace

bool Xxh3Stream::available(Path path) {
  if (path == Path::kBaseline) return true;
  static const bool avx2 = xxh3_detail::kAvx2 != nullptr && cpu_has_avx2();
  return avx2;
}

Xxh3Stream::Path Xxh3Stream::best() {
  static const Path p = available(Path::kAvx2) ? Path::kAvx2 : Path::kBaseline;
  return p;
}

const char* Xxh3Stream::name(Path path) {
  return path == Path::kAvx2 ? "avx2" : "baseline";
}

Xxh3Stream::Xxh3Stream(Path path)
    : ops_(path == Path::kAvx2 && available(path) ? xxh3_detail::kAvx2 : &xxh3_detail::kBaseline) {
  ops_->reset(state_);
}

}  // namespace kvc
