// Elements of the stateful configuration's dtypes, written independently of
// the library's conversions: decoding any code, and encoding only values
// the harness knows to be exact in the dtype (so stored bytes are known).
#include <cmath>
#include <cstring>

#include "fuzz_stateful.h"

namespace kvc_fuzz {

namespace {

float f16_to_f32(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  float v;
  if (e == 0) v = std::ldexp(float(m), -24);
  else if (e == 31) v = m == 0 ? INFINITY : NAN;
  else v = std::ldexp(float(1024 + m), e - 25);
  return s ? -v : v;
}

float fp8_to_f32(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(float(m), -9);
  else v = std::ldexp(float(8 + m), e - 10);
  return s ? -v : v;
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

}  // namespace

size_t st_dtype_size(kvc_dtype_t dtype) {
  return dtype == KVC_DTYPE_F32 ? 4 : dtype == KVC_DTYPE_FP8_E4M3 ? 1 : 2;
}

float st_load(const unsigned char* p, kvc_dtype_t dtype, size_t i) {
  switch (dtype) {
    case KVC_DTYPE_F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case KVC_DTYPE_F16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return f16_to_f32(h);
    }
    case KVC_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      const uint32_t b = uint32_t(h) << 16;
      float v;
      std::memcpy(&v, &b, 4);
      return v;
    }
    default:
      return fp8_to_f32(p[i]);
  }
}

void st_store_exact(unsigned char* p, kvc_dtype_t dtype, size_t i, float v) {
  const uint32_t b = bits_of(v);
  switch (dtype) {
    case KVC_DTYPE_F32:
      std::memcpy(p + 4 * i, &b, 4);
      break;
    case KVC_DTYPE_F16: {
      // Zero or a normal f16 with at most 11 significant bits.
      uint16_t h = uint16_t((b >> 16) & 0x8000);
      if ((b & 0x7fffffff) != 0) {
        const int e = int((b >> 23) & 255) - 127 + 15;
        if (e <= 0 || e >= 31 || (b & 0x1fff) != 0) finding("harness: %g is not exact in f16", double(v));
        h = uint16_t(h | (e << 10) | ((b >> 13) & 1023));
      }
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case KVC_DTYPE_BF16: {
      if ((b & 0xffff) != 0) finding("harness: %g is not exact in bf16", double(v));
      const uint16_t h = uint16_t(b >> 16);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    default: {
      for (int c = 0; c < 256; ++c)
        if (c != 0x80 && fp8_to_f32(uint8_t(c)) == v) {
          p[i] = uint8_t(c);
          return;
        }
      finding("harness: %g is not exact in fp8_e4m3", double(v));
    }
  }
}

void st_moderate(unsigned char* p, kvc_dtype_t dtype, size_t i, uint32_t r) {
  if (dtype == KVC_DTYPE_FP8_E4M3) {
    // |x| < 4: exponent field 0..8; no -0 (its code is not what x / scale gives).
    uint8_t c = uint8_t(((r >> 8) & 1) << 7 | ((r >> 3) % 9) << 3 | (r & 7));
    if (c == 0x80) c = 0;
    p[i] = c;
    return;
  }
  st_store_exact(p, dtype, i, float(int8_t(r & 0xff)) / 32.0f);
}

}  // namespace kvc_fuzz
