#include "core/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "core/config.h"
#include "core/metrics.h"


namespace lz {
namespace {

// True on a pool worker, and on a caller while it runs its own units: a parallel call from here
// runs inline (any pool: a unit of pool A calling pool B whose unit calls A cannot deadlock).
thread_local bool t_in_pool_task = false;

inline uint32_t generation_of(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
inline uint32_t remaining_of(uint64_t word) { return static_cast<uint32_t>(word); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(num_threads, 1)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  sleep_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, int64_t align,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  align = std::max<int64_t>(align, 1);
  if (n <= grain || num_threads_ == 1 || t_in_pool_task) return fn(0, n);

  // Every chunk but the last has `chunk` >= n / max_chunks >= grain elements; a last chunk
  // shorter than grain joins the one before it.
  const int64_t max_chunks = std::min<int64_t>(num_threads_, n / grain);
  const int64_t chunk = ceil_div(ceil_div(n, max_chunks), align) * align;
  int64_t chunks = ceil_div(n, chunk);
  if (chunks > 1 && n - (chunks - 1) * chunk < grain) --chunks;
  if (chunks <= 1) return fn(0, n);

  struct Range {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunk, chunks;
  } range{&fn, n, chunk, chunks};
  const int64_t mine = run_job(
      chunks,
      [](const void* ctx, int64_t i) {
        const auto& r = *static_cast<const Range*>(ctx);
        (*r.fn)(i * r.chunk, i == r.chunks - 1 ? r.n : (i + 1) * r.chunk);
      },
      &range);
  LZ_COUNTER("PoolSplitJobs", 1);
  if (mine == chunks) LZ_COUNTER("PoolSplitJobsRunAlone", 1);  // no worker arrived in time
}

void ThreadPool::wake() {
  if (sleepers_.load(std::memory_order_relaxed) == 0) return;
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    ++wakes_;
  }
  sleep_cv_.notify_all();
  LZ_COUNTER("PoolWakes", 1);
}

void ThreadPool::run_all(const std::vector<std::function<void()>>& tasks) {
  if (tasks.empty()) return;
  if (tasks.size() == 1 || num_threads_ == 1 || t_in_pool_task) {
    std::exception_ptr first;
    for (const auto& task : tasks) {
      try {
        task();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
    return;
  }
  run_job(
      static_cast<int64_t>(tasks.size()),
      [](const void* ctx, int64_t i) {
        (*static_cast<const std::vector<std::function<void()>>*>(ctx))[i]();
      },
      &tasks);
}

int64_t ThreadPool::run_job(int64_t units, UnitFn fn, const void* ctx) {
  std::unique_lock<std::mutex> call_lock(call_mu_);
  unit_fn_ = fn;
  unit_ctx_ = ctx;
  units_ = units;
  pending_.store(units, std::memory_order_relaxed);
  const uint32_t generation = ++next_generation_;
  // Publishing the job releases the fields above to whoever takes a unit. seq_cst store, then
  // seq_cst load of sleepers_: with the sleeper's increment-then-check, no wake-up is lost.
  work_.store(uint64_t{generation} << 32 | static_cast<uint32_t>(units), std::memory_order_seq_cst);
  if (int sleeping = sleepers_.load(std::memory_order_seq_cst); sleeping > 0) {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    if (units - 1 >= sleeping) {
      sleep_cv_.notify_all();
    } else {
      for (int64_t i = 0; i < units - 1; ++i) sleep_cv_.notify_one();
    }
  }

  t_in_pool_task = true;
  const int64_t mine = take_units(generation);
  t_in_pool_task = false;
  wait_until_done();

  // Every unit finished (pending_ read 0 with acquire), so no worker touches error_ any more.
  std::exception_ptr error = std::exchange(error_, nullptr);
  call_lock.unlock();
  if (error) std::rethrow_exception(error);
  return mine;
}

int64_t ThreadPool::take_units(uint32_t generation) {
  int64_t taken = 0;
  uint64_t word = work_.load(std::memory_order_acquire);
  while (generation_of(word) == generation && remaining_of(word) != 0) {
    if (!work_.compare_exchange_weak(word, word - 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      continue;  // `word` was reloaded
    }
    // Holding a unit keeps the job alive: its fields stay valid until our decrement below.
    const int64_t unit = units_ - remaining_of(word);
    ++taken;
    try {
      unit_fn_(unit_ctx_, unit);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    // seq_cst, paired with the caller's store of caller_sleeping_ then check of pending_.
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_cv_.notify_one();
    }
    word = work_.load(std::memory_order_acquire);
  }
  return taken;
}

void ThreadPool::wait_until_done() {
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(kSpinNs, done)) return;
  std::unique_lock<std::mutex> lock(done_mu_);
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_seq_cst) == 0; });
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker_loop(int index) {
  const std::string name = "lz-pool-" + std::to_string(index);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  t_in_pool_task = true;  // everything a worker runs is a unit
  uint32_t seen = 0;      // generation 0 is the empty word the pool starts with
  uint32_t generation = 0;
  while (wait_for_job(seen, &generation)) {
    if (generation == seen) {  // woken without a job (wake()): spin for one
      LZ_COUNTER("PoolWorkerRoused", 1);
      continue;
    }
    seen = generation;
    take_units(generation);
  }
}

bool ThreadPool::wait_for_job(uint32_t seen, uint32_t* generation) {
  auto ready = [&] {
    *generation = generation_of(work_.load(std::memory_order_seq_cst));
    return *generation != seen || stop_.load(std::memory_order_relaxed);
  };
  if (!spin_until(kSpinNs, ready)) {
    std::unique_lock<std::mutex> lock(sleep_mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t wakes = wakes_;
    sleep_cv_.wait(lock, [&] { return ready() || wakes_ != wakes; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  return !stop_.load(std::memory_order_relaxed);
}

ThreadPool& runtime_pool() {
  // Leaked on purpose: see the header.
  static ThreadPool* pool = [] {
    int n = config().num_threads;
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    return new ThreadPool(std::max(n, 1));
  }();
  return *pool;
}

}  // namespace lz
