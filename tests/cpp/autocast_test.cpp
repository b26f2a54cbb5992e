// Autocast regions (include/lazuli/autocast.h) through the public C++ API: which ops cast, which
// dtypes they return, that the state is scoped and thread-local, and that gradients reach float32
// parameters.
#include <gtest/gtest.h>

#include <thread>

#include "lazuli/lazuli.h"

namespace lz {
namespace {

TEST(Autocast, ProductsAndConvolutionsComputeInTheRegionsDtype) {
  Tensor x = randn({4, 8}), w = randn({3, 8}), b = randn({3});
  Tensor img = randn({1, 2, 6, 6}), k = randn({4, 2, 3, 3}), kb = randn({4});
  {
    AutocastGuard amp(DType::BFloat16);
    EXPECT_EQ(matmul(x, transpose(w, 0, 1)).dtype(), DType::BFloat16);
    EXPECT_EQ(nn::linear(x, w, b).dtype(), DType::BFloat16);  // the bias is cast too
    EXPECT_EQ(nn::conv2d(img, k, kb).dtype(), DType::BFloat16);
    EXPECT_EQ((x + 1.0).dtype(), DType::Float32);  // other ops keep their inputs' dtypes
    EXPECT_EQ(exp(x).dtype(), DType::Float32);
    AutocastGuard half(DType::Float16);
    EXPECT_EQ(matmul(x, transpose(w, 0, 1)).dtype(), DType::Float16);
  }
  EXPECT_FALSE(autocast_state().enabled);
  EXPECT_EQ(matmul(x, transpose(w, 0, 1)).dtype(), DType::Float32);
}

TEST(Autocast, ValuesAreTheProductOfTheRoundedOperands) {
  Tensor x = randn({5, 16}), w = randn({16, 7});
  Tensor got;
  {
    AutocastGuard amp;
    got = matmul(x, w);
  }
  Tensor want = matmul(x.to(DType::BFloat16), w.to(DType::BFloat16));
  std::vector<float> g = got.to(DType::Float32).to_vector<float>();
  std::vector<float> r = want.to(DType::Float32).to_vector<float>();
  ASSERT_EQ(g.size(), r.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], r[i]) << i;
}

TEST(Autocast, Float64AndIntegerOperandsAreNotCast) {
  AutocastGuard amp;
  EXPECT_EQ(matmul(ones({2, 3}, DType::Float64), ones({3, 2}, DType::Float64)).dtype(), DType::Float64);
  EXPECT_EQ(matmul(ones({2, 3}, DType::Int64), ones({3, 2}, DType::Int64)).dtype(), DType::Int64);
}

TEST(Autocast, LossesComputeInFloat32) {
  Tensor logits = randn({6, 5}), target = randint(0, 5, {6});
  AutocastGuard amp;
  Tensor h = matmul(logits, eye(5));
  ASSERT_EQ(h.dtype(), DType::BFloat16);
  EXPECT_EQ(nn::cross_entropy(h, target).dtype(), DType::Float32);
  EXPECT_EQ(nn::mse_loss(h, logits).dtype(), DType::Float32);
}

TEST(Autocast, DisabledGuardTurnsItOffInsideAndTheStateIsRestored) {
  AutocastGuard amp(DType::Float16);
  {
    AutocastGuard off(DType::BFloat16, false);
    EXPECT_FALSE(autocast_state().enabled);
    EXPECT_EQ(matmul(ones({2, 2}), ones({2, 2})).dtype(), DType::Float32);
  }
  EXPECT_TRUE(autocast_state().enabled);
  EXPECT_EQ(autocast_state().dtype, DType::Float16);
}

TEST(Autocast, StateIsPerThread) {
  AutocastGuard amp;
  bool other = true;
  std::thread t([&] { other = autocast_state().enabled; });
  t.join();
  EXPECT_FALSE(other);
}

TEST(Autocast, OnlySixteenBitFloatDtypesAreAccepted) {
  EXPECT_THROW(AutocastGuard(DType::Float64), ValueError);
  EXPECT_THROW(set_autocast_state({true, DType::Int32}), ValueError);
  EXPECT_FALSE(autocast_state().enabled);
}

TEST(Autocast, GradientsReachFloat32ParametersInFloat32) {
  Tensor w = randn({8, 3});
  set_requires_grad(w);
  Tensor x = randn({4, 8});
  Tensor loss;
  {
    AutocastGuard amp;
    loss = sum(matmul(x, w).to(DType::Float32));
  }
  backward(loss);
  Tensor g = grad(w);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.dtype(), DType::Float32);
  // d sum(x w) / d w = x^T 1, from the bf16 product's gradient (bf16 precision).
  std::vector<float> got = g.to_vector<float>();
  std::vector<float> want = matmul(transpose(x, 0, 1), ones({4, 3})).to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.02 * (1 + std::abs(want[i]))) << i;
}

}  // namespace
}  // namespace lz
