// The public runtime (<lazuli/runtime.h>) and debug (<lazuli/debug.h>) entry points.
#include "backend/backend.h"
#include "core/config.h"
#include "core/metrics.h"
#include "exec/graph_executor.h"
#include "exec/step.h"
#include "ir/dump.h"
#include "lazuli/debug.h"
#include "lazuli/runtime.h"
#include "tensor/device.h"

namespace lz {
namespace {
std::vector<internal::TensorImplPtr> impls(const std::vector<Tensor>& ts, const char* op) {
  std::vector<internal::TensorImplPtr> out;
  for (const Tensor& t : ts) {
    if (!t.defined()) throw ValueError(std::string(op) + ": got an undefined tensor");
    out.push_back(t.impl());
  }
  return out;
}
}  // namespace

void sync(bool wait, bool reset_scope) { step_barrier(wait, reset_scope); }

void sync_tensors(const std::vector<Tensor>& tensors, bool wait) {
  raise_pending_async_error();
  SyncConfig cfg;
  cfg.barrier = true;
  cfg.wait = wait;
  cfg.reason = CutReason::SyncTensors;
  sync_tensors_graph(impls(tensors, "sync_tensors"), cfg);
}

void wait() { wait_all_executions(); }
void add_step_closure(std::function<void()> fn) { register_step_closure(std::move(fn)); }
int device_count() { return 1; }
std::string backend() { return active_backend().name(); }

namespace debug {

std::string metrics_report() { return lz::metrics_report(); }
std::string short_metrics_report() { return lz::short_metrics_report(); }
int64_t counter_value(const std::string& name) { return lz::counter_value(name); }
std::optional<MetricData> metric_data(const std::string& name) {
  lz::MetricData d;
  if (!lz::metric_data(name, &d)) return std::nullopt;
  return MetricData{d.count, d.total, std::move(d.samples)};
}
std::vector<std::string> counter_names() { return lz::counter_names(); }
std::vector<std::string> metric_names() { return lz::metric_names(); }
void clear_counters() { lz::clear_counters(); }
void clear_metrics() { lz::clear_metrics(); }

std::string tensor_state(const Tensor& t) {
  if (!t.defined()) throw ValueError("tensor_state: got an undefined tensor");
  return internal::tensor_state_name(t.impl()->state());
}

std::string graph_hash(const std::vector<Tensor>& tensors) {
  Roots roots = collect(impls(tensors, "graph_hash"), /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  std::vector<std::pair<int, int>> donations;
  if (config().enable_param_aliasing) donations = find_donations(roots, po);
  return lz::graph_hash(roots, po, donations).hex();
}

std::string dump_graph(const std::vector<Tensor>& tensors, const std::string& fmt) {
  if (fmt != "text" && fmt != "dot") throw ValueError("dump_graph: fmt must be \"text\" or \"dot\", got \"" + fmt + "\"");
  std::vector<ir::Value> roots;
  for (const Tensor& t : tensors) {
    if (!t.defined()) throw ValueError("dump_graph: got an undefined tensor");
    roots.push_back(t.impl()->value());
  }
  return fmt == "dot" ? ir::dump_dot(roots) : ir::dump_text(roots);
}

std::string dump_kernels(const std::vector<Tensor>& tensors, bool llvm_ir) {
  Roots roots = collect(impls(tensors, "dump_kernels"), /*include_views=*/false);
  PostOrder po = post_order(roots.values);
  // The default backend's plan whichever backend runs programs (docs/debugging.md).
  return backend_named(default_backend_name()).describe(lowering_graph(roots, po), llvm_ir);
}

int64_t live_tensor_count() { return internal::default_device().registry.size(); }

void explain_recompiles(bool enabled) { mutable_config().explain_recompiles = enabled; }

}  // namespace debug
}  // namespace lz
