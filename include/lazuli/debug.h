// Debug and metrics (API.md "Debug"). Nothing here compiles or runs a program.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lazuli/tensor.h"

namespace lz::debug {

std::string metrics_report();
std::string short_metrics_report();
int64_t counter_value(const std::string& name);  // 0 when never bumped
struct MetricData {
  int64_t count = 0;
  double total = 0;  // ns for timed metrics
  std::vector<double> samples;
};
std::optional<MetricData> metric_data(const std::string& name);
std::vector<std::string> counter_names();
std::vector<std::string> metric_names();
void clear_counters();
void clear_metrics();

// "device_data" | "ir" | "host" | "view"
std::string tensor_state(const Tensor& t);
// The hash a sync_tensors of these tensors would look up (hex), without compiling or running.
std::string graph_hash(const std::vector<Tensor>& tensors);
// The pending graph of these tensors, as text or dot ("text" | "dot"). No lookup, compile or run.
std::string dump_graph(const std::vector<Tensor>& tensors, const std::string& fmt = "text");
// The cpu backend's plan for these tensors' pending graph: fusion decisions, steps (kernels,
// library calls, fallbacks), buffers and each kernel's loop nest in pseudo-C; with llvm_ir, each
// kernel's LLVM IR too (this loads the code generator). Nothing is compiled into the caches or run.
std::string dump_kernels(const std::vector<Tensor>& tensors, bool llvm_ir = false);
int64_t live_tensor_count();
void explain_recompiles(bool enabled = true);

}  // namespace lz::debug
