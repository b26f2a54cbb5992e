// Concurrent use (DESIGN.md section 8): several threads recording, syncing, reading values, and
// creating and dropping tensors at once, on the interp and the cpu backend. Each test loops many
// steps and checks exact values (integers held exactly in float32), so a race shows as a wrong
// value or an error, and the ThreadSanitizer build (LAZULI_TSAN, scripts/test.sh) sees the
// interleavings. No test relies on a sleep or on timing.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "dist/process_group.h"
#include "lazuli/distributed.h"
#include "test_util.h"

namespace lz {
namespace {

// Steps per thread; LAZULI_CONCURRENCY_STEPS scales the tests up for a long local soak.
int steps(int base) {
  const char* s = std::getenv("LAZULI_CONCURRENCY_STEPS");
  return s ? std::max(1, std::atoi(s)) : base;
}

// Counts failures seen by worker threads and keeps the first few descriptions.
class Failures {
 public:
  void add(const std::string& what) {
    std::lock_guard<std::mutex> l(mu_);
    if (++count_ <= 5) first_ += what + "\n";
  }
  int count() const {
    std::lock_guard<std::mutex> l(mu_);
    return count_;
  }
  std::string first() const {
    std::lock_guard<std::mutex> l(mu_);
    return first_;
  }

 private:
  mutable std::mutex mu_;  // guards count_ and first_
  int count_ = 0;
  std::string first_;
};

// Runs fn(thread_index) on n threads; an exception in one is recorded as a failure.
template <typename Fn>
void run_threads(int n, Failures& failures, Fn fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      try {
        fn(t);
      } catch (const std::exception& e) {
        failures.add("thread " + std::to_string(t) + " raised: " + e.what());
      }
    });
  }
  for (auto& th : threads) th.join();
}

class Concurrency : public testing::RuntimeTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    set_active_backend(GetParam());
  }
  void TearDown() override {
    RuntimeTest::TearDown();
    set_active_backend(config().backend);
  }
};

// Each thread syncs every live tensor (other threads' too) and reads its own
// sum; every value must be its own, exactly.
TEST_P(Concurrency, ThreadsSyncingEachOtherReadExactValues) {
  Failures failures;
  const int n = steps(150);
  run_threads(8, failures, [&](int tid) {
    for (int k = 0; k < n; ++k) {
      Tensor c = (full({8}, tid) + k).sum();
      lz::sync();
      float got = c.item<float>();
      float want = 8.0f * static_cast<float>(tid + k);
      if (got != want) {
        failures.add("thread " + std::to_string(tid) + " step " + std::to_string(k) + ": got " +
                     std::to_string(got) + ", want " + std::to_string(want));
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// A barrier in another thread may donate `acc`'s old buffer to its new value
// while this thread records a read of that value; neither program may lose an input, and `acc`
// stays readable.
TEST_P(Concurrency, DonationRacingABarrierKeepsEveryInput) {
  Failures failures;
  const int n = steps(300);
  Tensor acc = zeros({4});
  lz::sync(true);
  std::atomic<bool> done{false};
  run_threads(2, failures, [&](int tid) {
    if (tid == 1) {
      while (!done.load()) lz::sync();
      return;
    }
    struct Done {
      std::atomic<bool>& d;
      ~Done() { d.store(true); }
    } mark_done{done};
    for (int i = 1; i <= n; ++i) {
      acc.add_(1);
      float got = (acc * 2).sum().item<float>();
      if (got != 8.0f * static_cast<float>(i)) {
        failures.add("step " + std::to_string(i) + ": got " + std::to_string(got));
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
  EXPECT_EQ(acc.to_vector<float>(), std::vector<float>(4, static_cast<float>(n)));
}

// Chains recorded in several threads while one more thread keeps cutting them with barriers.
TEST_P(Concurrency, RecordingWhileAnotherThreadSyncsKeepsEveryChain) {
  Failures failures;
  const int n = steps(200);
  std::atomic<int> recording{3};
  run_threads(4, failures, [&](int tid) {
    if (tid == 3) {
      while (recording.load() > 0) lz::sync();
      return;
    }
    struct Done {
      std::atomic<int>& r;
      ~Done() { r.fetch_sub(1); }
    } mark_done{recording};
    Tensor x = full({3, 5}, tid);
    Tensor y = zeros({5});
    for (int i = 1; i <= n; ++i) {
      x = x + 1;
      y += x.slice(0, 1, 2).reshape({5});  // a view, then an in-place update
      if (i % 25 == 0) {
        // x = tid + i everywhere; y = sum_{j<=i} (tid + j).
        float want_y = static_cast<float>(i * tid + i * (i + 1) / 2);
        float got_x = x.sum().item<float>();
        std::vector<float> got_y = y.to_vector<float>();
        if (got_x != 15.0f * static_cast<float>(tid + i) ||
            got_y != std::vector<float>(5, want_y)) {
          failures.add("thread " + std::to_string(tid) + " step " + std::to_string(i) + ": x sum " +
                       std::to_string(got_x) + ", y[0] " + std::to_string(got_y[0]) + " (want " +
                       std::to_string(want_y) + ")");
        }
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// Tensors of every state (host, device data, IR, view) born and dropped in some threads while
// others sync all live tensors: the barrier must never see a half-built tensor, nor walk a node
// another thread frees.
TEST_P(Concurrency, TensorsCreatedAndDroppedWhileSyncing) {
  Failures failures;
  const int n = steps(200);
  std::atomic<int> working{3};
  run_threads(5, failures, [&](int tid) {
    if (tid >= 3) {
      while (working.load() > 0) {
        if (tid == 3) {
          lz::sync();
        } else {
          lz::sync(true);
        }
      }
      return;
    }
    struct Done {
      std::atomic<int>& w;
      ~Done() { w.fetch_sub(1); }
    } mark_done{working};
    for (int i = 0; i < n; ++i) {
      float v = static_cast<float>(tid * 1000 + i);
      Tensor h = tensor<float>({v, v + 1, v + 2, v + 3}, {2, 2});  // host
      Tensor d = h * 1;                                            // IR over uploaded data
      Tensor t = d.transpose(0, 1);                                // a view
      Tensor e = (t + h) * 3 - d;                                  // dropped unread
      Tensor s = (t.slice(1, 0, 1) + 2).sum();
      if (i % 10 == 0) {
        float got = s.item<float>();  // t[:, 0] = (v, v + 1)
        if (got != 2 * v + 1 + 4) {
          failures.add("thread " + std::to_string(tid) + " step " + std::to_string(i) + ": got " +
                       std::to_string(got));
        }
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// Tensors that their creating thread never touches again (so no lock of theirs orders it after
// the creation): a barrier in another thread must find each one complete, never half-built
// (the registry once published a tensor before its state and IR were written).
TEST_P(Concurrency, BarrierFindsEveryNewTensorComplete) {
  Failures failures;
  const int n = steps(300);
  constexpr int kRing = 16;
  std::atomic<int> working{2};
  run_threads(3, failures, [&](int tid) {
    if (tid == 2) {
      while (working.load() > 0) lz::sync();
      return;
    }
    struct Done {
      std::atomic<int>& w;
      ~Done() { w.fetch_sub(1); }
    } mark_done{working};
    Tensor base = tensor<float>({0, 1, 2, 3}, {4});
    std::vector<std::vector<Tensor>> ring(kRing);
    auto check = [&](int step) {
      const std::vector<Tensor>& r = ring[step % kRing];
      float v = static_cast<float>(tid * 10000 + step);
      bool ok = r[0].to_vector<float>() == std::vector<float>(4, v) &&
                r[1].to_vector<float>() == std::vector<float>{v, -v} &&
                r[2].item<float>() == static_cast<float>(step % 4);
      if (!ok) failures.add("thread " + std::to_string(tid) + " step " + std::to_string(step));
    };
    for (int i = 0; i < n; ++i) {
      if (i >= kRing) check(i - kRing);  // then dropped: replaced below
      float v = static_cast<float>(tid * 10000 + i);
      // IR, host and view tensors, each left alone after its creation.
      ring[i % kRing] = {full({4}, v), tensor<float>({v, -v}, {2}),
                         base.slice(0, i % 4, i % 4 + 1)};
    }
    for (int i = std::max(0, n - kRing); i < n; ++i) check(i);
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

// Several threads read one tensor's pending value at once: one program computes it, and each
// reader gets the same exact result.
TEST_P(Concurrency, SeveralThreadsReadingOneTensorSeeOneValue) {
  Failures failures;
  const int n = steps(100);
  for (int i = 0; i < n; ++i) {
    Tensor x = full({16}, i);
    Tensor y = (x * 3 + 1).sum();  // 16 * (3i + 1)
    run_threads(4, failures, [&](int tid) {
      float got = tid % 2 ? y.item<float>() : y.to_vector<float>()[0];
      if (got != 16.0f * static_cast<float>(3 * i + 1)) {
        failures.add("step " + std::to_string(i) + " reader " + std::to_string(tid) + ": got " +
                     std::to_string(got));
      }
    });
  }
  EXPECT_EQ(failures.count(), 0) << failures.first();
  EXPECT_EQ(counter("UncachedCompile") + counter("CachedCompile"), n);
}

// A group of 2 ranks whose other rank holds the same values: an all_reduce doubles its buffer,
// slowly, on the program's communication thread (cpu backend) while the program's later steps
// run and write their own buffers.
class DoublingGroup final : public dist::ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string engine() const override { return "doubling"; }
  void all_reduce(void* buf, int64_t count, DType, dist::Reduce) override {
    auto* f = static_cast<float*>(buf);
    for (int64_t i = 0; i < count; ++i) f[i] *= 2;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  void all_gather(const void*, void*, int64_t, DType) override { std::abort(); }
  void reduce_scatter(const void*, void*, int64_t, DType, dist::Reduce) override { std::abort(); }
  void broadcast(void*, int64_t, DType, int) override {}
  void barrier() override {}
  std::vector<std::string> exchange(const std::string& record) override { return {record, record}; }
  void set_timeout(double) override {}
  [[noreturn]] void abort(int) override { std::abort(); }
};

// Gradients' all-reduces overlapping the rest of a step: every value read after them is exact,
// step after step (the buffers they write are not touched by the steps running beside them).
TEST_P(Concurrency, AllReducesBesideLaterStepsLeaveExactValues) {
  dist::set_world(std::make_shared<DoublingGroup>());
  struct NoWorldAfter {
    ~NoWorldAfter() { dist::set_world(nullptr); }
  } no_world_after;
  const int n = steps(60);
  for (int k = 0; k < n; ++k) {
    std::vector<Tensor> grads, updates;
    for (int j = 0; j < 6; ++j) {
      Tensor g = full({64 + j}, static_cast<float>(k + j)) * 1;
      distributed::all_reduce(g);
      grads.push_back(g);
      updates.push_back(
          (full({32}, static_cast<float>(j)) * 3).sum());  // independent work beside the all-reduce
    }
    Tensor total = grads[0].sum();
    for (int j = 1; j < 6; ++j) total = total + grads[j].sum();
    std::vector<Tensor> all = updates;
    all.push_back(total);
    sync_tensors(all, /*wait=*/true);
    float want = 0;
    for (int j = 0; j < 6; ++j) want += 2.0f * static_cast<float>((64 + j) * (k + j));
    ASSERT_EQ(total.item<float>(), want) << "step " << k;
    ASSERT_EQ(updates[5].item<float>(), 32.0f * 15) << "step " << k;
  }
}

// A value read of a short program runs it on the reading thread (DeviceExecutor::
// run_here_or_wake) while other threads' barriers leave theirs to the executor thread: each
// chain's programs still run in order, and every read sees its own exact value.
TEST_P(Concurrency, ReadersRunningTheirProgramsBesideTheExecutorThreadSeeExactValues) {
  Failures failures;
  const int n = steps(120);
  run_threads(6, failures, [&](int tid) {
    Tensor x = full({16}, static_cast<float>(tid));
    for (int k = 1; k <= n; ++k) {
      x = x * 1.0f + 1.0f;
      if (k % 3 != 0) {
        lz::sync();  // scheduled for the executor thread; the next read may depend on it
        continue;
      }
      float got = x.sum().item<float>();
      float want = 16.0f * static_cast<float>(tid + k);
      if (got != want) {
        failures.add("thread " + std::to_string(tid) + " step " + std::to_string(k) + ": got " +
                     std::to_string(got) + ", want " + std::to_string(want));
      }
    }
  });
  EXPECT_EQ(failures.count(), 0) << failures.first();
}

INSTANTIATE_TEST_SUITE_P(Backends, Concurrency, ::testing::Values("interp", "cpu"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace lz
