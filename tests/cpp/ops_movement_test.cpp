// Shape, movement, indexing and creation ops through the public API: views (reshape, squeeze,
// transpose, expand, slice, select, ...), copies (cat, stack, contiguous), splitting, integer
// indexing (index_select, gather, scatter_add, index_copy), and every creation op including the
// random ones (range, moments, seeding). Expectations are written out or built with plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
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

// start, start + 1, ..., start + n - 1.
std::vector<double> iota(int n, double start = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(start + i);
  return v;
}

// [2, 3] holding 0..5.
Tensor m23() { return make(iota(6), {2, 3}); }

// ---- reshape / view / flatten / squeeze / unsqueeze -------------------------------------------

TEST(OpsMovement, ReshapeInfersMinusOne) {
  expect_values(lz::reshape(m23(), {3, -1}), kFloat32, {3, 2}, iota(6));
  expect_values(m23().reshape({-1}), kFloat32, {6}, iota(6));
  expect_values(m23().view({1, 6, 1}), kFloat32, {1, 6, 1}, iota(6));
  expect_values(make({7}, {}).reshape({1, 1}), kFloat32, {1, 1}, {7});
  expect_values(make({7}, {1, 1}).reshape({}), kFloat32, {}, {7});
  expect_values(make({}, {0, 3}).reshape({3, -1, 2}), kFloat32, {3, 0, 2}, {});
}

TEST(OpsMovement, ReshapeOfTransposedReadsInLogicalOrder) {
  expect_values(m23().transpose(0, 1).reshape({6}), kFloat32, {6}, {0, 3, 1, 4, 2, 5});
}

TEST(OpsMovement, FlattenRanges) {
  Tensor x = make(iota(24), {2, 3, 4});
  expect_values(lz::flatten(x), kFloat32, {24}, iota(24));
  expect_values(x.flatten(1), kFloat32, {2, 12}, iota(24));
  expect_values(x.flatten(0, -2), kFloat32, {6, 4}, iota(24));
  expect_values(make({3}, {}).flatten(), kFloat32, {1}, {3});
}

TEST(OpsMovement, SqueezeAllOrOneDim) {
  Tensor x = make(iota(3), {1, 3, 1});
  expect_values(lz::squeeze(x), kFloat32, {3}, iota(3));
  expect_values(x.squeeze(0), kFloat32, {3, 1}, iota(3));
  expect_values(x.squeeze(-1), kFloat32, {1, 3}, iota(3));
  expect_values(x.squeeze(1), kFloat32, {1, 3, 1}, iota(3));  // size 3: unchanged
}

TEST(OpsMovement, UnsqueezeNegativeDims) {
  Tensor x = make(iota(6), {2, 3});
  expect_values(lz::unsqueeze(x, 0), kFloat32, {1, 2, 3}, iota(6));
  expect_values(x.unsqueeze(-1), kFloat32, {2, 3, 1}, iota(6));
  expect_values(x.unsqueeze(-2), kFloat32, {2, 1, 3}, iota(6));
  expect_values(x.unsqueeze(2), kFloat32, {2, 3, 1}, iota(6));
  expect_values(make({1}, {}).unsqueeze(0), kFloat32, {1}, {1});
}

// ---- transpose / permute / T ------------------------------------------------------------------

TEST(OpsMovement, TransposeAndT) {
  expect_values(lz::transpose(m23(), 0, 1), kFloat32, {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(m23().transpose(-1, -2), kFloat32, {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(m23().T(), kFloat32, {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(make(iota(3), {3}).T(), kFloat32, {3}, iota(3));
}

TEST(OpsMovement, PermuteThreeD) {
  Tensor x = make(iota(24), {2, 3, 4});
  std::vector<double> e;  // out[k][i][j] = x[i][j][k]
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) e.push_back(i * 12 + j * 4 + k);
  expect_values(lz::permute(x, {2, 0, 1}), kFloat32, {4, 2, 3}, e);
  expect_values(x.permute({-1, 0, -2}), kFloat32, {4, 2, 3}, e);
  std::vector<double> r;  // T reverses all dims: out[k][j][i] = x[i][j][k]
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) r.push_back(i * 12 + j * 4 + k);
  expect_values(x.T(), kFloat32, {4, 3, 2}, r);
}

// ---- expand / broadcast_to --------------------------------------------------------------------

TEST(OpsMovement, ExpandWithMinusOneAndNewLeadingDims) {
  Tensor col = make({1, 2}, {2, 1});
  expect_values(col.expand({-1, 3}), kFloat32, {2, 3}, {1, 1, 1, 2, 2, 2});
  expect_values(lz::expand(col, {2, 2, 3}), kFloat32, {2, 2, 3},
                {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  expect_values(col.expand({2, -1, -1}), kFloat32, {2, 2, 1}, {1, 2, 1, 2});
  expect_values(make({5}, {}).expand({2, 2}), kFloat32, {2, 2}, {5, 5, 5, 5});
}

TEST(OpsMovement, BroadcastToRow) {
  expect_values(lz::broadcast_to(make({1, 2, 3}, {3}), {2, 3}), kFloat32, {2, 3},
                {1, 2, 3, 1, 2, 3});
  expect_values(lz::broadcast_to(make({1, 2, 3}, {3}), {0, 3}), kFloat32, {0, 3}, {});
}

// ---- slice / select ---------------------------------------------------------------------------

TEST(OpsMovement, SliceWithSteps) {
  Tensor x = make(iota(10), {10});
  expect_values(lz::slice(x, 0, 1, 8, 3), kFloat32, {3}, {1, 4, 7});
  expect_values(x.slice(0, std::nullopt, std::nullopt, 4), kFloat32, {3}, {0, 4, 8});
  expect_values(x.slice(0, 1, std::nullopt, 2), kFloat32, {5}, {1, 3, 5, 7, 9});
}

TEST(OpsMovement, SliceNegativeAndOutOfRangeBoundsFollowPython) {
  Tensor x = make(iota(10), {10});
  expect_values(x.slice(0, -3), kFloat32, {3}, {7, 8, 9});
  expect_values(x.slice(0, std::nullopt, -8), kFloat32, {2}, {0, 1});
  expect_values(x.slice(0, 8, 100), kFloat32, {2}, {8, 9});
  expect_values(x.slice(0, -100, 2), kFloat32, {2}, {0, 1});
  expect_values(x.slice(0, 6, 2), kFloat32, {0}, {});
  expect_values(x.slice(0, 20, 30), kFloat32, {0}, {});
  expect_values(x.slice(0, -4, -1, 2), kFloat32, {2}, {6, 8});
}

TEST(OpsMovement, SliceInnerDimOfMatrix) {
  Tensor x = make(iota(12), {3, 4});
  expect_values(x.slice(1, 1, std::nullopt, 2), kFloat32, {3, 2}, {1, 3, 5, 7, 9, 11});
  expect_values(x.slice(-2, 1, 3).slice(-1, 0, 4, 3), kFloat32, {2, 2}, {4, 7, 8, 11});
}

TEST(OpsMovement, SelectWithNegativeIndex) {
  Tensor x = make(iota(12), {3, 4});
  expect_values(x.select(0, -1), kFloat32, {4}, {8, 9, 10, 11});
  expect_values(lz::select(x, 1, 2), kFloat32, {3}, {2, 6, 10});
  expect_values(x[1], kFloat32, {4}, {4, 5, 6, 7});
  expect_values(x[1][-2], kFloat32, {}, {6});
  EXPECT_EQ(x.select(1, -4)[2].item<float>(), 8.0f);
}

TEST(OpsMovement, ContiguousCopiesValuesOfAView) {
  Tensor t = m23().T().contiguous();
  expect_values(t, kFloat32, {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(lz::contiguous(m23().slice(1, 1)), kFloat32, {2, 2}, {1, 2, 4, 5});
  expect_values(m23().clone(), kFloat32, {2, 3}, iota(6));
}

// ---- cat / stack / split / chunk --------------------------------------------------------------

TEST(OpsMovement, CatAlongDimsWithPromotion) {
  Tensor a = make({1, 2, 3, 4}, {2, 2}, kInt32);
  Tensor b = make({0.5, 1.5}, {2, 1});
  expect_values(lz::cat({a, b}, 1), kFloat32, {2, 3}, {1, 2, 0.5, 3, 4, 1.5});
  expect_values(lz::cat({a, make({9, 8}, {1, 2}, kInt64)}), kInt64, {3, 2}, {1, 2, 3, 4, 9, 8});
  expect_values(lz::cat({a, a}, -1), kInt32, {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST(OpsMovement, CatWithEmptyAndSingle) {
  Tensor a = make({1, 2, 3}, {1, 3});
  expect_values(lz::cat({make({}, {0, 3}), a}), kFloat32, {1, 3}, {1, 2, 3});
  expect_values(lz::cat({a}), kFloat32, {1, 3}, {1, 2, 3});
  expect_values(lz::cat({a, a, a}, 0), kFloat32, {3, 3}, {1, 2, 3, 1, 2, 3, 1, 2, 3});
}

TEST(OpsMovement, StackAtEachPosition) {
  Tensor a = make({1, 2, 3}, {3});
  Tensor b = make({4, 5, 6}, {3});
  expect_values(lz::stack({a, b}), kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(lz::stack({a, b}, 1), kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6});
  expect_values(lz::stack({a, b}, -1), kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6});
  expect_values(lz::stack({make({1}, {}), make({2}, {})}), kFloat32, {2}, {1, 2});
}

TEST(OpsMovement, SplitBySizeLastIsSmaller) {
  auto parts = lz::split(make(iota(5), {5}), 2);
  ASSERT_EQ(parts.size(), 3u);
  expect_values(parts[0], kFloat32, {2}, {0, 1});
  expect_values(parts[1], kFloat32, {2}, {2, 3});
  expect_values(parts[2], kFloat32, {1}, {4});
}

TEST(OpsMovement, SplitBySizesAlongDimOne) {
  auto parts = lz::split(make(iota(8), {2, 4}), std::vector<int64_t>{1, 3}, 1);
  ASSERT_EQ(parts.size(), 2u);
  expect_values(parts[0], kFloat32, {2, 1}, {0, 4});
  expect_values(parts[1], kFloat32, {2, 3}, {1, 2, 3, 5, 6, 7});
}

TEST(OpsMovement, ChunkSizesFollowPyTorch) {
  auto c = lz::chunk(make(iota(5), {5}), 3);
  ASSERT_EQ(c.size(), 3u);
  expect_values(c[0], kFloat32, {2}, {0, 1});
  expect_values(c[2], kFloat32, {1}, {4});
  auto d = lz::chunk(make(iota(6), {6}), 4);  // PyTorch: three chunks of 2
  ASSERT_EQ(d.size(), 3u);
  expect_values(d[2], kFloat32, {2}, {4, 5});
  auto e = lz::chunk(make(iota(6), {2, 3}), 3, -1);
  ASSERT_EQ(e.size(), 3u);
  expect_values(e[1], kFloat32, {2, 1}, {1, 4});
}

// ---- integer indexing -------------------------------------------------------------------------

TEST(OpsMovement, IndexSelectWithRepeatsAndNegativeDim) {
  Tensor x = make(iota(12), {3, 4});
  Tensor idx = make({2, 0, 2}, {3}, kInt64);
  expect_values(lz::index_select(x, 0, idx), kFloat32, {3, 4},
                {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  expect_values(lz::index_select(x, -1, make({3, 1}, {2}, kInt32)), kFloat32, {3, 2},
                {3, 1, 7, 5, 11, 9});
  expect_values(lz::index_select(x, 0, make({}, {0}, kInt64)), kFloat32, {0, 4}, {});
}

TEST(OpsMovement, GatherAlongEachDim) {
  Tensor x = make({1, 2, 3, 4}, {2, 2});
  expect_values(lz::gather(x, 1, make({0, 0, 1, 0}, {2, 2}, kInt64)), kFloat32, {2, 2},
                {1, 1, 4, 3});
  expect_values(lz::gather(x, 0, make({1, 0, 1}, {1, 3}, kInt64).slice(1, 0, 2)), kFloat32,
                {1, 2}, {3, 2});
  expect_values(lz::gather(x, -1, make({1, 1, 1, 0, 0, 0}, {2, 3}, kInt64)), kFloat32, {2, 3},
                {2, 2, 2, 3, 3, 3});
}

TEST(OpsMovement, ScatterAddAccumulatesDuplicates) {
  Tensor x = make({0, 0, 0}, {3});
  expect_values(lz::scatter_add(x, 0, make({0, 1, 0, 2}, {4}, kInt64), make({1, 2, 3, 4}, {4})),
                kFloat32, {3}, {4, 2, 4});
  Tensor y = lz::ones({2, 3});
  Tensor idx = make({1, 0, 1}, {1, 3}, kInt64);
  expect_values(lz::scatter_add(y, 0, idx, make({5, 6, 7}, {1, 3})), kFloat32, {2, 3},
                {1, 7, 1, 6, 1, 8});
  expect_values(x, kFloat32, {3}, {0, 0, 0});  // out of place
}

TEST(OpsMovement, IndexCopyReplacesRows) {
  Tensor x = lz::zeros({3, 2});
  Tensor src = make({1, 2, 3, 4}, {2, 2});
  expect_values(lz::index_copy(x, 0, make({2, 0}, {2}, kInt64), src), kFloat32, {3, 2},
                {3, 4, 0, 0, 1, 2});
  expect_values(lz::index_copy(x, 1, make({1}, {1}, kInt64), make({7, 8, 9}, {3, 1})), kFloat32,
                {3, 2}, {0, 7, 0, 8, 0, 9});
}

// ---- creation ---------------------------------------------------------------------------------

TEST(OpsMovement, TensorFromVectors) {
  expect_values(lz::tensor(std::vector<float>{1.5f, 2.5f}), kFloat32, {2}, {1.5, 2.5});
  expect_values(lz::tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2}), kInt64, {2, 2}, {1, 2, 3, 4});
  expect_values(lz::tensor(std::vector<int32_t>{-7}, {}), kInt32, {}, {-7});
  expect_values(lz::tensor(std::vector<double>{0.1}), kFloat64, {1}, {0.1}, 1e-15);
  expect_values(lz::tensor(std::vector<bool>{true, false}), kBool, {2}, {1, 0});
}

TEST(OpsMovement, ScalarTensorDtypes) {
  expect_values(lz::scalar_tensor(2.5), kFloat32, {}, {2.5});
  expect_values(lz::scalar_tensor(3), kInt64, {}, {3});
  expect_values(lz::scalar_tensor(3, kFloat64), kFloat64, {}, {3});
}

TEST(OpsMovement, ZerosOnesFull) {
  expect_values(lz::zeros({2, 2}), kFloat32, {2, 2}, {0, 0, 0, 0});
  expect_values(lz::ones({3}, kInt32), kInt32, {3}, {1, 1, 1});
  expect_values(lz::zeros({}), kFloat32, {}, {0});
  expect_values(lz::ones({0, 2}), kFloat32, {0, 2}, {});
  expect_values(lz::full({2}, 7), kInt64, {2}, {7, 7});
  expect_values(lz::full({2, 1}, 2.5), kFloat32, {2, 1}, {2.5, 2.5});
  expect_values(lz::full({2}, true), kBool, {2}, {1, 1});
  expect_values(lz::full({2}, 3, kFloat64), kFloat64, {2}, {3, 3});
  expect_values(lz::full({1}, -1.5, kInt32), kInt32, {1}, {-1});
}

TEST(OpsMovement, LikeOpsKeepShapeAndDtype) {
  Tensor i = make({5, 6, 7}, {3, 1}, kInt32);
  expect_values(lz::zeros_like(i), kInt32, {3, 1}, {0, 0, 0});
  expect_values(lz::ones_like(make({1, 2}, {2}, kFloat64)), kFloat64, {2}, {1, 1});
  expect_values(lz::full_like(i, 4), kInt32, {3, 1}, {4, 4, 4});
}

TEST(OpsMovement, ArangeIntFloatAndNegativeStep) {
  expect_values(lz::arange(5), kInt64, {5}, {0, 1, 2, 3, 4});
  expect_values(lz::arange(2, 8, 3), kInt64, {2}, {2, 5});
  expect_values(lz::arange(0, 1, 0.25), kFloat32, {4}, {0, 0.25, 0.5, 0.75});
  expect_values(lz::arange(2.5), kFloat32, {3}, {0, 1, 2});
  expect_values(lz::arange(5, 0, -1), kInt64, {5}, {5, 4, 3, 2, 1});
  expect_values(lz::arange(1.0, 0.0, -0.3), kFloat32, {4}, {1, 0.7, 0.4, 0.1}, 1e-6);
  expect_values(lz::arange(-3, 3, 2), kInt64, {3}, {-3, -1, 1});
  expect_values(lz::arange(0, 3, 1, kFloat64), kFloat64, {3}, {0, 1, 2});
  expect_values(lz::arange(3, 3), kInt64, {0}, {});
}

TEST(OpsMovement, EyeSquareAndRectangular) {
  expect_values(lz::eye(3), kFloat32, {3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  expect_values(lz::eye(2, 3), kFloat32, {2, 3}, {1, 0, 0, 0, 1, 0});
  expect_values(lz::eye(3, 2, kInt64), kInt64, {3, 2}, {1, 0, 0, 1, 0, 0});
  expect_values(lz::eye(0), kFloat32, {0, 0}, {});
}

TEST(OpsMovement, RandIsInUnitIntervalWithPlausibleMean) {
  lz::manual_seed(1);
  Tensor r = lz::rand({100, 100});
  ASSERT_EQ(r.dtype(), kFloat32);
  ASSERT_EQ(r.shape(), (std::vector<int64_t>{100, 100}));
  auto v = r.to_vector<double>();
  double sum = 0;
  for (double x : v) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    sum += x;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);  // std of the mean ~0.003
  std::set<double> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), 9000u);
  EXPECT_EQ(lz::rand({3}, kFloat64).dtype(), kFloat64);
}

TEST(OpsMovement, RandnHasPlausibleMeanAndStd) {
  lz::manual_seed(2);
  auto v = lz::randn({10000}).to_vector<double>();
  double sum = 0, sq = 0;
  for (double x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
  }
  double mean = sum / 10000;
  for (double x : v) sq += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 0.0, 0.05);  // std of the mean 0.01
  EXPECT_NEAR(std::sqrt(sq / 9999), 1.0, 0.05);
}

TEST(OpsMovement, RandintStaysInRangeAndHitsEveryValue) {
  lz::manual_seed(3);
  Tensor r = lz::randint(-3, 4, {2000});
  ASSERT_EQ(r.dtype(), kInt64);
  auto v = r.to_vector<int64_t>();
  std::set<int64_t> seen;
  for (int64_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(lz::randint(0, 2, {4}, kInt32).dtype(), kInt32);
}

TEST(OpsMovement, ManualSeedReproducesAndDifferentSeedDiffers) {
  lz::manual_seed(42);
  auto a = lz::rand({64}).to_vector<float>();
  auto an = lz::randn({8}).to_vector<float>();
  lz::manual_seed(42);
  auto b = lz::rand({64}).to_vector<float>();
  auto bn = lz::randn({8}).to_vector<float>();
  lz::manual_seed(43);
  auto c = lz::rand({64}).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_EQ(an, bn);
  EXPECT_NE(a, c);
  // Two draws after one seed differ from each other.
  lz::manual_seed(42);
  auto d1 = lz::rand({64}).to_vector<float>();
  auto d2 = lz::rand({64}).to_vector<float>();
  EXPECT_NE(d1, d2);
}

TEST(OpsMovement, ManualSeedReproducesWhenDrawsAreReadTogether) {
  // Same seed, same sequence of draws, read lazily in one program.
  lz::manual_seed(7);
  Tensor a1 = lz::rand({16}), a2 = lz::randint(0, 100, {16});
  lz::manual_seed(7);
  Tensor b1 = lz::rand({16}), b2 = lz::randint(0, 100, {16});
  EXPECT_EQ(a1.to_vector<float>(), b1.to_vector<float>());
  EXPECT_EQ(a2.to_vector<int64_t>(), b2.to_vector<int64_t>());
}

// ---- Tensor attributes and printing ------------------------------------------------------------

TEST(OpsMovement, TensorAttributes) {
  Tensor x = lz::zeros({2, 3, 4}, kInt32);
  EXPECT_TRUE(x.defined());
  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(x.dtype(), kInt32);
  EXPECT_EQ(x.dim(), 3);
  EXPECT_EQ(x.ndim(), 3);
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(x.size(0), 2);
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_THROW((void)x.size(3), lz::IndexError);
  EXPECT_NE(x.id(), lz::zeros({1}).id());
  EXPECT_EQ(make({}, {0, 5}).numel(), 0);
  EXPECT_EQ(make({2}, {}).dim(), 0);
}

TEST(OpsMovement, ItemConvertsToEachType) {
  Tensor x = make({2.75}, {});
  EXPECT_EQ(x.item<float>(), 2.75f);
  EXPECT_EQ(x.item<double>(), 2.75);
  EXPECT_EQ(x.item<int64_t>(), 2);
  EXPECT_EQ(x.item<int32_t>(), 2);
  EXPECT_TRUE(x.item<bool>());
  EXPECT_EQ(make({-3}, {1, 1}, kInt64).item<int64_t>(), -3);
  EXPECT_EQ(make({-3}, {1}, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{-3}));
}

TEST(OpsMovement, ToStringShowsValuesLikePyTorch) {
  EXPECT_EQ(make({1, 2, 3, 4}, {2, 2}, kInt64).to_string(), "tensor([[1, 2],\n        [3, 4]])");
  EXPECT_EQ(make({1, 0}, {2}, kBool).to_string(), "tensor([True, False])");
  EXPECT_EQ(make({7}, {}, kInt32).to_string(), "tensor(7, dtype=lazuli.int32)");
  EXPECT_NE(make({1.5}, {1}, kFloat64).to_string().find("dtype=lazuli.float64"), std::string::npos);
}

// ---- more edge cases ---------------------------------------------------------------------------

TEST(OpsMovement, ViewsOfExpandedTensorRead) {
  Tensor e = make({1, 2}, {2, 1}).expand({2, 3});
  expect_values(e.T(), kFloat32, {3, 2}, {1, 2, 1, 2, 1, 2});
  expect_values(e.slice(1, 1), kFloat32, {2, 2}, {1, 1, 2, 2});
  expect_values(e.reshape({6}), kFloat32, {6}, {1, 1, 1, 2, 2, 2});
  expect_values(e[1], kFloat32, {3}, {2, 2, 2});
}

TEST(OpsMovement, CatAndStackOfViews) {
  Tensor x = make(iota(6), {2, 3});
  expect_values(lz::cat({x.T(), x.T().slice(1, 1)}, 1), kFloat32, {3, 3},
                {0, 3, 3, 1, 4, 4, 2, 5, 5});
  expect_values(lz::stack({x.select(1, 0), x.select(1, 2)}), kFloat32, {2, 2}, {0, 3, 2, 5});
  expect_values(lz::stack({make({1}, {1}, kInt32), make({0.5}, {1})}), kFloat32, {2, 1}, {1, 0.5});
}

TEST(OpsMovement, SplitAndChunkOfEmptyAndSmallDims) {
  auto c = lz::chunk(make(iota(2), {2}), 5);
  ASSERT_EQ(c.size(), 2u);
  expect_values(c[1], kFloat32, {1}, {1});
  auto s = lz::split(make({}, {0, 2}), 3);
  ASSERT_EQ(s.size(), 1u);
  expect_values(s[0], kFloat32, {0, 2}, {});
}

TEST(OpsMovement, SqueezeAndTransposeOfRankZero) {
  expect_values(make({4}, {}).squeeze(), kFloat32, {}, {4});
  expect_values(make({4}, {}).squeeze(0), kFloat32, {}, {4});
  expect_values(make({4}, {}).transpose(0, -1), kFloat32, {}, {4});
}

TEST(OpsMovement, ArangeFloatLengthUsesCeil) {
  expect_values(lz::arange(0, 0.3, 0.1), kFloat32, {3}, {0, 0.1, 0.2});
  expect_values(lz::arange(0.5, 2), kFloat32, {2}, {0.5, 1.5});
}

TEST(OpsMovement, EyeAndFullWithBoolDtype) {
  expect_values(lz::eye(2, std::nullopt, kBool), kBool, {2, 2}, {1, 0, 0, 1});
  expect_values(lz::full({2}, 0, kBool), kBool, {2}, {0, 0});
  expect_values(lz::full({2}, 2, kBool), kBool, {2}, {1, 1});
}

}  // namespace
