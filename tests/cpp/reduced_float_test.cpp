// The float16/bfloat16 conversions (core/reduced_float.h) against independent references: the
// compiler's _Float16 where it has one, and for bfloat16 rounding done in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/reduced_float.h"

namespace lz {
namespace {

// bfloat16 keeps 8 significant bits: round |f| to a multiple of its ulp, ties to even, in double
// (exact there), then to infinity past the largest finite bfloat16.
float bfloat16_reference(float f) {
  if (std::isnan(f) || std::isinf(f) || f == 0.0f) return f;
  int e = std::ilogb(f);
  if (e < -126) e = -126;  // float32 subnormals: bfloat16 has the same exponent range
  double ulp = std::ldexp(1.0, e - 7);
  double r = std::nearbyint(static_cast<double>(f) / ulp) * ulp;
  if (std::fabs(r) > 0x1.fep127) return std::copysign(std::numeric_limits<float>::infinity(), f);
  return static_cast<float>(r);
}

TEST(ReducedFloat, EveryFloat16RoundTripsThroughFloat32) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = float16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(float16_to_float(float_to_float16(f)))) << h;
      continue;
    }
    ASSERT_EQ(float_to_float16(f), h) << "bits " << h << " value " << f;
  }
}

TEST(ReducedFloat, EveryBFloat16RoundTripsThroughFloat32) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bfloat16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(f)))) << h;
      continue;
    }
    ASSERT_EQ(float_to_bfloat16(f), h) << "bits " << h << " value " << f;
  }
}

TEST(ReducedFloat, TiesRoundToEven) {
  // bfloat16 near 1: ulp 2^-7. Halfway below an even mantissa stays, above an odd one goes up.
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  // float16 near 1: ulp 2^-10.
  EXPECT_EQ(float16_to_float(float_to_float16(1.0f + 0x1p-11f)), 1.0f);
  EXPECT_EQ(float16_to_float(float_to_float16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  // float16 subnormals: multiples of 2^-24; half of the smallest goes to zero (even).
  EXPECT_EQ(float16_to_float(float_to_float16(0x1p-25f)), 0.0f);
  EXPECT_EQ(float16_to_float(float_to_float16(3 * 0x1p-25f)), 0x1p-23f);
  EXPECT_EQ(float16_to_float(float_to_float16(-0x1p-24f)), -0x1p-24f);
}

TEST(ReducedFloat, OverflowIsInfinityAndNaNStaysNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float16_to_float(float_to_float16(65504.0f)), 65504.0f);
  EXPECT_EQ(float16_to_float(float_to_float16(65519.0f)), 65504.0f);
  EXPECT_EQ(float16_to_float(float_to_float16(65520.0f)), inf);
  EXPECT_EQ(float16_to_float(float_to_float16(-1e6f)), -inf);
  EXPECT_EQ(float16_to_float(float_to_float16(inf)), inf);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::max())), inf);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(-inf)), -inf);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(float16_to_float(float_to_float16(nan))));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(nan))));
  // A NaN whose payload sits in the low bits only must not round to an infinity.
  float low_nan = bits_float(0x7f800001u);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(low_nan))));
  EXPECT_TRUE(std::isnan(float16_to_float(float_to_float16(low_nan))));
  EXPECT_TRUE(std::signbit(bfloat16_to_float(float_to_bfloat16(-nan))));
}

TEST(ReducedFloat, RandomFloatsRoundLikeTheReferences) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    float f = bits_float(bits(gen));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bfloat16_to_float(float_to_bfloat16(f)), bfloat16_reference(f)) << f;
#ifdef __FLT16_MAX__
    ASSERT_EQ(float16_to_float(float_to_float16(f)), static_cast<float>(static_cast<_Float16>(f)))
        << f;
#endif
  }
}

}  // namespace
}  // namespace lz
