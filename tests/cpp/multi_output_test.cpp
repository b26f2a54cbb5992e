// Multi-output nodes, through their first user: sort (values, indices). Each
// test runs on both backends: the reference one, and cpu, where sort is a
// reference-kernel step beside fused kernels that read either output.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "core/config.h"
#include "ir/dump.h"
#include "lazuli/lazuli.h"
#include "op_test_util.h"
#include "tensor/lazy_tensor.h"
#include "test_util.h"

namespace {

using lz_test::expect_values;
using lz_test::make;

class MultiOutput : public lz::testing::RuntimeTest,
                    public ::testing::WithParamInterface<const char *> {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    lz::set_active_backend(GetParam());
  }
  void TearDown() override {
    RuntimeTest::TearDown();
    lz::set_active_backend(lz::config().backend);
  }
};

// The stable ascending order of each row of a [rows, n] array, NaN last
// (numpy's argsort with kind="stable" orders NaN the same way).
std::vector<double> stable_order(const std::vector<double> &x, int64_t rows, int64_t n,
                                 bool descending, std::vector<double> *values) {
  std::vector<double> idx;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> o(static_cast<size_t>(n));
    std::iota(o.begin(), o.end(), 0);
    auto at = [&](int64_t j) { return x[static_cast<size_t>(r * n + j)]; };
    auto less = [](double p, double q) { return std::isnan(q) ? !std::isnan(p) : p < q; };
    std::stable_sort(o.begin(), o.end(), [&](int64_t p, int64_t q) {
      return descending ? less(at(q), at(p)) : less(at(p), at(q));
    });
    for (int64_t j : o) {
      idx.push_back(static_cast<double>(j));
      values->push_back(at(j));
    }
  }
  return idx;
}

TEST_P(MultiOutput, SortGivesValuesAndIndicesOfEveryRow) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // many ties: stability shows
  std::vector<double> x(4 * 9);
  for (double &v : x) v = small(rng);
  x[5] = NAN;
  for (bool descending : {false, true}) {
    std::vector<double> values;
    std::vector<double> idx = stable_order(x, 4, 9, descending, &values);
    auto [v, i] = lz::sort(make(x, {4, 9}), -1, descending);
    expect_values(v, lz::kFloat32, {4, 9}, values);
    expect_values(i, lz::kInt64, {4, 9}, idx);
  }
}

TEST_P(MultiOutput, SortAlongAnInnerDimOfEachDtype) {
  // [2, 3, 2] sorted along dim 1.
  std::vector<double> x = {5, 0, 1, 7, 3, 7, 2, 2, 9, 1, 2, 0};
  for (lz::DType dt : {lz::kInt32, lz::kInt64, lz::kFloat64}) {
    auto [v, i] = lz::sort(make(x, {2, 3, 2}, dt), 1);
    expect_values(v, dt, {2, 3, 2}, {1, 0, 3, 7, 5, 7, 2, 0, 2, 1, 9, 2});
    expect_values(i, lz::kInt64, {2, 3, 2}, {1, 0, 2, 1, 0, 2, 0, 2, 2, 1, 1, 0});
  }
  auto [bv, bi] = lz::sort(make({1, 0, 1, 0}, {4}, lz::kBool));
  expect_values(bv, lz::kBool, {4}, {0, 0, 1, 1});
  expect_values(bi, lz::kInt64, {4}, {1, 3, 0, 2});
}

TEST_P(MultiOutput, BothOutputsFeedFusedKernelsInOneProgram) {
  lz::Tensor x = make({3, 1, 2, 0}, {4});
  auto [v, i] = lz::sort(x);
  // Consumers of each output, a view of the indices among them, synced
  // together: one program.
  lz::Tensor a = v * 2 + 1;
  lz::Tensor b = lz::permute(lz::reshape(i, {2, 2}), {1, 0}) + 10;
  lz::sync_tensors({a, b, v, i});
  lz::wait();
  EXPECT_EQ(counter("UncachedCompile"), 1);
  expect_values(a, lz::kFloat32, {4}, {1, 3, 5, 7});
  expect_values(b, lz::kInt64, {2, 2}, {13, 12, 11, 10});
  expect_values(v, lz::kFloat32, {4}, {0, 1, 2, 3});
  expect_values(i, lz::kInt64, {4}, {3, 1, 2, 0});
}

TEST_P(MultiOutput, OutputsHashApartAndDumpByIndex) {
  lz::Tensor x = make({2, 1}, {2});
  auto [v, i] = lz::sort(x);
  const lz::ir::Value vv = v.impl()->value(), iv = i.impl()->value();
  ASSERT_EQ(vv.node, iv.node);
  EXPECT_EQ(iv.index, 1);
  EXPECT_NE(vv.hash(), iv.hash());
  EXPECT_FALSE(iv.requires_grad());
  // A consumer of the indices and one of the values: different graphs.
  EXPECT_NE(lz::debug::graph_hash({lz::cast(v, lz::kInt64) + 1}), lz::debug::graph_hash({i + 1}));
  const std::string dump = lz::debug::dump_graph({i + 1});
  EXPECT_NE(dump.find("(float32[2], int64[2])"), std::string::npos) << dump;
  EXPECT_NE(dump.find(".1"), std::string::npos) << dump;
}

TEST_P(MultiOutput, SortGradientGoesBackThroughTheIndices) {
  lz::Tensor x = make({0.5, -2, 3, 1, 4, 0}, {2, 3});
  lz::set_requires_grad(x, true);
  auto [v, i] = lz::sort(x, 1, /*descending=*/true);
  // d/dx of sum(w * sort(x)) is w placed back where each value came from.
  lz::Tensor w = make({1, 2, 3, 4, 5, 6}, {2, 3});
  lz::backward(lz::sum(v * w));
  // Row 0 descending: 3 (from 2), 0.5 (from 0), -2 (from 1); row 1: 4 (1), 1
  // (0), 0 (2).
  expect_values(lz::grad(x), lz::kFloat32, {2, 3}, {2, 3, 1, 5, 4, 6});
}

TEST_P(MultiOutput, TopkIsTheHeadOfTheSort) {
  lz::Tensor x = make({4, 9, 1, 7, 3, 8}, {2, 3});
  auto [v, i] = lz::topk(x, 2, 1);
  expect_values(v, lz::kFloat32, {2, 2}, {9, 4, 8, 7});
  expect_values(i, lz::kInt64, {2, 2}, {1, 0, 2, 0});
  auto [sv, si] = lz::topk(x, 1, 0, /*largest=*/false);
  expect_values(sv, lz::kFloat32, {1, 3}, {4, 3, 1});
  expect_values(si, lz::kInt64, {1, 3}, {0, 1, 0});
  lz_test::expect_mentions(
      lz_test::expect_throw_and_recover<lz::IndexError>([&] { lz::topk(x, 4, 1); }),
      {"topk", "k=4", "size 3"});
}

TEST_P(MultiOutput, SortOfAScalarAndBadDimsAreClear) {
  auto [v, i] = lz::sort(make({2.5}, {}));
  expect_values(v, lz::kFloat32, {}, {2.5});
  expect_values(i, lz::kInt64, {}, {0});
  lz_test::expect_mentions(lz_test::expect_throw_and_recover<lz::Error>([&] {
                             lz::sort(make({1, 2}, {2}), 3);
                           }),
                           {"sort"});
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiOutput, ::testing::Values("interp", "cpu"),
                         [](const auto &info) { return std::string(info.param); });

}  // namespace
