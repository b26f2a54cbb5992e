// lazuli._C._distributed: the collectives of include/lazuli/distributed.h; lazuli/distributed.py
// is the Python face (PyTorch's spellings).
#include "bindings.h"
#include "lazuli/distributed.h"

namespace lzpy {

void bind_distributed(py::module_& parent) {
  namespace d = lz::distributed;
  py::module_ m = parent.def_submodule("_distributed", "collectives (lazuli.distributed)");
  py::enum_<d::ReduceOp>(m, "ReduceOp")
      .value("SUM", d::ReduceOp::SUM)
      .value("AVG", d::ReduceOp::AVG)
      .value("PRODUCT", d::ReduceOp::PRODUCT)
      .value("MAX", d::ReduceOp::MAX)
      .value("MIN", d::ReduceOp::MIN);
  m.def("init_process_group", &d::init_process_group, py::arg("backend") = "mpi");
  m.def("is_initialized", &d::is_initialized);
  m.def("get_rank", &d::get_rank);
  m.def("get_world_size", &d::get_world_size);
  m.def("get_backend", &d::get_backend);
  // Both wait for this process's programs, which may take the GIL (step closures).
  m.def("destroy_process_group", &d::destroy_process_group, py::call_guard<py::gil_scoped_release>());
  m.def("barrier", &d::barrier, py::call_guard<py::gil_scoped_release>());
  m.def("all_reduce", [](lz::Tensor& t, d::ReduceOp op) { d::all_reduce(t, op); }, py::arg("tensor"),
        py::arg("op") = d::ReduceOp::SUM);
  m.def("broadcast", [](lz::Tensor& t, int src) { d::broadcast(t, src); }, py::arg("tensor"), py::arg("src"));
  m.def("all_gather", &d::all_gather, py::arg("tensor"));
  m.def("reduce_scatter", &d::reduce_scatter, py::arg("tensor"), py::arg("op") = d::ReduceOp::SUM);
  m.attr("DEFAULT_BUCKET_CAP_BYTES") = d::kDefaultBucketCapBytes;
  m.def("average_gradients", &d::average_gradients, py::arg("param"),
        py::arg("bucket_cap_bytes") = d::kDefaultBucketCapBytes);
  m.def("abort", [](int code) { d::abort(code); }, py::arg("code") = 1);
}

}  // namespace lzpy
