#include "exec/device_executor.h"

#include <cstdlib>

#include "core/metrics.h"
#include "core/thread_pool.h"

namespace lz {

DeviceExecutor::DeviceExecutor() : thread_([this] { loop(); }) {}

DeviceExecutor::~DeviceExecutor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DeviceExecutor::schedule(std::shared_ptr<Execution> exec, bool waiter_may_run,
                              std::function<void()> task, bool wake) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(Task{std::move(exec), waiter_may_run, std::move(task)});
    queued_.fetch_add(1, std::memory_order_release);
  }
  if (wake) cv_.notify_one();
}

void DeviceExecutor::run_here_or_wake(const Execution* exec) {
  if (!run_here_if_next(exec)) cv_.notify_one();
}

bool DeviceExecutor::run_here_if_next(const Execution* exec) {
  Task t;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (busy_ || stop_ || queue_.empty() || queue_.front().exec.get() != exec ||
        !queue_.front().waiter_may_run) {
      return false;
    }
    t = std::move(queue_.front());
    queue_.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    busy_ = true;
  }
  LZ_COUNTER("RunOnWaiter", 1);
  run_task(std::move(t));
  return true;
}

namespace {
thread_local int t_running = 0;  // tasks this thread is running (run_task nests never; 0 or 1)
}  // namespace

bool DeviceExecutor::running_task_here() { return t_running > 0; }

void DeviceExecutor::run_task(Task t) {
  ++t_running;
  try {
    t.run();  // completes t.exec
  } catch (...) {
    // A task must not throw (run_program catches what it can); if one does, its run fails like
    // any failed run instead of leaving busy_ set, which would stop every later program.
    if (!t.exec->done()) {
      record_error(t.exec.get(), std::current_exception());
      t.exec->complete(std::current_exception());
    }
  }
  t.run = nullptr;  // release the task's buffers now, not when the next task arrives
  --t_running;
  bool more;
  {
    std::lock_guard<std::mutex> l(mu_);
    busy_ = false;
    more = !queue_.empty();
    if (!more) idle_cv_.notify_all();
  }
  // What was queued meanwhile waits for busy_ to clear (a waiter ran the task): wake its runner.
  if (more) cv_.notify_one();
}

void DeviceExecutor::wait_all() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return queue_.empty() && !busy_; });
}

bool DeviceExecutor::wait_all_for_ms(int ms) {
  std::unique_lock<std::mutex> l(mu_);
  return idle_cv_.wait_for(l, std::chrono::milliseconds(ms), [&] { return queue_.empty() && !busy_; });
}

std::exception_ptr DeviceExecutor::take_error() {
  std::lock_guard<std::mutex> l(mu_);
  std::exception_ptr e = std::move(error_);
  error_ = nullptr;
  error_exec_ = nullptr;
  return e;
}

void DeviceExecutor::record_error(const Execution* exec, std::exception_ptr error) {
  std::lock_guard<std::mutex> l(mu_);
  if (!error_) {
    error_ = std::move(error);
    error_exec_ = exec;
  }
}

void DeviceExecutor::forget_error_of(const Execution* exec) {
  std::lock_guard<std::mutex> l(mu_);
  if (error_exec_ == exec) {
    error_ = nullptr;
    error_exec_ = nullptr;
  }
}

void DeviceExecutor::hold() {
  std::lock_guard<std::mutex> l(mu_);
  ++holds_;
}

void DeviceExecutor::release() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (holds_ > 0) --holds_;
  }
  cv_.notify_all();
}

std::exception_ptr DeviceExecutor::take_error_of(const Execution* exec) {
  std::lock_guard<std::mutex> l(mu_);
  if (error_exec_ != exec) return nullptr;
  error_exec_ = nullptr;
  return std::move(error_);
}

namespace {
constexpr int64_t kIdleSpinNs = 50'000;

// Programs still queued or running when the process exits finish first: otherwise exit() tears
// down libraries (oneDNN's JIT state) under a running kernel.
void drain_at_exit() { device_executor().wait_all(); }
}  // namespace

void DeviceExecutor::loop() {
  for (;;) {
    Task item;
    // A step's next program (a replayed step's, above all) usually comes within microseconds:
    // wait for it awake first, since sleeping and being woken costs more than a small program.
    spin_until(kIdleSpinNs, [&] { return queued_.load(std::memory_order_acquire) > 0; });
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || (!queue_.empty() && holds_ == 0 && !busy_); });
      if (queue_.empty()) return;  // stop_ and drained
      item = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
      busy_ = true;
    }
    run_task(std::move(item));
    // Registered after the first program, so it runs before the destructors of what that program
    // initialized (exit() runs handlers in reverse order of registration). The first program
    // always runs here: a waiter runs only programs that ran before.
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(drain_at_exit); });
  }
}

DeviceExecutor& device_executor() {
  // Leaked on purpose: joining a thread from a static destructor races with other statics.
  static DeviceExecutor* e = new DeviceExecutor();
  return *e;
}

}  // namespace lz
