// Shared pieces of the Python bindings: argument conversion (dims, shapes, operands, dtypes) and
// the one function per API area that module.cpp calls. The bindings convert and forward; every
// semantic lives in the C++ core.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "backend/buffer.h"
#include "lazuli/lazuli.h"

namespace py = pybind11;

namespace pybind11::detail {
// A Python number or a Tensor as an op operand. bool before int (bool is an int subclass), and
// anything with __float__ (numpy scalars) as a float. Other objects do not convert, so operator
// dunders return NotImplemented and Python raises its usual TypeError.
template <>
struct type_caster<lz::Operand> {
  PYBIND11_TYPE_CASTER(lz::Operand, const_name("Tensor | number"));
  bool load(handle src, bool convert);
};
}  // namespace pybind11::detail

namespace lzpy {

// None -> all dims; int -> [d]; sequence -> list.
lz::IntList dims_arg(const py::object& dim);
// Varargs or one tuple/list: zeros(2, 3) and zeros((2, 3)).
lz::IntList shape_args(const py::args& args);
lz::IntList shape_arg(const py::object& obj);
lz::DType dtype_arg(const py::object& dt, lz::DType fallback);

// Waits for a value read in slices, releasing the GIL, so other threads run and Ctrl-C works.
void wait_interruptibly(const std::shared_ptr<lz::Execution>& exec);
// t's value as a new numpy array (a value read).
py::array to_numpy(const lz::Tensor& t);
lz::Tensor from_numpy(const py::array& a);

py::class_<lz::Tensor> bind_tensor(py::module_& m);
// Module functions, and the same ops as Tensor methods where PyTorch has them.
void bind_ops(py::module_& m, py::class_<lz::Tensor>& cls);
void bind_runtime(py::module_& m);
// requires_grad, grad, backward, detach, no_grad (python/src/autograd_bindings.cpp).
void bind_autograd(py::module_& m, py::class_<lz::Tensor>& cls);
void bind_debug(py::module_& m);

}  // namespace lzpy
