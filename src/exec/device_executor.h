// The device's executor thread: runs scheduled programs one at a time, in scheduling order, so a
// program's parameters produced by an earlier program are always ready when it starts. A thread
// waiting for the next program may run it instead (run_here_if_next); the order still holds.
// The first error of an asynchronous run is kept until take_error() hands it to the next wait or
// sync (never lost, raised once).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/buffer.h"

namespace lz {

class DeviceExecutor {
 public:
  DeviceExecutor();
  ~DeviceExecutor();
  // `task` runs on the executor thread (or on a waiter, below) and must complete `exec` (with or
  // without an error; on an error it calls record_error first).
  void schedule(std::shared_ptr<Execution> exec, std::function<void()> task) {
    schedule(std::move(exec), false, std::move(task));
  }
  // waiter_may_run: `task` may also run on a thread that waits for `exec` (run_here_if_next).
  // wake = false: the caller is about to call run_here_or_wake(exec), so the executor thread is
  // not woken for it first.
  void schedule(std::shared_ptr<Execution> exec, bool waiter_may_run, std::function<void()> task,
                bool wake = true);
  // Called by a thread about to wait for `exec`: when `exec`'s task may run on its waiter, is the
  // next to start and nothing runs, runs it here (in scheduling order, as the executor thread
  // would) and returns true. Otherwise false: the executor thread runs it, or did. For a small
  // program the waiter's sleep and the executor thread's wake-up cost more than the program
  // (bench/RESULTS.md 25).
  bool run_here_if_next(const Execution* exec);
  // run_here_if_next(exec), else wakes the executor thread: what a caller that scheduled `exec`
  // with wake = false and waits for it at once does next.
  void run_here_or_wake(const Execution* exec);
  // Whether the calling thread is running a task now (the executor thread, or a waiter inside
  // run_here_if_next): what a task's buffers release then must not wait for the executor, nor run
  // code that might (a Python finalizer: python/src/bridge_bindings.cpp release_owner).
  static bool running_task_here();
  // Blocks until everything scheduled so far has finished.
  void wait_all();
  // Waits at most `ms` milliseconds; true when everything scheduled so far has finished.
  bool wait_all_for_ms(int ms);
  // The pending asynchronous error, cleared; null when none.
  std::exception_ptr take_error();
  // Called by a failing task before it completes `exec`: the error waits for the next wait/sync.
  void record_error(const Execution* exec, std::exception_ptr error);
  // A value read that raised `exec`'s own error need not raise it again at the next sync.
  void forget_error_of(const Execution* exec);
  // The pending error if it is `exec`'s, cleared; null otherwise. A read of a value a failed
  // program restored or still computed raises the failure there, once.
  std::exception_ptr take_error_of(const Execution* exec);
  // Tests only: while held, the executor thread starts no further program (the one running
  // finishes), so a test can make "the producing program has not finished" certain instead of
  // likely; only a waiter may still run one (run_here_if_next). Calls nest; every hold() needs
  // its release() before anything waits for the executor (wait_all would block).
  void hold();
  void release();

 private:
  void loop();

  std::atomic<int64_t> queued_{0};  // queue_.size(), readable without mu_ (the idle spin)
  std::mutex mu_;  // guards queue_, busy_, stop_, holds_, error_, error_exec_
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  struct Task {
    std::shared_ptr<Execution> exec;
    bool waiter_may_run = false;
    std::function<void()> run;
  };
  // Runs `t` on this thread (busy_ is set) and clears busy_ after.
  void run_task(Task t);

  std::deque<Task> queue_;
  bool busy_ = false;  // a task runs (on the executor thread or on a waiter)
  bool stop_ = false;
  int holds_ = 0;
  std::exception_ptr error_;
  const Execution* error_exec_ = nullptr;
  std::thread thread_;
};

DeviceExecutor& device_executor();

}  // namespace lz
