// Argument conversion with PyTorch's messages, and the one place that names the failing argument
// when pybind11 itself refuses a call.
//
// Converters say which argument and what it should be: "argument 'dim' must be int or tuple of
// ints, not str". Every function of lazuli._C goes through `dispatch` (install_argument_errors
// swaps it in for pybind11's dispatcher once all bindings exist); after a failed call it prefixes
// such messages with the function ("lz.sum(): "), and rewrites pybind11's "incompatible function
// arguments" (the whole signature) and "Unable to cast Python instance" into the same form, found
// from the signature and the arguments of the call. A call that succeeds pays one C call.
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"

namespace pybind11::detail {
bool type_caster<lz::Operand>::load(handle src, bool convert) {
  if (py::isinstance<lz::Tensor>(src)) {
    value = lz::Operand(src.cast<lz::Tensor>());
    return true;
  }
  if (PyBool_Check(src.ptr())) {
    value = lz::Operand(src.ptr() == Py_True);
    return true;
  }
  if (PyLong_Check(src.ptr())) {
    value = lz::Operand(static_cast<long long>(lzpy::int_arg(src, nullptr)));
    return true;
  }
  if (PyFloat_Check(src.ptr())) {
    value = lz::Operand(PyFloat_AsDouble(src.ptr()));
    return true;
  }
  if (!convert) return false;
  // numpy scalars and 0-d arrays keep their kind: integers stay integers.
  py::object o = py::reinterpret_borrow<py::object>(src);
  if (py::hasattr(o, "dtype") && py::hasattr(o, "ndim") && o.attr("ndim").cast<int>() == 0) {
    std::string kind = py::str(o.attr("dtype").attr("kind"));
    if (kind == "b") {
      value = lz::Operand(o.cast<bool>());
      return true;
    }
    if (kind == "i" || kind == "u") {
      value = lz::Operand(static_cast<long long>(lzpy::int_arg(o, nullptr)));
      return true;
    }
    if (kind == "f") {
      value = lz::Operand(o.cast<double>());
      return true;
    }
    return false;
  }
  if (PyIndex_Check(src.ptr())) {
    value = lz::Operand(static_cast<long long>(lzpy::int_arg(o, nullptr)));
    return true;
  }
  return false;
}
}  // namespace pybind11::detail

namespace lzpy {

std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

namespace {

std::string arg_words(const char* arg) {
  return arg ? std::string("argument '") + arg + "'" : std::string("argument");
}

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

bool int_like(py::handle h) {
  PyObject* o = h.ptr();
  if (PyLong_Check(o)) return !PyBool_Check(o);
  // PyTorch refuses bools and floats where it wants an int; numpy integers and 0-d integer
  // tensors convert through __index__.
  return !PyFloat_Check(o) && PyIndex_Check(o) &&
         std::strcmp(Py_TYPE(o)->tp_name, "numpy.bool_") != 0;
}

[[noreturn]] void int_list_error(const char* arg, const char* expected, py::handle h, size_t i) {
  raise(PyExc_TypeError, arg_words(arg) + " must be " + expected + ", but found element of type " +
                             type_name(h) + " at pos " + std::to_string(i));
}

lz::IntList int_sequence(py::handle obj, const char* arg, const char* expected) {
  lz::IntList out;
  size_t i = 0;
  for (py::handle h : obj) {
    if (!int_like(h)) int_list_error(arg, expected, h, i);
    out.push_back(int_arg(h, arg));
    ++i;
  }
  return out;
}

bool is_int_sequence_container(py::handle h) {
  return PyTuple_Check(h.ptr()) || PyList_Check(h.ptr());
}

}  // namespace

int64_t int_arg(py::handle h, const char* arg) {
  if (!int_like(h)) {
    raise(PyExc_TypeError, arg_words(arg) + " must be int, not " + type_name(h));
  }
  py::object idx = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
  if (!idx) {
    // __index__ refused (a float tensor, a tensor of many elements): same error, named.
    py::error_already_set e;
    std::string why = py::str(e.value());
    PyObject* type = e.type().ptr() == PyExc_ValueError ? PyExc_ValueError : PyExc_TypeError;
    raise(type, arg_words(arg) + " (" + type_name(h) + "): " + why);
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow) {
    // The dispatcher adds the function's name and the tensor's dtype.
    raise(PyExc_OverflowError, (arg ? arg_words(arg) + ": " : std::string()) + "the integer " +
                                   std::string(py::str(idx)) +
                                   " does not fit in int64, Lazuli's widest integer type");
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

std::optional<int64_t> opt_int_arg(py::handle h, const char* arg) {
  if (h.is_none()) return std::nullopt;
  return int_arg(h, arg);
}

bool bool_arg(py::handle h, const char* arg) {
  if (PyBool_Check(h.ptr())) return h.ptr() == Py_True;
  if (py::hasattr(h, "dtype") && py::str(h.attr("dtype")).cast<std::string>() == "bool") {
    return PyObject_IsTrue(h.ptr()) == 1;  // numpy.bool_
  }
  raise(PyExc_TypeError, arg_words(arg) + " must be bool, not " + type_name(h));
}

lz::IntList dims_arg(const py::object& dim, const char* arg) {
  if (dim.is_none()) return {};
  if (int_like(dim)) return {int_arg(dim, arg)};
  if (is_int_sequence_container(dim)) return int_sequence(dim, arg, "int or tuple of ints");
  raise(PyExc_TypeError, arg_words(arg) + " must be int or tuple of ints, not " + type_name(dim));
}

lz::IntList int_list_arg(py::handle obj, const char* arg) {
  if (is_int_sequence_container(obj)) return int_sequence(obj, arg, "a list of ints");
  raise(PyExc_TypeError, arg_words(arg) + " must be a list of ints, not " + type_name(obj));
}

lz::IntList shape_arg(const py::object& obj, const char* arg) {
  if (int_like(obj)) return {int_arg(obj, arg)};
  if (is_int_sequence_container(obj)) return int_sequence(obj, arg, "tuple of ints");
  raise(PyExc_TypeError, arg_words(arg) + " must be tuple of ints, not " + type_name(obj));
}

lz::IntList shape_args(const py::args& args, const char* arg) {
  if (args.size() == 1 && !int_like(args[0])) {
    return shape_arg(py::reinterpret_borrow<py::object>(args[0]), arg);
  }
  return int_sequence(args, arg, "tuple of ints");
}

lz::DType dtype_arg(const py::object& dt, lz::DType fallback, const char* arg) {
  if (dt.is_none()) return fallback;
  if (py::isinstance<lz::DType>(dt)) return dt.cast<lz::DType>();
  raise(PyExc_TypeError, arg_words(arg) +
                             " must be a lazuli dtype (lz.float32, lz.float64, lz.int32, lz.int64, "
                             "lz.bool), not " +
                             std::string(py::repr(dt)));
}

lz::Operand operand_arg(py::handle h, const char* arg) {
  py::detail::make_caster<lz::Operand> c;
  if (!c.load(h, true))
    raise(PyExc_TypeError, arg_words(arg) + " must be Tensor or number, not " + type_name(h));
  return py::detail::cast_op<lz::Operand>(c);
}

lz::Scalar number_arg(py::handle h, const char* arg) {
  py::detail::make_caster<lz::Operand> c;
  if (!c.load(h, true) || py::detail::cast_op<lz::Operand&>(c).is_tensor()) {
    raise(PyExc_TypeError, arg_words(arg) + " must be a number, not " + type_name(h));
  }
  return py::detail::cast_op<lz::Operand&>(c).scalar();
}

lz::Tensor tensor_arg(py::handle h, const char* arg) {
  if (!py::isinstance<lz::Tensor>(h))
    raise(PyExc_TypeError, arg_words(arg) + " must be Tensor, not " + type_name(h));
  return h.cast<lz::Tensor>();
}

std::vector<lz::Tensor> tensors_arg(py::handle h, const char* arg, bool one_tensor_ok) {
  if (py::isinstance<lz::Tensor>(h)) {
    if (one_tensor_ok) return {h.cast<lz::Tensor>()};
    raise(PyExc_TypeError, arg_words(arg) + " must be a list or tuple of Tensors, not Tensor");
  }
  if (!is_int_sequence_container(h)) {
    raise(PyExc_TypeError,
          arg_words(arg) + " must be a Tensor or a list of Tensors, not " + type_name(h));
  }
  std::vector<lz::Tensor> out;
  size_t i = 0;
  for (py::handle e : h) {
    if (!py::isinstance<lz::Tensor>(e)) {
      raise(PyExc_TypeError, arg_words(arg) +
                                 " must be a list of Tensors, but found element of type " +
                                 type_name(e) + " at pos " + std::to_string(i));
    }
    out.push_back(e.cast<lz::Tensor>());
    ++i;
  }
  return out;
}

}  // namespace lzpy
