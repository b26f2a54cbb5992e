// The counter-based generator behind every random op (RngUniform, RngNormal, RngAdvance): the
// i-th value of an op with key k, the same on every backend and platform. The reference kernels
// (backend/interp) call these functions; a code generator (backend/cpu/jit/emit_expr.cpp) emits
// the same steps from the constants below, so the two cannot drift apart.
//   mix(z)         = the splitmix64 finalizer (Steele, Lea, Flood 2014), a bijection with full
//                    avalanche: z ^= z >> 30; z *= M1; z ^= z >> 27; z *= M2; z ^= z >> 31
//   splitmix64(x)  = mix(x + G)
//   rng_bits(k, i) = mix(mix(splitmix64(uint64(k)) ^ (i * G)))
//   rng_advance(k) = int64(splitmix64(uint64(k) ^ S))
// (all mod 2^64). Value i of an op with key k:
//   rng_uniform float32: (rng_bits(k, i) >> 40) * 2^-24;  float64: (rng_bits(k, i) >> 11) * 2^-53
//   rng_normal: u1 = 1 - (rng_bits(k, 2i) >> 11) * 2^-53 (in (0, 1]),
//               u2 = (rng_bits(k, 2i+1) >> 11) * 2^-53,
//               z = sqrt(-2 ln u1) * cos(2 pi u2) in double, then cast to the dtype.
//   rng_advance: the op's [] int64 output is rng_advance(k).
#pragma once
#include <cstdint>

namespace lz::ir::rng {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;       // G
inline constexpr uint64_t kAdvanceSalt = 0x5851F42D4C957F2Dull;  // S
inline constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ull;         // M1
inline constexpr uint64_t kMix2 = 0x94D049BB133111EBull;         // M2
inline constexpr int kShift1 = 30, kShift2 = 27, kShift3 = 31;

constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> kShift1)) * kMix1;
  z = (z ^ (z >> kShift2)) * kMix2;
  return z ^ (z >> kShift3);
}

constexpr uint64_t splitmix64(uint64_t x) { return mix64(x + kGolden); }

constexpr uint64_t bits(int64_t key, uint64_t i) {
  return mix64(mix64(splitmix64(static_cast<uint64_t>(key)) ^ (i * kGolden)));
}

constexpr int64_t advance(int64_t key) {
  return static_cast<int64_t>(splitmix64(static_cast<uint64_t>(key) ^ kAdvanceSalt));
}

}  // namespace lz::ir::rng
