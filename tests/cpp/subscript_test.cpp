// x.index(key) and x.index_put_(key, value) (<lazuli/indexing.h>): every kind of key item, the
// placement of advanced result dims, masks (read, and where() on assignment), accumulate, and bad
// keys: each error names the op and the tensor's dtype and shape, and records nothing. Expected
// values are PyTorch's for the same key, written out.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kBool;
using lz::kFloat32;
using lz::kInt32;
using lz::kInt64;
using lz::Tensor;
using lz::indexing::Ellipsis;
using lz::indexing::None;
using lz::indexing::Slice;
using lz::indexing::TensorIndex;
using lz_test::expect_mentions;
using lz_test::expect_throw_and_recover;
using lz_test::expect_values;
using lz_test::make;

std::vector<double> iota(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}
Tensor x34() { return make(iota(12), {3, 4}); }  // [[0..3], [4..7], [8..11]]
Tensor y234() { return make(iota(24), {2, 3, 4}); }
Tensor ints(const std::vector<double>& v, const std::vector<int64_t>& shape) {
  return make(v, shape, kInt64);
}
int64_t executions() {
  return lz::debug::counter_value("CachedCompile") + lz::debug::counter_value("UncachedCompile");
}

// ---- basic items: views ---------------------------------------------------------------------

TEST(TensorIndexing, IntsSlicesNoneAndEllipsisAreViews) {
  Tensor x = x34();
  expect_values(x.index({1}), kFloat32, {4}, {4, 5, 6, 7});
  expect_values(x.index({-1, 2}), kFloat32, {}, {10});
  Tensor cols = x.index({Slice(), Slice(1, 3)});
  EXPECT_EQ(lz::debug::tensor_state(cols), "view");
  expect_values(cols, kFloat32, {3, 2}, {1, 2, 5, 6, 9, 10});
  expect_values(x.index({Slice(None, None, 2)}), kFloat32, {2, 4}, {0, 1, 2, 3, 8, 9, 10, 11});
  expect_values(x.index({Slice(-2)}), kFloat32, {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  expect_values(x.index({None, 0}), kFloat32, {1, 4}, {0, 1, 2, 3});
  expect_values(x.index({Ellipsis, 1}), kFloat32, {3}, {1, 5, 9});
  expect_values(x.index({"...", None}), kFloat32, {3, 4, 1}, iota(12));
  EXPECT_EQ(x.index({}).shape(), (std::vector<int64_t>{3, 4}));
  cols.fill_(-1);  // a view writes through
  expect_values(x, kFloat32, {3, 4}, {0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11});
}

TEST(TensorIndexing, BoolsAddADimKeptOrEmptied) {
  Tensor x = x34();
  EXPECT_EQ(x.index({true}).shape(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(x.index({false}).shape(), (std::vector<int64_t>{0, 3, 4}));
  expect_values(x.index({true, 1}), kFloat32, {1, 4}, {4, 5, 6, 7});
  EXPECT_EQ(x.index({Ellipsis, true}).shape(), (std::vector<int64_t>{3, 4, 1}));
}

TEST(TensorIndexing, SeveralEllipsesAsInPyTorch) {
  Tensor y = y234();
  EXPECT_EQ(y.index({Ellipsis, Ellipsis}).shape(), (std::vector<int64_t>{2, 3, 4}));
  expect_values(y.index({Ellipsis, 1, 2, Ellipsis}), kFloat32, {2}, {6, 18});
}

// ---- integer tensors and lists: copies --------------------------------------------------------

TEST(TensorIndexing, IntegerTensorsSelectCopies) {
  Tensor x = x34();
  Tensor rows = x.index({ints({2, 0}, {2})});
  expect_values(rows, kFloat32, {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3});
  expect_values(x.index({ints({-1}, {1})}), kFloat32, {1, 4}, {8, 9, 10, 11});
  expect_values(x.index({Slice(), make({3, 0}, {2}, kInt32)}), kFloat32, {3, 2},
                {3, 0, 7, 4, 11, 8});
  expect_values(x.index({ints({0, 1, 1, 2}, {2, 2}), 0}), kFloat32, {2, 2}, {0, 4, 4, 8});
  expect_values(x.index({ints({1}, {})}), kFloat32, {4}, {4, 5, 6, 7});  // 0-d: as a select
  rows.fill_(0);  // a copy: x keeps its values
  expect_values(x, kFloat32, {3, 4}, iota(12));
}

TEST(TensorIndexing, ListsAreIndices) {
  Tensor x = x34();
  expect_values(x.index({std::vector<int64_t>{0, 2}}), kFloat32, {2, 4},
                {0, 1, 2, 3, 8, 9, 10, 11});
  expect_values(x.index({std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, -1}}), kFloat32, {2},
                {1, 11});
  EXPECT_EQ(x.index({std::vector<int64_t>{}}).shape(), (std::vector<int64_t>{0, 4}));
}

// ---- advanced indices together: broadcasting and placement --------------------------------

TEST(TensorIndexing, AdvancedIndicesBroadcastTogether) {
  Tensor x = x34();
  expect_values(x.index({ints({0, 2}, {2}), ints({1, 3}, {2, 1})}), kFloat32, {2, 2},
                {1, 9, 3, 11});
  expect_values(x.index({ints({0, 2}, {2}), None, ints({1, 3}, {2})}), kFloat32, {2, 1}, {1, 11});
}

TEST(TensorIndexing, AdjacentResultDimsStayInPlaceOthersGoFirst) {
  Tensor y = y234();
  Tensor i = ints({0, 1}, {2}), j = ints({1, 2}, {2});
  // Adjacent: the result dims replace the indexed ones where they were.
  Tensor adjacent = y.index({Slice(), i, j});
  expect_values(adjacent, kFloat32, {2, 2}, {1, 6, 13, 18});
  // Separated by a slice: the result dims come first.
  expect_values(y.index({i, Slice(), j}), kFloat32, {2, 3}, {1, 5, 9, 14, 18, 22});
  // An int between them is applied first (a view), so they are adjacent again: [3, 2].
  EXPECT_EQ(y.index({0, Slice(), i}).shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(y.index({i, 1, i}).shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(y.index({None, Slice(), i, j}).shape(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(y.index({i, Slice(), None, j}).shape(), (std::vector<int64_t>{2, 3, 1}));
  // A 0-d index selects: it takes no part in placing the others.
  EXPECT_EQ(y.index({ints({0}, {}), None, ints({0, 1}, {2, 1}), -1}).shape(),
            (std::vector<int64_t>{1, 2, 1}));
}

// ---- masks ------------------------------------------------------------------------------------

TEST(TensorIndexing, MasksSelectTheirTrueElements) {
  Tensor x = x34();
  expect_values(x.index({lz::gt(x, 8)}), kFloat32, {3}, {9, 10, 11});
  Tensor rows = make({1, 0, 1}, {3}, kBool);
  expect_values(x.index({rows}), kFloat32, {2, 4}, {0, 1, 2, 3, 8, 9, 10, 11});
  expect_values(x.index({rows, std::vector<int64_t>{0, 1}}), kFloat32, {2}, {0, 9});
  expect_values(x.index({Slice(), make({0, 1, 1, 0}, {4}, kBool)}), kFloat32, {3, 2},
                {1, 2, 5, 6, 9, 10});
  EXPECT_EQ(x.index({make({1}, {}, kBool)}).shape(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(x.index({make({0}, {}, kBool)}).shape(), (std::vector<int64_t>{0, 3, 4}));
}

// ---- index_put_ -------------------------------------------------------------------------------

TEST(TensorIndexing, IndexPutThroughBasicKeysWritesTheView) {
  Tensor x = lz::zeros({3, 4});
  x.index_put_({1}, 5.0);
  x.index_put_({Slice(), Slice(2)}, make({1, 2}, {2}));
  expect_values(x, kFloat32, {3, 4}, {0, 0, 1, 2, 5, 5, 1, 2, 0, 0, 1, 2});
  x.index_put_({Ellipsis, 0}, lz::full({3}, 9.0));
  expect_values(x.index({Slice(), 0}), kFloat32, {3}, {9, 9, 9});
}

TEST(TensorIndexing, IndexPutWithIntegerIndices) {
  Tensor x = lz::zeros({3, 4});
  x.index_put_({ints({0, 2}, {2}), ints({1, 3}, {2})}, make({5, 6}, {2}));
  expect_values(x, kFloat32, {3, 4}, {0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6});
  Tensor c = lz::zeros({2, 3, 4});
  c.index_put_({ints({0, 1}, {2}), Slice(), ints({1, 3}, {2})}, make(iota(6), {2, 3}));
  expect_values(c.index({0, Slice(), 1}), kFloat32, {3}, {0, 1, 2});
  expect_values(c.index({1, Slice(), 3}), kFloat32, {3}, {3, 4, 5});
  Tensor rows = lz::zeros({3, 2});
  rows.index_put_(ints({2, 0}, {2}), make({1, 2, 3, 4}, {2, 2}));  // one index tensor: dim 0
  expect_values(rows, kFloat32, {3, 2}, {3, 4, 0, 0, 1, 2});
}

TEST(TensorIndexing, IndexPutAccumulateAddsEveryRepeat) {
  Tensor x = lz::zeros({2, 3});
  x.index_put_({ints({0, 0, 1, 0}, {4}), ints({1, 1, 2, 1}, {4})}, make({1, 2, 3, 4}, {4}), true);
  expect_values(x, kFloat32, {2, 3}, {0, 7, 0, 0, 0, 3});
  x.index_put_({ints({1, 1}, {2})}, lz::ones({3}), /*accumulate=*/true);
  expect_values(x, kFloat32, {2, 3}, {0, 7, 0, 2, 2, 5});
}

TEST(TensorIndexing, MaskAssignmentOfABroadcastValueReadsNothing) {
  Tensor x = x34();
  lz::sync(true);
  int64_t before = executions();
  x.index_put_({lz::gt(x, 8)}, -1.0);  // where(mask, value, x): no cut
  x.index_put_({lz::lt(x, 1)}, lz::scalar_tensor(5.0));
  EXPECT_EQ(executions(), before);
  expect_values(x, kFloat32, {3, 4}, {5, 1, 2, 3, 4, 5, 6, 7, 8, 5, 5, 5});
}

TEST(TensorIndexing, MaskAssignmentOfAValueTensorFillsInMaskOrder) {
  Tensor x = lz::zeros({2, 3});
  x.index_put_({make({1, 0, 1, 0, 1, 0}, {2, 3}, kBool)}, make({1, 2, 3}, {3}));
  expect_values(x, kFloat32, {2, 3}, {1, 0, 2, 0, 3, 0});
}

TEST(TensorIndexing, IndexPutThroughAViewWritesTheBase) {
  Tensor x = lz::zeros({3, 4});
  Tensor tail = x.index({Slice(1)});
  tail.index_put_({ints({0, 1}, {2}), ints({1, 2}, {2})}, make({5, 6}, {2}));
  expect_values(x, kFloat32, {3, 4}, {0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 6, 0});
}

// ---- bad keys: errors naming the op, the tensor and the key; nothing recorded -----------------

// The failing call throws E mentioning `parts`, and x keeps its device data and values.
template <class E>
void expect_rejected(Tensor& x, const std::function<void()>& bad,
                     const std::vector<std::string>& parts) {
  lz::sync(true);
  std::vector<float> before = x.to_vector<float>();
  expect_mentions(expect_throw_and_recover<E>(bad), parts);
  EXPECT_EQ(lz::debug::tensor_state(x), "device_data");  // no new value recorded
  EXPECT_EQ(x.to_vector<float>(), before);
}

TEST(TensorIndexing, OutOfRangeIntIsIndexError) {
  Tensor x = x34();
  expect_rejected<lz::IndexError>(x, [&] { (void)x.index({5}); }, {"select", "float32[3, 4]", "5"});
  expect_rejected<lz::IndexError>(x, [&] { x.index_put_({0, 4}, 1.0); }, {"select", "[4]", "4"});
}

TEST(TensorIndexing, TooManyIndicesIsIndexError) {
  Tensor x = x34();
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({0, 0, 0});
                                  },
                                  {"index(float32[3, 4])", "too many indices", "dimension 2"});
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    x.index_put_({0, Slice(), None, 1}, 2.0);
                                  },
                                  {"index_put_(float32[3, 4])", "too many indices"});
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({make({1, 0, 1}, {3}, kBool), 0, 0});
                                  },
                                  {"index(float32[3, 4])", "too many indices"});
}

TEST(TensorIndexing, WrongIndexDtypeIsIndexError) {
  Tensor x = x34();
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({make({0, 1}, {2})});
                                  },
                                  {"index(float32[3, 4])", "long, int or bool", "got float32"});
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    x.index_put_({Slice(), make({1}, {1}, lz::kFloat64)}, 0.0);
                                  },
                                  {"index_put_(float32[3, 4])", "got float64"});
}

TEST(TensorIndexing, IndexValuesKnownAtTheCallAreChecked) {
  Tensor x = x34();
  expect_rejected<lz::IndexError>(
      x,
      [&] {
        (void)x.index({Slice(), std::vector<int64_t>{0, 4}});
      },
      {"index(float32[3, 4])", "index 4 is out of bounds for dimension 1 with size 4"});
  expect_rejected<lz::IndexError>(x, [&] { x.index_put_({ints({-4}, {1})}, 1.0); },
                                  {"index_put_", "index -4 is out of range for size 3"});
}

TEST(TensorIndexing, KeysThatDoNotFitAreRejected) {
  Tensor x = x34();
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({make({1, 0}, {2}, kBool)});
                                  },
                                  {"index(float32[3, 4])", "mask [2]", "indexed tensor [3, 4]"});
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({ints({0, 1}, {2}), ints({0, 1, 2}, {3})});
                                  },
                                  {"index(float32[3, 4])", "could not be broadcast", "[2], [3]"});
  expect_rejected<lz::IndexError>(x,
                                  [&] {
                                    (void)x.index({Ellipsis, Ellipsis, 0});
                                  },
                                  {"index(float32[3, 4])", "single ellipsis"});
  expect_rejected<lz::ValueError>(x, [&] { (void)x.index({Slice(0, 2, 0)}); },
                                  {"index(float32[3, 4])", "step must be greater than zero"});
  expect_rejected<lz::ValueError>(x,
                                  [&] {
                                    x.index_put_({ints({0, 2}, {2})}, lz::ones({3}));
                                  },
                                  {"index_put_(float32[3, 4])", "value tensor of shape [3]",
                                   "indexing result of shape [2, 4]"});
  expect_rejected<lz::ValueError>(x,
                                  [&] {
                                    x.index_put_({make({1, 1, 0}, {3}, kBool)}, lz::ones({3, 4}));
                                  },
                                  {"index_put_(float32[3, 4])", "value tensor of shape [3, 4]"});
  expect_rejected<lz::ValueError>(x, [&] { (void)x.index({Tensor()}); }, {"index", "undefined"});
  EXPECT_THROW(TensorIndex("..x"), lz::ValueError);
}

TEST(TensorIndexing, ComputedIndexOutOfRangeFailsWhenItRunsNamingIndex) {
  Tensor x = x34();
  Tensor bad = lz::mul(ints({1, 7}, {2}), 1);  // not on the host: checked when the program runs
  Tensor r = x.index({bad});
  try {
    (void)r.to_vector<float>();
    ADD_FAILURE() << "expected the read to fail";
  } catch (const lz::Error& e) {
    expect_mentions(e.what(), {"index", "7"});
  }
  lz_test::expect_runtime_works();
  expect_values(x.index({lz::remainder(bad, 3)}), kFloat32, {2, 4}, {4, 5, 6, 7, 4, 5, 6, 7});
}

}  // namespace
