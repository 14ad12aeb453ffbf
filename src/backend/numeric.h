// Host-side conversions between f32 and the stored element types (f16,
// bf16, fp8-e4m3), bit-exact with the CUDA intrinsics the kernels use
// (__float2half_rn, __float2bfloat16_rn, __nv_cvt_float_to_fp8 with
// __NV_SATFINITE): round to nearest even, fp8 saturating to +-448.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kvcache/config.h"

namespace kvc {

inline uint32_t f32_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

inline float f32_from_bits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    const float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000 | (mant << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return uint16_t(sign | 0x7e00);  // NaN
  if (ax >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to inf (>= 65520)
  if (ax < 0x38800000) {
    // Below the smallest normal (2^-14): a multiple of 2^-24. Scaling by a
    // power of two is exact, so nearbyint rounds to nearest even correctly.
    const float scaled = f32_from_bits(ax) * 16777216.0f;
    return uint16_t(sign | uint16_t(std::nearbyint(scaled)));
  }
  uint32_t h = ((((ax >> 23) - 112) << 10) | ((ax & 0x7fffff) >> 13));
  const uint32_t rest = ax & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into inf: correct
  return uint16_t(sign | h);
}

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

inline float fp8e4m3_to_f32(uint8_t v) {
  const bool neg = (v & 0x80) != 0;
  const uint32_t exp = (v >> 3) & 0xf;
  const uint32_t mant = v & 0x7;
  float r;
  if (exp == 0xf && mant == 0x7) {
    r = std::nanf("");
  } else if (exp == 0) {
    r = std::ldexp(float(mant), -9);
  } else {
    r = std::ldexp(float(8 + mant), int(exp) - 10);
  }
  return neg ? -r : r;
}

inline uint8_t f32_to_fp8e4m3(float f) {
  const uint8_t sign = (f32_bits(f) >> 24) & 0x80;
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  if (a >= 448.0f) return uint8_t(sign | 0x7e);  // saturate (satfinite)
  if (a < 0.015625f) {
    // Subnormal range (< 2^-6): a multiple of 2^-9; 8 * 2^-9 is the
    // smallest normal, which the code 0x08 also encodes.
    return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));
  }
  int e2 = 0;
  const float frac = std::frexp(a, &e2);  // a = frac * 2^e2, frac in [0.5, 1)
  int e = e2 - 1;                          // a = s * 2^e, s in [1, 2)
  uint32_t mant = uint32_t(std::nearbyint((frac * 2.0f - 1.0f) * 8.0f));
  if (mant == 8) {
    mant = 0;
    ++e;
  }
  const uint32_t code = (uint32_t(e + 7) << 3) | mant;
  return uint8_t(sign | (code > 0x7e ? 0x7e : code));
}

// Element `i` of an array of `dtype`, as f32.
inline float load_f32(const void* p, kvc_dtype_t dtype, uint64_t i) {
  switch (dtype) {
    case KVC_DTYPE_F32: return static_cast<const float*>(p)[i];
    case KVC_DTYPE_F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case KVC_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return fp8e4m3_to_f32(static_cast<const uint8_t*>(p)[i]);
  }
}

// Stores `v` rounded to `dtype` as element `i`.
inline void store_f32(void* p, kvc_dtype_t dtype, uint64_t i, float v) {
  switch (dtype) {
    case KVC_DTYPE_F32: static_cast<float*>(p)[i] = v; break;
    case KVC_DTYPE_F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); break;
    case KVC_DTYPE_BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); break;
    default: static_cast<uint8_t*>(p)[i] = f32_to_fp8e4m3(v); break;
  }
}

}  // namespace kvc
