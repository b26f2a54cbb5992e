// The attention functions beside lz::nn::scaled_dot_product_attention (src/ops/attention.cpp):
// its output with the scores' logsumexp, as ATen's flash attention kernels return them, and the
// masked scores alone (what the ATen table's backward entry recomputes its weights from).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lazuli/lazuli.h"
#include "op_test_util.h"

namespace {

using lz::kFloat32;
using lz::kFloat64;
using lz::Tensor;
using lz_test::expect_values;
using lz_test::make;

constexpr double kInf = std::numeric_limits<double>::infinity();

void expect_near(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << "at " << i;
}

TEST(AttentionLogsumexp, OutputIsTheAttentionsAndLogsumexpTheScores) {
  Tensor q = lz::randn({2, 3, 4, 5}, kFloat64), k = lz::randn({2, 3, 6, 5}, kFloat64),
         v = lz::randn({2, 3, 6, 2}, kFloat64);
  Tensor bias = lz::randn({4, 6}, kFloat64);
  auto [out, lse] = lz::nn::scaled_dot_product_attention_with_logsumexp(q, k, v, bias, false, 0.3);
  expect_near(out, lz::nn::scaled_dot_product_attention(q, k, v, bias, 0.0, false, 0.3), 1e-12);
  Tensor scores = lz::nn::scaled_dot_product_attention_scores(q, k, bias, false, 0.3);
  expect_near(scores, lz::matmul(q, lz::transpose(k, -2, -1)) * 0.3 + bias, 1e-12);
  EXPECT_EQ(lse.dtype(), kFloat64);
  expect_near(lse, lz::logsumexp(scores, {-1}), 1e-12);
}

TEST(AttentionLogsumexp, CausalAndGroupedAsTheAttention) {
  Tensor q = lz::randn({1, 4, 3, 2}), k = lz::randn({1, 2, 5, 2}), v = lz::randn({1, 2, 5, 3});
  auto [out, lse] = lz::nn::scaled_dot_product_attention_with_logsumexp(q, k, v, Tensor(), true,
                                                                        std::nullopt, true);
  expect_near(
      out, lz::nn::scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true, std::nullopt, true),
      1e-6);
  EXPECT_EQ(lse.shape(), (lz::IntList{1, 4, 3}));
  Tensor scores =
      lz::nn::scaled_dot_product_attention_scores(q, k, Tensor(), true, std::nullopt, true);
  EXPECT_EQ(scores.shape(), (lz::IntList{1, 4, 3, 5}));
  std::vector<float> s = scores.to_vector<float>();
  for (int64_t i = 0; i < 3; ++i) {  // query i sees keys 0..i
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(std::isinf(s[i * 5 + j]), j > i) << i << ", " << j;
  }
  expect_near(lse, lz::logsumexp(scores, {-1}), 1e-5);
}

TEST(AttentionLogsumexp, AFullyMaskedRowGivesZerosAndNoNanGradient) {
  Tensor q = make({1, 2, 3, 4}, {1, 2, 2}, kFloat64), k = make({1, 0, 0, 1}, {1, 2, 2}, kFloat64);
  Tensor v = make({1, 2, 3, 4}, {1, 2, 2}, kFloat64);
  lz::set_requires_grad(q);
  Tensor mask = make({0, -kInf, -kInf, -kInf}, {2, 2}, kFloat64);
  auto [out, lse] = lz::nn::scaled_dot_product_attention_with_logsumexp(q, k, v, mask, false, 1.0);
  // Row 0 sees key 0 only: its output is v's row 0 and its logsumexp the score q0 . k0 = 1.
  expect_values(out, kFloat64, {1, 2, 2}, {1, 2, 0, 0});
  expect_values(lse, kFloat64, {1, 2}, {1, 0});
  lz::backward(lz::sum(out) + lz::sum(lse));
  // d lse0 / d q0 = k0 (the only weight is 1); the output's gradient is 0 (one weight).
  expect_values(lz::grad(q), kFloat64, {1, 2, 2}, {1, 0, 0, 0});
}

TEST(AttentionLogsumexp, CausalAndAMaskBothApply) {
  Tensor q = make({1, 0, 0, 1}, {2, 2}), k = make({1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor mask = make({0.5, 0, 0, -kInf, 0, 0}, {2, 3});
  Tensor scores = lz::nn::scaled_dot_product_attention_scores(q, k, mask, true, 1.0);
  expect_values(scores, kFloat32, {2, 3}, {1.5, -kInf, -kInf, -kInf, 1, -kInf});
  auto [out, lse] = lz::nn::scaled_dot_product_attention_with_logsumexp(q, k, k, mask, true, 1.0);
  expect_values(out, kFloat32, {2, 2}, {1, 0, 0, 1});
  expect_values(lse, kFloat32, {2}, {1.5, 1});
  // scaled_dot_product_attention itself still refuses the two together, as PyTorch's.
  EXPECT_THROW(lz::nn::scaled_dot_product_attention(q, k, k, mask, 0.0, true), lz::ValueError);
}

TEST(AttentionLogsumexp, ScoresErrorsNameQueryAndKeyOnly) {
  std::string m;
  try {
    lz::nn::scaled_dot_product_attention_scores(lz::zeros({2, 3, 4}), lz::zeros({2, 5, 3}));
  } catch (const lz::ValueError& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("scaled_dot_product_attention"), std::string::npos) << m;
  EXPECT_NE(m.find("key float32[2, 5, 3]"), std::string::npos) << m;
  EXPECT_EQ(m.find("value"), std::string::npos) << m;
  EXPECT_THROW(lz::nn::scaled_dot_product_attention_scores(Tensor(), lz::zeros({2, 2})),
               lz::ValueError);
  EXPECT_THROW(lz::nn::scaled_dot_product_attention_with_logsumexp(
                   lz::zeros({2, 3, 4}), lz::zeros({2, 5, 4}), lz::zeros({2, 4, 4})),
               lz::ValueError);
}

}  // namespace
