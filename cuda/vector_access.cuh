// Vector loads and stores of N bytes (1..16, a power of two) through the
// widest matching type, so a copy moves 16 bytes per instruction when the
// data allows it.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace kvc {

template <int N> struct VecOf;
template <> struct VecOf<16> { using type = uint4; };
template <> struct VecOf<8> { using type = uint2; };
template <> struct VecOf<4> { using type = uint32_t; };
template <> struct VecOf<2> { using type = uint16_t; };
template <> struct VecOf<1> { using type = uint8_t; };

// E elements of T in registers, loadable as whole vectors.
template <class T, int E>
union Pack {
  static constexpr int kBytes = int(sizeof(T)) * E;
  static constexpr int kChunk = kBytes >= 16 ? 16 : kBytes;
  static constexpr int kChunks = kBytes / kChunk;
  typename VecOf<kChunk>::type chunks[kChunks];
  T elems[E];
};

template <class T, int E>
__device__ __forceinline__ void load_pack(Pack<T, E>& p, const unsigned char* src) {
  using V = typename VecOf<Pack<T, E>::kChunk>::type;
#pragma unroll
  for (int c = 0; c < Pack<T, E>::kChunks; ++c) p.chunks[c] = reinterpret_cast<const V*>(src)[c];
}

template <class T, int E>
__device__ __forceinline__ void store_pack(const Pack<T, E>& p, unsigned char* dst) {
  using V = typename VecOf<Pack<T, E>::kChunk>::type;
#pragma unroll
  for (int c = 0; c < Pack<T, E>::kChunks; ++c) reinterpret_cast<V*>(dst)[c] = p.chunks[c];
}

// Largest power of two <= 16 dividing every value.
inline int common_alignment(std::initializer_list<uint64_t> values) {
  int w = 16;
  for (uint64_t v : values)
    while (w > 1 && v % uint64_t(w) != 0) w /= 2;
  return w;
}

}  // namespace kvc
