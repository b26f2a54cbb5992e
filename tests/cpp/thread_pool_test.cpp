// The runtime thread pool: coverage and chunking of parallel_for, exceptions, nesting, concurrent
// callers, run_all, the single-thread inline path and shutdown. No timing assertions: real
// concurrency is shown by units that wait for each other (a latch), which would hang otherwise.
#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/metrics.h"

namespace lz {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

// Runs one parallel_for and returns its chunks sorted by begin.
Chunks record_chunks(ThreadPool& pool, int64_t n, int64_t grain, int64_t align) {
  std::mutex mu;
  Chunks chunks;
  pool.parallel_for(n, grain, align, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 63, 64, 65, 100, 1000, 4097}) {
      for (int64_t grain : {1, 3, 64, 1000}) {
        for (int64_t align : {1, 4, 64}) {
          std::vector<std::atomic<int>> hits(n);
          pool.parallel_for(n, grain, align, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
          });
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " n=" << n
                                         << " grain=" << grain << " align=" << align << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(ThreadPool, ChunksAreContiguousAlignedAtLeastGrainAndAtMostThreads) {
  for (int threads : {2, 3, 4, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 64, 65, 100, 1000, 4097, 100000}) {
      for (int64_t grain : {1, 3, 64, 1000}) {
        for (int64_t align : {1, 4, 64}) {
          SCOPED_TRACE("threads=" + std::to_string(threads) + " n=" + std::to_string(n) +
                       " grain=" + std::to_string(grain) + " align=" + std::to_string(align));
          Chunks chunks = record_chunks(pool, n, grain, align);
          ASSERT_FALSE(chunks.empty());
          EXPECT_LE(static_cast<int>(chunks.size()), threads);
          EXPECT_EQ(chunks.front().first, 0);
          EXPECT_EQ(chunks.back().second, n);
          for (size_t c = 0; c < chunks.size(); ++c) {
            if (c > 0) {
              EXPECT_EQ(chunks[c].first, chunks[c - 1].second);
            }
            EXPECT_EQ(chunks[c].first % align, 0);
            if (chunks.size() > 1) {
              EXPECT_GE(chunks[c].second - chunks[c].first, grain);
            }
          }
        }
      }
    }
  }
}

TEST(ThreadPool, LargeRangeIsSplitAcrossAllThreads) {
  ThreadPool pool(4);
  EXPECT_EQ(record_chunks(pool, 1 << 20, 1024, 64).size(), 4u);
  EXPECT_EQ(record_chunks(pool, 4096, 1024, 64).size(), 4u);
  EXPECT_EQ(record_chunks(pool, 3000, 1024, 64).size(), 2u);  // two chunks of >= 1024
}

TEST(ThreadPool, RangeUpToGrainRunsInlineAsOneCallOnTheCaller) {
  ThreadPool pool(4);
  for (int64_t n : {1, 63, 64}) {
    std::vector<std::pair<int64_t, int64_t>> calls;
    std::thread::id where;
    pool.parallel_for(n, 64, 16, [&](int64_t begin, int64_t end) {
      calls.emplace_back(begin, end);  // no lock: must run on this thread
      where = std::this_thread::get_id();
    });
    EXPECT_EQ(calls, (Chunks{{0, n}}));
    EXPECT_EQ(where, std::this_thread::get_id());
  }
  int called = 0;
  pool.parallel_for(0, 64, 16, [&](int64_t, int64_t) { ++called; });
  EXPECT_EQ(called, 0);
}

TEST(ThreadPool, SingleThreadPoolRunsEverythingInlineOnTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.num_threads(), 1);
  const std::thread::id me = std::this_thread::get_id();
  Chunks calls;
  pool.parallel_for(1000, 1, 1, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), me);
    calls.emplace_back(begin, end);
  });
  EXPECT_EQ(calls, (Chunks{{0, 1000}}));
  std::vector<int> order;
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < 5; ++i) {
    tasks.push_back([&, i] {
      EXPECT_EQ(std::this_thread::get_id(), me);
      order.push_back(i);
    });
  }
  pool.run_all(tasks);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(ThreadPool, ParallelForRunsChunksConcurrentlyOnNamedWorkers) {
  ThreadPool pool(2);
  const int64_t jobs = counter_value("PoolSplitJobs"), alone = counter_value("PoolSplitJobsRunAlone");
  for (int round = 0; round < 20; ++round) {  // some rounds find the worker asleep, some spinning
    std::latch both(2);  // each chunk waits for the other: hangs unless they run concurrently
    std::mutex mu;
    std::vector<std::string> names;
    pool.parallel_for(2, 1, 1, [&](int64_t, int64_t) {
      both.arrive_and_wait();
      char name[16] = {};
      pthread_getname_np(pthread_self(), name, sizeof(name));
      std::lock_guard<std::mutex> lock(mu);
      names.emplace_back(name);
    });
    ASSERT_EQ(names.size(), 2u);
    EXPECT_TRUE(names[0] == "lz-pool-1" || names[1] == "lz-pool-1") << names[0] << ", " << names[1];
    if (round % 5 == 4) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Every job was split, and none ran on the caller alone (each chunk waited for the other).
  EXPECT_EQ(counter_value("PoolSplitJobs") - jobs, 20);
  EXPECT_EQ(counter_value("PoolSplitJobsRunAlone") - alone, 0);
}

TEST(ThreadPool, ASplitJobCountsAsRunAloneExactlyWhenTheCallerRanEveryChunk) {
  // Whether the worker arrives in time varies; the count must match what happened, job by job.
  ThreadPool pool(2);
  const int64_t jobs = counter_value("PoolSplitJobs"), alone = counter_value("PoolSplitJobsRunAlone");
  const std::thread::id me = std::this_thread::get_id();
  int64_t ran_alone = 0;
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> on_caller{0};
    pool.parallel_for(2, 1, 1, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() == me) on_caller.fetch_add(static_cast<int>(e - b));
    });
    ran_alone += on_caller.load() == 2;
    if (round % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // worker asleep
  }
  EXPECT_EQ(counter_value("PoolSplitJobs") - jobs, 50);
  EXPECT_EQ(counter_value("PoolSplitJobsRunAlone") - alone, ran_alone);
}

TEST(ThreadPool, ExceptionReachesTheCallerAfterEveryChunkRanAndThePoolKeepsWorking) {
  ThreadPool pool(4);
  for (int round = 0; round < 10; ++round) {
    std::atomic<int64_t> covered{0};
    EXPECT_THROW(pool.parallel_for(4000, 1, 1,
                                   [&](int64_t begin, int64_t end) {
                                     covered.fetch_add(end - begin);
                                     if (begin == 0) throw std::runtime_error("chunk 0");
                                   }),
                 std::runtime_error);
    EXPECT_EQ(covered.load(), 4000);  // the other chunks still ran
  }
  // Every chunk throws: one exception arrives, and it is one of theirs.
  try {
    pool.parallel_for(4000, 1, 1, [&](int64_t begin, int64_t) {
      throw std::runtime_error("chunk at " + std::to_string(begin));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("chunk at ", 0), 0u);
  }
  std::atomic<int64_t> sum{0};
  pool.parallel_for(4000, 1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum.fetch_add(i, std::memory_order_relaxed);
  });
  EXPECT_EQ(sum.load(), 4000 * 3999 / 2);
}

TEST(ThreadPool, NestedCallsRunInlineWithoutDeadlock) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(64 * 64);
  std::atomic<int> off_thread_inner{0};
  pool.parallel_for(64, 1, 1, [&](int64_t begin, int64_t end) {
    const std::thread::id outer = std::this_thread::get_id();
    for (int64_t row = begin; row < end; ++row) {
      Chunks inner;
      pool.parallel_for(64, 1, 1, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != outer) off_thread_inner.fetch_add(1);
        inner.emplace_back(b, e);
        for (int64_t i = b; i < e; ++i) hits[row * 64 + i].fetch_add(1);
      });
      EXPECT_EQ(inner, (Chunks{{0, 64}}));  // one inline call
      std::vector<std::function<void()>> tasks(3, [&] {
        if (std::this_thread::get_id() != outer) off_thread_inner.fetch_add(1);
      });
      pool.run_all(tasks);
    }
  });
  EXPECT_EQ(off_thread_inner.load(), 0);
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ConcurrentCallsFromExternalThreadsAreSerializedAndComplete) {
  ThreadPool pool(3);
  constexpr int kCallers = 4;
  constexpr int kCalls = 200;
  constexpr int64_t kN = 1000;
  std::vector<int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int call = 0; call < kCalls; ++call) {
        std::atomic<int64_t> sum{0};
        pool.parallel_for(kN, 16, 8, [&](int64_t begin, int64_t end) {
          int64_t local = 0;
          for (int64_t i = begin; i < end; ++i) local += i;
          sum.fetch_add(local, std::memory_order_relaxed);
        });
        sums[c] += sum.load();
        if (call % 50 == 0) {
          std::atomic<int> ran{0};
          pool.run_all(std::vector<std::function<void()>>(5, [&] { ran.fetch_add(1); }));
          EXPECT_EQ(ran.load(), 5);
        }
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int64_t s : sums) EXPECT_EQ(s, kCalls * (kN * (kN - 1) / 2));
}

TEST(ThreadPool, RunAllRunsEveryTaskOnce) {
  ThreadPool pool(3);
  for (int count : {0, 1, 2, 3, 17, 100}) {
    std::vector<std::atomic<int>> ran(count);
    std::vector<std::function<void()>> tasks;
    for (int i = 0; i < count; ++i) tasks.push_back([&ran, i] { ran[i].fetch_add(1); });
    pool.run_all(tasks);
    for (int i = 0; i < count; ++i) ASSERT_EQ(ran[i].load(), 1) << "count=" << count << " i=" << i;
  }
}

TEST(ThreadPool, RunAllRunsTasksConcurrently) {
  ThreadPool pool(2);
  std::latch both(2);  // hangs unless the two tasks overlap
  std::vector<std::function<void()>> tasks(2, [&] { both.arrive_and_wait(); });
  pool.run_all(tasks);
}

TEST(ThreadPool, RunAllRethrowsTheFirstExceptionAfterRunningEveryTask) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::atomic<int> ran{0};
    std::vector<std::function<void()>> tasks;
    for (int i = 0; i < 10; ++i) {
      tasks.push_back([&, i] {
        ran.fetch_add(1);
        if (i == 4) throw std::invalid_argument("task 4");
      });
    }
    EXPECT_THROW(pool.run_all(tasks), std::invalid_argument);
    EXPECT_EQ(ran.load(), 10);
    ran = 0;
    pool.run_all(std::vector<std::function<void()>>(4, [&] { ran.fetch_add(1); }));
    EXPECT_EQ(ran.load(), 4);
  }
}

TEST(ThreadPool, DestructorJoinsFreshBusyAndSleepingWorkers) {
  { ThreadPool fresh(4); }  // workers may not have started yet
  {
    ThreadPool just_worked(4);
    just_worked.parallel_for(1000, 1, 1, [](int64_t, int64_t) {});
  }  // workers still spinning
  {
    ThreadPool slept(4);
    slept.parallel_for(1000, 1, 1, [](int64_t, int64_t) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: asleep
  }
  SUCCEED();  // reaching here is the test: a hang fails it through the test timeout
}

// Polls until `pred` holds (10 s at most: a failure, not a hang); nothing here measures time.
template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

TEST(ThreadPool, WakeRousesEverySleepingWorkerWithoutAJobAndTheySleepAgain) {
  ThreadPool pool(3);
  ASSERT_TRUE(eventually([&] { return pool.sleeping_workers() == 2; }));  // past their spin
  const int64_t wakes = counter_value("PoolWakes"), roused = counter_value("PoolWorkerRoused");
  pool.wake();
  EXPECT_EQ(counter_value("PoolWakes") - wakes, 1);
  ASSERT_TRUE(eventually([&] { return counter_value("PoolWorkerRoused") - roused == 2; }));
  // Nothing ran; having spun for a job that did not come, they sleep again, and still work.
  ASSERT_TRUE(eventually([&] { return pool.sleeping_workers() == 2; }));
  EXPECT_EQ(counter_value("PoolWorkerRoused") - roused, 2);
  std::atomic<int64_t> covered{0};
  pool.parallel_for(3000, 1, 1, [&](int64_t b, int64_t e) { covered += e - b; });
  EXPECT_EQ(covered.load(), 3000);
}

TEST(ThreadPool, WakeWithNoWorkerAsleepDoesNothing) {
  ThreadPool pool(2);
  const int64_t wakes = counter_value("PoolWakes");
  std::latch both(2);  // both tasks running at once: the only worker runs one of them
  pool.run_all({[&] { both.arrive_and_wait(); },
                [&] {
                  both.arrive_and_wait();
                  EXPECT_EQ(pool.sleeping_workers(), 0);
                  pool.wake();
                }});
  EXPECT_EQ(counter_value("PoolWakes"), wakes);
  ThreadPool single(1);  // no workers at all
  single.wake();
  EXPECT_EQ(counter_value("PoolWakes"), wakes);
}

TEST(ThreadPool, RuntimePoolIsOneProcessWideInstance) {
  ThreadPool& pool = runtime_pool();
  EXPECT_EQ(&pool, &runtime_pool());
  // Sized by config().num_threads when first used; a test may have reloaded the config since.
  EXPECT_GE(pool.num_threads(), 1);
  std::atomic<int64_t> covered{0};
  pool.parallel_for(10000, 100, 64, [&](int64_t begin, int64_t end) { covered += end - begin; });
  EXPECT_EQ(covered.load(), 10000);
}

}  // namespace
}  // namespace lz
