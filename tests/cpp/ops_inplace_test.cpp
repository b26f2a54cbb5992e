// In-place ops through the public API: arithmetic with tensors, scalars and alpha, copy_, zero_,
// fill_, clamp_, index_put_, scatter_add_ and the augmented assignments; writes through views
// (select, strided slice, transpose, reshape chains) reaching the base and every other view; and
// the in-place errors (expanded views, uncastable result dtypes, shape changes) that must leave
// the tensor unchanged.
#include <gtest/gtest.h>

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

// [2, 3] holding 0..5.
Tensor m23(lz::DType dt = kFloat32) { return make({0, 1, 2, 3, 4, 5}, {2, 3}, dt); }

// ---- arithmetic ---------------------------------------------------------------------------------

TEST(OpsInplace, AddSubWithTensorScalarAndAlpha) {
  Tensor x = make({1, 2, 3}, {3});
  Tensor y = make({10, 20, 30}, {3});
  x.add_(y);
  expect_values(x, kFloat32, {3}, {11, 22, 33});
  x.add_(y, 2);
  expect_values(x, kFloat32, {3}, {31, 62, 93});
  x.sub_(y, 3);
  expect_values(x, kFloat32, {3}, {1, 2, 3});
  x.sub_(0.5);
  expect_values(x, kFloat32, {3}, {0.5, 1.5, 2.5});
  x.add_(1);
  expect_values(x, kFloat32, {3}, {1.5, 2.5, 3.5});
  x.sub_(y);
  expect_values(x, kFloat32, {3}, {-8.5, -17.5, -26.5});
}

TEST(OpsInplace, AddWithFractionalAlpha) {
  Tensor x = make({1, 1}, {2});
  x.add_(make({2, 4}, {2}), 0.5);
  expect_values(x, kFloat32, {2}, {2, 3});
}

TEST(OpsInplace, MulDivWithTensorAndScalar) {
  Tensor x = make({1, 2, 3}, {3});
  x.mul_(make({2, 3, 4}, {3}));
  expect_values(x, kFloat32, {3}, {2, 6, 12});
  x.mul_(0.5);
  expect_values(x, kFloat32, {3}, {1, 3, 6});
  x.div_(make({1, 3, 4}, {3}));
  expect_values(x, kFloat32, {3}, {1, 1, 1.5});
  x.div_(2);
  expect_values(x, kFloat32, {3}, {0.5, 0.5, 0.75});
}

TEST(OpsInplace, InPlaceBroadcastsTheOtherOperand) {
  Tensor x = m23();
  x.add_(make({10, 20, 30}, {3}));
  expect_values(x, kFloat32, {2, 3}, {10, 21, 32, 13, 24, 35});
  x.mul_(make({1, -1}, {2, 1}));
  expect_values(x, kFloat32, {2, 3}, {10, 21, 32, -13, -24, -35});
}

TEST(OpsInplace, AugmentedAssignments) {
  Tensor x = make({4, 8}, {2});
  x += 1;
  expect_values(x, kFloat32, {2}, {5, 9});
  x -= make({1, 1}, {2});
  expect_values(x, kFloat32, {2}, {4, 8});
  x *= 2.5;
  expect_values(x, kFloat32, {2}, {10, 20});
  x /= make({4, 5}, {2});
  expect_values(x, kFloat32, {2}, {2.5, 4});
  x += make({1, 1}, {2});
  x -= 0.5;
  x *= make({2, 2}, {2});
  x /= 2;
  expect_values(x, kFloat32, {2}, {3, 4.5});
}

TEST(OpsInplace, IntTensorKeepsItsDtypeWithIntOperands) {
  Tensor x = make({1, 2}, {2}, kInt32);
  x += make({5, 5}, {2}, kInt64);  // int64 result, cast back to int32
  x *= 3;
  expect_values(x, kInt32, {2}, {18, 21});
}

TEST(OpsInplace, FloatTensorTakesIntAndDoubleOperands) {
  Tensor x = make({1, 2}, {2});
  x += make({1, 2}, {2}, kInt64);
  x += make({0.5, 0.5}, {2}, kFloat64);  // float64 result, cast back to float32
  expect_values(x, kFloat32, {2}, {2.5, 4.5});
}

TEST(OpsInplace, AddSelfDoubles) {
  Tensor x = make({1, 2, 3}, {3});
  x.add_(x);
  expect_values(x, kFloat32, {3}, {2, 4, 6});
}

TEST(OpsInplace, HandleCopiesShareUpdates) {
  Tensor x = make({1, 2}, {2});
  Tensor alias = x;
  alias += 1;
  expect_values(x, kFloat32, {2}, {2, 3});
}

TEST(OpsInplace, OutOfPlaceResultIsNotAffectedByLaterInPlace) {
  Tensor x = make({1, 2}, {2});
  Tensor y = x * 2;
  x.add_(100);
  expect_values(y, kFloat32, {2}, {2, 4});
  expect_values(x, kFloat32, {2}, {101, 102});
}

// ---- copy_ / zero_ / fill_ / clamp_ -------------------------------------------------------------

TEST(OpsInplace, CopyBroadcastsAndCasts) {
  Tensor x = lz::zeros({2, 3}, kInt32);
  x.copy_(make({1.7, -2.7, 3}, {3}));
  expect_values(x, kInt32, {2, 3}, {1, -2, 3, 1, -2, 3});
  Tensor y = make({0, 0}, {2});
  y.copy_(make({5}, {}, kInt64));
  expect_values(y, kFloat32, {2}, {5, 5});
  Tensor b = make({0, 0}, {2}, kBool);
  b.copy_(make({0.0, 0.1}, {2}));
  expect_values(b, kBool, {2}, {0, 1});
}

TEST(OpsInplace, CopyFromSourceDoesNotAliasIt) {
  Tensor x = lz::zeros({2});
  Tensor src = make({1, 2}, {2});
  x.copy_(src);
  src.add_(10);
  expect_values(x, kFloat32, {2}, {1, 2});
}

TEST(OpsInplace, ZeroAndFill) {
  Tensor x = m23();
  x.zero_();
  expect_values(x, kFloat32, {2, 3}, {0, 0, 0, 0, 0, 0});
  x.fill_(2.5);
  expect_values(x, kFloat32, {2, 3}, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
  Tensor i = m23(kInt64);
  i.fill_(-3);
  expect_values(i, kInt64, {2, 3}, {-3, -3, -3, -3, -3, -3});
  Tensor s = make({1}, {});
  s.fill_(9);
  expect_values(s, kFloat32, {}, {9});
}

TEST(OpsInplace, ClampInPlace) {
  Tensor x = make({-2, 0.5, 3}, {3});
  x.clamp_(-1, 1);
  expect_values(x, kFloat32, {3}, {-1, 0.5, 1});
  Tensor i = make({-5, 5}, {2}, kInt64);
  i.clamp_(0, std::nullopt);
  expect_values(i, kInt64, {2}, {0, 5});
}

// ---- index_put_ / scatter_add_ ------------------------------------------------------------------

TEST(OpsInplace, IndexPutAssignsRows) {
  Tensor x = lz::zeros({3, 2});
  x.index_put_(make({2, 0}, {2}, kInt64), make({1, 2, 3, 4}, {2, 2}));
  expect_values(x, kFloat32, {3, 2}, {3, 4, 0, 0, 1, 2});
  x.index_put_(make({1}, {1}, kInt64), make({9}, {1}));  // broadcast values
  expect_values(x, kFloat32, {3, 2}, {3, 4, 9, 9, 1, 2});
  Tensor v = lz::zeros({4}, kInt64);
  v.index_put_(make({3, 1}, {2}, kInt64), make({7, 8}, {2}, kInt64));
  expect_values(v, kInt64, {4}, {0, 8, 0, 7});
}

TEST(OpsInplace, ScatterAddInPlace) {
  Tensor x = make({1, 1, 1}, {3});
  x.scatter_add_(0, make({2, 2, 0}, {3}, kInt64), make({1, 2, 3}, {3}));
  expect_values(x, kFloat32, {3}, {4, 1, 4});
}

// ---- writes through views -----------------------------------------------------------------------

TEST(OpsInplace, FillOfSelectedRowChangesBase) {
  Tensor x = make({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3});
  auto row = x.select(0, 1);
  row.fill_(7);
  expect_values(x, kFloat32, {3, 3}, {0, 1, 2, 7, 7, 7, 6, 7, 8});
  expect_values(row, kFloat32, {3}, {7, 7, 7});
}

TEST(OpsInplace, AddOfStridedSliceChangesBase) {
  Tensor x = make({0, 1, 2, 3, 4, 5, 6}, {7});
  x.slice(0, 1, std::nullopt, 2).add_(100);
  expect_values(x, kFloat32, {7}, {0, 101, 2, 103, 4, 105, 6});
}

TEST(OpsInplace, AddOfTransposeViewChangesBase) {
  Tensor x = m23();
  Tensor t = x.transpose(0, 1);  // [3, 2]
  t.add_(make({10, 20, 30, 40, 50, 60}, {3, 2}));
  // t[i][j] is x[j][i]
  expect_values(x, kFloat32, {2, 3}, {10, 31, 52, 23, 44, 65});
}

TEST(OpsInplace, OtherViewsOfTheBaseSeeTheUpdate) {
  Tensor x = m23();
  Tensor flat = x.reshape({6});
  Tensor col = x.select(1, 2);
  Tensor tr = x.T();
  x.select(0, 0).mul_(-1);
  expect_values(flat, kFloat32, {6}, {0, -1, -2, 3, 4, 5});
  expect_values(col, kFloat32, {2}, {-2, 5});
  expect_values(tr, kFloat32, {3, 2}, {0, 3, -1, 4, -2, 5});
  x.add_(1);  // an update of the base itself
  expect_values(col, kFloat32, {2}, {-1, 6});
}

TEST(OpsInplace, ViewOfViewWritesThroughToBase) {
  Tensor x = make({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor v = x.T().slice(0, 1, 3)[1];  // x[:, 2]
  v.copy_(make({-1, -2, -3}, {3}));
  expect_values(x, kFloat32, {3, 4}, {0, 1, -1, 3, 4, 5, -2, 7, 8, 9, -3, 11});
}

TEST(OpsInplace, InPlaceOnSelectOfIntTensorAndIndexPutOnView) {
  Tensor x = m23(kInt64);
  x[1] += 10;
  expect_values(x, kInt64, {2, 3}, {0, 1, 2, 13, 14, 15});
  Tensor row0 = x[0];
  row0.index_put_(make({2}, {1}, kInt64), make({-9}, {1}, kInt64));
  expect_values(x, kInt64, {2, 3}, {0, 1, -9, 13, 14, 15});
}

TEST(OpsInplace, ContiguousCopyIsNotAView) {
  Tensor x = m23();
  Tensor c = x.contiguous();
  c.fill_(0);
  expect_values(x, kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor c2 = x.clone();
  x.fill_(1);
  expect_values(c2, kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
}

TEST(OpsInplace, ViewUpdatesSurviveASync) {
  Tensor x = m23();
  lz::sync(true);
  x[0].zero_();
  lz::sync(true);
  expect_values(x, kFloat32, {2, 3}, {0, 0, 0, 3, 4, 5});
  x.slice(1, 2).fill_(-1);
  expect_values(x.reshape({6}), kFloat32, {6}, {0, 0, -1, 3, 4, -1});
}

// ---- errors -------------------------------------------------------------------------------------

TEST(OpsInplace, InPlaceOnExpandedViewThrowsValueError) {
  Tensor x = make({1, 2, 3}, {1, 3});
  Tensor e = x.expand({4, 3});
  EXPECT_THROW(e.add_(1), lz::ValueError);
  EXPECT_THROW(e.fill_(0), lz::ValueError);
  expect_values(x, kFloat32, {1, 3}, {1, 2, 3});
}

TEST(OpsInplace, IntTensorPlusEqualsFloatThrowsTypeErrorAndKeepsValues) {
  Tensor x = make({1, 2}, {2}, kInt64);
  EXPECT_THROW(x += 1.5, lz::TypeError);
  EXPECT_THROW(x.add_(make({0.5, 0.5}, {2})), lz::TypeError);
  EXPECT_THROW(x.div_(2), lz::TypeError);  // true division gives float
  EXPECT_THROW(x.mul_(make({0.5}, {}, kFloat64)), lz::TypeError);
  expect_values(x, kInt64, {2}, {1, 2});
  Tensor b = make({1, 0}, {2}, kBool);
  EXPECT_THROW(b += 1, lz::TypeError);
  expect_values(b, kBool, {2}, {1, 0});
}

TEST(OpsInplace, ShapeChangingInPlaceThrowsAndKeepsValues) {
  Tensor x = make({1, 2, 3}, {3});
  EXPECT_THROW(x.add_(make({1, 2, 3, 4, 5, 6}, {2, 3})), lz::ValueError);
  EXPECT_THROW(x.mul_(make({1, 2, 3}, {3, 1})), lz::ValueError);
  EXPECT_THROW(x.copy_(make({1, 2}, {2})), lz::ValueError);
  EXPECT_THROW(x.copy_(make({1, 2, 3, 4, 5, 6}, {2, 3})), lz::ValueError);
  expect_values(x, kFloat32, {3}, {1, 2, 3});
}

TEST(OpsInplace, FailedInPlaceThroughViewLeavesBaseUnchanged) {
  Tensor x = m23(kInt32);
  Tensor row = x[1];
  EXPECT_THROW(row += 0.5, lz::TypeError);
  EXPECT_THROW(row.add_(make({1, 2}, {2}, kInt32)), lz::ValueError);
  expect_values(x, kInt32, {2, 3}, {0, 1, 2, 3, 4, 5});
}

// ---- more view cases ----------------------------------------------------------------------------

TEST(OpsInplace, FillOfScalarElementViewChangesBase) {
  Tensor x = make({0, 1, 2, 3, 4, 5}, {2, 3});
  x[1][2].fill_(50);
  x.select(1, 0)[0].add_(7);
  expect_values(x, kFloat32, {2, 3}, {7, 1, 2, 3, 4, 50});
}

TEST(OpsInplace, CopyBetweenRowsOfTheSameBase) {
  Tensor x = make({0, 1, 2, 3, 4, 5}, {2, 3});
  x[0].copy_(x[1]);
  expect_values(x, kFloat32, {2, 3}, {3, 4, 5, 3, 4, 5});
  x[1].add_(x[0]);
  expect_values(x, kFloat32, {2, 3}, {3, 4, 5, 6, 8, 10});
}

TEST(OpsInplace, SelectOfExpandedViewCannotBeUpdated) {
  Tensor x = make({1, 2, 3}, {3});
  Tensor e = x.expand({2, 3});
  EXPECT_THROW(e[0].fill_(0), lz::ValueError);
  EXPECT_THROW(e.T().add_(1), lz::ValueError);
  expect_values(x, kFloat32, {3}, {1, 2, 3});
  expect_values(e, kFloat32, {2, 3}, {1, 2, 3, 1, 2, 3});
}

TEST(OpsInplace, UnsqueezedStridedSliceWritesThrough) {
  Tensor x = make({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  Tensor v = x.slice(1, 1, std::nullopt, 2).unsqueeze(0);  // [1, 2, 2]: x[:, 1::2]
  v.mul_(make({10, 100}, {2}));
  expect_values(x, kFloat32, {2, 4}, {0, 10, 2, 300, 4, 50, 6, 700});
}

TEST(OpsInplace, ViewCreatedBeforeBaseCopySeesNewValue) {
  Tensor x = lz::zeros({2, 2});
  Tensor row = x[1];
  x.copy_(make({1, 2, 3, 4}, {2, 2}));
  expect_values(row, kFloat32, {2}, {3, 4});
  x.zero_();
  expect_values(row, kFloat32, {2}, {0, 0});
}

TEST(OpsInplace, ScatterAddAndIndexPutThroughTranspose) {
  Tensor x = lz::zeros({2, 3});
  Tensor t = x.T();  // [3, 2]
  t.index_put_(make({2}, {1}, kInt64), make({1, 2}, {1, 2}));
  expect_values(x, kFloat32, {2, 3}, {0, 0, 1, 0, 0, 2});
  x.T().scatter_add_(0, make({0, 0}, {1, 2}, kInt64), make({5, 6}, {1, 2}));
  expect_values(x, kFloat32, {2, 3}, {5, 0, 1, 6, 0, 2});
}

}  // namespace
