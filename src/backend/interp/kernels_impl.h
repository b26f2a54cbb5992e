// Private to the reference kernels: the per-family entry points run_kernel dispatches to, the
// dtype dispatch, the strided index walk behind broadcasting and movement, and the scalar
// semantics (wrapping integer arithmetic, NaN-propagating max/min, numeric conversion) that more
// than one kernel file needs, so every kernel agrees on them.
#pragma once
#include <array>
#include <string>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/interp/kernels.h"
#include "lazuli/error.h"

namespace lz::interp {

// ---- entry points, one per family (kernels_*.cpp) ----

// kernels_elementwise.cpp
void run_leaf(ir::OpKind op, const ir::Attrs& attrs, MutArray out);  // Constant, Iota
void run_random(ir::OpKind op, const ConstArray& key, MutArray out);
void run_unary(ir::OpKind op, const ConstArray& x, MutArray out);  // includes Cast
void run_binary(ir::OpKind op, const ConstArray& a, const ConstArray& b, MutArray out);
void run_compare(ir::OpKind op, const ConstArray& a, const ConstArray& b, MutArray out);
void run_where(const ConstArray& cond, const ConstArray& a, const ConstArray& b, MutArray out);
// kernels_reduce.cpp
void run_reduction(ir::OpKind op, const ir::Attrs& attrs, const ConstArray& x, MutArray out);
void run_matmul(const ConstArray& a, const ConstArray& b, MutArray out);
// kernels_movement.cpp
void run_movement(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                  MutArray out);
void run_index(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
               MutArray out);
// kernels_conv.cpp
void run_conv(ir::OpKind op, const ir::ConvAttrs& a, const ConstArray& p, const ConstArray& q,
              MutArray out);
void run_pool(ir::OpKind op, const ir::PoolAttrs& a, const ConstArray& x,
              const std::vector<MutArray>& outs);
// kernels_sort.cpp
void run_sort(const ir::SortAttrs& a, const ConstArray& x, MutArray values, MutArray indices);
// kernels_scan.cpp
void run_scan(ir::OpKind op, const ir::ScanAttrs& a, const ConstArray& x, MutArray out);

// ---- dtype dispatch ----

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the C++ type stored for `dt` (bool is one byte, as C++ bool).
template <class F>
void dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::Bool: f(TypeTag<bool>{}); return;
    case DType::Int32: f(TypeTag<int32_t>{}); return;
    case DType::Int64: f(TypeTag<int64_t>{}); return;
    case DType::Float32: f(TypeTag<float>{}); return;
    case DType::Float64: f(TypeTag<double>{}); return;
    case DType::Float16:
    case DType::BFloat16:
      // The frontend computes 16-bit floats in float32 (ops/frontend.cpp): only casts, leaves and
      // byte-moving kernels see them, and those convert through core/reduced_float.h.
      throw Error(std::string("interp: no arithmetic kernel for ") + std::string(dtype_name(dt)));
  }
  throw Error("interp: unknown dtype");
}

template <class T>
const T* data_of(const ConstArray& a) {
  return static_cast<const T*>(a.data);
}
template <class T>
T* data_of(MutArray a) {
  return static_cast<T*>(a.data);
}

// ---- strided walks ----

// Strides (in elements) that read a contiguous array of shape `in` as if it had shape `out`:
// right-aligned, and 0 on every dim where `in` has size 1 (or is missing), numpy-style.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> contiguous = contiguous_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[lead + i] = in[i] == 1 ? 0 : contiguous[i];
  return st;
}

// Row-major walk over `shape` that keeps one element offset per operand, each advancing by its
// own strides. Visit numel(shape) positions, calling next() after each; rank 0 is one position.
template <size_t N>
class StridedWalk {
 public:
  StridedWalk(const Shape& shape, std::array<std::vector<int64_t>, N> strides,
              std::array<int64_t, N> start = {})
      : shape_(shape), strides_(std::move(strides)), index_(shape.size(), 0), offset_(start) {}

  int64_t offset(size_t k) const { return offset_[k]; }
  int64_t index(size_t dim) const { return index_[dim]; }

  void next() {
    for (size_t d = shape_.size(); d-- > 0;) {
      ++index_[d];
      for (size_t k = 0; k < N; ++k) offset_[k] += strides_[k][d];
      if (index_[d] < shape_[d]) return;
      for (size_t k = 0; k < N; ++k) offset_[k] -= strides_[k][d] * shape_[d];
      index_[d] = 0;
    }
  }

 private:
  Shape shape_;
  std::array<std::vector<int64_t>, N> strides_;
  std::vector<int64_t> index_;
  std::array<int64_t, N> offset_;
};

// ---- scalar semantics shared by several kernels ----

template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integer add/mul wrap around (two's complement) instead of being undefined on overflow; on bool
// they are logical or/and, as PyTorch's bool add/mul.
template <class T>
T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <class T>
T mul_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  return false;
}

// maximum/minimum: a NaN operand wins (the first one when both are NaN), as torch.maximum.
template <class T>
T max_values(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return b > a ? b : a;
}
template <class T>
T min_values(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return b < a ? b : a;
}

// Numeric conversion with every case defined. To bool: x != 0 (NaN is true). Floating to
// integer truncates toward zero; NaN and out-of-range values give the integer minimum, which is
// what x86's truncating conversions produce, so this matches compiled code there without the
// undefined behaviour of a plain static_cast.
template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (kIsInt<To> && std::is_floating_point_v<From>) {
    constexpr From limit =
        static_cast<From>(std::numeric_limits<To>::max()) + From(1);  // 2^(bits-1)
    if (!(x >= -limit && x < limit)) return std::numeric_limits<To>::min();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace lz::interp
