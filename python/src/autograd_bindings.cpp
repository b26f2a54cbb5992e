// Autograd bindings: requires_grad, grad, is_leaf, backward, detach and grad mode. Semantics live
// in the C++ core (include/lazuli/autograd.h); this file converts and forwards.
#include "bindings.h"

namespace lzpy {

void bind_autograd(py::module_& m, py::class_<lz::Tensor>& cls) {
  cls.def_property(
         "requires_grad", [](const lz::Tensor& t) { return lz::requires_grad(t); },
         [](lz::Tensor& t, bool on) { lz::set_requires_grad(t, on); })
      .def("requires_grad_", [](lz::Tensor& t, bool on) -> lz::Tensor& { return lz::set_requires_grad(t, on); },
           py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const lz::Tensor& t) -> py::object {
            lz::Tensor g = lz::grad(t);
            if (!g.defined()) return py::none();
            return py::cast(g);
          },
          [](const lz::Tensor& t, py::object g) {
            lz::set_grad(t, g.is_none() ? lz::Tensor() : tensor_arg(g, "grad"));
          })
      .def_property_readonly("is_leaf", [](const lz::Tensor& t) { return lz::is_leaf(t); })
      .def("backward", [](const lz::Tensor& t, py::object gradient, bool retain_graph) {
             lz::Tensor g = gradient.is_none() ? lz::Tensor() : tensor_arg(gradient, "gradient");
             lz::backward(t, g, retain_graph);
           }, py::arg("gradient") = py::none(), py::arg("retain_graph") = false)
      .def("detach", [](const lz::Tensor& t) { return lz::detach(t); });
  m.def("is_grad_enabled", &lz::is_grad_enabled);
  m.def("_set_grad_enabled", &lz::set_grad_enabled, py::arg("enabled"));
  m.def("detach", [](const lz::Tensor& t) { return lz::detach(t); });
  // Autocast (include/lazuli/autocast.h); lazuli.autocast is the Python face.
  m.def("_autocast_state", []() {
    lz::AutocastState s = lz::autocast_state();
    return py::make_tuple(s.enabled, s.dtype);
  });
  m.def("_set_autocast_state", [](bool enabled, lz::DType dtype) {
    lz::set_autocast_state({enabled, dtype});
  }, py::arg("enabled"), py::arg("dtype"));
}

}  // namespace lzpy
