// Trains the model of examples/train_digits.py (an MLP 64-128-10, SGD, batch 64) through the C++
// API: lz::nn::MLP, lz::nn::cross_entropy, lz::backward and lz::nn::sgd_step.
//
// Reading scikit-learn's digits from C++ is awkward, so this example generates a synthetic data
// set of the same shape instead: 10 classes of 8x8 "images", each class a fixed random prototype
// plus noise (deterministic under the seed). Each step records forward, backward and the update;
// lz::sync() compiles the step once and replays it afterwards, donating the parameters' buffers.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <lazuli/lazuli.h>

int main() {
  constexpr int64_t kClasses = 10, kFeatures = 64, kTrain = 1408, kTest = 352, kBatch = 64;
  std::mt19937 gen(0);
  std::normal_distribution<float> noise(0.0f, 0.6f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> prototypes(kClasses * kFeatures);
  for (float& p : prototypes) p = unit(gen);
  auto make = [&](int64_t n, std::vector<float>& x, std::vector<int64_t>& y) {
    x.resize(n * kFeatures);
    y.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<int64_t>(gen() % kClasses);
      for (int64_t j = 0; j < kFeatures; ++j) x[i * kFeatures + j] = prototypes[y[i] * kFeatures + j] + noise(gen);
    }
  };
  std::vector<float> x_train, x_test;
  std::vector<int64_t> y_train, y_test;
  make(kTrain, x_train, y_train);
  make(kTest, x_test, y_test);

  lz::manual_seed(0);
  lz::nn::MLP model({kFeatures, 128, kClasses});
  std::vector<lz::Tensor> params = model.parameters();
  const int epochs = 10;
  auto start = std::chrono::steady_clock::now();
  float last_loss = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t b = 0; b + kBatch <= kTrain; b += kBatch) {
      lz::Tensor xb = lz::from_data(&x_train[b * kFeatures], lz::kFloat32, {kBatch, kFeatures});
      lz::Tensor yb = lz::from_data(&y_train[b], lz::kInt64, {kBatch});
      lz::nn::zero_grad(params);
      lz::Tensor loss = lz::nn::cross_entropy(model.forward(xb), yb);
      lz::backward(loss);
      lz::nn::sgd_step(params, 0.05);
      if (b == 0) lz::add_step_closure([loss, &last_loss] { last_loss = loss.item<float>(); });
      lz::sync();
    }
    std::printf("epoch %2d  loss %.4f\n", epoch + 1, last_loss);
  }
  lz::wait();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  lz::NoGradGuard no_grad;
  lz::Tensor pred = lz::argmax(model.forward(lz::from_data(x_test.data(), lz::kFloat32, {kTest, kFeatures})), 1);
  std::vector<int64_t> p = pred.to_vector<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < kTest; ++i) correct += p[i] == y_test[i];
  std::printf("test accuracy %.2f%% (%lld samples), %.2f s training\n", 100.0 * correct / kTest,
              static_cast<long long>(kTest), secs);
  std::printf("compiles %lld, cached compiles %lld, buffers donated %lld\n",
              static_cast<long long>(lz::debug::counter_value("UncachedCompile")),
              static_cast<long long>(lz::debug::counter_value("CachedCompile")),
              static_cast<long long>(lz::debug::counter_value("InputOutputAliasCount")));
  return 0;
}
