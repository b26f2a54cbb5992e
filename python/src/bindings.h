// Shared pieces of the Python bindings: argument conversion (dims, shapes, operands, dtypes) and
// the one function per API area that module.cpp calls. The bindings convert and forward; every
// semantic lives in the C++ core.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "exec/front_end.h"  // the one internal header the bindings use
#include "lazuli/lazuli.h"

namespace py = pybind11;
namespace fe = lz::front_end;

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

// Argument conversion (arguments.cpp). Each names its argument in PyTorch's words ("argument 'dim'
// must be int or tuple of ints, not str"); the dispatcher puts the function's name in front
// (argument_errors.cpp). Ints take anything with __index__ (numpy integers, 0-d integer tensors)
// but not bools or floats; an int past int64 raises OverflowError.
std::string type_name(py::handle h);
int64_t int_arg(py::handle h, const char* arg);
std::optional<int64_t> opt_int_arg(py::handle h, const char* arg);  // None -> nullopt
bool bool_arg(py::handle h, const char* arg);
// None -> all dims; int -> [d]; tuple or list of ints.
lz::IntList dims_arg(const py::object& dim, const char* arg = "dim");
lz::IntList int_list_arg(py::handle obj, const char* arg);
// Varargs or one tuple/list: zeros(2, 3) and zeros((2, 3)).
lz::IntList shape_args(const py::args& args, const char* arg = "size");
lz::IntList shape_arg(const py::object& obj, const char* arg = "size");
lz::DType dtype_arg(const py::object& dt, lz::DType fallback, const char* arg = "dtype");
lz::Operand operand_arg(py::handle h, const char* arg);
lz::Scalar number_arg(py::handle h, const char* arg);  // a number, not a tensor
lz::Tensor tensor_arg(py::handle h, const char* arg);
// A list or tuple of tensors (or one tensor, when one_tensor_ok).
std::vector<lz::Tensor> tensors_arg(py::handle h, const char* arg, bool one_tensor_ok = false);
// Routes every function of `m` (and its submodules and classes) through the dispatcher that
// names the function and the argument in argument errors. Called once all bindings exist.
void install_argument_errors(py::module_& m);
// Ctrl-C stops a compile of the Python main thread at the next kernel boundary and raises
// KeyboardInterrupt (interrupt.cpp). Called after the module's exception translator.
void install_compile_interrupt(py::module_& m);
// Runs `work` (with the GIL held; it may release it). When Ctrl-C stopped a compile inside it,
// Python's SIGINT handler runs: KeyboardInterrupt (the default) propagates; a handler that returns
// (a graceful-shutdown flag) means go on, so `work` runs again and its compile resumes (the
// kernels finished before the signal are cached).
void resume_after_interrupt(const std::function<void()>& work);

// A value read: scheduled without the GIL (a first read may compile for seconds while other
// Python threads go on), then waited for in slices, so Ctrl-C works; finished (its error raised).
fe::PendingRead read_interruptibly(const lz::Tensor& t, lz::CutReason reason);
// read_interruptibly of each tensor, with one release of the GIL to schedule them all and one
// per wait that blocks: a replay's outputs, which one program computes, so the first wait is the
// only one (each read's own release and wait cost more than the read).
std::vector<fe::PendingRead> read_all_interruptibly(const std::vector<lz::Tensor>& ts,
                                                    lz::CutReason reason);
// numpy's dtype for `t` (TypeError for bfloat16, which numpy lacks).
py::dtype numpy_dtype(lz::DType t);
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
void bind_bridge(py::module_& m);
// conv, pooling, normalization into m._nn (nn_bindings.cpp), after bind_composites made it.
void bind_nn_layers(py::module_& m);
// Safetensors files for lz.save / lz.load (serialize_bindings.cpp).
void bind_serialize(py::module_& m);
// tril, masked_fill, flip, roll, norms, F.pad/interpolate... (composite_bindings.cpp).
void bind_composites(py::module_& m, py::class_<lz::Tensor>& cls);
// x[key], x[key] = value, index_put(_) (indexing_bindings.cpp).
void bind_indexing(py::module_& m, py::class_<lz::Tensor>& cls);
// The flat positions (int64) of a bool mask's true elements: reads the mask (a cut with reason
// data-dependent-shape), waiting interruptibly (ops_bindings.cpp).
lz::Tensor nonzero_flat(const lz::Tensor& mask);
// The ATen lowering table, into m._aten (aten_bindings.cpp).
void bind_aten(py::module_& m);
// lazuli._C._distributed (distributed_bindings.cpp).
void bind_distributed(py::module_& m);
// A keep-alive for memory a Python object owns, safe to drop on any thread (bridge_bindings.cpp).
std::shared_ptr<void> python_owner(const py::object& owner);

}  // namespace lzpy
