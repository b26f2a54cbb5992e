// Elementwise ops through the public API: unary math, binary arithmetic with numpy broadcasting
// and PyTorch type promotion, comparisons, logical and bitwise ops, where, clamp, casts, Python
// floor division and remainder, pow, and empty / zero-size operands. Expectations are computed
// by hand or with plain loops, never with the op under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::DType;
using lz::kBool;
using lz::kFloat32;
using lz::kFloat64;
using lz::kInt32;
using lz::kInt64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Applies f to each input: the expected values of a unary op.
template <class F>
std::vector<double> map(const std::vector<double>& in, F f) {
  std::vector<double> out;
  for (double x : in) out.push_back(f(x));
  return out;
}

// ---- unary ---------------------------------------------------------------------------------

TEST(OpsElementwise, UnaryFloatMathMatchesLibm) {
  std::vector<double> in{-2.0, -0.5, 0.0, 0.25, 1.0, 3.0};
  std::vector<double> pos{0.25, 0.5, 1.0, 2.0, 9.0, 100.0};
  Tensor x = make(in, {2, 3});
  Tensor p = make(pos, {2, 3});
  expect_values(lz::exp(x), kFloat32, {2, 3}, map(in, [](double v) { return std::exp(v); }), 1e-6);
  expect_values(lz::log(p), kFloat32, {2, 3}, map(pos, [](double v) { return std::log(v); }), 1e-6);
  expect_values(lz::log1p(p), kFloat32, {2, 3}, map(pos, [](double v) { return std::log1p(v); }));
  expect_values(lz::expm1(x), kFloat32, {2, 3}, map(in, [](double v) { return std::expm1(v); }));
  expect_values(lz::sqrt(p), kFloat32, {2, 3}, map(pos, [](double v) { return std::sqrt(v); }));
  expect_values(lz::rsqrt(p), kFloat32, {2, 3},
                map(pos, [](double v) { return 1 / std::sqrt(v); }));
  expect_values(lz::sin(x), kFloat32, {2, 3}, map(in, [](double v) { return std::sin(v); }));
  expect_values(lz::cos(x), kFloat32, {2, 3}, map(in, [](double v) { return std::cos(v); }));
  expect_values(lz::tanh(x), kFloat32, {2, 3}, map(in, [](double v) { return std::tanh(v); }));
  expect_values(lz::sigmoid(x), kFloat32, {2, 3},
                map(in, [](double v) { return 1 / (1 + std::exp(-v)); }));
  expect_values(lz::erf(x), kFloat32, {2, 3}, map(in, [](double v) { return std::erf(v); }));
  expect_values(lz::reciprocal(p), kFloat32, {2, 3}, map(pos, [](double v) { return 1 / v; }));
}

TEST(OpsElementwise, GeluIsTheExactErfForm) {
  std::vector<double> in{-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0};
  expect_values(lz::gelu(make(in, {8})), kFloat32, {8},
                map(in, [](double v) { return 0.5 * v * (1 + std::erf(v / std::numbers::sqrt2)); }),
                1e-5);
}

TEST(OpsElementwise, UnaryEdgeValuesGiveInfAndNaN) {
  Tensor x = make({0.0, -1.0, kInf, kNaN}, {4});
  expect_values(lz::log(x), kFloat32, {4}, {-kInf, kNaN, kInf, kNaN});
  expect_values(lz::sqrt(x), kFloat32, {4}, {0.0, kNaN, kInf, kNaN});
  expect_values(lz::reciprocal(make({0.0, -0.0}, {2})), kFloat32, {2}, {kInf, -kInf});
  expect_values(lz::exp(make({-kInf, kInf}, {2})), kFloat32, {2}, {0.0, kInf});
}

TEST(OpsElementwise, FloatMathOnIntTensorGivesFloat32) {
  expect_values(lz::exp(make({0, 1, 2}, {3}, kInt64)), kFloat32, {3},
                {1.0, std::exp(1.0), std::exp(2.0)});
  expect_values(lz::sqrt(make({4, 9}, {2}, kInt32)), kFloat32, {2}, {2.0, 3.0});
  expect_values(make({0, 1}, {2}, kBool).sigmoid(), kFloat32, {2}, {0.5, 1 / (1 + std::exp(-1.0))});
}

TEST(OpsElementwise, Float64StaysFloat64) {
  Tensor x = make({0.1, 0.2}, {2}, kFloat64);
  expect_values(lz::exp(x), kFloat64, {2}, {std::exp(0.1), std::exp(0.2)}, 1e-14);
  expect_values(x + 0.5, kFloat64, {2}, {0.6, 0.7}, 1e-14);
}

TEST(OpsElementwise, NegAbsReluSignKeepIntDtype) {
  Tensor i = make({-3, 0, 5}, {3}, kInt32);
  expect_values(lz::neg(i), kInt32, {3}, {3, 0, -5});
  expect_values(-i, kInt32, {3}, {3, 0, -5});
  expect_values(lz::abs(i), kInt32, {3}, {3, 0, 5});
  expect_values(i.abs(), kInt32, {3}, {3, 0, 5});
  expect_values(lz::relu(i), kInt32, {3}, {0, 0, 5});
  expect_values(lz::sign(i), kInt32, {3}, {-1, 0, 1});
  Tensor f = make({-2.5, 0.0, 0.5}, {3});
  expect_values(lz::sign(f), kFloat32, {3}, {-1, 0, 1});
  expect_values(f.relu(), kFloat32, {3}, {0, 0, 0.5});
  expect_values(lz::abs(f), kFloat32, {3}, {2.5, 0, 0.5});
}

TEST(OpsElementwise, FloorCeilRoundHalfToEven) {
  Tensor x = make({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -1.7}, {8});
  expect_values(lz::floor(x), kFloat32, {8}, {-3, -2, -1, 0, 1, 2, 1, -2});
  expect_values(lz::ceil(x), kFloat32, {8}, {-2, -1, -0.0, 1, 2, 3, 2, -1});
  expect_values(lz::round(x), kFloat32, {8}, {-2, -2, -0.0, 0, 2, 2, 1, -2});
  // Rounding an integer tensor is the identity, dtype kept.
  expect_values(lz::floor(make({-3, 4}, {2}, kInt64)), kInt64, {2}, {-3, 4});
}

TEST(OpsElementwise, LogicalNotAndBitwiseNot) {
  expect_values(lz::logical_not(make({0.0, 1.5, -2.0}, {3})), kBool, {3}, {1, 0, 0});
  expect_values(lz::logical_not(make({0, 7}, {2}, kInt64)), kBool, {2}, {1, 0});
  expect_values(lz::bitwise_not(make({5, -1, 0}, {3}, kInt64)), kInt64, {3}, {-6, 0, -1});
  expect_values(~make({5, 0}, {2}, kInt32), kInt32, {2}, {-6, -1});
  expect_values(lz::bitwise_not(make({1, 0}, {2}, kBool)), kBool, {2}, {0, 1});
}

TEST(OpsElementwise, BitwiseNotOfBoolReadsBackAsBool) {
  // ~True must be False, also after further arithmetic on the bool (not 254 read as true).
  Tensor b = lz::bitwise_not(make({1, 0}, {2}, kBool));
  expect_values(b.to(kInt64), kInt64, {2}, {0, 1});
}

// ---- casts ---------------------------------------------------------------------------------

TEST(OpsElementwise, CastFloatToIntTruncatesTowardZero) {
  Tensor x = make({-1.7, -0.5, 0.5, 2.9}, {4});
  expect_values(lz::cast(x, kInt32), kInt32, {4}, {-1, 0, 0, 2});
  expect_values(x.to(kInt64), kInt64, {4}, {-1, 0, 0, 2});
  expect_values(x.long_(), kInt64, {4}, {-1, 0, 0, 2});
}

TEST(OpsElementwise, CastToBoolIsNonzero) {
  expect_values(make({0.0, 0.5, -2.0, kNaN}, {4}).bool_(), kBool, {4}, {0, 1, 1, 1});
  expect_values(make({0, 3}, {2}, kInt64).bool_(), kBool, {2}, {0, 1});
}

TEST(OpsElementwise, CastBetweenDtypesKeepsValues) {
  expect_values(make({1, 0}, {2}, kBool).float_(), kFloat32, {2}, {1, 0});
  expect_values(make({1, 0}, {2}, kBool).int_(), kInt32, {2}, {1, 0});
  expect_values(make({-5, 7}, {2}, kInt64).int_(), kInt32, {2}, {-5, 7});
  expect_values(make({0.1}, {1}, kFloat64).float_(), kFloat32, {1}, {0.1});
  expect_values(make({0.25}, {1}).double_(), kFloat64, {1}, {0.25}, 1e-15);
  expect_values(make({3}, {}, kInt32).to(kFloat64), kFloat64, {}, {3});
}

// ---- binary arithmetic and broadcasting ----------------------------------------------------

TEST(OpsElementwise, AddSubMulDivSameShape) {
  Tensor a = make({1, 2, 3, 4}, {2, 2});
  Tensor b = make({0.5, -1, 2, 8}, {2, 2});
  expect_values(lz::add(a, b), kFloat32, {2, 2}, {1.5, 1, 5, 12});
  expect_values(a - b, kFloat32, {2, 2}, {0.5, 3, 1, -4});
  expect_values(a * b, kFloat32, {2, 2}, {0.5, -2, 6, 32});
  expect_values(a / b, kFloat32, {2, 2}, {2, -2, 1.5, 0.5});
}

TEST(OpsElementwise, ScalarOnEitherSide) {
  Tensor a = make({1, 2, 4}, {3});
  expect_values(a + 1, kFloat32, {3}, {2, 3, 5});
  expect_values(10 - a, kFloat32, {3}, {9, 8, 6});
  expect_values(a - 10, kFloat32, {3}, {-9, -8, -6});
  expect_values(2 * a, kFloat32, {3}, {2, 4, 8});
  expect_values(8 / a, kFloat32, {3}, {8, 4, 2});
  expect_values(lz::sub(3, a), kFloat32, {3}, {2, 1, -1});
}

TEST(OpsElementwise, BroadcastColumnWithRow) {
  Tensor col = make({0, 10, 20}, {3, 1});
  Tensor row = make({1, 2, 3, 4}, {4});
  std::vector<double> e;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) e.push_back(i * 10 + j + 1);
  expect_values(col + row, kFloat32, {3, 4}, e);
  expect_values(row + col, kFloat32, {3, 4}, e);
}

TEST(OpsElementwise, BroadcastRankZeroWithRankTwo) {
  Tensor s = make({2}, {}, kFloat32);
  Tensor m = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(s * m, kFloat32, {2, 3}, {2, 4, 6, 8, 10, 12});
  expect_values(m - s, kFloat32, {2, 3}, {-1, 0, 1, 2, 3, 4});
  expect_values(s + s, kFloat32, {}, {4});
}

TEST(OpsElementwise, BroadcastBothSidesThreeD) {
  Tensor a = make({1, 2}, {2, 1, 1});
  Tensor b = make({10, 20, 30}, {1, 3});
  std::vector<double> e;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) e.push_back((i + 1) + (k + 1) * 10);
  expect_values(a + b, kFloat32, {2, 1, 3}, e);
}

TEST(OpsElementwise, MaximumMinimumPropagateNaN) {
  Tensor a = make({1, 5, kNaN, -1}, {4});
  Tensor b = make({3, 2, 0, kNaN}, {4});
  expect_values(lz::maximum(a, b), kFloat32, {4}, {3, 5, kNaN, kNaN});
  expect_values(lz::minimum(a, b), kFloat32, {4}, {1, 2, kNaN, kNaN});
  expect_values(lz::maximum(make({1, 5}, {2}, kInt64), 3), kInt64, {2}, {3, 5});
}

// ---- type promotion --------------------------------------------------------------------------

TEST(OpsElementwise, Int32PlusInt64IsInt64) {
  expect_values(make({1, 2}, {2}, kInt32) + make({10, 20}, {2}, kInt64), kInt64, {2}, {11, 22});
}

TEST(OpsElementwise, IntTensorPlusFloatScalarIsFloat32) {
  expect_values(make({1, 2}, {2}, kInt64) + 0.5, kFloat32, {2}, {1.5, 2.5});
  expect_values(make({1, 2}, {2}, kInt32) * 1.5, kFloat32, {2}, {1.5, 3});
}

TEST(OpsElementwise, IntTensorPlusIntScalarKeepsInt32) {
  expect_values(make({1, 2}, {2}, kInt32) + 5, kInt32, {2}, {6, 7});
}

TEST(OpsElementwise, Float32TensorPlusDoubleScalarStaysFloat32) {
  expect_values(make({1, 2}, {2}) + 0.1, kFloat32, {2}, {1.1, 2.1});
}

TEST(OpsElementwise, BoolTensorPlusIntScalarIsInt64) {
  expect_values(make({1, 0}, {2}, kBool) + 2, kInt64, {2}, {3, 2});
}

TEST(OpsElementwise, IntDivIntIsFloat32) {
  expect_values(make({1, 7}, {2}, kInt64) / make({2, 2}, {2}, kInt64), kFloat32, {2}, {0.5, 3.5});
  expect_values(lz::div(make({3}, {1}, kInt32), 2), kFloat32, {1}, {1.5});
}

TEST(OpsElementwise, BoolPlusBoolIsBool) {
  Tensor a = make({1, 1, 0, 0}, {4}, kBool);
  Tensor b = make({1, 0, 1, 0}, {4}, kBool);
  expect_values(a + b, kBool, {4}, {1, 1, 1, 0});
  expect_values(a * b, kBool, {4}, {1, 0, 0, 0});
}

TEST(OpsElementwise, ZeroDimFloat64PlusFloat32TensorIsFloat32) {
  Tensor z = make({0.5}, {}, kFloat64);
  expect_values(make({1, 2}, {2}) + z, kFloat32, {2}, {1.5, 2.5});
  expect_values(z + make({1, 2}, {2}), kFloat32, {2}, {1.5, 2.5});
  EXPECT_EQ(lz::result_type({z, make({1}, {1})}), kFloat32);
}

TEST(OpsElementwise, ZeroDimFloat64PlusInt32TensorIsFloat64) {
  // PyTorch: the zero-dim tensor's dtype wins when its category is higher.
  Tensor z = make({0.5}, {}, kFloat64);
  expect_values(make({1, 2, 3}, {3}, kInt32) + z, kFloat64, {3}, {1.5, 2.5, 3.5});
  EXPECT_EQ(lz::result_type({make({1}, {1}, kInt32), z}), kFloat64);
}

TEST(OpsElementwise, ZeroDimFloat32PlusInt64TensorIsFloat32) {
  expect_values(make({1, 2}, {2}, kInt64) + make({0.25}, {}), kFloat32, {2}, {1.25, 2.25});
}

TEST(OpsElementwise, ZeroDimInt64PlusInt32TensorStaysInt32) {
  expect_values(make({1, 2}, {2}, kInt32) + make({5}, {}, kInt64), kInt32, {2}, {6, 7});
}

TEST(OpsElementwise, ZeroDimTensorsPromoteAmongThemselves) {
  expect_values(make({1}, {}, kInt32) + make({0.5}, {}, kFloat64), kFloat64, {}, {1.5});
  expect_values(make({1}, {}, kInt32) + 2.5, kFloat32, {}, {3.5});
}

TEST(OpsElementwise, ResultTypeOfNumbersOnly) {
  EXPECT_EQ(lz::result_type({lz::Operand(1), lz::Operand(2)}), kInt64);
  EXPECT_EQ(lz::result_type({lz::Operand(1), lz::Operand(2.0)}), kFloat32);
  EXPECT_EQ(lz::result_type({lz::Operand(true)}), kBool);
}

// ---- comparisons -----------------------------------------------------------------------------

TEST(OpsElementwise, ComparisonsGiveBool) {
  Tensor a = make({1, 2, 3}, {3});
  Tensor b = make({3, 2, 1}, {3});
  expect_values(a == b, kBool, {3}, {0, 1, 0});
  expect_values(a != b, kBool, {3}, {1, 0, 1});
  expect_values(a < b, kBool, {3}, {1, 0, 0});
  expect_values(a <= b, kBool, {3}, {1, 1, 0});
  expect_values(a > b, kBool, {3}, {0, 0, 1});
  expect_values(a >= b, kBool, {3}, {0, 1, 1});
  expect_values(lz::eq(a, 2), kBool, {3}, {0, 1, 0});
  expect_values(lz::gt(2, a), kBool, {3}, {1, 0, 0});
}

TEST(OpsElementwise, CompareIntTensorWithFloatScalarComparesAsFloat) {
  Tensor i = make({1, 2, 3}, {3}, kInt64);
  expect_values(i < 2.5, kBool, {3}, {1, 1, 0});
  expect_values(i == 2.0, kBool, {3}, {0, 1, 0});
  expect_values(i > 1.5, kBool, {3}, {0, 1, 1});
}

TEST(OpsElementwise, CompareBroadcastsAndNaNIsUnequal) {
  Tensor col = make({1, 2}, {2, 1});
  Tensor row = make({1, 2, kNaN}, {3});
  expect_values(col == row, kBool, {2, 3}, {1, 0, 0, 0, 1, 0});
  expect_values(col != row, kBool, {2, 3}, {0, 1, 1, 1, 0, 1});
}

// ---- logical and bitwise --------------------------------------------------------------------

TEST(OpsElementwise, LogicalOpsOnMixedDtypesGiveBool) {
  Tensor a = make({0, 1, 0, 2}, {4}, kInt64);
  Tensor b = make({0, 0, 0.5, 3}, {4});
  expect_values(lz::logical_and(a, b), kBool, {4}, {0, 0, 0, 1});
  expect_values(lz::logical_or(a, b), kBool, {4}, {0, 1, 1, 1});
  expect_values(lz::logical_xor(a, b), kBool, {4}, {0, 1, 1, 0});
}

TEST(OpsElementwise, BitwiseOpsOnInts) {
  Tensor a = make({12, 5, -1}, {3}, kInt64);
  Tensor b = make({10, 3, 6}, {3}, kInt64);
  expect_values(lz::bitwise_and(a, b), kInt64, {3}, {8, 1, 6});
  expect_values(a | b, kInt64, {3}, {14, 7, -1});
  expect_values(a ^ b, kInt64, {3}, {6, 6, -7});
  expect_values(make({6}, {1}, kInt32) & 3, kInt32, {1}, {2});
}

TEST(OpsElementwise, BitwiseOpsOnBools) {
  Tensor a = make({1, 1, 0, 0}, {4}, kBool);
  Tensor b = make({1, 0, 1, 0}, {4}, kBool);
  expect_values(a & b, kBool, {4}, {1, 0, 0, 0});
  expect_values(a | b, kBool, {4}, {1, 1, 1, 0});
  expect_values(a ^ b, kBool, {4}, {0, 1, 1, 0});
}

// ---- where and clamp -------------------------------------------------------------------------

TEST(OpsElementwise, WhereSelectsAndBroadcasts) {
  Tensor c = make({1, 0, 1}, {3}, kBool);
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make({-1}, {1});
  expect_values(lz::where(c, a, b), kFloat32, {2, 3}, {1, -1, 3, 4, -1, 6});
}

TEST(OpsElementwise, WhereWithScalars) {
  Tensor c = make({1, 0}, {2}, kBool);
  expect_values(lz::where(c, 1.5, 0), kFloat32, {2}, {1.5, 0});
  expect_values(lz::where(c, 7, -7), kInt64, {2}, {7, -7});
  expect_values(lz::where(c, make({1, 2}, {2}, kInt32), 2.5), kFloat32, {2}, {1, 2.5});
  expect_values(lz::where(c, make({1, 2}, {2}, kInt32), 9), kInt32, {2}, {1, 9});
}

TEST(OpsElementwise, WherePromotesTensorOperands) {
  Tensor c = make({0, 1}, {2}, kBool);
  expect_values(lz::where(c, make({1, 2}, {2}, kInt64), make({0.5, 0.5}, {2}, kFloat64)), kFloat64,
                {2}, {0.5, 2});
}

TEST(OpsElementwise, ClampMinMaxAndOneSided) {
  Tensor x = make({-2, -0.5, 0.5, 3}, {4});
  expect_values(lz::clamp(x, -1, 1), kFloat32, {4}, {-1, -0.5, 0.5, 1});
  expect_values(x.clamp(0, std::nullopt), kFloat32, {4}, {0, 0, 0.5, 3});
  expect_values(x.clamp(std::nullopt, 0), kFloat32, {4}, {-2, -0.5, 0, 0});
}

TEST(OpsElementwise, ClampIntWithIntKeepsIntAndWithFloatPromotes) {
  Tensor i = make({-5, 0, 5}, {3}, kInt32);
  expect_values(lz::clamp(i, -2, 2), kInt32, {3}, {-2, 0, 2});
  expect_values(lz::clamp(i, 0.5, std::nullopt), kFloat32, {3}, {0.5, 0.5, 5});
}

// ---- floor_divide, remainder, pow ------------------------------------------------------------

TEST(OpsElementwise, FloorDivideIntRoundsTowardNegativeInfinity) {
  Tensor a = make({7, -7, 7, -7, 6}, {5}, kInt64);
  Tensor b = make({2, 2, -2, -2, 3}, {5}, kInt64);
  expect_values(lz::floor_divide(a, b), kInt64, {5}, {3, -4, -4, 3, 2});
}

TEST(OpsElementwise, FloorDivideFloat) {
  Tensor a = make({7.5, -7.5, 7.5, -7.5}, {4});
  Tensor b = make({2, 2, -2, -2}, {4});
  expect_values(lz::floor_divide(a, b), kFloat32, {4}, {3, -4, -4, 3});
  expect_values(lz::floor_divide(make({-7}, {1}, kInt32), 2), kInt32, {1}, {-4});
}

TEST(OpsElementwise, RemainderHasTheDivisorsSign) {
  Tensor a = make({7, -7, 7, -7, 6}, {5}, kInt64);
  Tensor b = make({3, 3, -3, -3, 3}, {5}, kInt64);
  expect_values(lz::remainder(a, b), kInt64, {5}, {1, 2, -2, -1, 0});
  expect_values(a % 3, kInt64, {5}, {1, 2, 1, 2, 0});
  Tensor f = make({7.5, -7.5, 7.5, -7.5}, {4});
  expect_values(f % make({2, 2, -2, -2}, {4}), kFloat32, {4}, {1.5, 0.5, -0.5, -1.5});
}

TEST(OpsElementwise, PowIntFloatAndScalarBase) {
  expect_values(lz::pow(make({2, 3, -2}, {3}, kInt64), 2), kInt64, {3}, {4, 9, 4});
  expect_values(make({4, 9}, {2}).pow(0.5), kFloat32, {2}, {2, 3});
  expect_values(lz::pow(make({4, 2}, {2}, kInt64), 0.5), kFloat32, {2}, {2, std::sqrt(2.0)});
  expect_values(lz::pow(2, make({0, 1, 2, 3}, {4}, kInt64)), kInt64, {4}, {1, 2, 4, 8});
  expect_values(lz::pow(make({2, 3}, {2}), make({3, -1}, {2})), kFloat32, {2}, {8, 1.0 / 3});
  expect_values(lz::pow(make({-8}, {1}), 1.0 / 3), kFloat32, {1}, {kNaN});
  expect_values(lz::pow(make({0, 5}, {2}), 0), kFloat32, {2}, {1, 1});
}

// x ** 1, 2, 3, -1 and -2 are x, products and quotients, as PyTorch's CPU kernel computes them: the
// same bits as eager, and no pow in the program (a vector powf takes a scalar path per negative
// lane: GPT-2's tanh GELU spent 44% of its inference there).
TEST(OpsElementwise, PowBySmallIntegersIsProductsWithEagersBits) {
  const std::vector<double> in{-2.5, -1.25, -0.3, 0.0, 0.7, 1.9, 3.1};
  auto f = [](double v) { return static_cast<float>(v); };
  Tensor x = make(in, {7});
  std::vector<double> in_f32, cube, inv, inv2, sq;
  for (double v : in) {
    const float a = f(v);
    in_f32.push_back(a);
    sq.push_back(a * a);
    cube.push_back(a * a * a);
    inv.push_back(1.0f / a);
    inv2.push_back(1.0f / (a * a));
  }
  expect_values(lz::pow(x, 1.0), kFloat32, {7}, in_f32, 0);
  expect_values(lz::pow(x, 2), kFloat32, {7}, sq, 0);
  expect_values(lz::pow(x, 3.0), kFloat32, {7}, cube, 0);
  expect_values(lz::pow(x, 3), kFloat32, {7}, cube, 0);
  expect_values(lz::pow(x, -1), kFloat32, {7}, inv, 0);
  expect_values(lz::pow(x, -2.0), kFloat32, {7}, inv2, 0);
  for (double e : {1.0, 2.0, 3.0, -1.0, -2.0}) {
    std::string graph = lz::debug::dump_graph({lz::pow(x, e)});
    EXPECT_EQ(graph.find("pow"), std::string::npos) << "x ** " << e << ":\n" << graph;
  }
  // Integers: products wrap as eager's integer pow does; a float exponent stays pow (its result
  // is float), and so does any other exponent.
  expect_values(lz::pow(make({-3, 5, 2}, {3}, kInt64), 3), kInt64, {3}, {-27, 125, 8});
  expect_values(lz::pow(make({1 << 20}, {1}, kInt32), 3), kInt32, {1}, {0});
  EXPECT_NE(lz::debug::dump_graph({lz::pow(make({2}, {1}, kInt64), 3.0)}).find("pow"),
            std::string::npos);
  EXPECT_NE(lz::debug::dump_graph({lz::pow(x, 4)}).find("pow"), std::string::npos);
}

// ---- empty and zero-size ---------------------------------------------------------------------

TEST(OpsElementwise, ZeroSizeDimBroadcastsWithRow) {
  Tensor e = lz::zeros({0, 3});
  expect_values(e + make({1, 2, 3}, {3}), kFloat32, {0, 3}, {});
  expect_values(make({1, 2, 3}, {3}) * e, kFloat32, {0, 3}, {});
}

TEST(OpsElementwise, EmptyTensorUnaryAndCompare) {
  Tensor e = make({}, {0});
  expect_values(lz::exp(e), kFloat32, {0}, {});
  expect_values(e < 1, kBool, {0}, {});
  expect_values(e.to(kInt64), kInt64, {0}, {});
}

TEST(OpsElementwise, ChainOfOpsComputesExpectedValues) {
  Tensor x = make({1, 2, 3}, {3});
  Tensor y = lz::sqrt(x * x + 1) - x / 2;
  expect_values(y, kFloat32, {3},
                {std::sqrt(2.0) - 0.5, std::sqrt(5.0) - 1, std::sqrt(10.0) - 1.5});
}

// ---- more edge cases ---------------------------------------------------------------------------

TEST(OpsElementwise, ReluAndClampPropagateNaN) {
  expect_values(lz::relu(make({kNaN, -1}, {2})), kFloat32, {2}, {kNaN, 0});
  expect_values(lz::clamp(make({kNaN, 5}, {2}), 0, 1), kFloat32, {2}, {kNaN, 1});
}

TEST(OpsElementwise, ClampWithMinAboveMaxGivesMax) {
  expect_values(lz::clamp(make({-1, 0.5, 3}, {3}), 2, 1), kFloat32, {3}, {1, 1, 1});
}

TEST(OpsElementwise, FloatFloorDivideAndRemainderByZero) {
  Tensor a = make({1, -1, 0}, {3});
  expect_values(lz::floor_divide(a, 0.0), kFloat32, {3}, {kInf, -kInf, kNaN});
  expect_values(lz::remainder(a, 0.0), kFloat32, {3}, {kNaN, kNaN, kNaN});
}

TEST(OpsElementwise, FloorDivideAndRemainderBroadcastWithScalarOnLeft) {
  Tensor b = make({3, -3, 4}, {3}, kInt64);
  expect_values(lz::floor_divide(-7, b), kInt64, {3}, {-3, 2, -2});
  expect_values(lz::remainder(-7, b), kInt64, {3}, {2, -1, 1});
  expect_values(lz::remainder(make({5.5}, {}), make({2, -2}, {2, 1})), kFloat32, {2, 1},
                {1.5, -0.5});
}

TEST(OpsElementwise, WhereWithLargestConditionBroadcastsScalars) {
  Tensor c = make({1, 0, 0, 1}, {2, 2}, kBool);
  expect_values(lz::where(c, make({1, 2}, {2}), 0), kFloat32, {2, 2}, {1, 0, 0, 2});
  expect_values(lz::where(c, 1, 0), kInt64, {2, 2}, {1, 0, 0, 1});
  expect_values(lz::where(make({1}, {}, kBool), make({1, 2}, {2}, kInt32), make({5}, {}, kInt64)),
                kInt32, {2}, {1, 2});
}

TEST(OpsElementwise, BoolTensorPlusZeroDimIntTensorIsInt) {
  expect_values(make({1, 0}, {2}, kBool) + make({3}, {}, kInt32), kInt32, {2}, {4, 3});
  expect_values(make({1, 0}, {2}, kBool) + 0.5, kFloat32, {2}, {1.5, 0.5});
}

TEST(OpsElementwise, CompareBoolWithInt) {
  expect_values(make({1, 0}, {2}, kBool) == 1, kBool, {2}, {1, 0});
  expect_values(make({1, 0}, {2}, kBool) < make({2, 0}, {2}, kInt64), kBool, {2}, {1, 0});
}

TEST(OpsElementwise, RoundHalfToEvenFloat64AndLargeValues) {
  expect_values(lz::round(make({0.5, 1.5, 2.5, -2.5, 3.5, 1e15 + 0.5}, {6}, kFloat64)), kFloat64,
                {6}, {0, 2, 2, -2, 4, 1e15}, 1e-15);
}

TEST(OpsElementwise, OpsOnNonContiguousViews) {
  Tensor x = make({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor t = x.T();  // [[0, 3], [1, 4], [2, 5]]
  expect_values(t + make({10, 20}, {2}), kFloat32, {3, 2}, {10, 23, 11, 24, 12, 25});
  expect_values(lz::exp(x.slice(1, 0, 3, 2)), kFloat32, {2, 2},
                {1, std::exp(2.0), std::exp(3.0), std::exp(5.0)});
  expect_values(x.expand({2, 2, 3}) * 2, kFloat32, {2, 2, 3},
                {0, 2, 4, 6, 8, 10, 0, 2, 4, 6, 8, 10});
}

TEST(OpsElementwise, LargeInt64ArithmeticIsExact) {
  Tensor a = make({9007199254740993.0}, {1}, kInt64);  // 2^53 (the double rounds down)
  expect_values(a + 2, kInt64, {1}, {9007199254740994.0});
  EXPECT_EQ((make({4611686018427387904.0}, {1}, kInt64) + 1).item<int64_t>(),
            int64_t{4611686018427387905});
}

}  // namespace
