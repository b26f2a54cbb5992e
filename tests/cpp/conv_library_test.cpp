// The cpu backend's convolutions (oneDNN, float32) against the reference backend's, on geometries
// that exercise every parameter and the cuts of the batch and of the channels across threads;
// and the counted fallback where oneDNN does not apply (float64).
#include <gtest/gtest.h>

#include <random>

#include "backend/backend.h"
#include "core/config.h"
#include "core/shape.h"
#include "lazuli/lazuli.h"
#include "test_util.h"

namespace {

using lz::Tensor;

struct Geom {
  lz::IntList x, w;
  lz::IntList stride, padding, dilation;
  int64_t groups;
};

Tensor random(const lz::IntList& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = d(rng);
  return lz::tensor<float>(v, shape);
}

// y = conv(x, w), and the gradients of sum(y * r) for x and w, on the active backend.
std::vector<std::vector<float>> conv_and_grads(const Geom& g) {
  Tensor x = random(g.x, 1), w = random(g.w, 2);
  lz::set_requires_grad(x);
  lz::set_requires_grad(w);
  Tensor y = g.x.size() == 3
                 ? lz::nn::conv1d(x, w, Tensor(), g.stride, g.padding, g.dilation, g.groups)
                 : lz::nn::conv2d(x, w, Tensor(), g.stride, g.padding, g.dilation, g.groups);
  Tensor r = random(y.shape(), 3);
  lz::backward(lz::sum(y * r));
  return {y.to_vector<float>(), lz::grad(x).to_vector<float>(), lz::grad(w).to_vector<float>()};
}

class ConvLibrary : public lz::testing::RuntimeTest {
 protected:
  void TearDown() override {
    lz::set_active_backend(lz::config().backend);
    RuntimeTest::TearDown();
  }
};

TEST_F(ConvLibrary, Float32ConvolutionsAndGradientsMatchTheReference) {
  const std::vector<Geom> geoms = {
      {{2, 4, 9, 8}, {6, 4, 3, 3}, {1}, {0}, {1}, 1},
      {{3, 4, 9, 8}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},
      {{1, 3, 7, 7}, {3, 1, 3, 3}, {1}, {1}, {1}, 3},    // depthwise, batch of 1
      {{5, 3, 16, 16}, {8, 3, 7, 7}, {2}, {3}, {1}, 1},  // a resnet stem, odd batch
      {{4, 8, 5, 5}, {16, 8, 1, 1}, {2}, {0}, {1}, 1},   // strided pointwise: right pad < 0
      {{2, 6, 11}, {3, 2, 3}, {3}, {1}, {2}, 3},         // 1-D
      // oneDNN's blocked layouts (a part with at least 32 output positions; the ones above with
      // fewer run on the plain layouts): channels in blocks of 16, a depthwise one
      {{2, 32, 10, 10}, {48, 32, 3, 3}, {1}, {1}, {1}, 1},
      {{3, 8, 12, 12}, {8, 1, 3, 3}, {1}, {1}, {1}, 8},
      // batch 1 with 2 threads: cut by channels (output, or input for the input gradient), in
      // blocks of 16, plain and blocked, strided and padded
      {{1, 32, 6, 6}, {48, 32, 3, 3}, {1}, {1}, {1}, 1},
      {{1, 40, 14, 14}, {64, 40, 3, 3}, {2}, {1}, {1}, 1},
      {{1, 64, 7, 7}, {33, 64, 1, 1}, {1}, {0}, {1}, 1},
      {{1, 3, 20, 20}, {32, 3, 7, 7}, {2}, {3}, {1}, 1},  // stem: 3 input channels, not cut
      // weights larger than the input: the weight gradient is cut by output channels at any
      // batch (no partial gradients to sum), also where they are not a multiple of 16
      {{4, 64, 4, 4}, {64, 64, 3, 3}, {1}, {1}, {1}, 1},
      {{3, 48, 5, 5}, {40, 48, 3, 3}, {1}, {1}, {1}, 1},
  };
  for (const Geom& g : geoms) {
    lz::set_active_backend("interp");
    auto want = conv_and_grads(g);
    lz::set_active_backend("cpu");
    lz::debug::clear_counters();
    auto got = conv_and_grads(g);
    for (size_t k = 0; k < 3; ++k) {
      ASSERT_EQ(got[k].size(), want[k].size());
      for (size_t i = 0; i < got[k].size(); ++i) {
        ASSERT_NEAR(got[k][i], want[k][i], 1e-4 * std::max(1.0f, std::abs(want[k][i])))
            << "output " << k << " element " << i << " of geometry x" << lz::shape_str(g.x) << " w"
            << lz::shape_str(g.w);
      }
    }
    EXPECT_EQ(counter("fallback::conv"), 0) << "x" << lz::shape_str(g.x);
    EXPECT_EQ(counter("fallback::conv_backward_input"), 0);
    EXPECT_EQ(counter("fallback::conv_backward_weight"), 0);
  }
}

TEST_F(ConvLibrary, Float64RunsTheCountedReferenceKernel) {
  lz::set_active_backend("cpu");
  Tensor x = lz::ones({1, 1, 3, 3}, lz::kFloat64), w = lz::ones({1, 1, 2, 2}, lz::kFloat64);
  EXPECT_EQ(lz::nn::conv2d(x, w).to_vector<double>(), (std::vector<double>{4, 4, 4, 4}));
  EXPECT_EQ(counter("fallback::conv"), 1);
}

}  // namespace
