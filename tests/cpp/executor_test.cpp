// Tensor states, the executor's routes (sync, sync_tensors, value reads), asynchronous execution
// and its errors, step closures, the graph-size cut, the shape cache, and dumps.
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <stdexcept>
#include <thread>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/config.h"
#include "core/thread_pool.h"
#include "exec/device_executor.h"
#include "ir/shape_inference.h"
#include "test_util.h"

namespace lz {
namespace {

using Executor = testing::RuntimeTest;
using TensorStates = testing::RuntimeTest;

// A compiled program with a step big enough to split across the pool wakes the pool's sleeping
// workers when its run is scheduled (Executable::about_to_run), so that step finds them awake; a
// program whose steps all run inline leaves them asleep. Counted, never timed.
TEST_F(Executor, AProgramThatSplitsAStepWakesTheSleepingPoolBeforeItRuns) {
  ThreadPool& pool = runtime_pool();
  if (config().backend != "cpu" || pool.num_threads() < 2)
    GTEST_SKIP() << "needs the cpu backend and 2 threads";
  Tensor big = tensor<float>(testing::random_values(1 << 20, 1), {1 << 20});
  Tensor small = tensor<float>({1, 2, 3, 4}, {4});
  auto step = [](const Tensor& x) {
    Tensor y = lz::exp(x) + 1.0f;
    lz::sync(true);
    return y;
  };
  step(big);  // compiled, and both inputs on the device from now on
  step(small);
  auto all_asleep = [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pool.sleeping_workers() != pool.num_threads() - 1) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  };
  ASSERT_TRUE(all_asleep());
  const int64_t wakes = counter("PoolWakes");
  step(small);
  EXPECT_EQ(counter("PoolWakes"), wakes);
  ASSERT_TRUE(all_asleep());
  step(big);
  EXPECT_EQ(counter("PoolWakes") - wakes, 1);
}

TEST_F(TensorStates, HostThenDeviceDataThenIrThenDeviceData) {
  Tensor a = tensor<float>({1, 2, 3}, {3});
  EXPECT_EQ(debug::tensor_state(a), "host");
  Tensor b = a + 1.5f;
  EXPECT_EQ(debug::tensor_state(a), "device_data");  // uploaded on first use in a graph
  EXPECT_EQ(debug::tensor_state(b), "ir");
  lz::sync(true);
  EXPECT_EQ(debug::tensor_state(b), "device_data");
  b *= 2.0f;
  EXPECT_EQ(debug::tensor_state(b), "ir");
  Tensor v = b.slice(0, 0, 2);
  EXPECT_EQ(debug::tensor_state(v), "view");
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(debug::tensor_state(v), "view");
}

TEST_F(TensorStates, HostTensorUploadsOnceAndCountsOneTransfer) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor b = a + a;
  Tensor c = a * a;
  EXPECT_EQ(counter("TransferToDevice"), 1);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(counter("TransferFromDevice"), 2);
}

TEST_F(TensorStates, ReadingAHostTensorRunsNothing) {
  Tensor a = tensor<int64_t>({4, 5}, {2});
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);
}

TEST_F(TensorStates, LiveTensorRegistryTracksCreationAndDestruction) {
  int64_t before = debug::live_tensor_count();
  {
    Tensor a = zeros({2});
    Tensor b = a + 1.0f;
    EXPECT_EQ(debug::live_tensor_count(), before + 2);
    EXPECT_LT(a.id(), b.id());
  }
  EXPECT_EQ(debug::live_tensor_count(), before);
}

TEST_F(Executor, SyncWithNothingPendingRunsNothing) {
  Tensor a = tensor<float>({1}, {1});
  lz::sync(true);
  lz::sync(true);
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);
  EXPECT_EQ(counter("MarkStep"), 2);
}

TEST_F(Executor, SyncReturnsOnceScheduledAndReadsWait) {
  Tensor a = tensor<float>({1, 2, 3, 4}, {4});
  Tensor y = (a * a).sum();
  lz::sync();  // does not wait
  EXPECT_EQ(debug::tensor_state(y), "device_data");  // a placeholder until the program runs
  EXPECT_FLOAT_EQ(y.item<float>(), 30.0f);
}

TEST_F(Executor, SyncTensorsSyncsOnlyTheListedTensors) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor x = a + 1.0f, y = a + 2.0f;
  lz::sync_tensors({x}, true);
  EXPECT_EQ(debug::tensor_state(x), "device_data");
  EXPECT_EQ(debug::tensor_state(y), "ir");
}

TEST_F(Executor, FailingProgramRaisesAtTheNextWaitAndTheNextStepRuns) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  // 7 is out of range, known only when it runs (computed; a host index is checked at the op).
  Tensor idx = tensor<int64_t>({0, 7}, {2}) + zeros({2}, DType::Int64);
  Tensor bad = index_select(x, 0, idx);
  lz::sync();  // scheduled; the failure happens on the executor thread
  EXPECT_THROW(lz::wait(), ExecutionError);
  lz::wait();  // raised once, then cleared
  Tensor ok = x * 2.0f;
  lz::sync(true);
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_THROW(bad.to_vector<float>(), ExecutionError);  // its value never came
}

TEST_F(Executor, AsyncErrorIsRaisedByTheNextSync) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  Tensor bad = index_select(x, 0, tensor<int64_t>({-1}, {1}) + zeros({1}, DType::Int64));
  lz::sync();
  try {
    lz::sync(true);
    // The error may surface here or at the wait below, never get lost.
    lz::wait();
    ADD_FAILURE() << "the asynchronous error was lost";
  } catch (const ExecutionError& e) {
    EXPECT_NE(std::string(e.what()).find("index_select"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("graph"), std::string::npos) << e.what();
  }
  Tensor y = x + 1.0f;
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST_F(Executor, ValueReadOfAFailedProgramRaisesOnceNotAgainAtSync) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  // Computed, so only the program finds index 5 (a host index is checked at the op).
  Tensor bad = index_select(x, 0, tensor<int64_t>({5}, {1}) + zeros({1}, DType::Int64));
  EXPECT_THROW(bad.item<float>(), ExecutionError);
  EXPECT_NO_THROW(lz::sync(true));
}

TEST_F(Executor, HostIndexOutOfRangeRaisesAtTheOpAndRecordsNothing) {
  Tensor x = tensor<float>({1, 2, 3}, {3});
  EXPECT_THROW(index_select(x, 0, tensor<int64_t>({3}, {1})), IndexError);
  EXPECT_THROW(gather(x, 0, tensor<int64_t>({-1}, {1})), IndexError);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

// A program that fails leaves every tensor it would have updated as it was, donated buffers
// included, and a new result the failure did not reach keeps its value (DESIGN.md section 7).
TEST_F(Executor, FailedStepKeepsUpdatedTensorsAndDonatedBuffers) {
  for (const char* backend : {"cpu", "interp"}) {
    set_active_backend(backend);
    Tensor w = tensor<float>({1, 2, 3}, {3}) + 0.0f;
    Tensor m = zeros({3});
    lz::sync(true);
    Tensor idx = tensor<int64_t>({0, 9}, {2}) + zeros({2}, DType::Int64);
    lz::sync(true);
    int64_t aliases = counter("InputOutputAliasCount");
    Tensor g = index_select(w, 0, idx).sum();  // fails: index 9
    w.sub_(g * 0.1f);
    m.add_(1.0f);            // independent of the failure, but state: restored with the rest
    Tensor fresh = m + 4.0f;  // new, and not reached by the failure: keeps its value
    lz::sync();
    EXPECT_GT(counter("InputOutputAliasCount"), aliases) << backend;  // w and m were donated
    EXPECT_THROW(lz::wait(), ExecutionError) << backend;
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3})) << backend;
    EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, 0, 0})) << backend;
    EXPECT_EQ(fresh.to_vector<float>(), (std::vector<float>{5, 5, 5})) << backend;
    w.add_(1.0f);  // the next step works
    lz::sync(true);
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 3, 4})) << backend;
  }
  set_active_backend(config().backend);
}

TEST_F(Executor, RunTimeIndexErrorNamesTheOpTheUserCalled) {
  Tensor logits = zeros({2, 4});
  Tensor target = tensor<int64_t>({1, 6}, {2}) + zeros({2}, DType::Int64);
  Tensor loss = nn::cross_entropy(logits, target);
  try {
    loss.item<float>();
    ADD_FAILURE() << "no error";
  } catch (const ExecutionError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind("cross_entropy failed when its program ran: gather: index 6", 0), 0u) << what;
  }
}

TEST_F(Executor, StepClosuresRunAfterTheBarrierInOrderAndSeeValues) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor loss = (a * 3.0f).sum();
  std::vector<float> seen;
  lz::add_step_closure([&] { seen.push_back(loss.item<float>()); });
  lz::add_step_closure([&] { seen.push_back(loss.item<float>() + 1); });
  EXPECT_TRUE(seen.empty());
  lz::sync();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FLOAT_EQ(seen[0], 9.0f);
  EXPECT_FLOAT_EQ(seen[1], 10.0f);
  // Both closures read the barrier's result: no extra program ran.
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 1);
  lz::sync();
  EXPECT_EQ(seen.size(), 2u);  // closures run once
}

TEST_F(Executor, RunawayGraphIsCutAsGraphTooLarge) {
  mutable_config().max_pending_nodes = 200;
  Tensor x = tensor<float>({0}, {1});
  for (int i = 0; i < 1000; ++i) x = x + 1.5f;
  EXPECT_GE(counter("GraphTooLargeCut"), 3);
  EXPECT_FLOAT_EQ(x.item<float>(), 1500.0f);
}

TEST_F(Executor, NodesNoLiveTensorReachesNeverCauseAGraphTooLargeCut) {
  mutable_config().max_pending_nodes = 200;
  Tensor a = tensor<float>({1, 2}, {2}), b = tensor<float>({3, 4}, {2});
  for (int i = 0; i < 5000; ++i) {
    Tensor c = a + b;  // dropped at once: nothing live reaches it
  }
  EXPECT_EQ(counter("GraphTooLargeCut"), 0);
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);  // nothing ran
  // A live chain still is cut.
  Tensor x = tensor<float>({0}, {1});
  for (int i = 0; i < 1000; ++i) x = x + 1.5f;
  EXPECT_GE(counter("GraphTooLargeCut"), 3);
  EXPECT_FLOAT_EQ(x.item<float>(), 1500.0f);
  mutable_config().max_pending_nodes = 200000;
}

TEST_F(Executor, DroppingAVeryLongUnsyncedChainDoesNotOverflowTheStack) {
  mutable_config().max_pending_nodes = 1 << 30;  // no automatic cut: build the whole chain
  Tensor x = tensor<float>({1}, {1});
  Tensor y = x;
  for (int i = 0; i < 300000; ++i) y = lz::relu(y);
  y = Tensor();  // the last reference: 300k nodes released iteratively
  EXPECT_FLOAT_EQ((x + 1.0f).item<float>(), 2.0f);
}

TEST_F(Executor, ShapeCacheIsBoundedByItsSize) {
  ir::resize_shape_cache(8);
  Tensor a = zeros({3});
  for (int i = 1; i < 40; ++i) Tensor b = a.reshape({3, 1}).expand({3, i});
  EXPECT_LE(ir::shape_cache_size(), 8u);
  ir::resize_shape_cache(static_cast<size_t>(config().ir_shape_cache_size));
}

TEST_F(Executor, DumpsAndGraphHashCompileAndRunNothing) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor y = (a.exp() + 1.0f).sum();
  std::string text = debug::dump_graph({y});
  std::string dot = debug::dump_graph({y}, "dot");
  std::string h = debug::graph_hash({y});
  EXPECT_NE(text.find("exp"), std::string::npos);
  EXPECT_NE(text.find("reduce_sum"), std::string::npos);
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_EQ(h.size(), 32u);
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), 0);
  EXPECT_EQ(debug::tensor_state(y), "ir");
  EXPECT_THROW(debug::dump_graph({y}, "svg"), ValueError);
}

TEST_F(Executor, RecordingFromSeveralThreadsIsSafe) {
  Tensor base = tensor<float>({1, 2, 3, 4}, {4});
  std::vector<std::thread> threads;
  std::vector<float> sums(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Tensor x = base;
      for (int i = 0; i < 50; ++i) x = x + static_cast<float>(t);
      sums[t] = x.sum().item<float>();
      lz::sync();
    });
  }
  for (auto& th : threads) th.join();
  lz::wait();
  for (int t = 0; t < 4; ++t) EXPECT_FLOAT_EQ(sums[t], 10.0f + 4 * 50.0f * t);
}

TEST_F(Executor, ConfigRejectsMalformedEnvironmentValues) {
  setenv("LAZULI_COMPILATION_CACHE_SIZE", "lots", 1);
  EXPECT_THROW(reload_config(), ValueError);
  unsetenv("LAZULI_COMPILATION_CACHE_SIZE");
  setenv("LAZULI_BACKEND", "tpu", 1);
  EXPECT_THROW(reload_config(), ValueError);
  unsetenv("LAZULI_BACKEND");
  reload_config();
  EXPECT_EQ(config().compilation_cache_size, 2048);
}

TEST_F(Executor, MetricsReportsListCountersAndTimes) {
  Tensor y = tensor<float>({1, 2}, {2}).exp();
  y.to_vector<float>();
  std::string full = debug::metrics_report();
  std::string brief = debug::short_metrics_report();
  EXPECT_NE(full.find("UncachedCompile"), std::string::npos);
  EXPECT_NE(full.find("ExecuteTime"), std::string::npos);
  EXPECT_NE(brief.find("CompileTime"), std::string::npos);
  auto d = debug::metric_data("ExecuteTime");
  ASSERT_TRUE(d.has_value());
  EXPECT_GE(d->count, 1);
  EXPECT_EQ(debug::counter_value("NoSuchCounter"), 0);
}

// A sampler: each token reads a value computed from idx, then grows idx by one token. The read
// stores idx (live, and computed by the read's graph anyway), so each token runs one cat; without
// that, token k recomputed the k cats of the whole chain.
TEST_F(Executor, ValueReadStoresTheLiveTensorsItComputesSoAGrowingCatRunsOncePerToken) {
  Tensor idx = tensor<int64_t>({1, 2, 3}, {1, 3});
  std::vector<int64_t> expect{1, 2, 3};
  for (int64_t k = 0; k < 12; ++k) {
    Tensor r = idx.sum() % 7;  // the sum is dropped here; a C++ temporary would be held
    int64_t next = r.item<int64_t>();
    int64_t want = 0;
    for (int64_t v : expect) want += v;
    EXPECT_EQ(next, want % 7);
    expect.push_back(next);
    idx = lz::cat({idx, tensor<int64_t>({next}, {1, 1})}, 1);
  }
  EXPECT_EQ(counter("ExecutedNode::cat"), 11);  // 66 with the whole chain recomputed
  EXPECT_EQ(idx.to_vector<int64_t>(), expect);
  EXPECT_EQ(counter("ExecutedNode::cat"), 12);
  EXPECT_EQ(counter("ValueReadMaterialized"), 11);
}

TEST_F(Executor, ValueReadLeavesTensorsOutsideItsGraphAndDroppedOnesAlone) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor other = a * 5.0f;  // held, but the read does not compute it
  Tensor held = a * 3.0f;
  Tensor out = ((held + 1.0f) * 2.0f).sum();  // held + 1 is dropped at once
  EXPECT_EQ(out.item<float>(), 22.0f);
  EXPECT_EQ(debug::tensor_state(held), "device_data");
  EXPECT_EQ(debug::tensor_state(other), "ir");
  EXPECT_EQ(counter("ValueReadMaterialized"), 1);
  EXPECT_EQ(cut_log().recent().back().outputs, 2u);  // out and held: nothing else was kept
  int64_t runs = counter("CachedCompile") + counter("UncachedCompile");
  EXPECT_EQ(held.to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(counter("CachedCompile") + counter("UncachedCompile"), runs);
}

TEST_F(Executor, BarriersAndSyncTensorsStoreOnlyWhatTheySync) {
  Tensor a = tensor<float>({1, 2}, {2});
  Tensor held = a * 3.0f;
  Tensor out = (held * 2.0f).sum();
  lz::sync_tensors({out}, true);
  EXPECT_EQ(debug::tensor_state(held), "ir");  // sync_tensors syncs only the listed tensors
  EXPECT_EQ(counter("ValueReadMaterialized"), 0);
}

TEST_F(Executor, SteadyLoopWithAReadOfAHeldIntermediateCompilesNothingAfterWarmUp) {
  Tensor w = tensor<float>({1, -1, 0.5f}, {3});
  int64_t compiled = 0;
  for (int step = 0; step < 6; ++step) {
    if (step == 2) compiled = counter("UncachedCompile");
    Tensor h = w * 2.0f;  // held across the read: one more output of the read, every step
    float loss = (h * h).sum().item<float>();
    EXPECT_GT(loss, 0.0f);
    w = h * 0.5f + 0.1f;
    lz::sync(true);
  }
  EXPECT_EQ(counter("UncachedCompile"), compiled);
  EXPECT_GE(counter("ValueReadMaterialized"), 6);
}

// ---- a waiter that runs the program it waits for (DeviceExecutor::run_here_if_next) ---------
// hold() keeps the executor thread from starting anything, so whether the waiter or the executor
// thread runs a task is certain, not a race.

// Sets LAZULI_WAITER_RUN_MS for a test's scope.
class WaiterRunMs {
 public:
  explicit WaiterRunMs(int64_t ms) : old_(config().waiter_run_ms) {
    mutable_config().waiter_run_ms = ms;
  }
  ~WaiterRunMs() { mutable_config().waiter_run_ms = old_; }

 private:
  int64_t old_;
};

struct Ran {
  std::atomic<int> times{0};
  std::thread::id on;
};

std::function<void()> task_of(const std::shared_ptr<Execution>& exec, Ran& ran) {
  return [exec, &ran] {
    ran.on = std::this_thread::get_id();
    ++ran.times;
    exec->complete(nullptr);
  };
}

TEST_F(Executor, WaiterRunsTheNextProgramOnItsOwnThreadWhenAllowed) {
  DeviceExecutor& ex = device_executor();
  ex.wait_all();  // a task finishing (busy_ still set) would refuse the waiter below
  const int64_t before = counter("RunOnWaiter");
  auto exec = std::make_shared<Execution>();
  Ran ran;
  ex.hold();
  ex.schedule(exec, true, task_of(exec, ran));
  EXPECT_TRUE(ex.run_here_if_next(exec.get()));
  ex.release();
  EXPECT_TRUE(exec->done());
  EXPECT_EQ(ran.times, 1);
  EXPECT_EQ(ran.on, std::this_thread::get_id());
  EXPECT_EQ(counter("RunOnWaiter"), before + 1);
  EXPECT_FALSE(ex.run_here_if_next(exec.get()));  // ran already: nothing to do
  ex.wait_all();
  EXPECT_EQ(ran.times, 1);
}

TEST_F(Executor, WaiterNeverRunsAProgramOutOfOrderOrOneNotAllowed) {
  DeviceExecutor& ex = device_executor();
  ex.wait_all();  // a task finishing (busy_ still set) would refuse the waiter below
  auto first = std::make_shared<Execution>(), second = std::make_shared<Execution>(),
       pinned = std::make_shared<Execution>();
  Ran r1, r2, r3;
  ex.hold();
  ex.schedule(first, true, task_of(first, r1));
  ex.schedule(second, true, task_of(second, r2));
  ex.schedule(pinned, false, task_of(pinned, r3));  // a collective's run: the executor thread's
  EXPECT_FALSE(ex.run_here_if_next(second.get()));  // `first` must run before it
  EXPECT_EQ(r2.times, 0);
  EXPECT_TRUE(ex.run_here_if_next(first.get()));
  EXPECT_TRUE(ex.run_here_if_next(second.get()));
  EXPECT_FALSE(ex.run_here_if_next(pinned.get()));
  ex.release();
  ex.wait_all();
  EXPECT_EQ(r3.times, 1);
  EXPECT_NE(r3.on, std::this_thread::get_id());
}

TEST_F(Executor, ATaskThatThrowsFailsItsRunAndLaterTasksStillRun) {
  DeviceExecutor& ex = device_executor();
  ex.wait_all();  // a task finishing (busy_ still set) would refuse the waiter below
  auto bad = std::make_shared<Execution>(), good = std::make_shared<Execution>();
  Ran ran;
  ex.hold();
  ex.schedule(bad, true, [] { throw std::runtime_error("a task that breaks its contract"); });
  EXPECT_TRUE(ex.run_here_if_next(bad.get()));
  ex.release();
  EXPECT_TRUE(bad->done());
  EXPECT_TRUE(bad->error() != nullptr);
  EXPECT_TRUE(ex.take_error_of(bad.get()) != nullptr);  // kept for the next wait, like any failure
  ex.schedule(good, false, task_of(good, ran));         // the executor thread is not stuck
  good->wait();
  EXPECT_EQ(ran.times, 1);
}

TEST_F(Executor, ExecutorThreadStartsNothingWhileAWaiterRunsAProgram) {
  DeviceExecutor& ex = device_executor();
  ex.wait_all();  // a task finishing (busy_ still set) would refuse the waiter below
  auto a = std::make_shared<Execution>(), b = std::make_shared<Execution>();
  Ran rb;
  std::atomic<bool> b_started_during_a{false};
  ex.hold();
  ex.schedule(a, true, [&] {
    ex.release();  // the executor thread is free now: only `a` running may hold `b` back
    ex.schedule(b, true, task_of(b, rb));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b_started_during_a = rb.times.load() > 0;
    a->complete(nullptr);
  });
  EXPECT_TRUE(ex.run_here_if_next(a.get()));
  b->wait();
  EXPECT_FALSE(b_started_during_a);
  EXPECT_EQ(rb.times, 1);
}

TEST_F(Executor, ValueReadOfAShortProgramThatRanBeforeRunsOnTheReader) {
  // Any earlier run counts as short here: a loaded machine (CI's sanitizer runs) may take
  // longer than the default 10 ms over a tiny program.
  WaiterRunMs long_enough(1'000'000);
  Tensor x = lz::ones({8});
  auto step = [&] { return lz::mul(x, 2.0f).to_vector<float>(); };
  // The first read also stores x (a live intermediate); from the second on, one program repeats.
  // Its first run is the executor thread's: its length is unknown until then.
  step();
  step();
  // The executor thread may still be finishing the last run's task (busy_ set), which would
  // refuse the waiter: wait until it is idle.
  device_executor().wait_all();
  device_executor().hold();
  const int64_t before = counter("RunOnWaiter");
  // With the executor thread held only the reader can run it; if it does not, the read would
  // wait for the hold, so the test lets go after 10 s and fails instead of hanging.
  auto read = std::async(std::launch::async, step);
  const bool ran = read.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  device_executor().release();
  EXPECT_TRUE(ran);
  EXPECT_EQ(read.get(), std::vector<float>(8, 2.0f));
  EXPECT_EQ(counter("RunOnWaiter"), before + 1);
}

TEST_F(Executor, ReadOfAValueASyncScheduledRunsItWhenTheExecutorThreadHasNotStarted) {
  // Any earlier run counts as short here: a loaded machine (CI's sanitizer runs) may take
  // longer than the default 10 ms over a tiny program.
  WaiterRunMs long_enough(1'000'000);
  Tensor x = lz::ones({8});
  auto step = [&] {
    Tensor y = lz::mul(x, 3.0f);
    lz::sync();  // scheduled for the executor thread: sync does not wait
    return y;
  };
  step().to_vector<float>();  // the first run of each program is the executor thread's
  step().to_vector<float>();
  // The executor thread may still be finishing the last run's task (busy_ set), which would
  // refuse the waiter: wait until it is idle.
  device_executor().wait_all();
  device_executor().hold();
  const int64_t before = counter("RunOnWaiter");
  Tensor y = step();  // queued behind the hold
  auto read = std::async(std::launch::async, [&] { return y.to_vector<float>(); });
  const bool ran = read.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  device_executor().release();
  EXPECT_TRUE(ran);  // the read found it next in line and ran it
  EXPECT_EQ(read.get(), std::vector<float>(8, 3.0f));
  EXPECT_EQ(counter("RunOnWaiter"), before + 1);
}

}  // namespace
}  // namespace lz
