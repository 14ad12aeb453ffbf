// Host conversions of the CPU reference kernels (backend/numeric.h): every
// f16, bf16 and fp8-e4m3 code survives decode + encode, and rounding is to
// nearest even at the midpoints, saturating fp8 to +-448 (the CUDA
// intrinsics' behaviour, which the GPU tests check byte for byte).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "backend/numeric.h"

namespace kvc {
namespace {

TEST(Numeric, F16CodesRoundTrip) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const uint16_t h = uint16_t(c);
    const float f = f16_to_f32(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << c;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(Numeric, F16RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to even (1).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: to even.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // halfway to 65536: rounds to inf
  EXPECT_EQ(f32_to_f16(-1e-8f), 0x8000);    // below half the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 2^-24: even
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
}

TEST(Numeric, Bf16CodesRoundTripAndRoundToEven) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float f = bf16_to_f32(uint16_t(c));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16(f), c) << std::hex << c;
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie, to even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie, to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(Numeric, Fp8CodesRoundTrip) {
  for (uint32_t c = 0; c < 0x100; ++c) {
    const float f = fp8e4m3_to_f32(uint8_t(c));
    if (std::isnan(f)) {
      EXPECT_EQ(c & 0x7F, 0x7Fu);  // only S.1111.111 is NaN
      continue;
    }
    if (c == 0x80) continue;  // -0 encodes back as -0 (0x80): same code
    EXPECT_EQ(f32_to_fp8e4m3(f), c) << std::hex << c;
  }
  EXPECT_EQ(fp8e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(fp8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

TEST(Numeric, Fp8RoundsToEvenAndSaturates) {
  EXPECT_EQ(f32_to_fp8e4m3(1.0625f), 0x38);  // between 1 and 1.125: to even
  EXPECT_EQ(f32_to_fp8e4m3(1.1875f), 0x3A);  // between 1.125 and 1.25: to even
  EXPECT_EQ(f32_to_fp8e4m3(200.0f), 0x74);   // between 192 and 208: to even
  EXPECT_EQ(f32_to_fp8e4m3(460.0f), 0x7E);   // past 448: saturates
  EXPECT_EQ(f32_to_fp8e4m3(-1e9f), 0xFE);
  EXPECT_EQ(f32_to_fp8e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest: even
  EXPECT_EQ(f32_to_fp8e4m3(3 * std::ldexp(1.0f, -10)), 0x02);
  EXPECT_EQ(f32_to_fp8e4m3(0.0146484375f), 0x08);  // 7.5 * 2^-9: to even (8 = 2^-6)
  EXPECT_EQ(f32_to_fp8e4m3(std::nanf("")), 0x7F);
}

TEST(Numeric, LoadAndStoreByDtype) {
  unsigned char buf[16] = {};
  for (kvc_dtype_t d : {KVC_DTYPE_F32, KVC_DTYPE_F16, KVC_DTYPE_BF16, KVC_DTYPE_FP8_E4M3}) {
    store_f32(buf, d, 1, -1.5f);
    EXPECT_EQ(load_f32(buf, d, 1), -1.5f) << d;
  }
}

}  // namespace
}  // namespace kvc
