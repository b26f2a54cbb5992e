// Conversions between float32 and the two 16-bit float formats Lazuli stores: IEEE binary16
// (float16) and bfloat16 (float32's top half). Narrowing rounds to nearest, ties to even; a NaN
// stays a NaN (quieted, sign kept); values past the largest finite number become infinities.
// Widening is exact. These are the only place the bit layouts are spelled out: the reference
// kernels, the frontend's scalars and the bindings all convert through them.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lazuli/dtype.h"

namespace lz {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bfloat16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  // Adding 0x7fff plus the kept part's lowest bit rounds half to even; a carry out of the
  // mantissa bumps the exponent, up to infinity.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float bfloat16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_float16(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  // 65520 is halfway between 65504 (the largest float16) and 65536; the tie goes to the even
  // neighbour, which is the infinity.
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (x >= 0x38800000u) {  // a normal float16: rebias the exponent (127 -> 15), round 13 bits off
    x -= 112u << 23;
    x += 0xfffu + ((x >> 13) & 1u);
    return static_cast<uint16_t>(sign | (x >> 13));
  }
  // Subnormal (or zero): a multiple of 2^-24. Scaling by 2^24 is exact; nearbyint rounds half to
  // even in the default rounding mode. 1024 units is the smallest normal, whose bits are 0x0400.
  float units = std::nearbyint(bits_float(x) * 16777216.0f);
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
}
inline float float16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

// For a reduced float dtype: its bits from a float32 and back.
inline uint16_t to_reduced(DType t, float f) {
  return t == DType::BFloat16 ? float_to_bfloat16(f) : float_to_float16(f);
}
inline float from_reduced(DType t, uint16_t h) {
  return t == DType::BFloat16 ? bfloat16_to_float(h) : float16_to_float(h);
}

}  // namespace lz
