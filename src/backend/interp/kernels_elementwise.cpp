// Reference kernels for leaves (Constant, Iota), the counter-based random ops, and every
// elementwise op: unary (with Cast), binary, compare and where. Binary, compare and where
// broadcast their operands to the output shape through stride-0 walks (kernels_impl.h).
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>

#include "backend/interp/kernels_impl.h"
#include "core/reduced_float.h"
#include "ir/libm.h"
#include "ir/rng.h"

namespace lz::interp {
namespace {

using ir::OpKind;

// ---- random ----

// 53 random bits in [0, 1); every double in the grid k * 2^-53 is equally likely.
double uniform_double(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

template <class T>
T uniform_value(uint64_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    // 24 bits: every float32 value k * 2^-24 is exact, and 1.0f is never produced.
    return static_cast<float>(bits >> 40) * 0x1p-24f;
  } else {
    return convert<T>(uniform_double(bits));
  }
}

// Box-Muller, cosine branch only, so value i depends on counters 2i and 2i+1 alone.
double normal_double(int64_t key, uint64_t i) {
  double u1 = 1.0 - uniform_double(rng_bits(key, 2 * i));  // (0, 1]: log(u1) is finite
  double u2 = uniform_double(rng_bits(key, 2 * i + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// ---- unary ----

template <class T>
T neg_value(T x) {
  if constexpr (std::is_same_v<T, bool>) {
    return x;  // rejected by shape inference; defined anyway
  } else if constexpr (kIsInt<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(U(0) - static_cast<U>(x));  // -INT_MIN wraps to INT_MIN
  } else {
    return -x;
  }
}

// Runs a floating-point function on x: float32 uses the float overloads of <cmath>, float64 the
// double ones. Integer or bool inputs (the frontend casts those away) are computed in double.
template <class T, class F>
T float_math(T x, F f) {
  if constexpr (std::is_floating_point_v<T>) {
    return f(x);
  } else {
    return convert<T>(f(static_cast<double>(x)));
  }
}

template <class T, class R, class F>
void map_unary(const ConstArray& x, MutArray out, F f) {
  const T* in = data_of<T>(x);
  R* o = data_of<R>(out);
  int64_t n = numel(*out.shape);
  for (int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
}

template <class T>
void unary_typed(OpKind op, const ConstArray& x, MutArray out) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  auto math = [&](auto f) { map_unary<T, T>(x, out, [f](T v) { return float_math(v, f); }); };
  if (const ir::LibmFn* fn = ir::libm_fn(op)) {  // op_table.def's LZ_LIBM rows
    return math([fn](auto v) {
      if constexpr (std::is_same_v<decltype(v), float>)
        return fn->unary_f32(v);
      else
        return fn->unary_f64(v);
    });
  }
  switch (op) {
    case OpKind::Neg: return map_unary<T, T>(x, out, [](T v) { return neg_value(v); });
    case OpKind::Abs:
      return map_unary<T, T>(x, out, [](T v) {
        if constexpr (kFloat)
          return std::abs(v);
        else if constexpr (kIsInt<T>)
          return v < 0 ? neg_value(v) : v;
        else
          return v;
      });
    case OpKind::Sqrt: return math([](auto v) { return std::sqrt(v); });
    case OpKind::Rsqrt: return math([](auto v) { return decltype(v)(1) / std::sqrt(v); });
    case OpKind::Sigmoid:
      return math([](auto v) {
        using V = decltype(v);
        return V(1) / (V(1) + std::exp(-v));
      });
    case OpKind::Gelu:
      return math([](auto v) {
        using V = decltype(v);
        return v * V(0.5) * (V(1) + std::erf(v / std::numbers::sqrt2_v<V>));
      });
    case OpKind::Reciprocal: return math([](auto v) { return decltype(v)(1) / v; });
    case OpKind::Relu:
      // Only values below zero become zero, as torch.relu does: NaN stays NaN, -0.0 stays -0.0.
      return map_unary<T, T>(x, out, [](T v) { return v < T(0) ? T(0) : v; });
    // Rounding an integer is the identity.
    case OpKind::Floor:
      return map_unary<T, T>(x, out, [](T v) {
        if constexpr (kFloat)
          return std::floor(v);
        else
          return v;
      });
    case OpKind::Ceil:
      return map_unary<T, T>(x, out, [](T v) {
        if constexpr (kFloat)
          return std::ceil(v);
        else
          return v;
      });
    case OpKind::Round:
      // nearbyint in the default rounding mode rounds half to even, as torch.round.
      return map_unary<T, T>(x, out, [](T v) {
        if constexpr (kFloat)
          return std::nearbyint(v);
        else
          return v;
      });
    case OpKind::Sign:
      // (0 < x) - (x < 0), as PyTorch: sign(NaN) is 0 and sign(-0.0) is +0.
      return map_unary<T, T>(x, out, [](T v) {
        if constexpr (std::is_same_v<T, bool>)
          return v;
        else
          return static_cast<T>(int(T(0) < v) - int(v < T(0)));
      });
    case OpKind::BitwiseNot:
      return map_unary<T, T>(x, out, [](T v) -> T {
        if constexpr (std::is_same_v<T, bool>)
          return !v;
        else if constexpr (kIsInt<T>)
          return static_cast<T>(~v);
        else
          throw TypeError("bitwise_not: needs a bool or integer operand");
      });
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not a unary op");
}

// A cast from or to a 16-bit float goes through float32 (exact when widening; one rounding, to
// nearest even, when narrowing from float32 or an integer that float32 holds exactly).
void cast_reduced(const ConstArray& x, MutArray out) {
  int64_t n = numel(*out.shape);
  std::vector<float> wide(static_cast<size_t>(n));
  if (is_reduced_float(x.dtype)) {
    const uint16_t* p = static_cast<const uint16_t*>(x.data);
    for (int64_t i = 0; i < n; ++i) wide[i] = from_reduced(x.dtype, p[i]);
  } else {
    dispatch(x.dtype, [&](auto from) {
      using From = typename decltype(from)::type;
      const From* p = data_of<From>(x);
      for (int64_t i = 0; i < n; ++i) wide[i] = convert<float>(p[i]);
    });
  }
  if (is_reduced_float(out.dtype)) {
    uint16_t* o = static_cast<uint16_t*>(out.data);
    for (int64_t i = 0; i < n; ++i) o[i] = to_reduced(out.dtype, wide[i]);
  } else {
    dispatch(out.dtype, [&](auto to) {
      using To = typename decltype(to)::type;
      To* o = data_of<To>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(wide[i]);
    });
  }
}

void cast(const ConstArray& x, MutArray out) {
  if (is_reduced_float(x.dtype) || is_reduced_float(out.dtype)) return cast_reduced(x, out);
  dispatch(x.dtype, [&](auto from) {
    using From = typename decltype(from)::type;
    dispatch(out.dtype, [&](auto to) {
      using To = typename decltype(to)::type;
      map_unary<From, To>(x, out, [](From v) { return convert<To>(v); });
    });
  });
}

// ---- binary ----

template <class T, class R, class F>
void map_binary(const ConstArray& a, const ConstArray& b, MutArray out, F f) {
  const Shape& s = *out.shape;
  const T* pa = data_of<T>(a);
  const T* pb = data_of<T>(b);
  R* o = data_of<R>(out);
  int64_t n = numel(s);
  if (n == 0) return;
  // The walk below is per row: the innermost dim runs as a plain loop whose input steps are 0
  // (broadcast) or 1, so same-shape and row-broadcast operands (a bias) cost one tight loop.
  Shape outer(s.begin(), s.empty() ? s.end() : s.end() - 1);
  int64_t inner = s.empty() ? 1 : s.back();
  std::vector<int64_t> sa = broadcast_strides(*a.shape, s), sb = broadcast_strides(*b.shape, s);
  int64_t ia = sa.empty() ? 0 : sa.back(), ib = sb.empty() ? 0 : sb.back();
  if (!sa.empty()) sa.pop_back();
  if (!sb.empty()) sb.pop_back();
  StridedWalk<2> walk(outer, {sa, sb});
  for (int64_t row = 0; row < n / inner; ++row, walk.next()) {
    const T* ra = pa + walk.offset(0);
    const T* rb = pb + walk.offset(1);
    R* ro = o + row * inner;
    if (ia == 1 && ib == 1) {
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j], rb[j]);
    } else if (ia == 1 && ib == 0) {
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j], rb[0]);
    } else if (ia == 0 && ib == 1) {
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[0], rb[j]);
    } else {
      for (int64_t j = 0; j < inner; ++j) ro[j] = f(ra[j * ia], rb[j * ib]);
    }
  }
}

template <class T>
T sub_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a != b;  // PyTorch rejects bool subtraction; xor keeps it defined
  } else {
    return add_values(a, neg_value(b));
  }
}

template <class T>
T div_values(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a / b;
  } else {
    // Integer true division is rejected by shape inference; computed in double to stay defined.
    return convert<T>(static_cast<double>(a) / static_cast<double>(b));
  }
}

// An integer zero divisor throws instead of raising SIGFPE. Bool operands are computed as int64.
template <class T>
void check_int_divisor(T b, const char* op) {
  if (b == T(0)) throw ValueError(std::string(op) + ": integer division by zero");
}

// Python's a // b. Floats follow c10::div_floor_floating: computed as (a - fmod(a, b)) / b with
// fix-ups, so a == (a // b) * b + a % b holds where floor(a / b) would round wrongly.
template <class T>
T floor_div_values(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return a / b;
    T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= T(1);
    if (div == 0) return std::copysign(T(0), a / b);
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
    return floordiv;
  } else if constexpr (std::is_same_v<T, bool>) {
    return convert<bool>(floor_div_values<int64_t>(a, b));
  } else {
    check_int_divisor(b, "floor_divide");
    if (b == T(-1)) return neg_value(a);  // INT_MIN / -1 overflows (and traps on x86)
    T q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) --q;
    return q;
  }
}

// Python's a % b: the result takes the divisor's sign.
template <class T>
T remainder_values(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T mod = std::fmod(a, b);
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
    return mod;
  } else if constexpr (std::is_same_v<T, bool>) {
    return convert<bool>(remainder_values<int64_t>(a, b));
  } else {
    check_int_divisor(b, "remainder");
    if (b == T(-1)) return T(0);  // INT_MIN % -1 traps on x86
    T r = a % b;
    if (r != 0 && (r < 0) != (b < 0)) r += b;
    return r;
  }
}

template <class T>
T pow_values(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else if constexpr (std::is_same_v<T, bool>) {
    return !b || a;
  } else {
    // A negative exponent (a tensor one: a number is refused at the line) as PyTorch: 1 / a^-b
    // truncated, so 1 and -1 keep a magnitude of 1 and everything else (0 too) gives 0.
    if (b < 0) return a == T(1) ? T(1) : a == T(-1) ? T((b & 1) ? -1 : 1) : T(0);
    // Exponentiation by squaring, wrapping on overflow like integer multiplication.
    T result = 1;
    T base = a;
    for (T e = b; e > 0; e >>= 1) {
      if (e & 1) result = mul_values(result, base);
      base = mul_values(base, base);
    }
    return result;
  }
}

template <class T>
T bitwise_values(OpKind op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    if (op == OpKind::BitwiseAnd) return a && b;
    if (op == OpKind::BitwiseOr) return a || b;
    return a != b;
  } else if constexpr (kIsInt<T>) {
    if (op == OpKind::BitwiseAnd) return static_cast<T>(a & b);
    if (op == OpKind::BitwiseOr) return static_cast<T>(a | b);
    return static_cast<T>(a ^ b);
  } else {
    throw TypeError(std::string(ir::op_name(op)) + ": needs bool or integer operands");
  }
}

template <class T>
void binary_typed(OpKind op, const ConstArray& a, const ConstArray& b, MutArray out) {
  auto run = [&](auto f) { map_binary<T, T>(a, b, out, f); };
  switch (op) {
    case OpKind::Add: return run([](T x, T y) { return add_values(x, y); });
    case OpKind::Sub: return run([](T x, T y) { return sub_values(x, y); });
    case OpKind::Mul: return run([](T x, T y) { return mul_values(x, y); });
    case OpKind::Div: return run([](T x, T y) { return div_values(x, y); });
    case OpKind::FloorDiv: return run([](T x, T y) { return floor_div_values(x, y); });
    case OpKind::Remainder: return run([](T x, T y) { return remainder_values(x, y); });
    case OpKind::Pow: return run([](T x, T y) { return pow_values(x, y); });
    case OpKind::Maximum: return run([](T x, T y) { return max_values(x, y); });
    case OpKind::Minimum: return run([](T x, T y) { return min_values(x, y); });
    case OpKind::BitwiseAnd:
    case OpKind::BitwiseOr:
    case OpKind::BitwiseXor: return run([op](T x, T y) { return bitwise_values(op, x, y); });
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not a binary op");
}

template <class T>
void compare_typed(OpKind op, const ConstArray& a, const ConstArray& b, MutArray out) {
  auto run = [&](auto f) { map_binary<T, bool>(a, b, out, f); };
  switch (op) {
    case OpKind::Eq: return run([](T x, T y) { return x == y; });
    case OpKind::Ne: return run([](T x, T y) { return x != y; });
    case OpKind::Lt: return run([](T x, T y) { return x < y; });
    case OpKind::Le: return run([](T x, T y) { return x <= y; });
    case OpKind::Gt: return run([](T x, T y) { return x > y; });
    case OpKind::Ge: return run([](T x, T y) { return x >= y; });
    default: break;
  }
  throw Error("interp: " + std::string(ir::op_name(op)) + " is not a compare op");
}

}  // namespace

// ---- the generator (ir/rng.h) ----

uint64_t rng_bits(int64_t key, uint64_t i) { return ir::rng::bits(key, i); }

int64_t rng_advance(int64_t key) { return ir::rng::advance(key); }

// ---- entry points ----

void run_leaf(OpKind op, const ir::Attrs& attrs, MutArray out) {
  if (is_reduced_float(out.dtype)) {
    uint16_t* o = static_cast<uint16_t*>(out.data);
    if (op == OpKind::Constant) {
      o[0] = to_reduced(out.dtype, static_cast<float>(std::get<ir::ConstantAttrs>(attrs).value));
      return;
    }
    int64_t n = numel(*out.shape);
    for (int64_t i = 0; i < n; ++i) o[i] = to_reduced(out.dtype, static_cast<float>(i));
    return;
  }
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = data_of<T>(out);
    if (op == OpKind::Constant) {
      o[0] = convert<T>(std::get<ir::ConstantAttrs>(attrs).value);
      return;
    }
    int64_t n = numel(*out.shape);
    for (int64_t i = 0; i < n; ++i) o[i] = convert<T>(i);
  });
}

void run_random(OpKind op, const ConstArray& key_array, MutArray out) {
  int64_t key = data_of<int64_t>(key_array)[0];
  if (op == OpKind::RngAdvance) {
    data_of<int64_t>(out)[0] = rng_advance(key);
    return;
  }
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = data_of<T>(out);
    uint64_t n = static_cast<uint64_t>(numel(*out.shape));
    for (uint64_t i = 0; i < n; ++i) {
      o[i] = op == OpKind::RngUniform ? uniform_value<T>(rng_bits(key, i))
                                      : convert<T>(normal_double(key, i));
    }
  });
}

void run_unary(OpKind op, const ConstArray& x, MutArray out) {
  if (op == OpKind::Cast) return cast(x, out);
  if (op == OpKind::GradLeaf || op == OpKind::StopGradient) {  // autograd identities
    size_t n = static_cast<size_t>(numel(*out.shape)) * dtype_size(out.dtype);
    if (n) std::memcpy(out.data, x.data, n);
    return;
  }
  dispatch(x.dtype, [&](auto tag) { unary_typed<typename decltype(tag)::type>(op, x, out); });
}

void run_binary(OpKind op, const ConstArray& a, const ConstArray& b, MutArray out) {
  dispatch(a.dtype, [&](auto tag) { binary_typed<typename decltype(tag)::type>(op, a, b, out); });
}

void run_compare(OpKind op, const ConstArray& a, const ConstArray& b, MutArray out) {
  dispatch(a.dtype, [&](auto tag) { compare_typed<typename decltype(tag)::type>(op, a, b, out); });
}

void run_where(const ConstArray& cond, const ConstArray& a, const ConstArray& b, MutArray out) {
  dispatch(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Shape& s = *out.shape;
    int64_t n = numel(s);
    if (n == 0) return;
    // Per row, as map_binary: the innermost dim is a plain loop with steps 0 or 1.
    Shape outer(s.begin(), s.empty() ? s.end() : s.end() - 1);
    int64_t inner = s.empty() ? 1 : s.back();
    std::array<std::vector<int64_t>, 3> st = {broadcast_strides(*cond.shape, s),
                                              broadcast_strides(*a.shape, s), broadcast_strides(*b.shape, s)};
    std::array<int64_t, 3> step{};
    for (size_t k = 0; k < 3; ++k) {
      step[k] = st[k].empty() ? 0 : st[k].back();
      if (!st[k].empty()) st[k].pop_back();
    }
    StridedWalk<3> walk(outer, st);
    const bool* pc = data_of<bool>(cond);
    const T* pa = data_of<T>(a);
    const T* pb = data_of<T>(b);
    T* o = data_of<T>(out);
    for (int64_t row = 0; row < n / inner; ++row, walk.next()) {
      const bool* rc = pc + walk.offset(0);
      const T* ra = pa + walk.offset(1);
      const T* rb = pb + walk.offset(2);
      T* ro = o + row * inner;
      for (int64_t j = 0; j < inner; ++j) ro[j] = rc[j * step[0]] ? ra[j * step[1]] : rb[j * step[2]];
    }
  });
}

}  // namespace lz::interp
