// Reductions and matmul through the public API: every reduction with dim lists (negative dims),
// keepdim, empty inputs and integer accumulation, and matmul for each rank combination and
// batch broadcasting. Expected values come from plain loops in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

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

// 0, 1, ..., n-1.
std::vector<double> iota(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// x of shape [2, 3, 4] holding 0..23 (row-major).
Tensor cube() { return make(iota(24), {2, 3, 4}); }

// ---- sum / mean / prod ----------------------------------------------------------------------

TEST(OpsReduce, SumAllGivesRankZero) {
  expect_values(lz::sum(cube()), kFloat32, {}, {276});
  expect_values(cube().sum(), kFloat32, {}, {276});
}

TEST(OpsReduce, SumOverOneDimAndNegativeDim) {
  std::vector<double> e1(8, 0), elast(6, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        e1[i * 4 + k] += i * 12 + j * 4 + k;
        elast[i * 3 + j] += i * 12 + j * 4 + k;
      }
  expect_values(lz::sum(cube(), {1}), kFloat32, {2, 4}, e1);
  expect_values(lz::sum(cube(), {-2}), kFloat32, {2, 4}, e1);
  expect_values(cube().sum({-1}), kFloat32, {2, 3}, elast);
}

TEST(OpsReduce, SumOverDimListWithKeepdim) {
  std::vector<double> e(3, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) e[j] += i * 12 + j * 4 + k;
  expect_values(lz::sum(cube(), {0, -1}), kFloat32, {3}, e);
  expect_values(lz::sum(cube(), {-1, 0}, true), kFloat32, {1, 3, 1}, e);
  expect_values(lz::sum(cube(), {}, true), kFloat32, {1, 1, 1}, {276});
}

TEST(OpsReduce, IntSumsGiveInt64) {
  expect_values(lz::sum(make({1, 2, 3, 4}, {2, 2}, kInt32), {0}), kInt64, {2}, {4, 6});
  expect_values(lz::sum(make({1, 0, 1}, {3}, kBool)), kInt64, {}, {2});
  expect_values(lz::sum(make({3000000000.0, 3000000000.0}, {2}, kInt64)), kInt64, {}, {6e9});
}

TEST(OpsReduce, SumOfEmptyIsZero) {
  expect_values(lz::sum(lz::zeros({0, 3}), {0}), kFloat32, {3}, {0, 0, 0});
  expect_values(lz::sum(make({}, {0, 3}), {1}), kFloat32, {0}, {});
  expect_values(lz::sum(make({}, {0}, kInt32)), kInt64, {}, {0});
  expect_values(lz::prod(make({}, {0, 2}), {0}), kFloat32, {2}, {1, 1});
}

TEST(OpsReduce, SumOfRankZeroOverDimZeroIsIdentity) {
  expect_values(lz::sum(make({5}, {}), {0}), kFloat32, {}, {5});
  expect_values(lz::sum(make({5}, {}), {-1}, true), kFloat32, {}, {5});
}

TEST(OpsReduce, MeanOverDims) {
  expect_values(lz::mean(cube()), kFloat32, {}, {11.5});
  std::vector<double> e(4, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) e[k] += (i * 12 + j * 4 + k) / 6.0;
  expect_values(lz::mean(cube(), {0, 1}), kFloat32, {4}, e, 1e-6);
  expect_values(cube().mean({1, 0}, true), kFloat32, {1, 1, 4}, e, 1e-6);
  expect_values(lz::mean(make({1, 2}, {2}, kFloat64)), kFloat64, {}, {1.5});
}

TEST(OpsReduce, MeanOfEmptyIsNaN) {
  expect_values(lz::mean(make({}, {0})), kFloat32, {}, {kNaN});
}

TEST(OpsReduce, ProdOverDims) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(lz::prod(x), kFloat32, {}, {720});
  expect_values(lz::prod(x, {1}), kFloat32, {2}, {6, 120});
  expect_values(lz::prod(x, {0}, true), kFloat32, {1, 3}, {4, 10, 18});
  expect_values(lz::prod(make({2, -3}, {2}, kInt32)), kInt64, {}, {-6});
}

// ---- amax / amin / argmax / argmin / max / min ----------------------------------------------

TEST(OpsReduce, AmaxAminOverDimLists) {
  Tensor x = make({3, -1, 7, 0, 9, -4}, {2, 3});
  expect_values(lz::amax(x), kFloat32, {}, {9});
  expect_values(lz::amin(x), kFloat32, {}, {-4});
  expect_values(x.amax({1}), kFloat32, {2}, {7, 9});
  expect_values(x.amin({-2}, true), kFloat32, {1, 3}, {0, -1, -4});
  expect_values(lz::amax(x, {0, 1}, true), kFloat32, {1, 1}, {9});
  expect_values(lz::amax(make({2, 5, 1}, {3}, kInt64)), kInt64, {}, {5});
  expect_values(lz::max(x), kFloat32, {}, {9});
  expect_values(lz::min(x), kFloat32, {}, {-4});
}

TEST(OpsReduce, AmaxPropagatesNaN) {
  expect_values(lz::amax(make({1, kNaN, 3}, {3})), kFloat32, {}, {kNaN});
  expect_values(lz::amin(make({1, kNaN, 3}, {3})), kFloat32, {}, {kNaN});
}

TEST(OpsReduce, ArgmaxArgminOverFlattenedAndDim) {
  Tensor x = make({3, -1, 9, 0, 9, -4}, {2, 3});
  expect_values(lz::argmax(x), kInt64, {}, {2});  // first of the ties
  expect_values(lz::argmin(x), kInt64, {}, {5});
  expect_values(x.argmax(1), kInt64, {2}, {2, 1});
  expect_values(x.argmin(0), kInt64, {3}, {1, 0, 1});
  expect_values(lz::argmax(x, -1, true), kInt64, {2, 1}, {2, 1});
  expect_values(lz::argmax(x, std::nullopt, true), kInt64, {1, 1}, {2});
  expect_values(lz::argmax(make({4}, {}), 0), kInt64, {}, {0});
}

TEST(OpsReduce, ArgmaxTiesPickTheFirstIndex) {
  expect_values(lz::argmax(make({1, 5, 5, 5}, {4})), kInt64, {}, {1});
  expect_values(lz::argmin(make({0, 0, -1, -1}, {2, 2}), 1), kInt64, {2}, {0, 0});
}

TEST(OpsReduce, MaxMinWithDimGiveValuesAndIndices) {
  Tensor x = make({3, -1, 7, 0, 9, -4}, {2, 3});
  auto [vmax, imax] = lz::max(x, 1);
  expect_values(vmax, kFloat32, {2}, {7, 9});
  expect_values(imax, kInt64, {2}, {2, 1});
  auto [vmin, imin] = lz::min(x, 0, true);
  expect_values(vmin, kFloat32, {1, 3}, {0, -1, -4});
  expect_values(imin, kInt64, {1, 3}, {1, 0, 1});
  auto [vi, ii] = lz::max(make({2, 8, 8}, {3}, kInt32), -1);
  expect_values(vi, kInt32, {}, {8});
  expect_values(ii, kInt64, {}, {1});
}

// ---- var / std / logsumexp ---------------------------------------------------------------------

TEST(OpsReduce, VarAndStdWithCorrectionZeroAndOne) {
  Tensor x = make({1, 2, 3, 4}, {4});
  expect_values(lz::var(x), kFloat32, {}, {5.0 / 3});
  expect_values(lz::var(x, {}, 0), kFloat32, {}, {1.25});
  expect_values(lz::std(x), kFloat32, {}, {std::sqrt(5.0 / 3)});
  expect_values(lz::std(x, {0}, 0), kFloat32, {}, {std::sqrt(1.25)});
}

TEST(OpsReduce, VarOverDimWithKeepdim) {
  Tensor x = make({1, 2, 3, 2, 4, 9}, {2, 3});
  // rows: mean 2 -> ss 2; mean 5 -> ss 9 + 1 + 16 = 26
  expect_values(lz::var(x, {1}), kFloat32, {2}, {1, 13});
  expect_values(lz::var(x, {-1}, 0, true), kFloat32, {2, 1}, {2.0 / 3, 26.0 / 3});
  // columns: pairs (1,2) (2,4) (3,9): ss 0.5, 2, 18
  expect_values(lz::std(x, {0}, 1, true), kFloat32, {1, 3},
                {std::sqrt(0.5), std::sqrt(2.0), std::sqrt(18.0)});
}

TEST(OpsReduce, VarOfOneElementWithCorrectionIsNaNOrInf) {
  // n - correction = 0: PyTorch gives nan (0/0) for a single element.
  expect_values(lz::var(make({3}, {1})), kFloat32, {}, {kNaN});
}

TEST(OpsReduce, LogsumexpRowsIncludingMinusInf) {
  Tensor x = make({1, 2, 3, -kInf, -kInf, -kInf, 1000, 1000, -kInf}, {3, 3});
  double r0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expect_values(lz::logsumexp(x, {1}), kFloat32, {3}, {r0, -kInf, 1000 + std::log(2.0)});
  expect_values(lz::logsumexp(x, {-1}, true), kFloat32, {3, 1}, {r0, -kInf, 1000 + std::log(2.0)});
}

TEST(OpsReduce, LogsumexpWithPlusInfIsInf) {
  expect_values(lz::logsumexp(make({1, kInf}, {2})), kFloat32, {}, {kInf});
}

TEST(OpsReduce, LogsumexpOverAllDimsAndOfEmpty) {
  Tensor x = make({0, 0, 0, 0}, {2, 2});
  expect_values(lz::logsumexp(x), kFloat32, {}, {std::log(4.0)});
  expect_values(lz::logsumexp(make({}, {0})), kFloat32, {}, {-kInf});
  expect_values(lz::logsumexp(make({}, {2, 0}), {1}), kFloat32, {2}, {-kInf, -kInf});
}

TEST(OpsReduce, LogsumexpOfIntIsFloat32) {
  expect_values(lz::logsumexp(make({0, 0}, {2}, kInt64)), kFloat32, {}, {std::log(2.0)});
}

// ---- all / any --------------------------------------------------------------------------------

TEST(OpsReduce, AllAnyOverDims) {
  Tensor b = make({1, 1, 0, 1, 1, 1}, {2, 3}, kBool);
  expect_values(lz::all(b), kBool, {}, {0});
  expect_values(lz::any(b), kBool, {}, {1});
  expect_values(lz::all(b, {1}), kBool, {2}, {0, 1});
  expect_values(lz::all(b, {0}, true), kBool, {1, 3}, {1, 1, 0});
  expect_values(lz::any(make({0, 0, 0, 2}, {2, 2}, kInt64), {-1}), kBool, {2}, {0, 1});
  expect_values(lz::all(make({0.5, -1}, {2})), kBool, {}, {1});
}

TEST(OpsReduce, AllOfEmptyIsTrueAndAnyIsFalse) {
  expect_values(lz::all(make({}, {0}, kBool)), kBool, {}, {1});
  expect_values(lz::any(make({}, {0}, kBool)), kBool, {}, {0});
  expect_values(lz::all(make({}, {0, 2}), {0}), kBool, {2}, {1, 1});
  expect_values(lz::any(make({}, {0, 2}), {0}), kBool, {2}, {0, 0});
}

// ---- matmul -----------------------------------------------------------------------------------

// Plain-loop reference: a [m, k] @ b [k, n].
std::vector<double> mm(const std::vector<double>& a, const std::vector<double>& b, int m, int k,
                       int n) {
  std::vector<double> c(static_cast<size_t>(m * n), 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

TEST(OpsReduce, MatmulTwoD) {
  std::vector<double> a{1, 2, 3, 4, 5, 6}, b{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  expect_values(lz::matmul(make(a, {2, 3}), make(b, {3, 4})), kFloat32, {2, 4}, mm(a, b, 2, 3, 4));
  expect_values(make(a, {2, 3}).matmul(make(b, {3, 4})), kFloat32, {2, 4}, mm(a, b, 2, 3, 4));
}

TEST(OpsReduce, MatmulVectorCases) {
  std::vector<double> v{1, -1, 2}, m{1, 2, 3, 4, 5, 6};
  // [3] @ [3, 2] -> [2]
  expect_values(lz::matmul(make(v, {3}), make(m, {3, 2})), kFloat32, {2}, mm(v, m, 1, 3, 2));
  // [2, 3] @ [3] -> [2]
  expect_values(lz::matmul(make(m, {2, 3}), make(v, {3})), kFloat32, {2}, mm(m, v, 2, 3, 1));
  // [3] @ [3] -> []
  expect_values(lz::matmul(make(v, {3}), make({4, 5, 6}, {3})), kFloat32, {}, {4 - 5 + 12});
}

TEST(OpsReduce, MatmulBatchedWithBroadcasting) {
  // [2, 1, 3, 4] @ [5, 4, 2] -> [2, 5, 3, 2]
  std::vector<double> a, b;
  for (int i = 0; i < 24; ++i) a.push_back((i % 7) - 3);
  for (int i = 0; i < 40; ++i) b.push_back((i % 5) * 0.5 - 1);
  std::vector<double> e;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) {
      std::vector<double> ai(a.begin() + i * 12, a.begin() + (i + 1) * 12);
      std::vector<double> bj(b.begin() + j * 8, b.begin() + (j + 1) * 8);
      auto c = mm(ai, bj, 3, 4, 2);
      e.insert(e.end(), c.begin(), c.end());
    }
  expect_values(lz::matmul(make(a, {2, 1, 3, 4}), make(b, {5, 4, 2})), kFloat32, {2, 5, 3, 2}, e);
}

TEST(OpsReduce, MatmulBatchedWithVector) {
  // [2, 2, 3] @ [3] -> [2, 2];  [3] @ [2, 3, 2] -> [2, 2]
  std::vector<double> a = iota(12), v{1, 0, -1};
  expect_values(lz::matmul(make(a, {2, 2, 3}), make(v, {3})), kFloat32, {2, 2}, {-2, -2, -2, -2});
  std::vector<double> e;
  for (int bi = 0; bi < 2; ++bi) {
    std::vector<double> bb(a.begin() + bi * 6, a.begin() + (bi + 1) * 6);
    auto c = mm(v, bb, 1, 3, 2);
    e.insert(e.end(), c.begin(), c.end());
  }
  expect_values(lz::matmul(make(v, {3}), make(a, {2, 3, 2})), kFloat32, {2, 2}, e);
}

TEST(OpsReduce, MatmulWithZeroInnerDimIsZeros) {
  expect_values(lz::matmul(make({}, {2, 0}), make({}, {0, 3})), kFloat32, {2, 3},
                {0, 0, 0, 0, 0, 0});
  expect_values(lz::matmul(make({}, {0}), make({}, {0})), kFloat32, {}, {0});
}

TEST(OpsReduce, MatmulIntAndFloat64) {
  expect_values(lz::matmul(make({1, 2, 3, 4}, {2, 2}, kInt64), make({1, 0, 0, 1}, {2, 2}, kInt64)),
                kInt64, {2, 2}, {1, 2, 3, 4});
  expect_values(lz::matmul(make({0.1, 0.2}, {1, 2}, kFloat64), make({10, 10}, {2, 1}, kFloat64)),
                kFloat64, {1, 1}, {3.0}, 1e-14);
}

// ---- more edge cases ---------------------------------------------------------------------------

TEST(OpsReduce, ReductionsOverNonContiguousViews) {
  Tensor x = make(iota(6), {2, 3});
  Tensor t = x.T();  // [[0, 3], [1, 4], [2, 5]]
  expect_values(t.sum({1}), kFloat32, {3}, {3, 5, 7});
  expect_values(lz::argmax(t, 0), kInt64, {2}, {2, 2});
  expect_values(lz::amax(x.slice(1, 0, 3, 2), {0}), kFloat32, {2}, {3, 5});
  expect_values(lz::sum(x.expand({4, 2, 3}), {0}), kFloat32, {2, 3}, {0, 4, 8, 12, 16, 20});
}

TEST(OpsReduce, LogsumexpOverTwoOfThreeDims) {
  // x[i][j][k] = i + j * 0.5 + k; reduce dims 0 and 2.
  std::vector<double> v, e(3, 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) {
        v.push_back(i + j * 0.5 + k);
        e[j] += std::exp(i + j * 0.5 + k);
      }
  for (double& d : e) d = std::log(d);
  expect_values(lz::logsumexp(make(v, {2, 3, 2}), {0, -1}), kFloat32, {3}, e, 1e-6);
  expect_values(lz::logsumexp(make(v, {2, 3, 2}), {2, 0}, true), kFloat32, {1, 3, 1}, e, 1e-6);
}

TEST(OpsReduce, VarOverTwoDims) {
  // values 1..6 in [2, 3]; all dims: mean 3.5, ss 17.5
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(lz::var(x, {0, 1}), kFloat32, {}, {3.5});
  expect_values(lz::var(x, {-1, -2}, 0, true), kFloat32, {1, 1}, {17.5 / 6});
  expect_values(lz::std(make({1, 3}, {2}, kFloat64), {}, 0), kFloat64, {}, {1}, 1e-15);
}

TEST(OpsReduce, ArgmaxKeepdimOnThreeD) {
  Tensor x = make({0, 9, 2, 3, 4, 5, 6, 7, 8, 1, 10, 0}, {2, 3, 2});
  // argmax over dim 1: batch 0 columns (0,2,4),(9,3,5) -> 2, 0; batch 1 (6,8,10),(7,1,0) -> 2, 0
  expect_values(lz::argmax(x, 1, true), kInt64, {2, 1, 2}, {2, 0, 2, 0});
  expect_values(lz::argmin(x, -1), kInt64, {2, 3}, {0, 0, 0, 0, 1, 1});
}

TEST(OpsReduce, AllTreatsNaNAsTrue) {
  expect_values(lz::all(make({kNaN, 1}, {2})), kBool, {}, {1});
  expect_values(lz::any(make({0, kNaN}, {2})), kBool, {}, {1});
}

TEST(OpsReduce, AmaxOfEmptyThrows) {
  // PyTorch: max over an empty dim has no identity and raises.
  EXPECT_THROW((void)lz::amax(make({}, {0})).item<float>(), lz::Error);
  EXPECT_THROW((void)lz::argmax(make({}, {0, 3})), lz::Error);
}

TEST(OpsReduce, MatmulOfTransposedViews) {
  std::vector<double> a{1, 2, 3, 4, 5, 6};
  Tensor x = make(a, {3, 2});
  // x.T() @ x: [2, 3] @ [3, 2]
  std::vector<double> at{1, 3, 5, 2, 4, 6};
  expect_values(lz::matmul(x.T(), x), kFloat32, {2, 2}, mm(at, a, 2, 3, 2));
  expect_values(lz::matmul(x.slice(0, 0, 3, 2), make({1, 1}, {2})), kFloat32, {2}, {3, 11});
}

}  // namespace
