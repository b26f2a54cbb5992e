// The runtime's one thread pool: it runs a compiled kernel's ranges (`parallel_for`) and parallel
// kernel compiles (`run_all`). No OpenMP: one pool for everything (shared/MACHINE.md).
//
// Design, from measurements on the project's machines (freshly created or long-sleeping threads
// start milliseconds late):
// - Workers persist for the pool's life. After a job a worker spins for kSpinNs (pause, with a
//   yield every few dozen pauses so a descheduled peer on the same core can run), then sleeps on a
//   condition variable. A back-to-back job therefore finds its workers awake.
// - A job is `units` indivisible pieces of work (the chunks of a parallel_for, the tasks of a
//   run_all). One atomic word packs the job's generation (high 32 bits) and the number of units
//   not yet handed out (low 32 bits); the caller and the workers take units by compare-exchange,
//   so a worker that arrives late (an old or a newer generation) can never take a unit of the
//   wrong job, and the caller never depends on a worker showing up: it takes units itself until
//   none is left, then waits for the units still running elsewhere.
// - Dispatch on a warm pool is one store, one cache-line hand-off per worker and one counter
//   decrement per unit: under a microsecond (two 5 us chunks on 2 threads: 5.8 us, serial 10.1).
//   A sleeping worker can wake tens of microseconds late; the caller then runs its units itself.
// - So a busy machine (another process on a core) costs the lost core and no more: a worker that
//   is not running does not hold a unit, and the caller runs the job alone. Counted per
//   parallel_for job that was split: `PoolSplitJobs`, and `PoolSplitJobsRunAlone` when the caller
//   ran every chunk itself (bench/busy_bench.py prints both; RESULTS.md 19).
// - wake() rouses the sleeping workers ahead of a job (counted `PoolWakes`; each worker roused
//   counts `PoolWorkerRoused`), so they are spinning when it comes: a compiled program calls it
//   when its run is scheduled (Executable::about_to_run), because a training step's programs
//   come after Python that outlasts the spin, and the late worker cost its first split step
//   20-40 us (RESULTS.md 32).
//
// Contracts:
// - Exceptions: every unit runs even when an earlier one threw; the first exception is rethrown in
//   the caller after all units finished (the pool is usable afterwards).
// - Nesting: a parallel_for or run_all called from inside a unit of any pool runs inline on the
//   calling thread (a thread-local flag), so a kernel that calls a kernel cannot deadlock.
// - Locking: `call_mu_` serializes whole jobs from different external threads; it is held while
//   the caller runs its own units, so a unit must not wait for another external thread that is
//   itself calling into this pool. `sleep_mu_` guards only the workers' sleep and wake-up,
//   `done_mu_` only the caller's sleep when its wait for other workers outlasts the spin.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lz {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins (pausing; every 64 pauses a clock read and a yield, so a same-core peer can run) until
// done() or `spin_ns` passed; true when done() became true. For waits usually shorter than a
// futex sleep and wake-up (the pool's workers, the device executor between a step's programs).
template <typename Done>
bool spin_until(int64_t spin_ns, Done done) {
  constexpr int kPausesPerYield = 64;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
  for (int i = 1;; ++i) {
    if (done()) return true;
    if (i % kPausesPerYield == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    } else {
      cpu_relax();
    }
  }
}

class ThreadPool {
 public:
  // Total parallelism including the calling thread: spawns num_threads - 1 workers (at least 0).
  explicit ThreadPool(int num_threads);
  // Joins the workers. No call may be in progress.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into at most num_threads() contiguous chunks of at least `grain` elements (chunk
  // boundaries are multiples of `align`, except the end n) and runs fn(begin, end) on each, the
  // calling thread taking a share; returns when all are done. n <= grain, a single thread, a
  // nested call, or a range that cannot be split into two chunks of `grain`: fn(0, n) inline,
  // with no synchronization. n <= 0: fn is not called. grain and align below 1 count as 1.
  void parallel_for(int64_t n, int64_t grain, int64_t align,
                    const std::function<void(int64_t, int64_t)>& fn);

  // Runs every task once, possibly concurrently (the caller participates; tasks are handed out one
  // at a time, so uneven tasks balance), and returns when all are done. For parallel compiles.
  void run_all(const std::vector<std::function<void()>>& tasks);

  // Wakes the sleeping workers without a job, so they spin (kSpinNs) waiting for one: called
  // where parallel work is about to start (a compiled program's run), so its first split job
  // finds them awake instead of paying their wake-up, tens of microseconds on a VM. A hint,
  // best-effort: a worker just going to sleep may miss it (it then wakes for the job as
  // before). Cheap when no worker sleeps (one load).
  void wake();

  // Workers asleep now (not spinning, not running a unit): for tests and diagnostics.
  int sleeping_workers() const { return sleepers_.load(std::memory_order_relaxed); }

 private:
  using UnitFn = void (*)(const void* ctx, int64_t unit);
  static constexpr int64_t kSpinNs = 75'000;  // spin before sleeping (worker) or blocking (caller)

  int64_t run_job(int64_t units, UnitFn fn, const void* ctx);  // returns the caller's units
  void worker_loop(int index);
  // false: the pool is stopping. *generation == seen: woken by wake(), without a job.
  bool wait_for_job(uint32_t seen, uint32_t* generation);
  int64_t take_units(uint32_t generation);  // returns how many units this thread ran
  void wait_until_done();

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serializes jobs; guards next_generation_ and the job fields below

  // The current job, written by the caller before it publishes the job in work_, read by a worker
  // only after it took a unit (so never while the caller rewrites them for the next job).
  uint32_t next_generation_ = 0;
  UnitFn unit_fn_ = nullptr;
  const void* unit_ctx_ = nullptr;
  int64_t units_ = 0;
  std::mutex error_mu_;
  std::exception_ptr error_;  // the job's first exception (guarded by error_mu_)

  // generation << 32 | units not yet handed out.
  alignas(64) std::atomic<uint64_t> work_{0};
  alignas(64) std::atomic<int64_t> pending_{0};  // units not yet finished
  std::atomic<bool> caller_sleeping_{false};
  alignas(64) std::atomic<int> sleepers_{0};
  uint64_t wakes_ = 0;  // wake() calls (guarded by sleep_mu_)
  std::atomic<bool> stop_{false};

  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

// The process-wide pool, created on first use with config().num_threads threads (0 = the number
// of cores). It is never destroyed: joining at exit could hang (exit() called from a thread while
// another is inside a job, or from a unit itself), and nothing needs its workers to stop first.
ThreadPool& runtime_pool();

}  // namespace lz
