// lz::Captured (capture and replay, exec/capture.cpp) from C++: replays start once two traces
// agree, read each call's arguments, write state in place, and give the values that running the
// function again gives.
#include <gtest/gtest.h>

#include "test_util.h"

namespace lz {
namespace {

using Capture = testing::RuntimeTest;

TEST_F(Capture, ReplaysAfterTwoMatchingTracesWithEachCallsArguments) {
  Tensor w = tensor<float>({1, 2, 3}, {3});
  Captured f([&w](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0] * w)}; }, "dot");
  std::vector<Tensor> results;
  for (int i = 0; i < 6; ++i) results.push_back(f({full({3}, static_cast<double>(i))})[0]);
  EXPECT_EQ(f.traces(), 2);
  EXPECT_EQ(f.replays(), 4);
  EXPECT_EQ(counter("CaptureReplay"), 4);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(results[i].item<float>(), 6.0f * i) << i;
}

TEST_F(Capture, InPlaceStateUpdatesAreWrittenOnEveryReplay) {
  Tensor acc = zeros({2});
  sync_tensors({acc});
  Captured add([&acc](const std::vector<Tensor>& a) {
    acc.add_(a[0]);
    return std::vector<Tensor>{};
  });
  for (int i = 1; i <= 5; ++i) add({full({2}, static_cast<double>(i))});
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{15, 15}));
  EXPECT_EQ(add.replays(), 3);
}

TEST_F(Capture, ReplayedTrainingMatchesTracedTrainingExactly) {
  auto train = [](bool capture) {
    manual_seed(0);
    nn::MLP model({4, 8, 3});
    std::vector<Tensor> params = model.parameters();
    Tensor x = randn({5, 4});
    Tensor y = tensor<int64_t>({0, 1, 2, 1, 0}, {5});
    sync_tensors({x, y});
    auto step = [&](const std::vector<Tensor>& a) {
      nn::zero_grad(params);
      Tensor loss = nn::cross_entropy(model.forward(a[0]), a[1]);
      backward(loss);
      nn::sgd_step(params, 0.1);
      return std::vector<Tensor>{loss};
    };
    Captured captured(step, "train");
    std::vector<float> losses;
    for (int i = 0; i < 6; ++i) {
      Tensor loss = capture ? captured({x, y})[0] : step({x, y})[0];
      if (!capture) sync();
      losses.push_back(loss.item<float>());
    }
    if (capture) {
      EXPECT_GE(captured.replays(), 3);
    }
    losses.push_back(params[0].to_vector<float>()[0]);
    return losses;
  };
  EXPECT_EQ(train(true), train(false));
}

TEST_F(Capture, AValueReadInsideIsTracedEveryTimeWithTheReason) {
  Captured f([](const std::vector<Tensor>& a) {
    Tensor y = a[0] * 2.0;
    (void)y.item<float>();
    return std::vector<Tensor>{y};
  });
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f({full({}, static_cast<double>(i))})[0].item<float>(), 2.0f * i);
  EXPECT_EQ(f.replays(), 0);
  EXPECT_NE(f.last_reason().find("value-read"), std::string::npos) << f.last_reason();
}

TEST_F(Capture, FullGraphRaisesOnAValueReadAndTheRuntimeKeepsWorking) {
  Captured f([](const std::vector<Tensor>& a) {
    (void)(a[0] + 1.0).item<float>();  // computes: an execution inside
    return std::vector<Tensor>{};
  }, "strict", /*full_graph=*/true);
  EXPECT_THROW(f({full({}, 1.0)}), UnexpectedExecutionError);
  EXPECT_FLOAT_EQ(sum(ones({3})).item<float>(), 3.0f);
}

TEST_F(Capture, ANewShapeIsANewSignature) {
  Captured f([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0])}; });
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(f({ones({2})})[0].item<float>(), 2.0f);
    EXPECT_FLOAT_EQ(f({ones({5})})[0].item<float>(), 5.0f);
  }
  EXPECT_EQ(f.traces(), 4);
  EXPECT_EQ(f.replays(), 2);
}

// Rows of x (n x 3) through a weight, then a view whose target is written from x's size and a
// slice of a table by that size (as a positional embedding is): attributes that change with n.
std::vector<Tensor> size_generic(const std::vector<Tensor>& a, const Tensor& w,
                                 const Tensor& table) {
  const int64_t n = a[0].shape()[0];
  Tensor y = a[0].matmul(w).relu().reshape({n * 2}) + table.slice(0, 0, n * 2);
  return {y, sum(y)};
}

TEST_F(Capture, ANewSizeOfASettledFunctionReplaysAfterOneTrace) {
  Tensor w = tensor<float>({1, -1, 2, 0.5f, 1, -3}, {3, 2});
  Tensor table = tensor<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {16});
  Captured f([&](const std::vector<Tensor>& a) { return size_generic(a, w, table); }, "generic");
  auto check = [&](int64_t n, double v) {
    Tensor x = full({n, 3}, v);
    std::vector<float> got = f({x})[0].to_vector<float>();
    EXPECT_EQ(got, size_generic({x}, w, table)[0].to_vector<float>()) << n << " " << v;
  };
  for (int i = 0; i < 3; ++i) check(2, i + 1.0);
  EXPECT_EQ(f.traces(), 2);
  EXPECT_EQ(f.replays(), 1);
  const int64_t settled = counter("CaptureSettledAtNewSizes");
  for (int64_t n : {5, 3, 8}) {
    check(n, 0.5);   // traced once
    check(n, -1.5);  // replayed
  }
  EXPECT_EQ(f.traces(), 5);
  EXPECT_EQ(f.replays(), 4);
  EXPECT_EQ(counter("CaptureSettledAtNewSizes") - settled, 3);
  EXPECT_EQ(f.last_reason(), "");
}

TEST_F(Capture, ANewSizeWhoseProgramChangesBeyondItsSizesIsTracedTwice) {
  // The scale is computed from the size in the function: new data at each size, as a Python
  // number baked into the graph would be; the size alone does not explain it.
  Captured f(
      [](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{a[0] * full({}, static_cast<double>(a[0].shape()[0]))};
      },
      "scaled");
  for (int i = 0; i < 3; ++i) f({ones({2})});
  const int64_t settled = counter("CaptureSettledAtNewSizes");
  EXPECT_EQ(f({ones({4})})[0].to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(f.traces(), 3);
  EXPECT_EQ(f({ones({4})})[0].to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(f.traces(), 4);  // the second trace at the new size settles it, as before
  EXPECT_EQ(f({ones({4})})[0].to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(f.replays(), 2);
  EXPECT_EQ(counter("CaptureSettledAtNewSizes"), settled);
}

TEST_F(Capture, AMeanOverTheChangingDimSettlesANewSizeOnOneTrace) {
  // mean() divides by a count constant: it follows the sizes, as the sizes themselves do.
  Captured f([](const std::vector<Tensor>& a) { return std::vector<Tensor>{mean(a[0] * 2.0)}; });
  for (int i = 0; i < 3; ++i) f({ones({2, 3})});
  for (int64_t n : {4, 7}) {
    EXPECT_FLOAT_EQ(f({full({n, 3}, 1.5)})[0].item<float>(), 3.0f);
    EXPECT_FLOAT_EQ(f({full({n, 3}, 2.5)})[0].item<float>(), 5.0f);
  }
  EXPECT_EQ(f.traces(), 4);
  EXPECT_EQ(f.replays(), 3);
}

TEST_F(Capture, ASliceThatMovesAtANewSizeOrAChangedStructureIsTracedTwice) {
  // A crop whose offset a Python number sets (not the sizes): at a new batch size the crop moved
  // along a dim whose extent did not change, so the trace is not the settled program at other
  // sizes. Likewise a branch on the size that adds an op.
  int64_t offset = 0;
  Captured f([&offset](const std::vector<Tensor>& a) {
    Tensor y = a[0].slice(1, offset, offset + 2);
    if (a[0].shape()[0] > 6) y = y.relu();
    return std::vector<Tensor>{y};
  });
  Tensor cols = tensor<float>({0, 1, 2, 3, 4, 5}, {1, 6});
  for (int i = 0; i < 3; ++i) f({cols.expand({2, 6}).contiguous()});
  const int64_t settled = counter("CaptureSettledAtNewSizes");
  offset = 1;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f({cols.expand({4, 6}).contiguous()})[0].to_vector<float>(),
              (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  }
  EXPECT_EQ(f.traces(), 2 + 2);
  offset = 0;
  for (int i = 0; i < 3; ++i) f({cols.expand({8, 6}).contiguous()});
  EXPECT_EQ(f.traces(), 4 + 2);
  EXPECT_EQ(counter("CaptureSettledAtNewSizes"), settled);
}

TEST_F(Capture, ADeadStateTensorMakesTheCallTraceAgain) {
  auto w = std::make_shared<Tensor>(ones({2}));
  Captured f([w](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] * *w}; });
  for (int i = 0; i < 3; ++i) f({ones({2})});
  *w = full({2}, 3.0);  // the traced tensor is gone
  EXPECT_EQ(f({ones({2})})[0].to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_NE(f.last_reason().find("no longer exists"), std::string::npos) << f.last_reason();
}

}  // namespace
}  // namespace lz
