// The primitives that are one C math library function: op_table.def's LZ_LIBM rows, with the
// functions' names (for the cpu code generator, which emits calls to them, and its loader, which
// resolves exactly these) and the functions themselves (for the reference kernels). Header-only:
// the code generator's library links nothing of the core.
#pragma once
#include <math.h>

#include <span>

#include "ir/ops.h"

namespace lz::ir {

struct LibmFn {
  OpKind op;
  const char* f32;  // "expm1f"
  const char* f64;  // "expm1"
  int arity;        // 1 or 2
  float (*unary_f32)(float);  // set when arity is 1
  double (*unary_f64)(double);
  float (*binary_f32)(float, float);  // set when arity is 2
  double (*binary_f64)(double, double);
};

namespace libm_detail {

constexpr LibmFn row(OpKind op, const char* f32, const char* f64, float (*f)(float),
                     double (*d)(double)) {
  return {op, f32, f64, 1, f, d, nullptr, nullptr};
}
constexpr LibmFn row(OpKind op, const char* f32, const char* f64, float (*f)(float, float),
                     double (*d)(double, double)) {
  return {op, f32, f64, 2, nullptr, nullptr, f, d};
}

// math.h's C functions (::expf), so the overload set never picks a C++ template.
inline constexpr LibmFn kTable[] = {
#define LZ_LIBM(name, f32, f64) row(OpKind::name, #f32, #f64, &::f32, &::f64),
#include "ir/op_table.def"
#undef LZ_LIBM
};

}  // namespace libm_detail

inline std::span<const LibmFn> libm_fns() { return libm_detail::kTable; }

// nullptr when k is not one.
inline const LibmFn* libm_fn(OpKind k) {
  for (const LibmFn& f : libm_detail::kTable) {
    if (f.op == k) return &f;
  }
  return nullptr;
}

// Whether a kernel computing op k calls a math library function: a libm row, or an op whose
// code calls one (sigmoid's exp, gelu's erf; backend/cpu/jit/emit_expr.cpp).
inline bool calls_libm(OpKind k) {
  return libm_fn(k) != nullptr || k == OpKind::Sigmoid || k == OpKind::Gelu;
}

}  // namespace lz::ir
