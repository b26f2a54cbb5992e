// The step marker: sync(wait, reset_scope) (DESIGN.md section 4).
#include "exec/step.h"

#include <cstdio>
#include <functional>
#include <mutex>

#include "core/config.h"
#include "core/metrics.h"
#include "exec/debug_log.h"
#include "exec/device_executor.h"
#include "exec/graph_executor.h"
#include "tensor/device.h"

namespace lz {
namespace {

struct StepState {
  std::mutex mu;  // guards closures and step
  std::vector<std::function<void()>> closures;
  int64_t step = 0;
};

StepState& step_state() {
  static auto* s = new StepState();
  return *s;
}

}  // namespace

void register_step_closure(std::function<void()> fn) {
  StepState& s = step_state();
  std::lock_guard<std::mutex> l(s.mu);
  s.closures.push_back(std::move(fn));
}

int64_t step_count() {
  StepState& s = step_state();
  std::lock_guard<std::mutex> l(s.mu);
  return s.step;
}

void step_barrier(bool wait, bool reset_scope, CutReason reason, ProgramCapture* capture) {
  // An error of an earlier asynchronous run nobody waited for surfaces here, once, after this
  // step is scheduled: the failed program left its tensors as they were (run_program), so this
  // step is as good as any and is not lost.
  std::exception_ptr earlier = device_executor().take_error();
  // reset_scope: IR scopes (name prefixes for dumps) are not implemented yet; nothing to reset.
  (void)reset_scope;
  auto& dev = internal::default_device();
  SyncConfig cfg;
  cfg.barrier = true;
  cfg.wait = wait;
  cfg.reason = reason;
  cfg.capture = capture;
  // Views are excluded by collect(): they hold no IR of their own.
  SyncResult r;
  try {
    r = sync_tensors_graph(dev.registry.snapshot(), cfg);
  } catch (...) {
    if (earlier) device_executor().record_error(nullptr, earlier);  // still raised, once, later
    throw;
  }
  finish_step(r.ran, r.hash);
  if (earlier) std::rethrow_exception(earlier);
}

void finish_step(bool ran, const Hash128& hash) {
  LZ_COUNTER("MarkStep", 1);
  StepState& s = step_state();
  std::vector<std::function<void()>> closures;
  int64_t step;
  {
    std::lock_guard<std::mutex> l(s.mu);
    step = ++s.step;
    closures.swap(s.closures);
  }
  if (config().emit_steplog) {
    debug_write("[lazuli] step " + std::to_string(step) + ": " +
                (ran ? "scheduled graph " + hash.hex() : std::string("nothing pending, graph ")) + "\n");
  }
  check_step_patterns(step);
  // After the barrier, in registration order; closures that read values share this execution.
  for (auto& fn : closures) fn();
}

}  // namespace lz
