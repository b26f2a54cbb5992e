// The cpu backend's blocked convolution weights (backend/cpu/conv_weights.h): one copy per call
// for all its parts, kept across calls while the weights' storage is unchanged, and never stale:
// weights updated in place by a donated step, memory freed and handed to another tensor, and
// memory the user may write (from_blob) are all seen by the next convolution. Checked through
// the ConvWeightReorder / ConvWeightReuse counters, the results against plain loops, and bit for
// bit against the same convolution over a fresh copy of the weights.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "backend/backend.h"
#include "backend/cpu/conv_weights.h"
#include "core/config.h"
#include "core/thread_pool.h"
#include "lazuli/lazuli.h"
#include "tensor/lazy_tensor.h"
#include "test_util.h"

namespace {

using lz::Tensor;

// Shapes: x [n, 32, 10, 10], w [64, 32, 3, 3] (72 KiB: the buffer cache keeps such blocks), padding
// 1: 100 output positions per batch entry, so every part runs on oneDNN's blocked layouts.
constexpr int64_t kC = 32, kO = 64, kH = 10, kK = 3;

std::vector<float> randoms(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = d(rng);
  return v;
}

std::vector<float> weights(unsigned seed) { return randoms(kO * kC * kK * kK, seed); }

// y = conv2d(x, w, padding 1) with plain loops, x [n, c, kH, kH], w [o, c, kK, kK].
std::vector<float> conv_loops(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                              int64_t c, int64_t o) {
  std::vector<float> y(static_cast<size_t>(n * o * kH * kH), 0.0f);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < kH; ++i)
        for (int64_t j = 0; j < kH; ++j) {
          double s = 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ki = 0; ki < kK; ++ki)
              for (int64_t kj = 0; kj < kK; ++kj) {
                const int64_t ii = i + ki - 1, jj = j + kj - 1;
                if (ii < 0 || jj < 0 || ii >= kH || jj >= kH) continue;
                s += double(x[((b * c + ic) * kH + ii) * kH + jj]) *
                     w[((oc * c + ic) * kK + ki) * kK + kj];
              }
          y[((b * o + oc) * kH + i) * kH + j] = static_cast<float>(s);
        }
  return y;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-3 * std::max(1.0f, std::abs(want[i])))
        << what << ": element " << i;
  }
}

Tensor conv(const Tensor& x, const Tensor& w) { return lz::nn::conv2d(x, w, Tensor(), {1}, {1}); }

// The same convolution over a fresh Lazuli copy of the weights' current values: a new storage,
// so its blocked copy is made anew. The results must equal bit for bit.
std::vector<float> conv_fresh(const Tensor& x, const std::vector<float>& wv) {
  Tensor w = lz::tensor<float>(wv, {kO, kC, kK, kK});
  return conv(x, w).to_vector<float>();
}

// Weights as a program's output (device data in a storage of Lazuli's), as initialized
// parameters are.
Tensor parameter(const std::vector<float>& values) {
  Tensor w = lz::tensor<float>(values, {kO, kC, kK, kK}).clone();
  lz::sync_tensors({w}, true);
  return w;
}

const void* memory_of(const Tensor& t) { return t.impl()->buffer()->wait()->data(); }
uint64_t content_of(const Tensor& t) { return t.impl()->buffer()->wait()->content_id(); }

// The kept copies' bytes once dead storages are gone: a Storage that a finished program still
// held is released on the executor thread, possibly just after lz::wait() returns, and its
// copies are freed then (the retire hook). Waits for that (at most 5 s), not for speed.
size_t settled_cache_bytes() {
  lz::wait();
  for (int i = 0; i < 5000 && lz::cpu::conv_weight_cache_bytes() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return lz::cpu::conv_weight_cache_bytes();
}

class ConvWeightCache : public lz::testing::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    lz::set_active_backend("cpu");
    lz::cpu::clear_conv_weight_cache();
  }
  void TearDown() override {
    RuntimeTest::TearDown();
    lz::cpu::clear_conv_weight_cache();
    lz::set_active_backend(lz::config().backend);
  }
  // A batch that cuts into equal parts, two entries each.
  static int64_t batch() { return 2 * lz::runtime_pool().num_threads(); }
  static Tensor input(unsigned seed, std::vector<float>* values = nullptr) {
    std::vector<float> v = randoms(batch() * kC * kH * kH, seed);
    if (values) *values = v;
    return lz::tensor<float>(v, {batch(), kC, kH, kH});
  }
  static int64_t reorders() { return counter("ConvWeightReorder"); }
  static int64_t reuses() { return counter("ConvWeightReuse"); }
};

TEST_F(ConvWeightCache, SteadyInferenceReordersTheWeightsOnce) {
  const std::vector<float> wv = weights(1);
  Tensor w = lz::tensor<float>(wv, {kO, kC, kK, kK});
  lz::sync_tensors({w}, true);
  for (unsigned call = 0; call < 3; ++call) {
    std::vector<float> xv;
    Tensor x = input(10 + call, &xv);
    const int64_t r0 = reorders(), u0 = reuses();
    std::vector<float> y = conv(x, w).to_vector<float>();
    if (call == 0) {
      EXPECT_EQ(reorders() - r0, 1) << "one copy for all the call's parts";
      EXPECT_EQ(reuses() - u0, lz::runtime_pool().num_threads() - 1);
    } else {
      EXPECT_EQ(reorders() - r0, 0) << "call " << call << " must reuse the kept copy";
      EXPECT_EQ(reuses() - u0, lz::runtime_pool().num_threads());
    }
    expect_near(y, conv_loops(xv, wv, batch(), kC, kO), "conv");
    EXPECT_EQ(y, conv_fresh(x, wv)) << "call " << call;
  }
  EXPECT_GT(lz::cpu::conv_weight_cache_bytes(), 0u);
}

TEST_F(ConvWeightCache, ComputedWeightsShareOneCopyPerCall) {
  const std::vector<float> wv = weights(2);
  Tensor w = lz::tensor<float>(wv, {kO, kC, kK, kK});
  std::vector<float> w2(wv.size());
  for (size_t i = 0; i < wv.size(); ++i) w2[i] = wv[i] * 1.5f;
  for (unsigned call = 0; call < 2; ++call) {
    std::vector<float> xv;
    Tensor x = input(20 + call, &xv);
    const int64_t r0 = reorders();
    // The weights are computed in the program (scratch memory): nothing is kept across calls.
    std::vector<float> y = conv(x, w * 1.5f).to_vector<float>();
    EXPECT_EQ(reorders() - r0, 1) << "call " << call;
    expect_near(y, conv_loops(xv, w2, batch(), kC, kO), "conv of computed weights");
  }
  EXPECT_EQ(lz::cpu::conv_weight_cache_bytes(), 0u);
}

// A training-like loop: the weights are updated in place by a step whose program writes them
// into their own (donated) storage. The next convolution must see the new weights.
TEST_F(ConvWeightCache, DonatedInPlaceUpdateIsSeenByTheNextConv) {
  Tensor w = parameter(weights(3));
  const void* memory = memory_of(w);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> xv;
    Tensor x = input(30 + step, &xv);
    const std::vector<float> wv = w.to_vector<float>();
    const uint64_t id = content_of(w);
    const int64_t r0 = reorders();
    std::vector<float> y = conv(x, w).to_vector<float>();
    EXPECT_EQ(reorders() - r0, 1) << "new weights, a new copy (step " << step << ")";
    expect_near(y, conv_loops(xv, wv, batch(), kC, kO), "conv after an in-place update");
    EXPECT_EQ(y, conv_fresh(x, wv)) << "step " << step;
    // The update, at a step barrier: w's buffer is donated to w's new value.
    const int64_t donations = counter("InputOutputAliasCount");
    w.sub_(0.25f);
    lz::sync(/*wait=*/true);
    ASSERT_GT(counter("InputOutputAliasCount"), donations) << "the update must be donated";
    ASSERT_EQ(memory_of(w), memory) << "the update must write the weights' own storage";
    EXPECT_NE(content_of(w), id) << "new contents, new identity";
  }
}

// The same, with the convolution and the update in one program: the convolution reads the weights
// whose storage the program then overwrites (so nothing may be kept from them).
TEST_F(ConvWeightCache, ConvAndUpdateInOneProgram) {
  Tensor w = parameter(weights(4));
  const void* memory = memory_of(w);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> xv;
    Tensor x = input(40 + step, &xv);
    lz::sync_tensors({x}, true);
    const std::vector<float> wv = w.to_vector<float>();
    Tensor y = conv(x, w);
    w.sub_(0.25f);
    lz::sync(/*wait=*/true);  // y and w's new value: one program
    ASSERT_EQ(memory_of(w), memory) << "the update must write the weights' own storage";
    std::vector<float> yv = y.to_vector<float>();
    expect_near(yv, conv_loops(xv, wv, batch(), kC, kO), "conv in the updating program");
    EXPECT_EQ(yv, conv_fresh(x, wv)) << "step " << step;
  }
  // (conv_fresh's weights were kept while alive; they are dead now.)
  EXPECT_EQ(settled_cache_bytes(), 0u) << "kept copies of overwritten weights";
}

// Weights freed, their memory handed to another tensor's weights: a new identity, a new copy.
TEST_F(ConvWeightCache, FreedMemoryReusedByOtherWeights) {
  std::vector<float> xv;
  Tensor x = input(50, &xv);
  lz::sync_tensors({x}, true);
  const void* first_memory = nullptr;
  uint64_t first_id = 0;
  {
    Tensor w = lz::tensor<float>(weights(5), {kO, kC, kK, kK});
    conv(x, w).to_vector<float>();
    first_memory = memory_of(w);
    first_id = content_of(w);
    EXPECT_GT(lz::cpu::conv_weight_cache_bytes(), 0u);
  }
  EXPECT_EQ(settled_cache_bytes(), 0u) << "a dead storage's copies are freed";
  const std::vector<float> wv = weights(6);
  Tensor w = lz::tensor<float>(wv, {kO, kC, kK, kK});  // its upload takes the freed block
  const int64_t r0 = reorders();
  std::vector<float> y = conv(x, w).to_vector<float>();
  EXPECT_EQ(memory_of(w), first_memory) << "the buffer cache should hand the block back";
  EXPECT_NE(content_of(w), first_id);
  EXPECT_EQ(reorders() - r0, 1);
  expect_near(y, conv_loops(xv, wv, batch(), kC, kO), "conv over reused memory");
  EXPECT_EQ(y, conv_fresh(x, wv));
}

// Memory the user owns and may write between calls (from_blob, as from_numpy): never kept.
TEST_F(ConvWeightCache, UserWritableWeightsAreNeverKept) {
  std::vector<float> wv = weights(7);
  Tensor w = lz::from_blob(wv.data(), lz::DType::Float32, {kO, kC, kK, kK});
  std::vector<float> xv;
  Tensor x = input(60, &xv);
  for (int call = 0; call < 2; ++call) {
    const int64_t r0 = reorders();
    std::vector<float> y = conv(x, w).to_vector<float>();
    EXPECT_EQ(reorders() - r0, 1) << "call " << call;
    expect_near(y, conv_loops(xv, wv, batch(), kC, kO), "conv over user memory");
    for (float& f : wv) f = -f;  // the user writes the weights behind Lazuli's back
  }
  EXPECT_EQ(lz::cpu::conv_weight_cache_bytes(), 0u);
}

// External memory whose owner sees every write to it (the torch bridge's parameters) lends a
// content id with it (core/buffer.h): its copy is kept across calls, though each call wraps the
// memory in a new Storage, until the owner retires the id.
Tensor lent(std::vector<float>* values, uint64_t id) {
  auto storage = std::make_shared<lz::Storage>(values->data(), values->size() * sizeof(float),
                                               std::shared_ptr<void>(values, [](void*) {}),
                                               lz::DeviceId::host(), id);
  return Tensor(lz::internal::TensorImpl::from_buffer(std::make_shared<lz::DeviceBuffer>(
      lz::DType::Float32, lz::Shape{kO, kC, kK, kK}, std::move(storage))));
}

TEST_F(ConvWeightCache, LentIdKeepsExternalWeightsUntilRetired) {
  std::vector<float> wv = weights(11), xv;
  Tensor x = input(90, &xv);
  lz::sync_tensors({x}, true);
  uint64_t id = lz::Storage::new_content_id();
  for (int call = 0; call < 3; ++call) {
    const int64_t r0 = reorders();
    std::vector<float> y = conv(x, lent(&wv, id)).to_vector<float>();
    EXPECT_EQ(reorders() - r0, call == 0 ? 1 : 0) << "call " << call;
    EXPECT_EQ(y, conv_fresh(x, wv)) << "call " << call;
  }
  lz::wait();
  EXPECT_GT(lz::cpu::conv_weight_cache_bytes(), 0u) << "a lent id outlives the Storage that lent it";
  // The owner writes its memory and says so: the copy goes, the next call makes a new one.
  for (float& f : wv) f = -f;
  lz::Storage::retire_content_id(id);
  EXPECT_EQ(settled_cache_bytes(), 0u);
  id = lz::Storage::new_content_id();
  const int64_t r0 = reorders();
  std::vector<float> y = conv(x, lent(&wv, id)).to_vector<float>();
  EXPECT_EQ(reorders() - r0, 1);
  expect_near(y, conv_loops(xv, wv, batch(), kC, kO), "conv over rewritten lent memory");
  lz::Storage::retire_content_id(id);
  EXPECT_EQ(settled_cache_bytes(), 0u);
}

// A write by Lazuli into lent memory (a program that donates into it) retires the lent id even
// through a Storage that derived nothing itself: the copy was made through an earlier one.
TEST_F(ConvWeightCache, WriteIntoLentMemoryRetiresTheLentId) {
  std::vector<float> wv = weights(12);
  Tensor x = input(91);
  const uint64_t id = lz::Storage::new_content_id();
  conv(x, lent(&wv, id)).to_vector<float>();
  lz::wait();
  ASSERT_GT(lz::cpu::conv_weight_cache_bytes(), 0u);
  lz::Storage again(wv.data(), wv.size() * sizeof(float), nullptr, lz::DeviceId::host(), id);
  again.contents_changed();
  EXPECT_NE(again.content_id(), id);
  EXPECT_NE(again.content_id(), 0u);
  EXPECT_EQ(settled_cache_bytes(), 0u) << "copies of the written bytes must go";
}

TEST_F(ConvWeightCache, BoundEvictsLeastRecentlyUsed) {
  const size_t copy_bytes = kO * kC * kK * kK * sizeof(float);
  lz::mutable_config().conv_weight_cache_bytes = static_cast<int64_t>(copy_bytes * 3 / 2);
  Tensor a = lz::tensor<float>(weights(8), {kO, kC, kK, kK});
  Tensor b = lz::tensor<float>(weights(9), {kO, kC, kK, kK});
  Tensor x = input(70);
  lz::sync_tensors({a, b, x}, true);
  int64_t r0 = reorders();
  for (const Tensor* w : {&a, &b, &a, &b}) conv(x, *w).to_vector<float>();
  EXPECT_EQ(reorders() - r0, 4) << "room for one copy: each call evicts the other's";
  EXPECT_LE(lz::cpu::conv_weight_cache_bytes(), copy_bytes * 3 / 2);
  r0 = reorders();
  conv(x, b).to_vector<float>();
  EXPECT_EQ(reorders() - r0, 0) << "the most recent one stays";

  lz::mutable_config().conv_weight_cache_bytes = 0;
  lz::cpu::clear_conv_weight_cache();
  r0 = reorders();
  for (int call = 0; call < 2; ++call) conv(x, a).to_vector<float>();
  EXPECT_EQ(reorders() - r0, 2) << "a bound of 0 keeps nothing";
  EXPECT_EQ(lz::cpu::conv_weight_cache_bytes(), 0u);
}

// Batch 1 (cut by channels when there are several threads: each part its slice of the weights)
// and the input gradient (the weights read by ConvBackwardInput) keep their copies too.
TEST_F(ConvWeightCache, ChannelSlicesAndInputGradientKeepTheirCopies) {
  const std::vector<float> wv = weights(10);
  Tensor w = lz::tensor<float>(wv, {kO, kC, kK, kK});
  std::vector<float> xv = randoms(kC * kH * kH, 80), dyv = randoms(kO * kH * kH, 81);
  Tensor x = lz::tensor<float>(xv, {1, kC, kH, kH});
  Tensor dy = lz::tensor<float>(dyv, {1, kO, kH, kH});
  lz::sync_tensors({w, x, dy}, true);
  auto input_grad = [&](const Tensor& weights) {
    return lz::nn::conv_input_grad({1, kC, kH, kH}, weights, dy, {1}, {1}).to_vector<float>();
  };
  const std::vector<float> y0 = conv(x, w).to_vector<float>(), dx0 = input_grad(w);
  int64_t r0 = reorders();
  EXPECT_EQ(conv(x, w).to_vector<float>(), y0);
  EXPECT_EQ(input_grad(w), dx0);
  EXPECT_EQ(reorders() - r0, 0);
  expect_near(y0, conv_loops(xv, wv, 1, kC, kO), "batch-1 conv");
  Tensor fresh = lz::tensor<float>(wv, {kO, kC, kK, kK});
  EXPECT_EQ(conv(x, fresh).to_vector<float>(), y0);
  EXPECT_EQ(input_grad(fresh), dx0);
}

}  // namespace
