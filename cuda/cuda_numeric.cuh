// Device-side element conversions, matching backend/numeric.h bit for bit:
// round to nearest even; fp8-e4m3 saturating to +-448.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace kvc {

// Storage types: raw bits, converted explicitly.
struct f16_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };
struct fp8_t { uint8_t bits; };

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(f16_t x) {
  return __half2float(__ushort_as_half(x.bits));
}
__device__ __forceinline__ float to_f32(bf16_t x) { return __uint_as_float(uint32_t(x.bits) << 16); }
__device__ __forceinline__ float to_f32(fp8_t x) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(x.bits), __NV_E4M3);
  return __half2float(__half(h));
}

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ f16_t from_f32<f16_t>(float v) {
  return f16_t{__half_as_ushort(__float2half_rn(v))};
}
template <>
__device__ __forceinline__ bf16_t from_f32<bf16_t>(float v) {
  return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
}
template <>
__device__ __forceinline__ fp8_t from_f32<fp8_t>(float v) {
  return fp8_t{uint8_t(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3))};
}

// Eight packed 16-bit or fp8 values (one 16-byte or 8-byte load) to f32.
__device__ __forceinline__ void unpack8(const uint4& raw, bf16_t, float* out) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpack8(const uint4& raw, f16_t, float* out) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack8(const uint2& raw, fp8_t, float* out) {
  const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i] & 0xffff), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(w[i] >> 16), __NV_E4M3);
    const float2 a = __half22float2(__half2(lo));
    const float2 b = __half22float2(__half2(hi));
    out[4 * i] = a.x;
    out[4 * i + 1] = a.y;
    out[4 * i + 2] = b.x;
    out[4 * i + 3] = b.y;
  }
}

}  // namespace kvc
