// lazuli.debug: metrics, tensor states, graph hashes, dumps, and the recent cuts.
#include "bindings.h"
#include "exec/cut_record.h"
#include "exec/explain.h"

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
    if (py::isinstance<lz::Tensor>(ts)) return lz::debug::graph_hash({ts.cast<lz::Tensor>()});
    return lz::debug::graph_hash(ts.cast<std::vector<lz::Tensor>>());
  }, py::arg("tensors"));
  d.def("dump_graph", [](py::object ts, const std::string& fmt) {
    if (py::isinstance<lz::Tensor>(ts)) return lz::debug::dump_graph({ts.cast<lz::Tensor>()}, fmt);
    return lz::debug::dump_graph(ts.cast<std::vector<lz::Tensor>>(), fmt);
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
}

}  // namespace lzpy
