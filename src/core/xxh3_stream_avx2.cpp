// Xxh3Stream's AVX2 path (xxh3_stream.h). CMakeLists.txt compiles this file
// with -mavx2 and defines KVC_XXH3_AVX2 for the library on x86-64 only; it
// includes nothing but xxhash.h (all static with XXH_INLINE_ALL), so no code
// built for AVX2 can be merged with, or called instead of, the baseline's.
#include "core/xxh3_stream.h"

#if KVC_XXH3_HAVE_AVX2

#if !defined(__AVX2__)
#error "xxh3_stream_avx2.cpp must be compiled with -mavx2"
#endif
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace kvc {
namespace xxh3_detail {
namespace {

#include "core/xxh3_ops.inc"

const Ops kAvx2Ops{reset, update, digest};

}  // namespace

const Ops* const kAvx2 = &kAvx2Ops;

}  // namespace xxh3_detail
}  // namespace kvc

#endif  // KVC_XXH3_HAVE_AVX2
