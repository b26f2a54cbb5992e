// Scans and attention through the public C++ API: the scan primitives (cumsum,
// cumprod) on both backends' reference kernels, and scaled dot-product attention written out by
// hand. Gradients are checked against finite differences in autograd_test.cpp's table; the Python
// suite compares the same ops with numpy and PyTorch over many more arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kFloat32;
using lz::kFloat64;
using lz::kInt64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;

TEST(Scan, CumsumAlongEachDim) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(lz::cumsum(x, 1), kFloat32, {2, 3}, {1, 3, 6, 4, 9, 15});
  expect_values(lz::cumsum(x, 0), kFloat32, {2, 3}, {1, 2, 3, 5, 7, 9});
  expect_values(lz::cumsum(x, -1), kFloat32, {2, 3}, {1, 3, 6, 4, 9, 15});
}

TEST(Scan, CumprodAlongEachDim) {
  Tensor x = make({1, 2, 3, 4, 0, 6}, {2, 3});
  expect_values(lz::cumprod(x, 1), kFloat32, {2, 3}, {1, 2, 6, 4, 0, 0});
  expect_values(lz::cumprod(x, 0), kFloat32, {2, 3}, {1, 2, 3, 4, 0, 18});
}

TEST(Scan, IntegerAndBoolInputsGiveInt64AsPyTorch) {
  expect_values(lz::cumsum(make({1, 0, 1, 1}, {4}, lz::kBool), 0), kInt64, {4}, {1, 1, 2, 3});
  expect_values(lz::cumsum(make({3, -1, 2}, {3}, lz::kInt32), 0), kInt64, {3}, {3, 2, 4});
  expect_values(lz::cumprod(make({3, -1, 2}, {3}, kInt64), 0), kInt64, {3}, {3, -3, -6});
  // dtype casts first: the running value has that type.
  expect_values(lz::cumsum(make({1, 2}, {2}, kInt64), 0, kFloat64), kFloat64, {2}, {1, 3});
}

TEST(Scan, ZeroDimAndEmptyInputs) {
  expect_values(lz::cumsum(lz::scalar_tensor(2.5), 0), kFloat32, {}, {2.5});
  expect_values(lz::cumprod(lz::scalar_tensor(2.5), -1), kFloat32, {}, {2.5});
  expect_values(lz::cumsum(lz::zeros({2, 0}), 1), kFloat32, {2, 0}, {});
}

TEST(Scan, Float32SumsAccumulateInDouble) {
  // 2^24 + 1 + 1: a float32 running sum would lose both ones; PyTorch's CPU kernel keeps them.
  Tensor x = make({16777216.0, 1.0, 1.0}, {3});
  EXPECT_EQ(lz::cumsum(x, 0).to_vector<float>()[2], 16777218.0f);
}

TEST(Scan, BadArgumentsNameTheOpAndRecordNothing) {
  Tensor x = make({1, 2, 3}, {3});
  try {
    lz::cumsum(x, 1);
    FAIL() << "expected IndexError";
  } catch (const lz::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("cumsum"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lz::cumprod(x, -2), lz::IndexError);
  EXPECT_THROW(lz::cumsum(x, 0, lz::kBool), lz::TypeError);
  EXPECT_THROW(lz::cumsum(Tensor(), 0), lz::ValueError);
}

// softmax(q k^T / sqrt(E) + mask) v, written out for one query row.
TEST(Attention, MatchesTheFormulaWrittenOut) {
  Tensor q = make({1, 0, 0, 1}, {1, 2, 2}, kFloat64);
  Tensor k = make({1, 0, 0, 1, 1, 1}, {1, 3, 2}, kFloat64);
  Tensor v = make({1, 2, 3, 4, 5, 6}, {1, 3, 2}, kFloat64);
  const double s = 1 / std::sqrt(2.0);
  auto row = [&](std::vector<double> scores) {
    double z = 0;
    for (double& x : scores) z += (x = std::exp(x));
    std::vector<double> out{0, 0};
    for (int j = 0; j < 3; ++j) {
      out[0] += scores[j] / z * (1 + 2 * j);
      out[1] += scores[j] / z * (2 + 2 * j);
    }
    return out;
  };
  std::vector<double> r0 = row({s, 0, s}), r1 = row({0, s, s});
  expect_values(lz::nn::scaled_dot_product_attention(q, k, v), kFloat64, {1, 2, 2},
                {r0[0], r0[1], r1[0], r1[1]}, 1e-12);
  // Causal: query 0 sees key 0 only, query 1 keys 0 and 1.
  std::vector<double> c1 = [&] {
    double a = 1, b = std::exp(s), z = a + b;
    return std::vector<double>{(1 * a + 3 * b) / z, (2 * a + 4 * b) / z};
  }();
  expect_values(lz::nn::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true), kFloat64,
                {1, 2, 2}, {1, 2, c1[0], c1[1]}, 1e-12);
  // The same causal mask given as a bool mask, and as a float bias.
  Tensor keep = make({1, 0, 0, 1, 1, 0}, {2, 3}, lz::kBool);
  expect_values(lz::nn::scaled_dot_product_attention(q, k, v, keep), kFloat64, {1, 2, 2},
                {1, 2, c1[0], c1[1]}, 1e-12);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor bias = make({0, -inf, -inf, 0, 0, -inf}, {2, 3}, kFloat64);
  expect_values(lz::nn::scaled_dot_product_attention(q, k, v, bias), kFloat64, {1, 2, 2},
                {1, 2, c1[0], c1[1]}, 1e-12);
}

TEST(Attention, AFullyMaskedRowGivesZeroNotNan) {
  Tensor q = make({1, 2, 3, 4}, {2, 2});
  Tensor k = make({1, 0, 0, 1}, {2, 2});
  Tensor mask = make({0, 0, 1, 1}, {2, 2}, lz::kBool);
  std::vector<float> out = lz::nn::scaled_dot_product_attention(q, k, k, mask).to_vector<float>();
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_FALSE(std::isnan(out[2]));
}

TEST(Attention, GroupedQueryHeadsShareKeysInConsecutiveGroups) {
  Tensor q = lz::randn({1, 4, 3, 2});
  Tensor k = lz::randn({1, 2, 3, 2}), v = lz::randn({1, 2, 3, 2});
  Tensor grouped =
      lz::nn::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, false, std::nullopt, true);
  // Heads 0 and 1 use key head 0, heads 2 and 3 key head 1.
  Tensor k4 = lz::cat(
      {lz::slice(k, 1, 0, 1), lz::slice(k, 1, 0, 1), lz::slice(k, 1, 1, 2), lz::slice(k, 1, 1, 2)},
      1);
  Tensor v4 = lz::cat(
      {lz::slice(v, 1, 0, 1), lz::slice(v, 1, 0, 1), lz::slice(v, 1, 1, 2), lz::slice(v, 1, 1, 2)},
      1);
  std::vector<float> a = grouped.to_vector<float>();
  std::vector<float> b = lz::nn::scaled_dot_product_attention(q, k4, v4).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(Attention, BadArgumentsNameTheOpAndTheShapes) {
  Tensor q = lz::zeros({2, 3, 4}), k = lz::zeros({2, 5, 4}), v = lz::zeros({2, 5, 6});
  auto message = [](auto f) {
    try {
      f();
    } catch (const lz::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message([&] {
    lz::nn::scaled_dot_product_attention(q, lz::zeros({2, 5, 3}), v);
  });
  EXPECT_NE(m.find("scaled_dot_product_attention"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 5, 3]"), std::string::npos) << m;
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, lz::zeros({2, 4, 6})), lz::ValueError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, v.to(kFloat64)), lz::TypeError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, v, lz::zeros({3, 4})), lz::ValueError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, v, lz::zeros({3, 5}, kInt64)),
               lz::TypeError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, v, lz::zeros({3, 5}), 0.0, true),
               lz::ValueError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, v, Tensor(), 1.5), lz::ValueError);
  Tensor q2 = lz::zeros({3, 4}), k2 = lz::zeros({5, 4});
  EXPECT_THROW(
      lz::nn::scaled_dot_product_attention(q2, k2, k2, Tensor(), 0.0, false, std::nullopt, true),
      lz::ValueError);  // enable_gqa needs a head dim
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(lz::zeros({3, 2, 4}), k, k, Tensor(), 0.0,
                                                    false, std::nullopt, true),
               lz::ValueError);  // 3 query heads, 2 key heads
}

}  // namespace
