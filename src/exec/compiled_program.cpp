#include "exec/compiled_program.h"

#include <chrono>

#include "core/call_site.h"
#include "core/config.h"
#include "core/metrics.h"
#include "dist/process_group.h"
#include "exec/cut_record.h"
#include "exec/debug_log.h"
#include "exec/device_executor.h"
#include "exec/program_profile.h"
#include "lazuli/error.h"

namespace lz {
namespace {

bool is_out_of_memory(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const OutOfMemoryError&) {
    return true;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (...) {
    return false;
  }
}

// A failed root whose tensor held data before gets that value back: a failed program leaves
// every tensor it would have updated as it was (DESIGN.md section 7). The storage of a donated
// parameter is taken over as it is (a failed root's output is never written: backend.h); any
// other earlier value is copied, so no two live buffers share memory that donation could reuse.
bool restore_root(BufferSlot& out, const SlotPtr& before, const std::shared_ptr<Storage>& allocated,
                  const std::vector<SlotPtr>& params, const std::pair<DType, Shape>& type) {
  if (!before || !before->storage || before->error ||
      before->donated.load(std::memory_order_acquire)) {
    return false;
  }
  for (const SlotPtr& p : params) {
    if (p == before && allocated == before->storage) {
      out.storage = before->storage;
      return true;
    }
  }
  size_t nbytes = static_cast<size_t>(numel(type.second)) * dtype_size(type.first);
  if (before->storage->nbytes() < nbytes) return false;
  std::shared_ptr<Storage> st = allocated;
  bool is_param_storage = false;
  for (const SlotPtr& p : params) is_param_storage |= st && p->storage == st;
  if (!st || is_param_storage) st = active_backend().allocate(nbytes);
  active_backend().copy(*before->storage, *st, nbytes);
  out.storage = std::move(st);
  return true;
}

void run_program(const Executable& exe, const Hash128& hash, const ProgramFacts& facts,
                 const std::vector<SlotPtr>& params, const std::vector<SlotPtr>& outputs,
                 const std::vector<std::pair<int, int>>& donations,
                 const std::vector<SlotPtr>& restore, const std::shared_ptr<Execution>& exec) {
  const auto& [root_types, origins, collectives, site, label] = facts;
  std::vector<std::shared_ptr<Storage>> outs(outputs.size());
  std::vector<bool> failed(outputs.size(), true);  // until run() says otherwise
  std::exception_ptr error;
  int failed_node = -1;
  try {
    // The sample is taken before the completion: a reader woken by it may read the metrics.
    LZ_TIMED("ExecuteTime");
    std::vector<const Storage*> ps;
    ps.reserve(params.size());
    for (const SlotPtr& p : params) {
      if (p->error) {
        throw ExecutionError("an input of this program came from an execution that failed: " +
                             error_text(p->error));
      }
      if (p->donated.load(std::memory_order_acquire)) {
        throw ExecutionError("an input of this program was donated to an earlier program");
      }
      ps.push_back(p->storage.get());
    }
    // On this thread, where the collectives themselves run, so the check and the collectives
    // reach the engine in one order.
    if (!collectives.empty() && config().dist_check) {
      if (std::shared_ptr<dist::ProcessGroup> g = dist::world()) {
        g->set_timeout(static_cast<double>(config().dist_timeout_s));
        dist::check_same_collectives(*g, collectives, site);
      }
    }
    Backend& backend = active_backend();
    for (auto& [p, r] : donations) outs[r] = params[p]->storage;
    for (size_t r = 0; r < outputs.size(); ++r) {
      if (outs[r]) continue;
      const auto& [dt, shape] = root_types[r];
      outs[r] = backend.allocate(static_cast<size_t>(numel(shape)) * dtype_size(dt));
    }
    std::vector<Storage*> raw(outs.size());
    for (size_t r = 0; r < outs.size(); ++r) raw[r] = outs[r].get();
    try {
      // The program profile: this thread's step sink is set for this run only.
      const bool profiling = profile::enabled();
      StepTimes times;
      struct Sink {
        explicit Sink(StepTimes* t) { step_times() = t; }
        ~Sink() { step_times() = nullptr; }
      } sink(profiling ? &times : nullptr);
      const auto start = std::chrono::steady_clock::now();
      exe.run(ps, raw);
      const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
      exe.last_run_ns.store(ns, std::memory_order_relaxed);
      if (profiling) profile::record_run(hash, label, exe, ns, times);
      failed.assign(outputs.size(), false);
    } catch (const PartialRunFailure& f) {
      failed = f.root_failed;
      error = f.error;
      failed_node = f.failed_node;
    }
  } catch (...) {
    error = std::current_exception();
  }
  // The outputs hold new contents (a donated parameter's storage too): whatever a cache derived
  // from their bytes before is stale. Renewed before the completion that lets readers see them.
  for (const std::shared_ptr<Storage>& s : outs) {
    if (s) s->contents_changed();
  }
  if (!error) {
    for (size_t r = 0; r < outputs.size(); ++r) outputs[r]->storage = std::move(outs[r]);
    for (auto& [p, r] : donations) params[p]->donated.store(true, std::memory_order_release);
    exec->complete(nullptr);
    return;
  }
  // In the user's terms where the failing node has an origin: "cross_entropy at train.py:41".
  std::string what;
  for (const auto& [node, origin] : origins) {
    if (node == failed_node && origin) what = *origin + " failed when its program ran: ";
  }
  what = (what.empty() ? "execution of graph " + hash.hex() + " failed: " : what) +
         error_text(error) + (what.empty() ? "" : " (graph " + hash.hex() + ")");
  std::exception_ptr err;
  // Out of memory stays OutOfMemoryError (Python: MemoryError), naming the program's outputs.
  if (is_out_of_memory(error)) {
    what += "; the program's outputs:";
    for (const auto& [dt, shape] : root_types)
      what += " " + std::string(dtype_name(dt)) + shape_str(shape);
    err = std::make_exception_ptr(OutOfMemoryError(what));
  } else {
    err = std::make_exception_ptr(ExecutionError(what));
  }
  // All or nothing for state: every tensor that held a value before gets it back, even where the
  // failure did not reach it (an optimizer's step count stays in step with its moments); a new
  // tensor the failure did not reach keeps its value, the others have none.
  for (size_t r = 0; r < outputs.size(); ++r) {
    bool restored = false;
    try {  // the copy may need memory; nothing may escape a task (exec/device_executor.h)
      restored = restore_root(*outputs[r], r < restore.size() ? restore[r] : nullptr, outs[r],
                              params, root_types[r]);
    } catch (...) {
    }
    if (restored) continue;
    if (!failed[r]) {
      outputs[r]->storage = std::move(outs[r]);
    } else {
      outputs[r]->error = err;
    }
  }
  // A donated parameter's storage now belongs to its output, restored or computed.
  for (auto& [p, r] : donations) {
    if (outputs[r]->storage == params[p]->storage)
      params[p]->donated.store(true, std::memory_order_release);
  }
  // Recorded before completing, so a reader woken by the completion can always forget it.
  device_executor().record_error(exec.get(), err);
  exec->complete(err);
}

}  // namespace

ScheduledRun run_compiled(const CompiledProgram& program, const std::vector<BufferPtr>& params,
                          std::vector<std::pair<int, int>> donations, const BindOutputs& bind,
                          bool caller_waits) {
  std::vector<SlotPtr> param_slots;
  param_slots.reserve(params.size());
  for (const BufferPtr& b : params) param_slots.push_back(b->slot());
  return run_compiled(program, std::move(param_slots), std::move(donations), bind, caller_waits);
}

ScheduledRun run_compiled(const CompiledProgram& program, std::vector<SlotPtr> param_slots,
                          std::vector<std::pair<int, int>> donations, const BindOutputs& bind,
                          bool caller_waits) {
  program.exe->about_to_run();
  ScheduledRun run{std::make_shared<Execution>(), {}};
  const ProgramFacts& facts = *program.facts;
  run.outputs.reserve(facts.root_types.size());
  for (const auto& [dt, shape] : facts.root_types) {
    run.outputs.push_back(std::make_shared<DeviceBuffer>(dt, shape, run.exec));
  }
  std::vector<SlotPtr> restore = bind ? bind(run.outputs) : std::vector<SlotPtr>{};
  std::vector<SlotPtr> output_slots;
  output_slots.reserve(run.outputs.size());
  for (const BufferPtr& b : run.outputs) output_slots.push_back(b->slot());
  // The task holds buffer slots, never DeviceBuffers, so queued and running programs do not
  // change the use counts that donation decisions read.
  const int64_t last_ns = program.exe->last_run_ns.load(std::memory_order_relaxed);
  const bool waiter_may_run =
      facts.collectives.empty() && last_ns >= 0 && last_ns < config().waiter_run_ms * 1'000'000;
  run.run_here = caller_waits && waiter_may_run;
  device_executor().schedule(
      run.exec, waiter_may_run,
      [exe = program.exe, hash = program.hash, facts = program.facts,
       params = std::move(param_slots), outputs = std::move(output_slots),
       donations = std::move(donations), restore = std::move(restore), exec = run.exec] {
        run_program(*exe, hash, *facts, params, outputs, donations, restore, exec);
      },
      /*wake=*/!run.run_here);
  return run;
}

void note_replay(const CompiledProgram& program, size_t inputs, const std::string& name) {
  CutRecord record;
  record.reason = CutReason::CaptureReplay;
  record.hash = program.hash;
  record.inputs = inputs;
  record.outputs = program.facts->root_types.size();
  record.name = name;
  if (config().debug > 0) {  // a replay never compiles: only the execution log shows it
    record.frames = user_frames(config().debug_max_frame);
    report_execution(record);
  }
  cut_log().add(std::move(record));
}

}  // namespace lz
