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

static_assert(sizeof(XXH3_state_t) <= kStateBytes && alignof(XXH3_state_t) <= kStateAlign,
              "XXH3_state_t does not fit Xxh3Stream's state");

void reset(void* s) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(s)); }
void update(void* s, const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(s), data, size);
}
uint64_t digest(const void* s) { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(s)); }

const Ops kAvx2Ops{reset, update, digest};

}  // namespace

const Ops* const kAvx2 = &kAvx2Ops;

}  // namespace xxh3_detail
}  // namespace kvc

#endif  // KVC_XXH3_HAVE_AVX2
