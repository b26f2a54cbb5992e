// The composite ops (src/ops/composite*.cpp) through the public C++ API: tril/triu, masked_fill,
// flip, roll, repeat, clamp with tensor bounds, multinomial, the norms and lz::linalg, and the
// lz::nn composites (pad, interpolate, one_hot, activations, dropout2d). Values are written out;
// the Python suite compares the same ops against numpy and PyTorch over many more arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kBool;
using lz::kFloat32;
using lz::kFloat64;
using lz::kInt64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;

Tensor grid() { return make({0, 1, 2, 3, 4, 5}, {2, 3}); }

TEST(Composite, TrilAndTriuKeepTheirTriangles) {
  expect_values(lz::tril(grid()), kFloat32, {2, 3}, {0, 0, 0, 3, 4, 0});
  expect_values(lz::triu(grid(), 1), kFloat32, {2, 3}, {0, 1, 2, 0, 0, 5});
  expect_values(lz::tril(grid(), -1), kFloat32, {2, 3}, {0, 0, 0, 3, 0, 0});
  Tensor x = grid();
  lz::triu_(x);
  expect_values(x, kFloat32, {2, 3}, {0, 1, 2, 0, 4, 5});
}

TEST(Composite, MaskedFillTakesNumbersAndZeroDimTensors) {
  Tensor mask = make({1, 0, 1}, {3}, kBool);
  expect_values(lz::masked_fill(grid(), mask, -1.0), kFloat32, {2, 3}, {-1, 1, -1, -1, 4, -1});
  expect_values(lz::masked_fill(grid(), mask, lz::scalar_tensor(7.0)), kFloat32, {2, 3},
                {7, 1, 7, 7, 4, 7});
  // Converted to the tensor's dtype, as PyTorch: 2.7 into int64 is 2.
  expect_values(lz::masked_fill(make({1, 2, 3}, {3}, kInt64), mask, 2.7), kInt64, {3}, {2, 2, 2});
  EXPECT_THROW(lz::masked_fill(grid(), make({1, 0, 1}, {3}), 0.0), lz::TypeError);
  EXPECT_THROW(lz::masked_fill(grid(), mask, make({1, 2}, {2})), lz::ValueError);
}

TEST(Composite, FlipRollRepeat) {
  expect_values(lz::flip(grid(), {1}), kFloat32, {2, 3}, {2, 1, 0, 5, 4, 3});
  expect_values(lz::flip(grid(), {0, 1}), kFloat32, {2, 3}, {5, 4, 3, 2, 1, 0});
  expect_values(lz::roll(grid(), {1}, {1}), kFloat32, {2, 3}, {2, 0, 1, 5, 3, 4});
  expect_values(lz::roll(grid(), {-4}), kFloat32, {2, 3}, {4, 5, 0, 1, 2, 3});
  expect_values(lz::repeat(make({1, 2}, {2}), {2, 2}), kFloat32, {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_THROW(lz::flip(grid(), {0, 0}), lz::ValueError);
  EXPECT_THROW(lz::roll(grid(), {1, 2}, {0}), lz::ValueError);
  EXPECT_THROW(lz::repeat(grid(), {2}), lz::ValueError);
}

TEST(Composite, ClampWithTensorBoundsSplitsTiesAsPyTorch) {
  Tensor x = make({-1, 0, 0.5, 1, 2}, {5}, kFloat64);
  lz::set_requires_grad(x);
  Tensor lo = make({0, 0, 0, 0, 0}, {5}, kFloat64), hi = make({1}, {1}, kFloat64);
  Tensor y = lz::clamp(x, lo, hi);
  expect_values(y, kFloat64, {5}, {0, 0, 0.5, 1, 1});
  lz::backward(lz::sum(y));
  expect_values(lz::grad(x), kFloat64, {5}, {0, 0.5, 1, 0.5, 0});
  expect_values(lz::clamp(x, Tensor(), hi), kFloat64, {5}, {-1, 0, 0.5, 1, 1});
  EXPECT_THROW(lz::clamp(x, Tensor(), Tensor()), lz::ValueError);
}

TEST(Composite, NormsMatchTheirFormulas) {
  Tensor v = make({3, -4}, {2});
  EXPECT_NEAR(lz::norm(v).item<float>(), 5.0f, 1e-6);
  EXPECT_NEAR(lz::linalg::vector_norm(v, 1).item<float>(), 7.0f, 1e-6);
  EXPECT_NEAR(lz::linalg::vector_norm(v, 0).item<float>(), 2.0f, 1e-6);
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(lz::linalg::vector_norm(v, inf).item<float>(), 4.0f, 1e-6);
  // [[0, 1, 2], [3, 4, 5]]: column sums 3, 5, 7; row sums 3, 12.
  EXPECT_NEAR(lz::linalg::matrix_norm(grid(), 1.0).item<float>(), 7.0f, 1e-6);
  EXPECT_NEAR(lz::linalg::matrix_norm(grid(), inf).item<float>(), 12.0f, 1e-6);
  EXPECT_NEAR(lz::linalg::norm(grid(), "fro").item<float>(), std::sqrt(55.0f), 1e-5);
  expect_values(lz::norm(grid(), 2.0, {1}), kFloat32, {2}, {std::sqrt(5.0), std::sqrt(50.0)});
  EXPECT_THROW(lz::linalg::matrix_norm(grid(), "nuc"), lz::ValueError);
  EXPECT_THROW(lz::norm(make({1, 2}, {2}, kInt64)), lz::TypeError);
}

TEST(Composite, MultinomialNeverDrawsAZeroWeightAndDrawsDistinctWithoutReplacement) {
  lz::manual_seed(3);
  Tensor w = make({1, 0, 2, 1}, {4});
  std::vector<int64_t> draws = lz::multinomial(w, 200, true).to_vector<int64_t>();
  for (int64_t d : draws) EXPECT_NE(d, 1);
  std::vector<int64_t> k = lz::multinomial(w, 3).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(k.begin(), k.end()), (std::set<int64_t>{0, 2, 3}));
  EXPECT_THROW(lz::multinomial(w, 5), lz::ValueError);
}

TEST(CompositeNn, PadModes) {
  Tensor x = make({0, 1, 2}, {1, 3});
  expect_values(lz::nn::pad(x, {1, 2}), kFloat32, {1, 6}, {0, 0, 1, 2, 0, 0});
  expect_values(lz::nn::pad(x, {2, 1}, "reflect"), kFloat32, {1, 6}, {2, 1, 0, 1, 2, 1});
  expect_values(lz::nn::pad(x, {1, 2}, "replicate"), kFloat32, {1, 6}, {0, 0, 1, 2, 2, 2});
  expect_values(lz::nn::pad(x, {2, 1}, "circular"), kFloat32, {1, 6}, {1, 2, 0, 1, 2, 0});
  expect_values(lz::nn::pad(x, {-1, 1}, "constant", 9.0), kFloat32, {1, 3}, {1, 2, 9});
  EXPECT_THROW(lz::nn::pad(x, {3, 0}, "reflect"), lz::ValueError);
  EXPECT_THROW(lz::nn::pad(x, {1}), lz::ValueError);
}

TEST(CompositeNn, InterpolateNearestAndBilinear) {
  Tensor x = make({0, 1, 2, 3}, {1, 1, 2, 2});
  expect_values(lz::nn::interpolate(x, std::nullopt, std::vector<double>{2.0}), kFloat32,
                {1, 1, 4, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3});
  expect_values(lz::nn::interpolate(x, lz::IntList{3, 3}, std::nullopt, "bilinear", true), kFloat32,
                {1, 1, 3, 3}, {0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3});
  EXPECT_THROW(lz::nn::interpolate(x, lz::IntList{3}, std::vector<double>{2.0}), lz::ValueError);
}

TEST(CompositeNn, OneHotActivationsAndDropout2d) {
  expect_values(lz::nn::one_hot(make({2, 0}, {2}, kInt64), 3), kInt64, {2, 3}, {0, 0, 1, 1, 0, 0});
  expect_values(lz::nn::one_hot(make({1, 3}, {2}, kInt64)), kInt64, {2, 4},
                {0, 1, 0, 0, 0, 0, 0, 1});
  EXPECT_THROW(lz::nn::one_hot(make({1, 5}, {2}, kInt64), 3), lz::IndexError);
  Tensor a = make({-4, 0, 1, 4}, {4});
  expect_values(lz::nn::hardsigmoid(a), kFloat32, {4}, {0, 0.5, 4.0 / 6, 1});
  expect_values(lz::nn::hardswish(a), kFloat32, {4}, {0, 0, 4.0 / 6, 4});
  expect_values(lz::nn::silu(a), kFloat32, {4},
                {-4 / (1 + std::exp(4.0)), 0, 1 / (1 + std::exp(-1.0)), 4 / (1 + std::exp(-4.0))});
  Tensor ones = lz::ones({2, 3, 2});
  expect_values(lz::nn::dropout2d(ones, 0.5, false), kFloat32, {2, 3, 2},
                std::vector<double>(12, 1.0));
  std::vector<float> d = lz::nn::dropout2d(ones, 0.5).to_vector<float>();
  for (size_t i = 0; i < d.size(); i += 2) EXPECT_EQ(d[i], d[i + 1]);  // whole channels
  EXPECT_THROW(lz::nn::dropout2d(lz::ones({3}), 0.5), lz::ValueError);
}

}  // namespace
