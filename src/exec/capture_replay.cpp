// Replaying a captured function's record (exec/capture.h): reads
// the arguments' and live tensors' buffers, checks the guards, runs the compiled program and
// writes its outputs back, or says why the call must trace instead. Tracing is capture.cpp.
#include "exec/capture_replay.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "backend/backend.h"
#include "core/config.h"
#include "core/grad_mode.h"
#include "core/metrics.h"
#include "exec/compile_region.h"
#include "exec/cut_record.h"
#include "exec/debug_log.h"
#include "exec/device_executor.h"
#include "exec/graph_executor.h"
#include "exec/step.h"
#include "lazuli/capture.h"
#include "lazuli/error.h"
#include "tensor/device.h"

namespace lz::capture_detail {

using internal::TensorImpl;
using internal::TensorImplPtr;
using internal::TensorState;

// One replay of `rec`; false (and *why) when it must not run and the call should trace instead.
bool replay(const CaptureRecord& rec, const std::string& name, std::vector<TensorImplPtr> args,
            std::vector<TensorImplPtr>* outs, std::string* why) {
  raise_pending_async_error();
  std::vector<TensorImplPtr> src(rec.sources.size());
  std::vector<TensorImplPtr> dst(rec.sinks.size());
  std::vector<TensorImplPtr> grad_leaf(rec.sinks.size());
  for (size_t i = 0; i < rec.sinks.size(); ++i) {
    const CaptureSink& s = rec.sinks[i];
    if (s.kind != CaptureSink::Kind::State) continue;
    if (s.is_grad) {
      grad_leaf[i] = s.grad_of.lock();
      if (!grad_leaf[i]) {
        *why = "a tensor whose .grad the function sets no longer exists";
        return false;
      }
      // The leaf had no grad at the trace (zero_grad outside): with one now, the function would
      // accumulate into it.
      if (s.grad_was_none && grad_leaf[i]->grad()) {
        *why = "a leaf whose .grad the function created at its trace now has a .grad (zero_grad "
               "no longer called?), so the function would accumulate into it";
        return false;
      }
    } else if (!(dst[i] = s.tensor.lock())) {
      *why = "a tensor the function updated or created during its trace no longer exists (state "
             "replaced, or a .grad set to None, outside the function)";
      return false;
    }
  }
  for (size_t i = 0; i < rec.sources.size(); ++i) {
    const CaptureSource& s = rec.sources[i];
    if (s.kind != CaptureSource::Kind::State) continue;
    if (!(src[i] = s.tensor.lock())) {
      *why = "a tensor the function reads no longer exists (replaced since the trace?)";
      return false;
    }
    if (src[i]->requires_grad_flag() != s.requires_grad) {
      *why = "a tensor the function reads changed requires_grad since the trace";
      return false;
    }
  }
  for (const CaptureOutput& o : rec.outputs) {
    if (o.kind == CaptureOutput::Kind::Fixed && o.fixed.expired()) {
      *why = "a tensor the function returned no longer exists (replaced since the trace?)";
      return false;
    }
  }
  // An argument that is also a tensor the program reads or writes as state: the trace saw them
  // as two tensors, so replaying would mix them up.
  for (size_t a = 0; a < args.size(); ++a) {
    for (const TensorImplPtr& t : src) {
      if (t && t == args[a]) {
        *why = "argument " + std::to_string(a) + " is a tensor the function also reads through a global";
        return false;
      }
    }
    for (const TensorImplPtr& t : dst) {
      if (t && t == args[a]) {
        *why = "argument " + std::to_string(a) + " is a tensor the function also writes through a global";
        return false;
      }
    }
  }
  for (const ReplayGuard& g : rec.guards) {
    if (!g.check()) {
      *why = "a replay guard registered by the traced code refused (e.g. an optimizer setting changed "
             "the shape of its update)";
      return false;
    }
  }
  if (RegionState* r = current_region(); r && r->full_graph) {
    check_execution_allowed(CutReason::CaptureReplay, user_frames(1));
  }
  materialize_args(args);
  for (size_t i = 0; i < rec.sources.size(); ++i) {
    const CaptureSource& s = rec.sources[i];
    if (s.kind == CaptureSource::Kind::Arg) src[i] = args[s.arg];
  }
  for (size_t i = 0; i < rec.sinks.size(); ++i) {
    if (rec.sinks[i].kind == CaptureSink::Kind::Arg) dst[i] = args[rec.sinks[i].index];
  }
  // State updated outside the function since the last run (pending IR) is computed first.
  std::vector<TensorImplPtr> pending;
  for (const TensorImplPtr& t : src) {
    if (t && t->state() == TensorState::IR) pending.push_back(t);
  }
  sync_before_call(pending);

  std::vector<BufferPtr> outputs;
  std::vector<std::pair<int, int>> donations;
  {
    auto lock = lock_executor();
    std::vector<BufferPtr> params(rec.sources.size());
    std::vector<bool> sole(rec.sources.size(), false);
    for (size_t i = 0; i < rec.sources.size(); ++i) {
      if (!src[i]) {
        params[i] = rec.sources[i].constant;
        continue;
      }
      bool s = false;
      params[i] = src[i]->replay_input(&s);
      sole[i] = s;
      if (!params[i]) {
        *why = "an input changed state while the replay started";
        return false;
      }
    }
    // One buffer read as two inputs (two tensors sharing it) is never donated.
    for (size_t i = 0; i < params.size(); ++i) {
      for (size_t j = i + 1; j < params.size(); ++j) {
        if (params[i] == params[j]) sole[i] = sole[j] = false;
      }
    }
    if (config().enable_param_aliasing) {
      for (auto& [p, r] : rec.donations) {
        if (sole[p] && src[p] && src[p] == dst[r]) donations.emplace_back(p, r);
      }
    }
    // A replay that fails gives each kept tensor its value back (run_compiled's restore).
    auto bind = [&](const std::vector<BufferPtr>& outs) {
      std::vector<SlotPtr> restore(outs.size());
      for (size_t r = 0; r < dst.size(); ++r) {
        if (dst[r]) restore[r] = dst[r]->replay_assign(outs[r]);
      }
      return restore;
    };
    // Only `params` (dropped below) and the sources' old data nodes hold the replaced buffers now;
    // the scheduled task keeps their memory through the slots.
    outputs = run_compiled(rec.program, params, donations, bind).outputs;
  }
  if (!donations.empty()) LZ_COUNTER("InputOutputAliasCount", static_cast<int64_t>(donations.size()));
  LZ_COUNTER("CaptureReplay", 1);

  std::vector<TensorImplPtr> fresh(outputs.size());
  for (size_t r = 0; r < grad_leaf.size(); ++r) {
    if (!grad_leaf[r]) continue;
    fresh[r] = TensorImpl::from_buffer(outputs[r]);  // also what a returned .grad returns
    grad_leaf[r]->set_grad(fresh[r]);
  }
  outs->clear();
  outs->reserve(rec.outputs.size());
  for (const CaptureOutput& o : rec.outputs) {
    switch (o.kind) {
      case CaptureOutput::Kind::Root:
        if (!fresh[o.index]) fresh[o.index] = TensorImpl::from_buffer(outputs[o.index]);
        outs->push_back(fresh[o.index]);
        break;
      case CaptureOutput::Kind::Arg: outs->push_back(nullptr); break;  // the caller's own
      case CaptureOutput::Kind::Fixed: outs->push_back(o.fixed.lock()); break;
    }
  }
  note_replay(rec.program, rec.sources.size(), name);
  finish_step(true, rec.program.hash);
  return true;
}

}  // namespace lz::capture_detail
