// The lz::nn functional ops and losses (src/ops/nn_functional.cpp, nn_loss.cpp,
// nn_normalization.cpp) through the public C++ API: the features lz.nn.functional forwards to them
// (gelu's tanh form, dropout, layer_norm, embedding, nll_loss and cross_entropy with weight,
// ignore_index, reductions, label smoothing and probability targets, mse_loss's reductions) and
// their errors, which name the op, the shapes and the dtypes. Expected values are computed here in
// double; the Python suite compares the same ops against PyTorch over many more arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
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
namespace nn = lz::nn;

// fn() throws E with every string of `parts` in its message.
template <typename E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "nothing was thrown";
  } catch (const E& e) {
    std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

// log_softmax of each row of `rows` (n rows of c values), in double.
std::vector<double> log_softmax_rows(const std::vector<double>& v, size_t c) {
  std::vector<double> out(v.size());
  for (size_t r = 0; r < v.size() / c; ++r) {
    double m = v[r * c], s = 0;
    for (size_t j = 0; j < c; ++j) m = std::max(m, v[r * c + j]);
    for (size_t j = 0; j < c; ++j) s += std::exp(v[r * c + j] - m);
    for (size_t j = 0; j < c; ++j) out[r * c + j] = v[r * c + j] - m - std::log(s);
  }
  return out;
}

const std::vector<double> kLogits = {0.5, -1.0, 2.0, 1.5, 0.25, -0.75};  // [2, 3]

TEST(NnFunctional, GeluTanhMatchesItsFormulaAndNoneIsTheErfGelu) {
  std::vector<double> x = {-2, -0.5, 0, 1, 3}, want;
  for (double v : x) {
    want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expect_values(nn::gelu(make(x, {5}, kFloat64), "tanh"), kFloat64, {5}, want, 1e-12);
  Tensor t = make(x, {5});
  expect_values(nn::gelu(t, "none"), kFloat32, {5}, lz::gelu(t).to_vector<double>(), 0);
  expect_error<lz::ValueError>([&] { nn::gelu(t, "fast"); }, {"gelu", "'fast'"});
}

TEST(NnFunctional, DropoutZeroesOrScalesEachElementAndChecksP) {
  Tensor x = lz::ones({2000});
  std::vector<double> y = nn::dropout(x, 0.25).to_vector<double>();
  int zeros = 0;
  for (double v : y) {
    if (v == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(v, 1 / 0.75);
    }
  }
  EXPECT_NEAR(zeros / 2000.0, 0.25, 0.05);
  EXPECT_EQ(nn::dropout(x, 0.5, /*training=*/false).impl(), x.impl());
  EXPECT_EQ(nn::dropout(x, 0.0).impl(), x.impl());
  expect_values(nn::dropout(make({1, 2}, {2}), 1.0), kFloat32, {2}, {0, 0});
  expect_error<lz::ValueError>([&] { nn::dropout(x, 1.5); }, {"dropout", "float32[2000]", "1.5"});
}

TEST(NnFunctional, LayerNormNormalizesTheLastDimsThenScalesAndShifts) {
  std::vector<double> x = {1, 2, 3, 4, 2, 4, 6, 10}, w = {1, 2, 1, 1}, b = {0, 0, 1, 0}, want;
  for (size_t r = 0; r < 2; ++r) {
    double m = 0, var = 0;
    for (size_t j = 0; j < 4; ++j) m += x[r * 4 + j] / 4;
    for (size_t j = 0; j < 4; ++j) var += (x[r * 4 + j] - m) * (x[r * 4 + j] - m) / 4;
    for (size_t j = 0; j < 4; ++j) {
      want.push_back((x[r * 4 + j] - m) / std::sqrt(var + 1e-5) * w[j] + b[j]);
    }
  }
  Tensor y = nn::layer_norm(make(x, {2, 4}, kFloat64), {4}, make(w, {4}, kFloat64),
                            make(b, {4}, kFloat64));
  expect_values(y, kFloat64, {2, 4}, want, 1e-12);
  // Over both dims: one mean for all 8 values.
  EXPECT_NEAR(nn::layer_norm(make(x, {2, 4}), {2, 4}).sum().item<float>(), 0.0f, 1e-5);
  Tensor xf = make(x, {2, 4});
  const lz::IntList bad = {3}, four = {4};
  expect_error<lz::ValueError>([&] { nn::layer_norm(xf, bad); },
                               {"layer_norm", "float32[2, 4]", "[3]"});
  expect_error<lz::ValueError>(
      [&] {
        nn::layer_norm(xf, four, lz::ones({2, 4}));
      },
      {"layer_norm", "weight", "[2, 4]"});
}

TEST(NnFunctional, EmbeddingTakesRowsAndNamesItselfInErrors) {
  Tensor weight = make({0, 1, 2, 3, 4, 5}, {3, 2});
  expect_values(nn::embedding(make({2, 0, 1, 2}, {2, 2}, kInt64), weight), kFloat32, {2, 2, 2},
                {4, 5, 0, 1, 2, 3, 4, 5});
  // Host index values are checked at the line; others when the program runs. Both name embedding.
  expect_error<lz::IndexError>([&] { nn::embedding(make({3}, {1}, kInt64), weight); },
                               {"embedding: index 3 is out of range for size 3"});
  Tensor on_device = make({3}, {1}, kInt64) + 0;
  lz::sync_tensors({on_device}, /*wait=*/true);
  ASSERT_EQ(lz::debug::tensor_state(on_device), "device_data");
  expect_error<lz::Error>([&] { nn::embedding(on_device, weight).to_vector<float>(); },
                          {"embedding", "index 3"});
  expect_error<lz::TypeError>([&] { nn::embedding(make({0}, {1}), weight); },
                              {"embedding", "float32[1]"});
  expect_error<lz::ValueError>([&] { nn::embedding(make({0}, {1}, kInt64), lz::ones({3})); },
                               {"embedding", "2-D", "float32[3]"});
}

TEST(NnFunctional, NllLossWeightsIgnoresAndReduces) {
  std::vector<double> lp = {-1, -2, -3, -0.5, -1.5, -2.5, -0.1, -0.2, -0.3};  // [3, 3]
  Tensor input = make(lp, {3, 3}, kFloat64);
  Tensor target = make({0, 2, -100}, {3}, kInt64);
  Tensor weight = make({1, 2, 3}, {3}, kFloat64);
  expect_values(nn::nll_loss(input, target, weight, -100, "none"), kFloat64, {3}, {1, 7.5, 0});
  expect_values(nn::nll_loss(input, target, weight, -100, "sum"), kFloat64, {}, {8.5});
  expect_values(nn::nll_loss(input, target, weight), kFloat64, {}, {8.5 / 4});  // / (1 + 3)
  expect_values(nn::nll_loss(input, target), kFloat64, {}, {3.5 / 2});
  // ignore_index 2 drops the second sample; -100 is then out of range.
  expect_error<lz::Error>([&] { nn::nll_loss(input, target, Tensor(), 2).item<double>(); },
                          {"nll_loss", "index -100"});
  expect_values(nn::nll_loss(input, make({0, 2, 1}, {3}, kInt64), Tensor(), 2, "none"), kFloat64,
                {3}, {1, 0, 0.2});
  // An unbatched (C,) input with a () target: a 0-d loss for every reduction.
  Tensor one = make({-1, -2, -3}, {3}, kFloat64);
  expect_values(nn::nll_loss(one, make({1}, {}, kInt64), Tensor(), -100, "none"), kFloat64, {},
                {2});
  expect_values(nn::nll_loss(one, make({1}, {}, kInt64), weight), kFloat64, {}, {2});
}

TEST(NnFunctional, CrossEntropySmoothsLabelsAndTakesClassProbabilities) {
  std::vector<double> lp = log_softmax_rows(kLogits, 3);
  Tensor logits = make(kLogits, {2, 3}, kFloat64);
  Tensor target = make({2, 0}, {2}, kInt64);
  expect_values(nn::cross_entropy(logits, target), kFloat64, {}, {-(lp[2] + lp[3]) / 2}, 1e-12);
  // label_smoothing e: (1 - e) * nll + e / C * (-sum of log-probs), each averaged.
  const double e = 0.2;
  double nll = -(lp[2] + lp[3]) / 2, uniform = 0;
  for (double v : lp) uniform -= v / 2;
  expect_values(nn::cross_entropy(logits, target, Tensor(), -100, "mean", e), kFloat64, {},
                {(1 - e) * nll + e / 3 * uniform}, 1e-12);
  // Class weights with smoothing: both terms weighted, the mean over the target weights.
  std::vector<double> w = {1, 2, 3};
  double num = -(w[2] * lp[2] + w[0] * lp[3]), smooth = 0;
  for (size_t i = 0; i < 6; ++i) smooth -= w[i % 3] * lp[i];
  expect_values(nn::cross_entropy(logits, target, make(w, {3}, kFloat64), -100, "sum", e), kFloat64,
                {}, {(1 - e) * num + e / 3 * smooth}, 1e-12);
  // Probability targets: -sum(p * log_softmax) per sample, the mean over samples.
  std::vector<double> p = {0.2, 0.3, 0.5, 1, 0, 0};
  double s0 = -(p[0] * lp[0] + p[1] * lp[1] + p[2] * lp[2]), s1 = -lp[3];
  expect_values(nn::cross_entropy(logits, make(p, {2, 3}, kFloat64), Tensor(), -100, "none"),
                kFloat64, {2}, {s0, s1}, 1e-12);
  expect_values(nn::cross_entropy(logits, make(p, {2, 3}, kFloat64), Tensor(), -100, "mean"),
                kFloat64, {}, {(s0 + s1) / 2}, 1e-12);
  // The three-argument form is the unweighted mean with ignore_index.
  expect_values(nn::cross_entropy(logits, make({2, -1}, {2}, kInt64), -1), kFloat64, {}, {-lp[2]},
                1e-12);
}

TEST(NnFunctional, LossErrorsNameTheOpShapesAndDtypes) {
  Tensor x = lz::zeros({4, 3});
  Tensor y = make({0, 1, 2, 0}, {4}, kInt64);
  expect_error<lz::ValueError>([&] { nn::cross_entropy(x, y, Tensor(), -100, "avg"); },
                               {"cross_entropy", "'avg'"});
  expect_error<lz::ValueError>([&] { nn::cross_entropy(x, y, lz::ones({2})); },
                               {"cross_entropy", "weight", "(3,)", "float32 (2,)"});
  expect_error<lz::ValueError>([&] { nn::cross_entropy(x, y, Tensor(), -100, "mean", 1.5); },
                               {"cross_entropy", "label_smoothing", "1.5"});
  expect_error<lz::ValueError>(
      [&] {
        nn::nll_loss(x, make({0, 1}, {2}, kInt64));
      },
      {"nll_loss", "float32 (4, 3)", "int64 (2,)"});
  expect_error<lz::TypeError>([&] { nn::nll_loss(x, lz::zeros({4})); },
                              {"nll_loss", "class indices", "float32 (4,)"});
  expect_error<lz::TypeError>(
      [&] {
        nn::cross_entropy(x, lz::zeros({4, 3}, kInt64));
      },
      {"cross_entropy", "floating point", "int64 (4, 3)"});
  expect_error<lz::ValueError>(
      [&] {
        nn::cross_entropy(x, lz::zeros({4, 3}), Tensor(), 1);
      },
      {"cross_entropy", "ignore_index"});
  // [B, T, V] logits with [B, T] targets: the message says where the class dim goes.
  expect_error<lz::ValueError>(
      [&] {
        nn::cross_entropy(lz::zeros({2, 5, 7}), lz::zeros({2, 5}, kInt64));
      },
      {"cross_entropy", "(2, 5, 7)", "(2, 5)", "transpose(1, 2)"});
  expect_error<lz::ValueError>([&] { nn::nll_loss(lz::scalar_tensor(1.0), y); },
                               {"nll_loss", "0-d"});
  expect_error<lz::ValueError>([&] { nn::mse_loss(x, x, "avg"); }, {"mse_loss", "'avg'"});
  expect_error<lz::IndexError>([&] { nn::softmax(x, 2); }, {"softmax"});
  expect_error<lz::IndexError>([&] { nn::log_softmax(x, -3); }, {"log_softmax"});
}

TEST(NnFunctional, MseLossReductions) {
  Tensor a = make({1, 2, 3}, {3}), b = make({1, 0, 0}, {3});
  expect_values(nn::mse_loss(a, b, "none"), kFloat32, {3}, {0, 4, 9});
  expect_values(nn::mse_loss(a, b, "sum"), kFloat32, {}, {13});
  expect_values(nn::mse_loss(a, b), kFloat32, {}, {13.0 / 3});
}

TEST(NnFunctional, LossGradientsComeFromThePrimitives) {
  // d/dx of mean cross entropy = (softmax - onehot) / N, with label smoothing 0.
  Tensor x = make(kLogits, {2, 3}, kFloat64);
  lz::set_requires_grad(x);
  lz::backward(nn::cross_entropy(x, make({2, 0}, {2}, kInt64)));
  std::vector<double> lp = log_softmax_rows(kLogits, 3), want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = std::exp(lp[i]) / 2;
  want[2] -= 0.5;
  want[3] -= 0.5;
  expect_values(lz::grad(x), kFloat64, {2, 3}, want, 1e-12);
}

}  // namespace
