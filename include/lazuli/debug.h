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

// The program profile (docs/debugging.md "Where a step's time goes"): while it is on
// (profile_programs(), or LAZULI_PROFILE_PROGRAMS=1 from the start, which also writes the report
// at exit), every run of a compiled program is timed, and on the cpu backend each of its steps.
void profile_programs(bool enabled = true);
bool profiling_programs();
// Per program, in first-run order: a row for its whole runs (step -1, kind "program"), then one
// per step (kind "kernel" | "matmul" | "library" | "fallback" | "copies"). Times in ns.
struct ProfileRow {
  std::string program;  // graph hash (hex)
  std::string label;    // the program's name, or where it was cut ("train.py:41", a cut reason)
  int step = -1;
  std::string kind;
  std::string what;  // the step in words: a kernel's ops and output, a product's shapes
  int64_t runs = 0;
  int64_t total_ns = 0;
};
std::vector<ProfileRow> program_profile();
// The profile as text: time by kind of step, the programs, then the `top` steps, by time.
std::string program_profile_report(int top = 20);
void clear_program_profile();

}  // namespace lz::debug
