// Gradients where finite differences say nothing (zeros, ties, bounds, constant inputs) and
// PyTorch is the spec: each expectation is the value PyTorch 2 gives for the same call.
#include <cmath>

#include "test_util.h"

namespace lz {
namespace {

using TorchAgreementGrads = testing::RuntimeTest;
using Fn = Tensor (*)(const Tensor&);

// The gradient of sum(fn(x)) at x (float64).
std::vector<double> grad_of(const std::function<Tensor(const Tensor&)>& fn, std::vector<double> x,
                            IntList shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(x.size())};
  Tensor t = tensor<double>(x, shape);
  set_requires_grad(t);
  backward(sum(fn(t)));
  Tensor g = grad(t);
  if (!g.defined()) return {};
  return g.to_vector<double>();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-12) << "element " << i;
    }
  }
}

TEST_F(TorchAgreementGrads, ProdGradientAtAZeroIsTheProductOfTheOthers) {
  auto all = [](const Tensor& x) { return prod(x); };
  expect_near(grad_of(all, {2, 0, 3}), {0, 6, 0});
  expect_near(grad_of(all, {2, 0, 0}), {0, 0, 0});  // two zeros: every gradient is 0
  expect_near(grad_of(all, {2, 4, 3}), {12, 6, 8});
  auto rows = [](const Tensor& x) { return prod(x, {1}, true); };
  expect_near(grad_of(rows, {2, 0, 3, 1, 2, 3, 0, 0, 1}, {3, 3}), {0, 6, 0, 6, 3, 2, 0, 0, 0});
  auto cols = [](const Tensor& x) { return prod(x, {0}); };
  expect_near(grad_of(cols, {2, 0, 0, 3}, {2, 2}), {0, 3, 2, 0});
}

TEST_F(TorchAgreementGrads, StdOfAConstantInputHasZeroGradient) {
  auto all = [](const Tensor& x) { return lz::std(x); };
  expect_near(grad_of(all, {2, 2, 2}), {0, 0, 0});
  auto v = [](const Tensor& x) { return var(x); };
  expect_near(grad_of(v, {2, 2, 2}), {0, 0, 0});
  // One constant column and one that varies: torch.tensor([[1., 2.], [1., 3.]]).std(0)
  auto cols = [](const Tensor& x) { return lz::std(x, {0}); };
  expect_near(grad_of(cols, {1, 2, 1, 3}, {2, 2}), {0, -std::sqrt(0.5), 0, std::sqrt(0.5)});
  // The value itself is still 0, and one element with correction 1 is still nan (as PyTorch).
  EXPECT_EQ(lz::std(tensor<double>({2, 2, 2}, {3})).item<double>(), 0.0);
  expect_near(grad_of(all, {2}), {NAN});
}

// PyTorch 2.15 (the pinned release): a value at a bound takes the bound, gradient 0.
TEST_F(TorchAgreementGrads, ClampPassesTheGradientStrictlyInsideOnly) {
  auto both = [](const Tensor& x) { return clamp(x, 1.0, 2.0); };
  expect_near(grad_of(both, {0.5, 1, 1.5, 2, 3}), {0, 0, 1, 0, 0});
  auto lo = [](const Tensor& x) { return clamp(x, 1.0, std::nullopt); };
  expect_near(grad_of(lo, {1, 2}), {0, 1});
  auto hi = [](const Tensor& x) { return clamp(x, std::nullopt, 1.0); };
  expect_near(grad_of(hi, {1, 0}), {0, 1});
  // min > max: every element is max, with no gradient; a nan input has gradient 0.
  auto crossed = [](const Tensor& x) { return clamp(x, 2.0, 1.0); };
  expect_near(grad_of(crossed, {0.5, 1, 1.5, 2, 3}), {0, 0, 0, 0, 0});
  expect_near(grad_of(both, {NAN, 1.5}), {0, 1});
  auto nan_bound = [](const Tensor& x) { return clamp(x, NAN, std::nullopt); };
  expect_near(grad_of(nan_bound, {1, 2}), {0, 0});
}

TEST_F(TorchAgreementGrads, ClampValuesWithNanAndCrossedBoundsAreTorchs) {
  Tensor x = tensor<float>({1, 2}, {2});
  for (float v : clamp(x, NAN, std::nullopt).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  for (float v : clamp(x, std::nullopt, NAN).to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  std::vector<float> c = clamp(tensor<float>({1, NAN}, {2}), 0.0, 1.0).to_vector<float>();
  EXPECT_EQ(c[0], 1);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_EQ(clamp(tensor<float>({1, 2}, {2}), INFINITY, std::nullopt).to_vector<float>(),
            (std::vector<float>{INFINITY, INFINITY}));
  EXPECT_EQ(clamp(tensor<int64_t>({1, 5}, {2}), 2, 3).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 3}));
}

TEST_F(TorchAgreementGrads, MaxAndMinOverADimSendTheGradientToTheReturnedIndex) {
  auto mx = [](const Tensor& x) { return max(x, 0).first; };
  expect_near(grad_of(mx, {1, 3, 3}), {0, 1, 0});
  auto mn = [](const Tensor& x) { return min(x, 0).first; };
  expect_near(grad_of(mn, {1, 1, 3}), {1, 0, 0});
  auto rows = [](const Tensor& x) { return max(x, 1, true).first; };
  expect_near(grad_of(rows, {1, 3, 3, 2, 2, 2}, {2, 3}), {0, 1, 0, 1, 0, 0});
  auto last = [](const Tensor& x) { return max(x, -1).first; };
  expect_near(grad_of(last, {1, 3, 3, 2, 2, 2}, {2, 3}), {0, 1, 0, 1, 0, 0});
  // The values and the indices are the same with and without a gradient to carry.
  Tensor x = tensor<double>({1, 3, 3, 5, 2, 5}, {2, 3});
  auto plain = max(x, 1);
  set_requires_grad(x);
  auto tracked = max(x, 1);
  EXPECT_EQ(plain.first.to_vector<double>(), tracked.first.to_vector<double>());
  EXPECT_EQ(tracked.first.shape(), (Shape{2}));
  EXPECT_EQ(plain.second.to_vector<int64_t>(), tracked.second.to_vector<int64_t>());
}

TEST_F(TorchAgreementGrads, AmaxAminAndFullMaxSplitTiesEvenly) {
  auto amax0 = [](const Tensor& x) { return amax(x, {0}); };
  expect_near(grad_of(amax0, {1, 3, 3}), {0, 0.5, 0.5});
  auto full = [](const Tensor& x) { return max(x); };
  expect_near(grad_of(full, {1, 3, 3}), {0, 0.5, 0.5});
  auto amin_all = [](const Tensor& x) { return amin(x); };
  expect_near(grad_of(amin_all, {1, 1, 3}), {0.5, 0.5, 0});
  auto mx = [](const Tensor& x) { return maximum(x, tensor<double>({1}, {1})); };
  expect_near(grad_of(mx, {1, 2, 0}), {0.5, 1, 0});
}

TEST_F(TorchAgreementGrads, PiecewiseConstantOpsGiveAZerosGradient) {
  const std::pair<const char*, Fn> ops[] = {
      {"floor", lz::floor}, {"ceil", lz::ceil}, {"round", lz::round}, {"sign", lz::sign}};
  for (auto [name, f] : ops) {
    SCOPED_TRACE(name);
    expect_near(grad_of(f, {1.5, -0.5}), {0, 0});  // defined (not none), and zero
  }
  auto through = [](const Tensor& x) { return floor(x * 3.0) * 2.0; };
  expect_near(grad_of(through, {0.2, 0.7}), {0, 0});
}

using TorchAgreementValues = testing::RuntimeTest;

TEST_F(TorchAgreementValues, IntegerToANegativeIntegerNumberThrowsAtTheLine) {
  Tensor i = tensor<int64_t>({1, 2}, {2});
  try {
    pow(i, -1);
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Integers to negative integer powers are not allowed"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("pow(int64[2], -1)"), std::string::npos);
  }
  EXPECT_EQ(pow(i, 2).to_vector<int64_t>(), (std::vector<int64_t>{1, 4}));   // still works
  EXPECT_EQ(pow(i, -1.0).to_vector<float>(), (std::vector<float>{1, 0.5}));  // a float exponent
}

TEST_F(TorchAgreementValues, IntegerToNegativeTensorPowersAreTorchs) {
  Tensor a = tensor<int64_t>({0, 1, -1, 2, -2, 3}, {6});
  // torch: a ** torch.tensor([-1] * 6) and ** torch.tensor([-2] * 6); and 2 ** tensor([-1, 2])
  EXPECT_EQ(pow(a, full({6}, -1, kInt64)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, -1, 0, 0, 0}));
  EXPECT_EQ(pow(a, full({6}, -2, kInt64)).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(pow(2, tensor<int64_t>({-1, 2}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 4}));
}

TEST_F(TorchAgreementValues, CrossEntropyIgnoresTargetsOfMinus100ByDefault) {
  Tensor x = tensor<double>(
      {0.126, -0.132, 0.64, 0.105, -0.536, 0.362, 1.304, 0.947, -0.704, -1.265, -0.623, 0.041},
      {4, 3});
  set_requires_grad(x);
  // torch: F.cross_entropy(x, torch.tensor([2, -100, 0, 1])) and its gradient's ignored row
  Tensor loss = nn::cross_entropy(x, tensor<int64_t>({2, -100, 0, 1}, {4}));
  EXPECT_NEAR(loss.item<double>(), 0.8577055021116573, 1e-12);
  backward(loss);
  std::vector<double> g = grad(x).to_vector<double>();
  EXPECT_NEAR(g[0], 0.09677092085733653, 1e-12);
  EXPECT_EQ(std::vector<double>(g.begin() + 3, g.begin() + 6), (std::vector<double>{0, 0, 0}));
  // Another ignore_index makes -100 an error again (at the line: the target is on the host).
  EXPECT_THROW(nn::cross_entropy(x, tensor<int64_t>({2, -100, 0, 1}, {4}), 7), IndexError);
}

}  // namespace
}  // namespace lz
