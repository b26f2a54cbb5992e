// Element types of Lazuli tensors and PyTorch's type promotion between them.
#pragma once
#include <cstdint>
#include <string_view>

namespace lz {

// The enumerators' values are part of every graph hash and never change; the 16-bit floats came
// later and so sit after Float64 (promote_types knows their rank).
enum class DType : uint8_t {
  Bool = 0, Int32 = 1, Int64 = 2, Float32 = 3, Float64 = 4, Float16 = 5, BFloat16 = 6
};
inline constexpr int kNumDTypes = 7;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;

std::string_view dtype_name(DType t);
size_t dtype_size(DType t);
// float16 and bfloat16 are stored in 16 bits and computed in float32, as PyTorch does on CPUs:
// the frontend widens their operands and rounds each op's result (ops/frontend.cpp).
inline bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || is_reduced_float(t);
}
// 0 bool, 1 integer, 2 floating: the categories of PyTorch's promotion rules.
inline int dtype_category(DType t) { return is_floating(t) ? 2 : (t == DType::Bool ? 0 : 1); }
// promote_types(int64, float32) == float32, promote_types(float16, bfloat16) == float32, as in
// PyTorch.
DType promote_types(DType a, DType b);
DType default_float_dtype();

template <typename T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };

}  // namespace lz
