// The warm-up route (SyncConfig::compile_only, DESIGN.md section 4) and tensors over external
// memory (Storage's owner constructor): what the PyTorch bridge builds its programs on.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "exec/graph_executor.h"
#include "test_util.h"

namespace lz {
namespace {

using WarmUp = testing::RuntimeTest;

Tensor over(std::vector<float>& data, std::shared_ptr<void> owner) {
  auto st = std::make_shared<Storage>(data.data(), data.size() * sizeof(float), std::move(owner));
  auto buf = std::make_shared<DeviceBuffer>(DType::Float32, Shape{static_cast<int64_t>(data.size())}, st);
  return Tensor(internal::TensorImpl::from_buffer(std::move(buf)));
}

TEST_F(WarmUp, CompileOnlyCompilesRunsNothingAndKeepsTheIr) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  sync_tensors({x});
  Tensor y = exp(x) * 2.0f;
  ProgramCapture cap;
  SyncConfig cfg;
  cfg.sync_data = false;
  cfg.compile_only = true;
  cfg.reason = CutReason::CaptureWarmup;
  cfg.capture = &cap;
  int64_t compiles = counter("UncachedCompile");
  wait();
  auto before = debug::metric_data("ExecuteTime");
  int64_t executions = before ? before->count : 0;
  SyncResult r = sync_tensors_graph({y.impl()}, cfg);
  EXPECT_FALSE(r.ran);
  EXPECT_EQ(counter("UncachedCompile"), compiles + 1);
  EXPECT_NE(cap.program.exe, nullptr);
  EXPECT_EQ(debug::tensor_state(y), "ir");   // nothing ran: y is still pending
  wait();
  auto ran = debug::metric_data("ExecuteTime");
  EXPECT_EQ(ran ? ran->count : 0, executions);
  // The same graph synced for real finds the warm program in the compile cache.
  EXPECT_FLOAT_EQ(y.to_vector<float>()[2], 2.0f * std::exp(3.0f));
  EXPECT_EQ(counter("UncachedCompile"), compiles + 1);
  EXPECT_EQ(counter("CachedCompile"), 1);
}

TEST_F(WarmUp, ExternalMemoryIsReadInPlaceAndOnlyItsOwnerIsReleased) {
  auto data = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> alive = data;
  {
    Tensor t = over(*data, data);
    (*data)[0] = 10;  // the tensor reads the owner's memory, not a copy
    EXPECT_FLOAT_EQ(sum(t).item<float>(), 19.0f);
    data.reset();
    EXPECT_FALSE(alive.expired());  // the tensor's storage holds the owner
  }
  // And lets it go, without freeing its memory itself. The executor thread may drop its last
  // reference to the finished program's inputs just after the read returned: wait for that,
  // boundedly (a release that never comes still fails).
  wait();
  for (int i = 0; i < 5000 && !alive.expired(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(alive.expired());
}

}  // namespace
}  // namespace lz
