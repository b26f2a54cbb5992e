// lazuli.debug: metrics, tensor states, graph hashes, dumps, and the recent cuts.
#include "bindings.h"
#include "exec/cut_record.h"
#include "exec/device_executor.h"
#include "exec/explain.h"
#include "exec/graph_executor.h"
#include "core/config.h"

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
  d.def("recent_cuts", [] {
    py::list out;
    for (const lz::CutRecord& r : lz::cut_log().recent()) {
      py::list frames;
      for (const auto& f : r.frames) frames.append(py::make_tuple(f.file, f.line, f.function));
      py::dict e;
      e["reason"] = std::string(lz::cut_reason_id(r.reason));
      e["graph_hash"] = r.hash.hex();
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
  d.def("clear_recent_cuts", [] { lz::cut_log().clear(); });
  d.def("clear_recompile_history", &lz::clear_recompile_history);
  // For tests and notebooks: start from an empty compile cache, or change a setting that the
  // environment set at startup (the names are Config's fields, see docs/environment.md).
  d.def("_clear_compile_cache", &lz::clear_compile_cache);
  // Tests only (exec/device_executor.h): no further program starts until the matching release.
  d.def("_hold_executor", [] { lz::device_executor().hold(); });
  d.def("_release_executor", [] { lz::device_executor().release(); });
  d.def("_set_config", [](const std::string& name, py::object value) {
    lz::Config& c = lz::mutable_config();
    if (name == "max_pending_nodes") c.max_pending_nodes = value.cast<int64_t>();
    else if (name == "debug") c.debug = value.cast<int>();
    else if (name == "debug_file") c.debug_file = value.cast<std::string>();
    else if (name == "debug_max_frame") c.debug_max_frame = value.cast<int>();
    else if (name == "save_graphs_file") c.save_graphs_file = value.cast<std::string>();
    else if (name == "save_graphs_fmt") c.save_graphs_fmt = value.cast<std::string>();
    else if (name == "enable_param_aliasing") c.enable_param_aliasing = value.cast<bool>();
    else if (name == "sync_wait") c.sync_wait = value.cast<bool>();
    else throw py::value_error("_set_config: unknown or read-only setting '" + name + "'");
  }, py::arg("name"), py::arg("value"));
  d.def("_get_config", [](const std::string& name) -> py::object {
    const lz::Config& c = lz::config();
    if (name == "max_pending_nodes") return py::int_(c.max_pending_nodes);
    if (name == "debug") return py::int_(c.debug);
    if (name == "debug_file") return py::str(c.debug_file);
    if (name == "debug_max_frame") return py::int_(c.debug_max_frame);
    if (name == "save_graphs_file") return py::str(c.save_graphs_file);
    if (name == "save_graphs_fmt") return py::str(c.save_graphs_fmt);
    if (name == "enable_param_aliasing") return py::bool_(c.enable_param_aliasing);
    if (name == "sync_wait") return py::bool_(c.sync_wait);
    throw py::value_error("_get_config: unknown setting '" + name + "'");
  }, py::arg("name"));
}

}  // namespace lzpy
