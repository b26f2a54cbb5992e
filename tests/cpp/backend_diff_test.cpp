// The cpu backend against the reference backend: the same programs give the same values within
// the dtype's tolerance (today the cpu backend differs in its matrix products: oneDNN sgemm).
#include <cmath>

#include "test_util.h"

namespace lz {
namespace {

using BackendDiff = testing::RuntimeTest;

using testing::random_values;

std::vector<float> run_on(const std::string& backend, const std::function<Tensor()>& program) {
  set_active_backend(backend);
  std::vector<float> out = program().to_vector<float>();
  set_active_backend(config().backend);
  return out;
}

void expect_same_on_both(const std::function<Tensor()>& program, double rtol = 1e-5) {
  std::vector<float> ref = run_on("interp", program);
  std::vector<float> cpu = run_on("cpu", program);
  ASSERT_EQ(ref.size(), cpu.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(cpu[i], ref[i], rtol * std::max(1.0, std::fabs(static_cast<double>(ref[i])))) << "at " << i;
  }
}

TEST_F(BackendDiff, MatmulShapesAgreeWithTheReference) {
  const std::vector<std::pair<IntList, IntList>> cases = {
      {{3, 4}, {4, 5}},          {{1, 7}, {7, 1}},       {{64, 33}, {33, 17}},
      {{2, 3, 4}, {4, 5}},       {{2, 1, 3, 4}, {5, 4, 2}}, {{4}, {4, 6}},
      {{6, 4}, {4}},             {{2, 3, 0}, {0, 4}},     {{0, 3}, {3, 2}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    std::vector<float> va = random_values(numel(sa), seed++), vb = random_values(numel(sb), seed++);
    expect_same_on_both([&] { return matmul(tensor<float>(va, sa), tensor<float>(vb, sb)); });
  }
}

TEST_F(BackendDiff, MatmulOfTransposedViewsAgrees) {
  std::vector<float> va = random_values(12, 7), vb = random_values(20, 8);
  expect_same_on_both([&] { return matmul(tensor<float>(va, {4, 3}).T(), tensor<float>(vb, {5, 4}).T()); });
}

TEST_F(BackendDiff, AnMlpStepAgrees) {
  std::vector<float> x = random_values(8 * 16, 3), w1 = random_values(16 * 32, 4), w2 = random_values(32 * 4, 5);
  expect_same_on_both([&] {
    Tensor h = relu(matmul(tensor<float>(x, {8, 16}), tensor<float>(w1, {16, 32})));
    return logsumexp(matmul(h, tensor<float>(w2, {32, 4})), {1});
  }, 1e-4);
}

TEST_F(BackendDiff, Float64MatmulKeepsTheReferenceKernel) {
  std::vector<double> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  set_active_backend("cpu");
  Tensor c = matmul(tensor<double>(a, {2, 2}), tensor<double>(b, {2, 2}));
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{19, 22, 43, 50}));
  set_active_backend(config().backend);
}

}  // namespace
}  // namespace lz
