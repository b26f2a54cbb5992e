// Bad input through the public API: each mistake raises the documented exception type, its
// message names the op, the shapes and (where they matter) the dtypes, and the failed op records
// nothing, so the runtime keeps working afterwards (record, read, sync, live-tensor count).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kFloat32;
using lz::kInt32;
using lz::kInt64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;

// Runs `bad`, which must throw E; returns its message ("" if it did not throw E). Checks that
// the failed op left no new live tensor behind, and that the runtime still records, reads and
// syncs afterwards.
template <class E>
std::string expect_throw_and_recover(const std::function<void()>& bad) {
  int64_t live_before = lz::debug::live_tensor_count();
  std::string msg;
  bool thrown = false;
  try {
    bad();
  } catch (const E& e) {
    thrown = true;
    msg = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
  }
  EXPECT_TRUE(thrown) << "expected an exception";
  EXPECT_EQ(lz::debug::live_tensor_count(), live_before) << "the failed op left tensors behind";
  {
    Tensor ok = make({1, 2}, {2}) * 3 + 1;
    expect_values(ok, kFloat32, {2}, {4, 7});
    Tensor pending = lz::exp(make({0}, {1}));
    lz::sync(true);
    expect_values(pending, kFloat32, {1}, {1});
  }
  EXPECT_EQ(lz::debug::live_tensor_count(), live_before);
  return msg;
}

// All of `parts` appear in `msg`.
void expect_mentions(const std::string& msg, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in message: " << msg;
  }
}

TEST(OpsErrors, AddShapeMismatchIsValueErrorNamingShapes) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make({1, 2, 3, 4}, {4});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)(a + b); });
  expect_mentions(msg, {"add", "[2, 3]", "[4]", "float32"});
}

TEST(OpsErrors, MulShapeMismatchNamesBothDtypes) {
  Tensor a = make({1, 2, 3}, {3});
  Tensor b = make({1, 2}, {2}, kInt64);
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)lz::mul(a, b); });
  expect_mentions(msg, {"mul", "[3]", "[2]", "float32", "int64"});
}

TEST(OpsErrors, SumOverDimOutOfRangeIsIndexErrorNamingShape) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string msg = expect_throw_and_recover<lz::IndexError>([&] { (void)lz::sum(x, {5}); });
  expect_mentions(msg, {"sum", "5"});
  // API.md: the message names the shape of the tensor, not only its rank.
  expect_mentions(msg, {"[2, 3]"});
}

TEST(OpsErrors, NegativeDimOutOfRangeIsIndexError) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string msg = expect_throw_and_recover<lz::IndexError>([&] { (void)x.amax({-3}); });
  expect_mentions(msg, {"amax", "-3"});
  expect_throw_and_recover<lz::IndexError>([&] { (void)x.unsqueeze(4); });
  expect_throw_and_recover<lz::IndexError>([&] { (void)x.transpose(0, 2); });
}

TEST(OpsErrors, BitwiseAndOnFloatsIsTypeErrorNamingDtypes) {
  Tensor a = make({1, 2}, {2});
  Tensor b = make({1, 2}, {2});
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)lz::bitwise_and(a, b); });
  expect_mentions(msg, {"bitwise_and", "float32", "[2]"});
  expect_throw_and_recover<lz::TypeError>([&] { (void)lz::bitwise_not(a); });
}

TEST(OpsErrors, SubtractionWithABoolIsTypeErrorAsInPyTorch) {
  // PyTorch refuses `-` when either operand is a bool tensor or a bool, even when the other
  // operand would promote the result to a number.
  Tensor m = make({1, 0}, {2}, lz::kBool);
  Tensor f = make({1, 2}, {2});
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)(m - f); });
  expect_mentions(msg, {"sub", "bool", "float32", "logical_not"});
  expect_throw_and_recover<lz::TypeError>([&] { (void)(f - m); });
  expect_throw_and_recover<lz::TypeError>([&] { (void)lz::sub(f, true); });
  expect_throw_and_recover<lz::TypeError>([&] { (void)lz::sub(true, f); });
  expect_throw_and_recover<lz::TypeError>([&] { (void)f.sub_(m); });
  expect_values(m + f, kFloat32, {2}, {2, 2});  // addition still promotes
}

TEST(OpsErrors, MeanOfIntIsTypeErrorNamingDtype) {
  Tensor x = make({1, 2, 3}, {3}, kInt64);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)lz::mean(x); });
  expect_mentions(msg, {"mean", "int64", "[3]"});
  expect_throw_and_recover<lz::TypeError>([&] { (void)lz::var(x); });
}

TEST(OpsErrors, SelectIndexOutOfRangeIsIndexError) {
  Tensor x = make({1, 2, 3}, {3});
  std::string msg = expect_throw_and_recover<lz::IndexError>([&] { (void)x.select(0, 5); });
  expect_mentions(msg, {"select", "5", "[3]"});
  expect_throw_and_recover<lz::IndexError>([&] { (void)x[-4]; });
}

TEST(OpsErrors, MatmulInnerDimMismatchIsValueError) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = make({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)lz::matmul(a, b); });
  expect_mentions(msg, {"matmul", "[2, 3]", "[4, 2]"});
}

TEST(OpsErrors, MatmulBatchMismatchIsValueError) {
  Tensor a = lz::zeros({2, 3, 4});
  Tensor b = lz::zeros({3, 4, 5});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)lz::matmul(a, b); });
  expect_mentions(msg, {"matmul", "[2, 3, 4]", "[3, 4, 5]"});
}

TEST(OpsErrors, ReshapeToWrongSizeIsValueError) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)x.reshape({4}); });
  expect_mentions(msg, {"reshape", "[2, 3]", "[4]"});
  msg = expect_throw_and_recover<lz::ValueError>([&] { (void)x.reshape({4, -1}); });
  expect_mentions(msg, {"reshape", "[2, 3]", "[4, -1]"});
  expect_throw_and_recover<lz::ValueError>([&] { (void)x.reshape({-1, -1}); });
}

TEST(OpsErrors, CatOfMismatchedShapesIsValueError) {
  Tensor a = lz::zeros({2, 3});
  Tensor b = lz::zeros({2, 4});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)lz::cat({a, b}, 0); });
  expect_mentions(msg, {"cat", "[2, 3]", "[2, 4]"});
  msg = expect_throw_and_recover<lz::ValueError>([&] { (void)lz::cat({a, lz::zeros({3})}); });
  expect_mentions(msg, {"cat", "[2, 3]", "[3]"});
}

TEST(OpsErrors, StackOfMismatchedShapesIsValueError) {
  std::string msg = expect_throw_and_recover<lz::ValueError>(
      [&] { (void)lz::stack({lz::zeros({2}), lz::zeros({3})}); });
  expect_mentions(msg, {"stack", "[2]", "[3]"});
}

TEST(OpsErrors, ExpandToIncompatibleShapeIsValueError) {
  Tensor x = lz::zeros({2, 3});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)x.expand({4, 3}); });
  expect_mentions(msg, {"expand", "[2, 3]", "[4, 3]"});
}

TEST(OpsErrors, WhereWithNonBoolConditionIsTypeError) {
  Tensor c = make({1, 0}, {2}, kInt32);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)lz::where(c, 1, 0); });
  expect_mentions(msg, {"where", "int32", "[2]"});
}

TEST(OpsErrors, IndexSelectWithFloatIndexIsTypeError) {
  Tensor x = lz::zeros({3});
  std::string msg = expect_throw_and_recover<lz::TypeError>(
      [&] { (void)lz::index_select(x, 0, make({0}, {1})); });
  expect_mentions(msg, {"index_select", "float32", "[1]"});
}

TEST(OpsErrors, SubOfBoolsIsTypeError) {
  Tensor b = make({1, 0}, {2}, lz::kBool);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)(b - b); });
  expect_mentions(msg, {"sub", "bool"});
  expect_throw_and_recover<lz::TypeError>([&] { (void)(-b); });
}

TEST(OpsErrors, BadCreationArgumentsAreValueErrors) {
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::zeros({2, -1}); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::arange(0, 5, -1); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::arange(0, 5, 0); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::randint(3, 3, {2}); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::eye(-1); });
}

TEST(OpsErrors, ItemOfManyElementsIsValueError) {
  Tensor x = lz::zeros({2});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)x.item<float>(); });
  expect_mentions(msg, {"item", "[2]"});
}

TEST(OpsErrors, AllErrorsDeriveFromLzError) {
  Tensor x = lz::zeros({2});
  EXPECT_THROW((void)x.select(0, 9), lz::Error);
  EXPECT_THROW((void)(x + lz::zeros({3})), lz::Error);
  EXPECT_THROW((void)lz::bitwise_or(x, x), std::runtime_error);
}

TEST(OpsErrors, ManyFailedOpsLeaveNoTensorsBehind) {
  Tensor a = make({1, 2, 3}, {3});
  Tensor b = make({1, 2}, {2});
  int64_t before = lz::debug::live_tensor_count();
  for (int i = 0; i < 50; ++i) {
    EXPECT_THROW((void)(a + b), lz::ValueError);
    EXPECT_THROW((void)lz::sum(a, {3}), lz::IndexError);
    EXPECT_THROW((void)lz::matmul(a, b), lz::ValueError);
  }
  EXPECT_EQ(lz::debug::live_tensor_count(), before);
  expect_values(a + 1, kFloat32, {3}, {2, 3, 4});
  lz::sync(true);
}

TEST(OpsErrors, UndefinedTensorOperandIsValueError) {
  Tensor x = make({1, 2}, {2});
  Tensor undefined;
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)(x + undefined); });
  expect_mentions(msg, {"add", "undefined"});
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::mul(undefined, x); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::where(x > 1, undefined, 0); });
  expect_throw_and_recover<lz::ValueError>([&] { x.add_(undefined); });
  expect_values(x, kFloat32, {2}, {1, 2});
}

TEST(OpsErrors, UndefinedTensorInUnaryAndReductionIsValueError) {
  Tensor undefined;
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::exp(undefined); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)lz::sum(undefined); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)undefined.reshape({1}); });
  expect_throw_and_recover<lz::ValueError>([&] { (void)undefined.item<float>(); });
}

TEST(OpsErrors, StdOfIntIsTypeErrorNamingStd) {
  Tensor x = make({1, 2, 3}, {3}, kInt64);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)lz::std(x); });
  expect_mentions(msg, {"std", "int64", "[3]"});
}

TEST(OpsErrors, MatmulDtypeMismatchIsTypeErrorNamingDtypes) {
  Tensor a = lz::zeros({2, 2});
  Tensor b = lz::zeros({2, 2}, kInt64);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { (void)lz::matmul(a, b); });
  expect_mentions(msg, {"matmul", "float32", "int64", "[2, 2]"});
}

TEST(OpsErrors, IndexPutWithWrongValuesShapeNamesIndexPut) {
  Tensor x = lz::zeros({3, 2});
  Tensor idx = make({0, 1}, {2}, kInt64);
  std::string msg = expect_throw_and_recover<lz::ValueError>(
      [&] { x.index_put_(idx, make({1, 2, 3}, {3})); });
  expect_mentions(msg, {"index_put_", "[3, 2]", "[3]"});
  expect_values(x, kFloat32, {3, 2}, {0, 0, 0, 0, 0, 0});
}

TEST(OpsErrors, GatherWithWrongIndexRankNamesBothShapes) {
  Tensor x = lz::zeros({2, 2});
  std::string msg = expect_throw_and_recover<lz::ValueError>(
      [&] { (void)lz::gather(x, 0, make({0, 1, 0}, {3}, kInt64)); });
  expect_mentions(msg, {"gather", "[3]", "[2, 2]"});
}

TEST(OpsErrors, ClampInPlaceOfIntWithFloatBoundIsTypeError) {
  Tensor x = make({-5, 5}, {2}, kInt64);
  std::string msg = expect_throw_and_recover<lz::TypeError>([&] { x.clamp_(0.5, std::nullopt); });
  expect_mentions(msg, {"clamp_", "int64", "float32"});
  expect_values(x, kInt64, {2}, {-5, 5});
}

TEST(OpsErrors, SliceWithNonPositiveStepIsValueError) {
  Tensor x = lz::zeros({4});
  std::string msg = expect_throw_and_recover<lz::ValueError>(
      [&] { (void)x.slice(0, std::nullopt, std::nullopt, 0); });
  expect_mentions(msg, {"slice", "[4]"});
  expect_throw_and_recover<lz::ValueError>(
      [&] { (void)x.slice(0, std::nullopt, std::nullopt, -1); });
}

TEST(OpsErrors, PermuteThatIsNotAPermutationIsValueError) {
  Tensor x = lz::zeros({2, 3});
  std::string msg = expect_throw_and_recover<lz::ValueError>([&] { (void)x.permute({0, 0}); });
  expect_mentions(msg, {"permute", "[2, 3]"});
  expect_throw_and_recover<lz::ValueError>([&] { (void)x.permute({0}); });
}

}  // namespace
