// The reference kernels called directly on small arrays with hand-computed expectations: every
// primitive of the op table, broadcasting, zero-size and rank-0 arrays, each dtype family, and
// the edge cases the compiled backend is later checked against (NaN, integer division, indices).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "backend/interp/kernels.h"
#include "ir/libm.h"
#include "lazuli/error.h"

namespace lz::interp {
namespace {

using ir::Attrs;
using ir::OpKind;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kNaN64 = std::numeric_limits<double>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A dense array that owns its bytes; bool is stored one byte per element, like the kernels expect.
struct Array {
  DType dtype;
  Shape shape;
  std::vector<unsigned char> bytes;

  ConstArray view() const { return {dtype, &shape, bytes.data()}; }

  template <class T>
  std::vector<T> values() const {
    EXPECT_EQ(dtype, dtype_of<T>::value);
    std::vector<T> v(static_cast<size_t>(numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) {
      T x;
      std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
      v[i] = x;
    }
    return v;
  }
};

template <class T>
Array make(Shape shape, const std::vector<T>& v) {
  EXPECT_EQ(static_cast<int64_t>(v.size()), numel(shape));
  Array a{dtype_of<T>::value, std::move(shape), std::vector<unsigned char>(v.size() * sizeof(T))};
  for (size_t i = 0; i < v.size(); ++i) {
    T x = v[i];
    std::memcpy(a.bytes.data() + i * sizeof(T), &x, sizeof(T));
  }
  return a;
}

Array run(OpKind op, const Attrs& attrs, const std::vector<const Array*>& inputs, DType dtype,
          Shape shape) {
  size_t n = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  Array out{dtype, std::move(shape), std::vector<unsigned char>(n)};
  std::vector<ConstArray> views;
  for (const Array* a : inputs) views.push_back(a->view());
  run_kernel(op, attrs, views, MutArray{dtype, &out.shape, out.bytes.data()});
  return out;
}


// A unary op on float32 [n] with an output of the same shape and dtype.
std::vector<float> unary_f32(OpKind op, const std::vector<float>& x) {
  Array a = make<float>({static_cast<int64_t>(x.size())}, x);
  return run(op, {}, {&a}, kFloat32, a.shape).values<float>();
}

template <class T>
std::vector<T> binary(OpKind op, const std::vector<T>& x, const std::vector<T>& y) {
  Array a = make<T>({static_cast<int64_t>(x.size())}, x);
  Array b = make<T>({static_cast<int64_t>(y.size())}, y);
  return run(op, {}, {&a, &b}, dtype_of<T>::value, a.shape).template values<T>();
}

// ---- leaves ----

TEST(InterpKernels, ConstantCastsScalarToOutputDtype) {
  ir::ConstantAttrs a{2.5};
  EXPECT_EQ(run(OpKind::Constant, a, {}, kFloat32, {}).values<float>(), std::vector<float>{2.5f});
  EXPECT_EQ(run(OpKind::Constant, a, {}, kFloat64, {}).values<double>(), std::vector<double>{2.5});
  a.value = -3.7;
  EXPECT_EQ(run(OpKind::Constant, a, {}, kInt32, {}).values<int32_t>(), std::vector<int32_t>{-3});
  a.value = 0.5;
  EXPECT_EQ(run(OpKind::Constant, a, {}, kBool, {}).values<bool>(), std::vector<bool>{true});
  a.value = 1e30;  // out of range: the documented integer minimum, never undefined behaviour
  EXPECT_EQ(run(OpKind::Constant, a, {}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
}

TEST(InterpKernels, IotaCountsFromZero) {
  EXPECT_EQ(run(OpKind::Iota, ir::IotaAttrs{5}, {}, kInt64, {5}).values<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run(OpKind::Iota, ir::IotaAttrs{3}, {}, kFloat32, {3}).values<float>(),
            (std::vector<float>{0, 1, 2}));
  EXPECT_TRUE(run(OpKind::Iota, ir::IotaAttrs{0}, {}, kInt32, {0}).values<int32_t>().empty());
}

TEST(InterpKernels, DeviceDataHasNoKernel) {
  EXPECT_THROW(run(OpKind::DeviceData, {}, {}, kFloat32, {}), Error);
}

// ---- random ----

TEST(InterpKernels, RngUniformMatchesDocumentedFormula) {
  Array key = make<int64_t>({}, {42});
  auto f32 = run(OpKind::RngUniform, ir::RandomAttrs{{1000}, kFloat32}, {&key}, kFloat32, {1000})
                 .values<float>();
  auto f64 = run(OpKind::RngUniform, ir::RandomAttrs{{1000}, kFloat64}, {&key}, kFloat64, {1000})
                 .values<double>();
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(f32[i], static_cast<float>(rng_bits(42, i) >> 40) * 0x1p-24f);
    EXPECT_EQ(f64[i], static_cast<double>(rng_bits(42, i) >> 11) * 0x1p-53);
    EXPECT_GE(f32[i], 0.0f);
    EXPECT_LT(f32[i], 1.0f);
    EXPECT_GE(f64[i], 0.0);
    EXPECT_LT(f64[i], 1.0);
  }
}

TEST(InterpKernels, RngUniformIsDeterministicPerKey) {
  Array k1 = make<int64_t>({}, {7}), k2 = make<int64_t>({}, {8});
  Attrs a = ir::RandomAttrs{{2, 8}, kFloat32};
  auto first = run(OpKind::RngUniform, a, {&k1}, kFloat32, {2, 8}).values<float>();
  auto again = run(OpKind::RngUniform, a, {&k1}, kFloat32, {2, 8}).values<float>();
  auto other = run(OpKind::RngUniform, a, {&k2}, kFloat32, {2, 8}).values<float>();
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
}

TEST(InterpKernels, RngBitsArePinned) {
  // Every backend must draw these exact values; a change here changes every random stream.
  EXPECT_EQ(rng_bits(0, 0), 0x33fe8bd4f9c57863ull);
  EXPECT_EQ(rng_bits(42, 3), 0xc3f45aae7f523ba2ull);
  EXPECT_EQ(rng_advance(42), -2655168058193352396ll);
}

TEST(InterpKernels, RngNormalHasStandardMoments) {
  Array key = make<int64_t>({}, {123});
  const int64_t n = 20000;
  auto z =
      run(OpKind::RngNormal, ir::RandomAttrs{{n}, kFloat64}, {&key}, kFloat64, {n}).values<double>();
  double sum = 0, sq = 0;
  for (double v : z) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);
  // Value 0 from counters 0 and 1, as documented.
  double u1 = 1.0 - static_cast<double>(rng_bits(123, 0) >> 11) * 0x1p-53;
  double u2 = static_cast<double>(rng_bits(123, 1) >> 11) * 0x1p-53;
  EXPECT_DOUBLE_EQ(z[0], std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  auto z32 =
      run(OpKind::RngNormal, ir::RandomAttrs{{4}, kFloat32}, {&key}, kFloat32, {4}).values<float>();
  EXPECT_EQ(z32[0], static_cast<float>(z[0]));
}

TEST(InterpKernels, RngAdvanceProducesANewKey) {
  Array key = make<int64_t>({}, {42});
  auto next = run(OpKind::RngAdvance, {}, {&key}, kInt64, {}).values<int64_t>();
  EXPECT_EQ(next[0], rng_advance(42));
  EXPECT_NE(next[0], 42);
  EXPECT_NE(rng_advance(next[0]), next[0]);
}

// ---- unary ----

TEST(InterpKernels, NegWrapsIntMinAndNegatesFloats) {
  Array i = make<int32_t>({3}, {5, -2, std::numeric_limits<int32_t>::min()});
  EXPECT_EQ(run(OpKind::Neg, {}, {&i}, kInt32, {3}).values<int32_t>(),
            (std::vector<int32_t>{-5, 2, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(unary_f32(OpKind::Neg, {1.5f, -0.0f}), (std::vector<float>{-1.5f, 0.0f}));
}

TEST(InterpKernels, AbsOfIntsAndFloats) {
  Array i = make<int64_t>({3}, {-4, 0, 9});
  EXPECT_EQ(run(OpKind::Abs, {}, {&i}, kInt64, {3}).values<int64_t>(),
            (std::vector<int64_t>{4, 0, 9}));
  EXPECT_EQ(unary_f32(OpKind::Abs, {-2.5f, 3.0f}), (std::vector<float>{2.5f, 3.0f}));
}

TEST(InterpKernels, FloatMathOpsMatchHandValues) {
  struct Case {
    OpKind op;
    std::vector<float> expect;  // at x = 0.5, 1, 2
  };
  const std::vector<Case> cases = {
      {OpKind::Exp, {1.64872127f, 2.71828183f, 7.3890561f}},
      {OpKind::Log, {-0.693147181f, 0, 0.693147181f}},
      {OpKind::Log1p, {0.405465108f, 0.693147181f, 1.09861229f}},
      {OpKind::Expm1, {0.648721271f, 1.71828183f, 6.3890561f}},
      {OpKind::Sqrt, {0.707106781f, 1, 1.41421356f}},
      {OpKind::Rsqrt, {1.41421356f, 1, 0.707106781f}},
      {OpKind::Sin, {0.479425539f, 0.841470985f, 0.909297427f}},
      {OpKind::Cos, {0.877582562f, 0.540302306f, -0.416146837f}},
      {OpKind::Tanh, {0.462117157f, 0.761594156f, 0.96402758f}},
      {OpKind::Sigmoid, {0.622459331f, 0.731058579f, 0.880797078f}},
      {OpKind::Gelu, {0.345731231f, 0.841344746f, 1.95449974f}},
      {OpKind::Erf, {0.520499878f, 0.842700793f, 0.995322265f}},
      {OpKind::Reciprocal, {2, 1, 0.5f}},
  };
  for (const Case& c : cases) {
    auto got = unary_f32(c.op, {0.5f, 1.0f, 2.0f});
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(got[i], c.expect[i], 1e-6 * (1 + std::abs(c.expect[i]))) << ir::op_name(c.op);
    }
  }
  Array d = make<double>({1}, {1.0});
  EXPECT_DOUBLE_EQ(run(OpKind::Exp, {}, {&d}, kFloat64, {1}).values<double>()[0], std::numbers::e);
}

TEST(InterpKernels, FloatMathOnIntsComputesInDouble) {
  Array i = make<int32_t>({3}, {4, 9, 2});
  EXPECT_EQ(run(OpKind::Sqrt, {}, {&i}, kInt32, {3}).values<int32_t>(),
            (std::vector<int32_t>{2, 3, 1}));
}

TEST(InterpKernels, ReluZeroesNegativesAndKeepsNaN) {
  auto r = unary_f32(OpKind::Relu, {-1.0f, 0.0f, 2.0f, kNaN});
  EXPECT_EQ(r[0], 0.0f);
  EXPECT_EQ(r[1], 0.0f);
  EXPECT_EQ(r[2], 2.0f);
  EXPECT_TRUE(std::isnan(r[3]));
  Array i = make<int64_t>({2}, {-3, 3});
  EXPECT_EQ(run(OpKind::Relu, {}, {&i}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>{0, 3}));
}

TEST(InterpKernels, RoundHalfToEven) {
  auto r = unary_f32(OpKind::Round, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f});
  EXPECT_EQ(r, (std::vector<float>{0, 2, 2, -0.0f, -2, 2, -3}));
  EXPECT_TRUE(std::signbit(r[3]));
  Array d = make<double>({2}, {3.5, -4.5});
  EXPECT_EQ(run(OpKind::Round, {}, {&d}, kFloat64, {2}).values<double>(),
            (std::vector<double>{4, -4}));
}

TEST(InterpKernels, FloorAndCeilOfFloats) {
  EXPECT_EQ(unary_f32(OpKind::Floor, {1.5f, -1.5f, 2.0f}), (std::vector<float>{1, -2, 2}));
  EXPECT_EQ(unary_f32(OpKind::Ceil, {1.5f, -1.5f, 2.0f}), (std::vector<float>{2, -1, 2}));
}

TEST(InterpKernels, RoundingIntsIsIdentity) {
  Array i = make<int32_t>({3}, {-7, 0, 7});
  for (OpKind op : {OpKind::Floor, OpKind::Ceil, OpKind::Round}) {
    EXPECT_EQ(run(op, {}, {&i}, kInt32, {3}).values<int32_t>(), (std::vector<int32_t>{-7, 0, 7}));
  }
}

TEST(InterpKernels, SignOfNaNIsZeroAsInPyTorch) {
  EXPECT_EQ(unary_f32(OpKind::Sign, {-2.5f, 0.0f, 3.0f, kNaN, -kInf}),
            (std::vector<float>{-1, 0, 1, 0, -1}));
  Array i = make<int64_t>({3}, {-5, 0, 7});
  EXPECT_EQ(run(OpKind::Sign, {}, {&i}, kInt64, {3}).values<int64_t>(),
            (std::vector<int64_t>{-1, 0, 1}));
}

TEST(InterpKernels, BitwiseNotIsLogicalOnBool) {
  Array b = make<bool>({2}, {true, false});
  EXPECT_EQ(run(OpKind::BitwiseNot, {}, {&b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{false, true}));
  Array i = make<int32_t>({2}, {0, 5});
  EXPECT_EQ(run(OpKind::BitwiseNot, {}, {&i}, kInt32, {2}).values<int32_t>(),
            (std::vector<int32_t>{-1, -6}));
}

TEST(InterpKernels, CastFloatToIntTruncatesTowardZero) {
  Array f = make<float>({4}, {-1.7f, 1.7f, 2.5f, -0.5f});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kInt32}, {&f}, kInt32, {4}).values<int32_t>(),
            (std::vector<int32_t>{-1, 1, 2, 0}));
  Array d = make<double>({2}, {kNaN64, 1e300});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kInt64}, {&d}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>(2, std::numeric_limits<int64_t>::min())));
}

TEST(InterpKernels, CastToBoolIsNonZeroAndNaNIsTrue) {
  Array f = make<float>({4}, {0.0f, -0.0f, 0.1f, kNaN});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kBool}, {&f}, kBool, {4}).values<bool>(),
            (std::vector<bool>{false, false, true, true}));
  Array i = make<int64_t>({3}, {0, -3, 2});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kBool}, {&i}, kBool, {3}).values<bool>(),
            (std::vector<bool>{false, true, true}));
}

TEST(InterpKernels, CastBoolAndIntsToFloats) {
  Array b = make<bool>({2}, {true, false});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kFloat64}, {&b}, kFloat64, {2}).values<double>(),
            (std::vector<double>{1, 0}));
  Array i = make<int32_t>({2}, {-3, 16777217});
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kFloat32}, {&i}, kFloat32, {2}).values<float>(),
            (std::vector<float>{-3, 16777216}));
  EXPECT_EQ(run(OpKind::Cast, ir::DTypeAttrs{kInt64}, {&i}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>{-3, 16777217}));
}

// op_table.def's LZ_LIBM rows: each is an elementwise primitive of the functions' arity, and its
// reference kernel is that function, bit for bit, in float32 and float64 (integers in double).
TEST(InterpKernels, LibmRowsAreElementwisePrimitivesComputedByTheirFunction) {
  const std::vector<float> xs = {0.25f, 1.5f, 2.0f, 3.75f};
  const std::vector<float> ys = {2.0f, 0.5f, 3.0f, -1.25f};
  ASSERT_FALSE(ir::libm_fns().empty());
  for (const ir::LibmFn& f : ir::libm_fns()) {
    const std::string name(ir::op_name(f.op));
    EXPECT_TRUE(ir::is_elementwise(f.op)) << name;
    EXPECT_EQ(ir::op_info(f.op).arity, f.arity) << name;
    EXPECT_EQ(ir::libm_fn(f.op), &f) << name;
    if (f.arity == 1) {
      std::vector<float> got = unary_f32(f.op, xs);
      Array a64 = make<double>({4}, {0.25, 1.5, 2.0, 3.75});
      std::vector<double> got64 = run(f.op, {}, {&a64}, kFloat64, a64.shape).values<double>();
      Array ai = make<int64_t>({2}, {1, 2});
      std::vector<int64_t> goti = run(f.op, {}, {&ai}, kInt64, ai.shape).values<int64_t>();
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(f.unary_f32(xs[i])))
            << name << "(" << xs[i] << ")";
        EXPECT_EQ(std::bit_cast<uint64_t>(got64[i]),
                  std::bit_cast<uint64_t>(f.unary_f64(static_cast<double>(xs[i]))))
            << name;
      }
      EXPECT_EQ(goti[1], static_cast<int64_t>(f.unary_f64(2.0))) << name;
    } else {
      std::vector<float> got = binary<float>(f.op, xs, ys);
      std::vector<double> got64 =
          binary<double>(f.op, {0.25, 1.5, 2.0, 3.75}, {2.0, 0.5, 3.0, -1.25});
      for (size_t i = 0; i < xs.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(got[i]),
                  std::bit_cast<uint32_t>(f.binary_f32(xs[i], ys[i])))
            << name;
        EXPECT_EQ(std::bit_cast<uint64_t>(got64[i]),
                  std::bit_cast<uint64_t>(f.binary_f64(xs[i], ys[i])))
            << name;
      }
    }
  }
}

// ---- binary ----

TEST(InterpKernels, AddBroadcastsColumnAgainstRow) {
  Array a = make<float>({3, 1}, {0, 10, 20});
  Array b = make<float>({4}, {1, 2, 3, 4});
  EXPECT_EQ(run(OpKind::Add, {}, {&a, &b}, kFloat32, {3, 4}).values<float>(),
            (std::vector<float>{1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24}));
  // And the other way round, with a middle broadcast dim.
  Array c = make<int64_t>({2, 1, 2}, {1, 2, 3, 4});
  Array d = make<int64_t>({3, 1}, {10, 20, 30});
  EXPECT_EQ(run(OpKind::Mul, {}, {&c, &d}, kInt64, {2, 3, 2}).values<int64_t>(),
            (std::vector<int64_t>{10, 20, 20, 40, 30, 60, 30, 40, 60, 80, 90, 120}));
}

TEST(InterpKernels, BinaryOnRankZeroOperands) {
  Array a = make<double>({}, {1.5}), b = make<double>({}, {2.0});
  EXPECT_EQ(run(OpKind::Sub, {}, {&a, &b}, kFloat64, {}).values<double>(),
            std::vector<double>{-0.5});
  Array m = make<double>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run(OpKind::Mul, {}, {&m, &b}, kFloat64, {2, 2}).values<double>(),
            (std::vector<double>{2, 4, 6, 8}));
}

TEST(InterpKernels, BinaryOnZeroSizeArrays) {
  Array a = make<float>({0, 3}, {});
  Array b = make<float>({3}, {1, 2, 3});
  EXPECT_TRUE(run(OpKind::Add, {}, {&a, &b}, kFloat32, {0, 3}).values<float>().empty());
  Array c = make<int32_t>({2, 0}, {});
  Array d = make<int32_t>({1, 0}, {});
  EXPECT_TRUE(run(OpKind::FloorDiv, {}, {&c, &d}, kInt32, {2, 0}).values<int32_t>().empty());
}

TEST(InterpKernels, SubMulDivOnFloats) {
  EXPECT_EQ(binary<float>(OpKind::Sub, {5, 1}, {2, 3}), (std::vector<float>{3, -2}));
  EXPECT_EQ(binary<float>(OpKind::Mul, {5, 1}, {2, 3}), (std::vector<float>{10, 3}));
  EXPECT_EQ(binary<double>(OpKind::Div, {1, -3}, {4, 0}),
            (std::vector<double>{0.25, -std::numeric_limits<double>::infinity()}));
}

TEST(InterpKernels, IntArithmeticWrapsOnOverflow) {
  const int32_t max = std::numeric_limits<int32_t>::max(),
                min = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(binary<int32_t>(OpKind::Add, {max}, {1}), std::vector<int32_t>{min});
  EXPECT_EQ(binary<int32_t>(OpKind::Sub, {min}, {1}), std::vector<int32_t>{max});
  EXPECT_EQ(binary<int32_t>(OpKind::Mul, {65536}, {65536}), std::vector<int32_t>{0});
}

TEST(InterpKernels, BoolAddIsOrAndMulIsAnd) {
  EXPECT_EQ(binary<bool>(OpKind::Add, {true, true, false}, {true, false, false}),
            (std::vector<bool>{true, true, false}));
  EXPECT_EQ(binary<bool>(OpKind::Mul, {true, true, false}, {true, false, false}),
            (std::vector<bool>{true, false, false}));
}

TEST(InterpKernels, FloorDivideRoundsTowardNegativeInfinityForInts) {
  EXPECT_EQ(binary<int32_t>(OpKind::FloorDiv, {7, -7, 7, -7, 6}, {2, 2, -2, -2, 3}),
            (std::vector<int32_t>{3, -4, -4, 3, 2}));
  EXPECT_EQ(binary<int64_t>(OpKind::FloorDiv, {-1, 0}, {5, -5}), (std::vector<int64_t>{-1, 0}));
}

TEST(InterpKernels, FloorDivideFloatsFollowPython) {
  // 1.0 // 0.1 is 9 in Python and PyTorch, where floor(1.0 / 0.1) would give 10.
  auto r = binary<double>(OpKind::FloorDiv, {7.5, -7.5, 1.0, 0.0}, {2, 2, 0.1, -1});
  EXPECT_EQ(r, (std::vector<double>{3, -4, 9, 0}));
  EXPECT_TRUE(std::signbit(r[3]));  // 0 // -1 is -0.0
  auto z = binary<float>(OpKind::FloorDiv, {1, -1, 0}, {0, 0, 0});
  EXPECT_EQ(z[0], kInf);
  EXPECT_EQ(z[1], -kInf);
  EXPECT_TRUE(std::isnan(z[2]));
}

TEST(InterpKernels, RemainderTakesDivisorSign) {
  EXPECT_EQ(binary<int32_t>(OpKind::Remainder, {7, -7, 7, -7, 6}, {3, 3, -3, -3, 3}),
            (std::vector<int32_t>{1, 2, -2, -1, 0}));
  EXPECT_EQ(binary<double>(OpKind::Remainder, {5.5, -5.5, 5.5, -5.5}, {2, 2, -2, -2}),
            (std::vector<double>{1.5, 0.5, -0.5, -1.5}));
  EXPECT_TRUE(std::isnan(binary<float>(OpKind::Remainder, {1}, {0})[0]));
}

TEST(InterpKernels, IntegerDivisionByZeroThrowsValueError) {
  try {
    binary<int32_t>(OpKind::FloorDiv, {1, 2}, {1, 0});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "floor_divide: integer division by zero");
  }
  try {
    binary<int64_t>(OpKind::Remainder, {1}, {0});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "remainder: integer division by zero");
  }
}

TEST(InterpKernels, IntMinByMinusOneDoesNotTrap) {
  const int32_t min32 = std::numeric_limits<int32_t>::min();
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(binary<int32_t>(OpKind::FloorDiv, {min32}, {-1}), std::vector<int32_t>{min32});
  EXPECT_EQ(binary<int64_t>(OpKind::FloorDiv, {min64}, {-1}), std::vector<int64_t>{min64});
  EXPECT_EQ(binary<int32_t>(OpKind::Remainder, {min32}, {-1}), std::vector<int32_t>{0});
  EXPECT_EQ(binary<int64_t>(OpKind::Remainder, {min64}, {-1}), std::vector<int64_t>{0});
}

TEST(InterpKernels, PowOfIntsBySquaring) {
  EXPECT_EQ(binary<int32_t>(OpKind::Pow, {2, 3, -2, 5, 0}, {10, 3, 3, 0, 0}),
            (std::vector<int32_t>{1024, 27, -8, 1, 1}));
  EXPECT_EQ(binary<int64_t>(OpKind::Pow, {2}, {62}), std::vector<int64_t>{int64_t(1) << 62});
}

TEST(InterpKernels, PowOfIntsToNegativeTensorPowersIsPyTorchs) {
  // torch: tensor([0, 1, -1, 2, -2, 3]) ** tensor([-1] * 6) and ** tensor([-2] * 6)
  EXPECT_EQ(binary<int64_t>(OpKind::Pow, {0, 1, -1, 2, -2, 3}, {-1, -1, -1, -1, -1, -1}),
            (std::vector<int64_t>{0, 1, -1, 0, 0, 0}));
  EXPECT_EQ(binary<int32_t>(OpKind::Pow, {0, 1, -1, 2, -2, 3}, {-2, -2, -2, -2, -2, -2}),
            (std::vector<int32_t>{0, 1, 1, 0, 0, 0}));
}

TEST(InterpKernels, PowOfFloats) {
  EXPECT_EQ(binary<float>(OpKind::Pow, {2, 4, -2}, {-1, 0.5f, 3}),
            (std::vector<float>{0.5f, 2, -8}));
  EXPECT_TRUE(std::isnan(binary<double>(OpKind::Pow, {-8}, {1.0 / 3})[0]));
}

TEST(InterpKernels, MaximumAndMinimumPropagateNaN) {
  auto mx = binary<float>(OpKind::Maximum, {1, kNaN, 3}, {2, 0, kNaN});
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mx[2]));
  auto mn = binary<double>(OpKind::Minimum, {1, kNaN64, 3}, {2, 0, kNaN64});
  EXPECT_EQ(mn[0], 1);
  EXPECT_TRUE(std::isnan(mn[1]));
  EXPECT_TRUE(std::isnan(mn[2]));
  EXPECT_EQ(binary<int32_t>(OpKind::Maximum, {-1, 5}, {2, 3}), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(binary<bool>(OpKind::Minimum, {true, true}, {false, true}),
            (std::vector<bool>{false, true}));
}

TEST(InterpKernels, CompareOpsBroadcastToBool) {
  Array a = make<int32_t>({3}, {1, 2, 3});
  Array b = make<int32_t>({}, {2});
  auto cmp = [&](OpKind op) { return run(op, {}, {&a, &b}, kBool, {3}).values<bool>(); };
  EXPECT_EQ(cmp(OpKind::Eq), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(cmp(OpKind::Ne), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(cmp(OpKind::Lt), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(cmp(OpKind::Le), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(cmp(OpKind::Gt), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(cmp(OpKind::Ge), (std::vector<bool>{false, true, true}));
}

TEST(InterpKernels, CompareWithNaNIsFalseExceptNe) {
  Array a = make<float>({2}, {kNaN, 1});
  Array b = make<float>({2}, {kNaN, kNaN});
  EXPECT_EQ(run(OpKind::Eq, {}, {&a, &b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{false, false}));
  EXPECT_EQ(run(OpKind::Ne, {}, {&a, &b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(run(OpKind::Ge, {}, {&a, &b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{false, false}));
}

TEST(InterpKernels, BitwiseOpsOnIntsAndLogicalOnBool) {
  EXPECT_EQ(binary<int64_t>(OpKind::BitwiseAnd, {12, -1}, {10, 7}), (std::vector<int64_t>{8, 7}));
  EXPECT_EQ(binary<int64_t>(OpKind::BitwiseOr, {12, -8}, {10, 7}), (std::vector<int64_t>{14, -1}));
  EXPECT_EQ(binary<int32_t>(OpKind::BitwiseXor, {12, -1}, {10, 0}), (std::vector<int32_t>{6, -1}));
  std::vector<bool> x = {true, true, false, false}, y = {true, false, true, false};
  EXPECT_EQ(binary<bool>(OpKind::BitwiseAnd, x, y), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(binary<bool>(OpKind::BitwiseOr, x, y), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(binary<bool>(OpKind::BitwiseXor, x, y), (std::vector<bool>{false, true, true, false}));
}

TEST(InterpKernels, WhereBroadcastsAllThreeOperands) {
  Array c = make<bool>({2, 1}, {true, false});
  Array a = make<int64_t>({3}, {1, 2, 3});
  Array b = make<int64_t>({}, {-1});
  EXPECT_EQ(run(OpKind::Where, {}, {&c, &a, &b}, kInt64, {2, 3}).values<int64_t>(),
            (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
}

// ---- reductions ----

TEST(InterpKernels, ReduceSumOverOneDimWithAndWithoutKeepdim) {
  Array x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{1}, false}, {&x}, kFloat32, {2}).values<float>(),
            (std::vector<float>{6, 15}));
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{1}, true}, {&x}, kFloat32, {2, 1}).values<float>(),
            (std::vector<float>{6, 15}));
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{0}, false}, {&x}, kFloat32, {3}).values<float>(),
            (std::vector<float>{5, 7, 9}));
}

TEST(InterpKernels, ReduceSumOverSeveralAndAllDims) {
  Array x = make<int64_t>({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{0, 2}, false}, {&x}, kInt64, {3}).values<int64_t>(),
            (std::vector<int64_t>{1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12}));
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{0, 1, 2}, false}, {&x}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{78});
  EXPECT_EQ(
      run(OpKind::ReduceSum, ir::ReduceAttrs{{0, 1, 2}, true}, {&x}, kInt64, {1, 1, 1}).values<int64_t>(),
      std::vector<int64_t>{78});
}

TEST(InterpKernels, ReduceOverNoDimsCopies) {
  Array x = make<double>({2, 2}, {1, -2, 3, 4});
  EXPECT_EQ(run(OpKind::ReduceMax, ir::ReduceAttrs{{}, false}, {&x}, kFloat64, {2, 2}).values<double>(),
            (std::vector<double>{1, -2, 3, 4}));
  Array s = make<double>({}, {5});
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{}, false}, {&s}, kFloat64, {}).values<double>(),
            std::vector<double>{5});
}

TEST(InterpKernels, ReduceOverZeroElementsGivesIdentity) {
  Array x = make<float>({2, 0}, {});
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{1}, false}, {&x}, kFloat32, {2}).values<float>(),
            (std::vector<float>{0, 0}));
  EXPECT_EQ(run(OpKind::ReduceProd, ir::ReduceAttrs{{1}, false}, {&x}, kFloat32, {2}).values<float>(),
            (std::vector<float>{1, 1}));
  EXPECT_TRUE(run(OpKind::ReduceSum, ir::ReduceAttrs{{0}, false}, {&x}, kFloat32, {0}).values<float>().empty());
}

TEST(InterpKernels, ReduceSumOfFloat32AccumulatesInDouble) {
  // In float, 2^24 + 1 rounds back to 2^24 at each step; in double both ones survive.
  Array x = make<float>({3}, {16777216.0f, 1.0f, 1.0f});
  EXPECT_EQ(run(OpKind::ReduceSum, ir::ReduceAttrs{{0}, false}, {&x}, kFloat32, {}).values<float>(),
            std::vector<float>{16777218.0f});
}

TEST(InterpKernels, ReduceProdOfInts) {
  Array x = make<int32_t>({2, 3}, {1, 2, 3, -4, 5, 6});
  EXPECT_EQ(run(OpKind::ReduceProd, ir::ReduceAttrs{{1}, false}, {&x}, kInt32, {2}).values<int32_t>(),
            (std::vector<int32_t>{6, -120}));
}

TEST(InterpKernels, ReduceMaxAndMinPropagateNaN) {
  Array x = make<float>({2, 3}, {1, kNaN, 3, -kInf, -kInf, -kInf});
  auto mx = run(OpKind::ReduceMax, ir::ReduceAttrs{{1}, false}, {&x}, kFloat32, {2}).values<float>();
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], -kInf);
  auto mn = run(OpKind::ReduceMin, ir::ReduceAttrs{{1}, false}, {&x}, kFloat32, {2}).values<float>();
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], -kInf);
  Array i = make<int64_t>({3}, {4, -9, 7});
  EXPECT_EQ(run(OpKind::ReduceMin, ir::ReduceAttrs{{0}, false}, {&i}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{-9});
  EXPECT_EQ(run(OpKind::ReduceMax, ir::ReduceAttrs{{0}, false}, {&i}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{7});
}

TEST(InterpKernels, ReduceMaxAndMinOnBoolAreAnyAndAll) {
  Array b = make<bool>({2, 2}, {false, true, true, true});
  EXPECT_EQ(run(OpKind::ReduceMax, ir::ReduceAttrs{{1}, false}, {&b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(run(OpKind::ReduceMin, ir::ReduceAttrs{{1}, false}, {&b}, kBool, {2}).values<bool>(),
            (std::vector<bool>{false, true}));
}

TEST(InterpKernels, ArgMaxAndArgMinTakeFirstOfTies) {
  Array x = make<float>({2, 3}, {1, 5, 5, 7, 0, 0});
  EXPECT_EQ(run(OpKind::ArgMax, ir::ReduceAttrs{{1}, false}, {&x}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(run(OpKind::ArgMin, ir::ReduceAttrs{{1}, false}, {&x}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(run(OpKind::ArgMax, ir::ReduceAttrs{{0}, true}, {&x}, kInt64, {1, 3}).values<int64_t>(),
            (std::vector<int64_t>{1, 0, 0}));
  // No dims: over the flattened input.
  EXPECT_EQ(run(OpKind::ArgMax, ir::ReduceAttrs{{}, false}, {&x}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{3});
  EXPECT_EQ(run(OpKind::ArgMin, ir::ReduceAttrs{{}, false}, {&x}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{4});
  Array i = make<int32_t>({4}, {3, -1, 3, -1});
  EXPECT_EQ(run(OpKind::ArgMin, ir::ReduceAttrs{{0}, false}, {&i}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{1});
}

TEST(InterpKernels, ArgMaxAndArgMinPickFirstNaN) {
  Array x = make<double>({5}, {1, kNaN64, 9, kNaN64, -9});
  EXPECT_EQ(run(OpKind::ArgMax, ir::ReduceAttrs{{0}, false}, {&x}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{1});
  EXPECT_EQ(run(OpKind::ArgMin, ir::ReduceAttrs{{0}, false}, {&x}, kInt64, {}).values<int64_t>(),
            std::vector<int64_t>{1});
}

// ---- matmul ----

TEST(InterpKernels, MatMulOfTwoMatrices) {
  Array a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Array b = make<float>({3, 2}, {7, 8, 9, 10, 11, 12});
  EXPECT_EQ(run(OpKind::MatMul, {}, {&a, &b}, kFloat32, {2, 2}).values<float>(),
            (std::vector<float>{58, 64, 139, 154}));
}

TEST(InterpKernels, MatMulBroadcastsBatchDims) {
  // a: [2, 1, 2, 2] batches {I, 2I}; b: [3, 2, 2] batches {I, [[0,1],[1,0]], ones}.
  Array a = make<int64_t>({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Array b = make<int64_t>({3, 2, 2}, {1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1});
  EXPECT_EQ(run(OpKind::MatMul, {}, {&a, &b}, kInt64, {2, 3, 2, 2}).values<int64_t>(),
            (std::vector<int64_t>{1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1,  //
                                  2, 0, 0, 2, 0, 2, 2, 0, 2, 2, 2, 2}));
  // A rank-2 operand broadcasts against a batched one.
  Array m = make<double>({2, 2}, {1, 2, 3, 4});
  Array batch = make<double>({2, 2, 1}, {1, 1, 0, 1});
  EXPECT_EQ(run(OpKind::MatMul, {}, {&m, &batch}, kFloat64, {2, 2, 1}).values<double>(),
            (std::vector<double>{3, 7, 2, 4}));
}

TEST(InterpKernels, MatMulWithEmptyInnerDimIsZeros) {
  Array a = make<float>({2, 0}, {});
  Array b = make<float>({0, 3}, {});
  EXPECT_EQ(run(OpKind::MatMul, {}, {&a, &b}, kFloat32, {2, 3}).values<float>(),
            std::vector<float>(6, 0.0f));
}

// ---- movement ----

TEST(InterpKernels, ReshapeKeepsRowMajorOrder) {
  Array x = make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run(OpKind::Reshape, ir::ShapeAttrs{{3, 2}}, {&x}, kInt32, {3, 2}).values<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(InterpKernels, PermuteReordersDims) {
  Array x = make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run(OpKind::Permute, ir::PermuteAttrs{{1, 0}}, {&x}, kInt32, {3, 2}).values<int32_t>(),
            (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  // out dim i = in dim perm[i]: [2, 1, 3] with perm [2, 0, 1] -> [3, 2, 1].
  Array y = make<double>({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run(OpKind::Permute, ir::PermuteAttrs{{2, 0, 1}}, {&y}, kFloat64, {3, 2, 1}).values<double>(),
            (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST(InterpKernels, ExpandRepeatsSizeOneDims) {
  Array row = make<bool>({1, 3}, {true, false, true});
  EXPECT_EQ(run(OpKind::Expand, ir::ShapeAttrs{{2, 3}}, {&row}, kBool, {2, 3}).values<bool>(),
            (std::vector<bool>{true, false, true, true, false, true}));
  Array col = make<float>({2, 1}, {1, 2});
  EXPECT_EQ(run(OpKind::Expand, ir::ShapeAttrs{{2, 3}}, {&col}, kFloat32, {2, 3}).values<float>(),
            (std::vector<float>{1, 1, 1, 2, 2, 2}));
}

TEST(InterpKernels, SliceWithStep) {
  Array x = make<int64_t>({5}, {0, 1, 2, 3, 4});
  EXPECT_EQ(run(OpKind::Slice, ir::SliceAttrs{0, 1, 5, 2}, {&x}, kInt64, {2}).values<int64_t>(),
            (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(run(OpKind::Slice, ir::SliceAttrs{0, 2, 2, 1}, {&x}, kInt64, {0}).values<int64_t>().empty());
  Array m = make<int64_t>({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(run(OpKind::Slice, ir::SliceAttrs{1, 1, 4, 2}, {&m}, kInt64, {2, 2}).values<int64_t>(),
            (std::vector<int64_t>{1, 3, 5, 7}));
}

TEST(InterpKernels, CatJoinsAlongDim) {
  Array a = make<float>({2, 1}, {1, 2});
  Array b = make<float>({2, 0}, {});
  Array c = make<float>({2, 2}, {3, 4, 5, 6});
  EXPECT_EQ(run(OpKind::Cat, ir::DimAttrs{1}, {&a, &b, &c}, kFloat32, {2, 3}).values<float>(),
            (std::vector<float>{1, 3, 4, 2, 5, 6}));
  Array d = make<float>({1, 2}, {7, 8});
  EXPECT_EQ(run(OpKind::Cat, ir::DimAttrs{0}, {&c, &d}, kFloat32, {3, 2}).values<float>(),
            (std::vector<float>{3, 4, 5, 6, 7, 8}));
}

TEST(InterpKernels, SliceScatterReplacesTheSlice) {
  Array base = make<int32_t>({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
  Array src = make<int32_t>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run(OpKind::SliceScatter, ir::SliceAttrs{1, 0, 4, 2}, {&base, &src}, kInt32, {2, 4})
                .values<int32_t>(),
            (std::vector<int32_t>{1, 0, 2, 0, 3, 0, 4, 0}));
}

// ---- indexing ----

TEST(InterpKernels, IndexSelectWithInt32AndInt64Indices) {
  Array x = make<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Array i64 = make<int64_t>({3}, {2, 0, 2});
  EXPECT_EQ(run(OpKind::IndexSelect, ir::DimAttrs{0}, {&x, &i64}, kFloat32, {3, 2}).values<float>(),
            (std::vector<float>{5, 6, 1, 2, 5, 6}));
  Array i32 = make<int32_t>({1}, {1});
  EXPECT_EQ(run(OpKind::IndexSelect, ir::DimAttrs{1}, {&x, &i32}, kFloat32, {3, 1}).values<float>(),
            (std::vector<float>{2, 4, 6}));
}

TEST(InterpKernels, IndexSelectOnScalarNeedsOneIndex) {
  Array s = make<double>({}, {4.5});
  Array one = make<int64_t>({1}, {0});
  EXPECT_EQ(run(OpKind::IndexSelect, ir::DimAttrs{0}, {&s, &one}, kFloat64, {}).values<double>(),
            std::vector<double>{4.5});
  Array two = make<int64_t>({2}, {0, 0});
  EXPECT_THROW(run(OpKind::IndexSelect, ir::DimAttrs{0}, {&s, &two}, kFloat64, {}), IndexError);
}

TEST(InterpKernels, GatherPicksAlongDim) {
  // out[i][j] = x[i][index[i][j]]; the index may be smaller than x outside dim.
  Array x = make<int32_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Array idx = make<int64_t>({2, 2}, {2, 0, 1, 1});
  EXPECT_EQ(run(OpKind::Gather, ir::DimAttrs{1}, {&x, &idx}, kInt32, {2, 2}).values<int32_t>(),
            (std::vector<int32_t>{3, 1, 5, 5}));
  // dim 0: out[i][j] = x[index[i][j]][j].
  Array idx0 = make<int32_t>({1, 3}, {2, 0, 1});
  EXPECT_EQ(run(OpKind::Gather, ir::DimAttrs{0}, {&x, &idx0}, kInt32, {1, 3}).values<int32_t>(),
            (std::vector<int32_t>{7, 2, 6}));
}

TEST(InterpKernels, ScatterAddAccumulatesRepeatedIndices) {
  Array base = make<float>({2, 3}, {0, 0, 0, 10, 10, 10});
  Array idx = make<int64_t>({2, 2}, {0, 0, 2, 1});
  Array src = make<float>({2, 3}, {1, 2, 100, 3, 4, 100});  // only the index's [2, 2] is read
  EXPECT_EQ(
      run(OpKind::ScatterAdd, ir::DimAttrs{1}, {&base, &idx, &src}, kFloat32, {2, 3}).values<float>(),
      (std::vector<float>{3, 0, 0, 10, 14, 13}));
  Array ib = make<int64_t>({3}, {0, 0, 0});
  Array ii = make<int32_t>({2}, {2, 2});
  Array is = make<int64_t>({2}, {5, 6});
  EXPECT_EQ(run(OpKind::ScatterAdd, ir::DimAttrs{0}, {&ib, &ii, &is}, kInt64, {3}).values<int64_t>(),
            (std::vector<int64_t>{0, 0, 11}));
}

TEST(InterpKernels, IndexCopyWritesSourceRows) {
  Array base = make<int64_t>({3, 2}, {0, 0, 0, 0, 0, 0});
  Array idx = make<int64_t>({2}, {2, 0});
  Array src = make<int64_t>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(
      run(OpKind::IndexCopy, ir::DimAttrs{0}, {&base, &idx, &src}, kInt64, {3, 2}).values<int64_t>(),
      (std::vector<int64_t>{3, 4, 0, 0, 1, 2}));
  Array col = make<int64_t>({1}, {1});
  Array srccol = make<int64_t>({3, 1}, {7, 8, 9});
  EXPECT_EQ(
      run(OpKind::IndexCopy, ir::DimAttrs{1}, {&base, &col, &srccol}, kInt64, {3, 2}).values<int64_t>(),
      (std::vector<int64_t>{0, 7, 0, 8, 0, 9}));
}

TEST(InterpKernels, IndexOutOfRangeThrowsIndexError) {
  Array x = make<float>({5}, {0, 1, 2, 3, 4});
  Array neg = make<int64_t>({1}, {-1});
  try {
    run(OpKind::IndexSelect, ir::DimAttrs{0}, {&x, &neg}, kFloat32, {1});
    FAIL() << "expected IndexError";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "index_select: index -1 is out of range for dim 0 of size 5");
  }
  Array big = make<int32_t>({1}, {5});
  Array src = make<float>({1}, {9});
  EXPECT_THROW(run(OpKind::IndexSelect, ir::DimAttrs{0}, {&x, &big}, kFloat32, {1}), IndexError);
  EXPECT_THROW(run(OpKind::Gather, ir::DimAttrs{0}, {&x, &big}, kFloat32, {1}), IndexError);
  EXPECT_THROW(run(OpKind::Gather, ir::DimAttrs{0}, {&x, &neg}, kFloat32, {1}), IndexError);
  EXPECT_THROW(run(OpKind::ScatterAdd, ir::DimAttrs{0}, {&x, &big, &src}, kFloat32, {5}), IndexError);
  EXPECT_THROW(run(OpKind::IndexCopy, ir::DimAttrs{0}, {&x, &neg, &src}, kFloat32, {5}), IndexError);
}

}  // namespace
}  // namespace lz::interp
