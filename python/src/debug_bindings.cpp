// lazuli.debug: metrics, tensor states, graph hashes, dumps, and the recent cuts.
#include "bindings.h"

namespace lzpy {

void bind_debug(py::module_& m) {
  py::module_ d = m.def_submodule("debug", "Debug and metrics (no program is compiled or run).");
  d.def("metrics_report", &lz::debug::metrics_report);
  d.def("short_metrics_report", &lz::debug::short_metrics_report);
  d.def("counter_value", &lz::debug::counter_value, py::arg("name"));
  d.def("metric_data", [](const std::string& name) -> py::object {
    auto md = lz::debug::metric_data(name);
    if (!md) return py::none();
    return py::make_tuple(md->count, md->total, md->samples);
  }, py::arg("name"));
  d.def("counter_names", &lz::debug::counter_names);
  d.def("metric_names", &lz::debug::metric_names);
  d.def("clear_counters", &lz::debug::clear_counters);
  d.def("clear_metrics", &lz::debug::clear_metrics);
  d.def("tensor_state", &lz::debug::tensor_state, py::arg("tensor"));
  d.def("graph_hash", [](py::object ts) {
    return lz::debug::graph_hash(tensors_arg(ts, "tensors", true));
  }, py::arg("tensors"));
  d.def("dump_kernels", [](py::object ts, bool llvm_ir) {
    return lz::debug::dump_kernels(tensors_arg(ts, "tensors", true), llvm_ir);
  }, py::arg("tensors"), py::arg("llvm_ir") = false);
  d.def("dump_graph", [](py::object ts, const std::string& fmt) {
    return lz::debug::dump_graph(tensors_arg(ts, "tensors", true), fmt);
  }, py::arg("tensors"), py::arg("fmt") = "text");
  d.def("live_tensor_count", &lz::debug::live_tensor_count);
  d.def("explain_recompiles", &lz::debug::explain_recompiles, py::arg("enabled") = true);
  d.def("profile_programs", &lz::debug::profile_programs, py::arg("enabled") = true,
        "Time every run of a compiled program, and on the cpu backend each of its steps, from now "
        "on (False: stop). LAZULI_PROFILE_PROGRAMS=1 turns it on from the start.");
  d.def("profiling_programs", &lz::debug::profiling_programs);
  d.def(
      "program_profile",
      [] {
        py::list out;
        for (const lz::debug::ProfileRow& r : lz::debug::program_profile()) {
          py::dict e;
          e["program"] = r.program;
          e["label"] = r.label;
          e["step"] = r.step;
          e["kind"] = r.kind;
          e["what"] = r.what;
          e["runs"] = r.runs;
          e["total_ns"] = r.total_ns;
          out.append(e);
        }
        return out;
      },
      "Per program, in first-run order: a row for its whole runs (step -1, kind 'program'), then "
      "one per step (kind 'kernel', 'matmul', 'library', 'fallback' or 'copies'); times in ns.");
  d.def("program_profile_report", &lz::debug::program_profile_report, py::arg("top") = 20,
        "The profile as text: time by kind of step, the programs, then the `top` steps by time.");
  d.def("clear_program_profile", &lz::debug::clear_program_profile);
  d.def("recent_cuts", [] {
    py::list out;
    for (const fe::CutInfo& r : fe::recent_cuts()) {
      py::list frames;
      for (const auto& f : r.frames) frames.append(py::make_tuple(f.file, f.line, f.function));
      py::dict e;
      e["reason"] = r.reason;
      e["graph_hash"] = r.graph_hash;
      e["nodes"] = r.nodes;
      e["inputs"] = r.inputs;
      e["outputs"] = r.outputs;
      e["compiled"] = r.compiled;
      e["frames"] = frames;
      e["explanation"] = r.explanation;
      e["cause"] = r.cause;
      e["name"] = r.name;
      out.append(e);
    }
    return out;
  }, "The last executions, oldest first: reason, graph hash, size, and the user's frames.");
  d.def("clear_recent_cuts", &fe::clear_recent_cuts);
  d.def("clear_recompile_history", &fe::clear_recompile_history);
  // For tests and notebooks: start from an empty compile cache, or change a setting that the
  // environment set at startup (the names are Config's fields, see docs/environment.md).
  d.def("_clear_compile_cache", &fe::clear_compile_cache);
  // Tests only (exec/device_executor.h): the executor thread starts no further program until the
  // matching release; a thread waiting for a short program may still run it.
  d.def("_hold_executor", &fe::hold_executor);
  d.def("_release_executor", &fe::release_executor);
  d.def(
      "_set_config",
      [](const std::string& name, py::object value) {
        // The setting's current kind decides the conversion (bool before int: bool is an int).
        fe::Setting v = fe::get_setting(name);
        if (std::holds_alternative<bool>(v))
          v = value.cast<bool>();
        else if (std::holds_alternative<int64_t>(v))
          v = value.cast<int64_t>();
        else
          v = value.cast<std::string>();
        fe::set_setting(name, v);
      },
      py::arg("name"), py::arg("value"));
  d.def(
      "_get_config",
      [](const std::string& name) -> py::object {
        return std::visit([](const auto& x) { return py::cast(x); }, fe::get_setting(name));
      },
      py::arg("name"));
}

}  // namespace lzpy
