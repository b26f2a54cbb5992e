// The cpu backend's pooling (backend/cpu/pool_planes.cpp: its own max/avg loops for float32,
// float64 and the integers, the reference's code for the rest, planes split across the pool)
// against the reference backend, bit for bit: values and indices, NaNs (the first wins), ties and
// signed zeros (the first stays), -inf, padding, dilation, ceil_mode, count_include_pad, a
// divisor, 1-D, the average's gradient, and a 16-bit dtype. No reference kernel runs on cpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "core/config.h"
#include "lazuli/lazuli.h"
#include "test_util.h"

namespace {

using lz::Tensor;

// Values with every case the max rule distinguishes: repeats (ties), -0 and +0, -inf, NaNs.
std::vector<double> tricky(int64_t n, unsigned seed, bool nans) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 19);
  std::normal_distribution<double> d;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    switch (pick(rng)) {
      case 0: x = 0.0; break;
      case 1: x = -0.0; break;
      case 2: x = -std::numeric_limits<double>::infinity(); break;
      case 3: x = nans ? std::nan("") : 1.0; break;
      case 4: case 5: x = 1.0; break;  // ties
      default: x = std::round(d(rng) * 4) / 4;  // more ties
    }
  }
  return v;
}

struct Case {
  lz::IntList x, kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{8, 4, 12, 12}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},  // resnet's, on a small image
      {{3, 5, 9, 7}, {2, 3}, {1, 2}, {1, 0}, {2, 1}},    // dilation, uneven
      {{2, 3, 10, 10}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true},  // ceil_mode
      {{1, 17, 6, 6}, {2, 2}, {}, {0, 0}, {1, 1}},       // one image, many planes
      {{4, 3, 15}, {4}, {3}, {2}, {1}},                  // 1-D
  };
  return c;
}

// Both outputs as raw bits (NaNs compare by their bits too).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
std::pair<std::vector<T>, std::vector<int64_t>> max_pool(const Case& c, lz::DType dtype,
                                                         unsigned seed) {
  const std::vector<double> v = tricky(lz::numel(c.x), seed, dtype != lz::DType::Int64);
  Tensor x = lz::tensor<double>(v, c.x).to(dtype);
  auto [y, i] = c.x.size() == 3
                    ? lz::nn::max_pool1d_with_indices(x, c.kernel, c.stride, c.padding,
                                                      c.dilation, c.ceil_mode)
                    : lz::nn::max_pool2d_with_indices(x, c.kernel, c.stride, c.padding,
                                                      c.dilation, c.ceil_mode);
  return {y.to_vector<T>(), i.to_vector<int64_t>()};
}

class PoolLibrary : public lz::testing::RuntimeTest {
 protected:
  void TearDown() override {
    lz::set_active_backend(lz::config().backend);
    RuntimeTest::TearDown();
  }
  // fn() on the reference backend, then on cpu; the cpu run must not fall back.
  template <class F>
  static auto both(F&& fn) {
    lz::set_active_backend("interp");
    auto want = fn();
    lz::set_active_backend("cpu");
    lz::debug::clear_counters();
    auto got = fn();
    EXPECT_EQ(counter("fallback::max_pool"), 0);
    EXPECT_EQ(counter("fallback::avg_pool"), 0);
    EXPECT_EQ(counter("fallback::avg_pool_backward"), 0);
    return std::make_pair(want, got);
  }
};

TEST_F(PoolLibrary, MaxPoolValuesAndIndicesAreTheReferencesBits) {
  unsigned seed = 1;
  for (const Case& c : cases()) {
    auto [want, got] = both([&] { return max_pool<float>(c, lz::DType::Float32, seed); });
    EXPECT_TRUE(same_bits(got.first, want.first)) << "float32 values, x" << lz::shape_str(c.x);
    EXPECT_EQ(got.second, want.second) << "float32 indices, x" << lz::shape_str(c.x);
    auto [want64, got64] = both([&] { return max_pool<double>(c, lz::DType::Float64, seed); });
    EXPECT_TRUE(same_bits(got64.first, want64.first)) << "float64, x" << lz::shape_str(c.x);
    EXPECT_EQ(got64.second, want64.second);
    auto [wanti, goti] = both([&] { return max_pool<int64_t>(c, lz::DType::Int64, seed); });
    EXPECT_EQ(goti, wanti) << "int64, x" << lz::shape_str(c.x);
    auto [wanth, goth] = both([&] {
      auto r = max_pool<float>(c, lz::DType::BFloat16, seed);  // read back as float32
      return r;
    });
    EXPECT_TRUE(same_bits(goth.first, wanth.first)) << "bfloat16, x" << lz::shape_str(c.x);
    EXPECT_EQ(goth.second, wanth.second);
    ++seed;
  }
}

TEST_F(PoolLibrary, MaxPoolKeepsTheFirstNanAndTheFirstOfEqualZeros) {
  const float nan1 = std::nanf("1"), nan2 = std::nanf("2");
  // One window of 4: -0, NaN(1), +0, NaN(2) -> NaN(1) at 1; -0, +0, -1, -2 -> -0 at 0.
  const std::vector<float> v = {-0.0f, nan1, 0.0f, nan2, -0.0f, 0.0f, -1.0f, -2.0f};
  lz::set_active_backend("cpu");
  auto [y, i] = lz::nn::max_pool1d_with_indices(lz::tensor<float>(v, {2, 1, 4}), {4});
  const std::vector<float> yv = y.to_vector<float>();
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(same_bits(std::vector<float>{yv[0]}, std::vector<float>{nan1}));
  EXPECT_TRUE(std::signbit(yv[1]));
}

TEST_F(PoolLibrary, AvgPoolAndItsGradientAreTheReferencesBits) {
  unsigned seed = 20;
  for (const Case& c : cases()) {
    if (c.x.size() == 4 && (c.dilation[0] != 1 || c.dilation[1] != 1)) continue;  // none
    for (bool include_pad : {true, false}) {
      for (std::optional<int64_t> divisor : {std::optional<int64_t>{}, std::optional<int64_t>{5}}) {
        if (divisor && c.x.size() == 3) continue;  // avg_pool1d has no divisor_override
        auto run = [&] {
          std::vector<double> v = tricky(lz::numel(c.x), seed, false);
          for (double& d : v) d = std::isinf(d) ? 3.0 : d;
          Tensor x = lz::tensor<double>(v, c.x).to(lz::DType::Float32);
          lz::set_requires_grad(x);
          Tensor y = c.x.size() == 3
                         ? lz::nn::avg_pool1d(x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                              include_pad)
                         : lz::nn::avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                              include_pad, divisor);
          std::vector<double> r = tricky(lz::numel(y.shape()), seed + 1, false);
          for (double& d : r) d = std::isinf(d) ? -2.0 : d;
          lz::backward(lz::sum(y * lz::tensor<double>(r, y.shape()).to(lz::DType::Float32)));
          return std::make_pair(y.to_vector<float>(), lz::grad(x).to_vector<float>());
        };
        auto [want, got] = both(run);
        EXPECT_TRUE(same_bits(got.first, want.first))
            << "avg_pool x" << lz::shape_str(c.x) << " include_pad " << include_pad;
        EXPECT_TRUE(same_bits(got.second, want.second))
            << "avg_pool's gradient x" << lz::shape_str(c.x) << " include_pad " << include_pad;
      }
    }
    ++seed;
  }
}

TEST_F(PoolLibrary, AdaptiveAvgPoolIsTheReferencesBits) {
  std::vector<double> v = tricky(2 * 3 * 7 * 9, 40, false);
  for (double& d : v) d = std::isinf(d) ? 1.5 : d;
  auto [want, got] = both([&] {
    Tensor x = lz::tensor<double>(v, {2, 3, 7, 9});
    return lz::nn::adaptive_avg_pool2d(x, {3, 4}).to_vector<double>();
  });
  EXPECT_TRUE(same_bits(got, want));
}

}  // namespace
