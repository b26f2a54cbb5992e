// x[key], x[key] = value and index_put from Python. What is Python's stays here: reading the key
// (a tuple, or PyTorch's list-as-tuple rule with its warning), turning Python items into
// lz::indexing items (numbers, slices, lists and numpy arrays: their values become a host list
// index, checked at the call), the value's kinds, `x[False] = v` doing nothing, and waiting for a
// mask interruptibly. The rules themselves are the C++ core's (src/ops/subscript.cpp), with
// bare messages: PyTorch's texts, as PyTorch's Python shows them.
#include "bindings.h"

namespace lzpy {
namespace {

using lz::Tensor;
using lz::indexing::TensorIndex;

// Python classes the key's items are told apart by; set once, at import (bind_indexing).
struct PyClasses {
  py::handle numpy, ndarray, np_bool, np_integer, np_number, sequence, number;
};
const PyClasses* g_classes = nullptr;

bool is_instance(py::handle h, py::handle cls) {
  int r = PyObject_IsInstance(h.ptr(), cls.ptr());
  if (r < 0) throw py::error_already_set();
  return r == 1;
}

// type(h).__name__
std::string short_type_name(py::handle h) {
  std::string t = Py_TYPE(h.ptr())->tp_name;
  size_t dot = t.rfind('.');
  return dot == std::string::npos ? t : t.substr(dot + 1);
}

bool is_bool(py::handle h) { return PyBool_Check(h.ptr()) || is_instance(h, g_classes->np_bool); }
bool is_int(py::handle h) {
  return !is_bool(h) && (PyLong_Check(h.ptr()) || is_instance(h, g_classes->np_integer));
}

// A list, tuple or numpy array as an index: its values, converted as PyTorch converts them (an
// empty list, or a list of floats, is long), become a host list index (checked at the call).
TensorIndex host_index(py::handle k) {
  py::object arr = g_classes->numpy.attr("asarray")(k);
  py::object dtype = arr.attr("dtype");
  std::string kind = py::str(dtype.attr("kind"));
  if (arr.attr("size").cast<int64_t>() == 0 || (PyList_Check(k.ptr()) && kind == "f")) {
    arr = arr.attr("astype")(g_classes->numpy.attr("int64"));
    kind = "i";
  }
  if (kind != "i" && kind != "u" && kind != "b") {
    throw py::index_error("tensors used as indices must be long, int or bool tensors, got " +
                          std::string(py::str(dtype)));
  }
  return TensorIndex::list(from_numpy(arr.attr("copy")().cast<py::array>()));  // the tensor owns its values
}

TensorIndex item(py::handle k) {
  if (PyLong_Check(k.ptr()) && !PyBool_Check(k.ptr())) return TensorIndex(int_arg(k, "index"));
  if (k.is_none()) return TensorIndex(lz::indexing::None);
  if (k.ptr() == Py_Ellipsis) return TensorIndex(lz::indexing::Ellipsis);
  if (py::isinstance<Tensor>(k)) return TensorIndex(k.cast<Tensor>());
  if (is_bool(k)) return TensorIndex(PyObject_IsTrue(k.ptr()) == 1);
  if (is_int(k)) return TensorIndex(int_arg(k, "index"));  // numpy integers
  if (PySlice_Check(k.ptr())) {
    auto* s = reinterpret_cast<PySliceObject*>(k.ptr());
    py::handle step(s->step);
    return TensorIndex(lz::indexing::Slice(opt_int_arg(s->start, "start"), opt_int_arg(s->stop, "stop"),
                                           step.is_none() ? 1 : int_arg(step, "step")));
  }
  if (PyList_Check(k.ptr()) || PyTuple_Check(k.ptr()) || is_instance(k, g_classes->ndarray)) {
    return host_index(k);
  }
  throw py::index_error("only integers, slices, None, '...', bools, integer or bool tensors and "
                        "lists are valid indices (got " + short_type_name(k) + ")");
}

// PyTorch's reading of a list key (treatSequenceAsTuple, torch/csrc/autograd/
// python_variable_indexing.cpp): a list shorter than 32 that holds a sequence, a slice, a tensor,
// None or ... is a tuple of indices, so x[[0, [1, 2]]] is x[0, [1, 2]]; any other list is one
// index. PyTorch warns that it will read such lists as one index some day; so does Lazuli.
bool reads_as_tuple(py::handle key) {
  if (!PyList_Check(key.ptr()) || PyList_GET_SIZE(key.ptr()) >= 32) return false;
  bool tuple_like = false;
  for (py::handle k : py::reinterpret_borrow<py::list>(key)) {
    if (k.is_none() || k.ptr() == Py_Ellipsis || py::isinstance<Tensor>(k) || PySlice_Check(k.ptr()) ||
        is_instance(k, g_classes->ndarray) || is_instance(k, g_classes->sequence)) {
      tuple_like = true;
      break;
    }
  }
  if (tuple_like &&
      PyErr_WarnEx(PyExc_UserWarning,
                   "Using a non-tuple sequence for multidimensional indexing is deprecated (as in "
                   "PyTorch); use x[tuple(seq)] instead of x[seq]: a later version will read "
                   "x[seq] as x[lz.tensor(seq)]", 1) < 0) {
    throw py::error_already_set();  // warnings turned into errors
  }
  return tuple_like;
}

std::vector<TensorIndex> key_items(py::handle key) {
  std::vector<TensorIndex> items;
  if (PyTuple_Check(key.ptr()) || reads_as_tuple(key)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(key);
    items.reserve(seq.size());
    for (py::handle k : seq) items.push_back(item(k));
  } else {
    items.push_back(item(key));
  }
  return items;
}

const lz::indexing::KeyContext& python_context() {
  // Bare messages (PyTorch's texts); a mask is read waiting interruptibly, without the GIL.
  static const lz::indexing::KeyContext ctx{nullptr, [](const Tensor& m) { return nonzero_flat(m); }};
  return ctx;
}

bool is_number(py::handle v) {
  if (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())) return true;  // bool is an int
  if (is_instance(v, g_classes->number) || is_instance(v, g_classes->np_bool) ||
      is_instance(v, g_classes->np_number)) {
    return true;
  }
  return is_instance(v, g_classes->ndarray) && v.attr("ndim").cast<int>() == 0;
}

void setitem(const Tensor& x, py::handle key, py::handle value) {
  if (key.ptr() == Py_False) return;  // as PyTorch: nothing is selected, the value is not looked at
  lz::ir::UserOpScope scope("x[index] = value");
  Tensor v;
  if (py::isinstance<Tensor>(value)) {
    v = value.cast<Tensor>();
  } else if (is_number(value)) {
    v = lz::scalar_tensor(value.cast<lz::Operand>().scalar(), x.dtype());
  } else {
    // As PyTorch: a list or array is not taken as a value (lz.tensor(value) is); a 0-d array,
    // which PyTorch refuses too, stays accepted as the number it holds.
    throw py::type_error("x[index] = value: can't assign a " + short_type_name(value) +
                         " to a lazuli tensor; assign a tensor (lz.tensor(value)) or a number");
  }
  lz::indexing::put(x, key_items(key), v, /*accumulate=*/false, python_context());
}

// target[indices] = values (or += with accumulate), in place, with PyTorch's index_put rules:
// indices is a tuple of index tensors (None: the whole dim, as aten.index_put takes it;
// torch.Tensor.index_put_ refuses it), broadcast together.
void index_put_into(const Tensor& target, py::handle indices, py::handle values,
                    py::handle accumulate, const std::string& fn) {
  if (!PyTuple_Check(indices.ptr()) && !PyList_Check(indices.ptr())) {
    throw py::type_error(fn + "(): argument 'indices' must be tuple of Tensors, not " +
                         short_type_name(indices));
  }
  std::vector<TensorIndex> key;
  size_t i = 0;
  for (py::handle t : py::reinterpret_borrow<py::sequence>(indices)) {
    if (t.is_none()) {
      key.emplace_back(lz::indexing::Slice());
    } else if (py::isinstance<Tensor>(t)) {
      key.emplace_back(t.cast<Tensor>());
    } else {
      throw py::type_error(fn + "(): argument 'indices' must be tuple of Tensors, but element " +
                           std::to_string(i) + " is " + short_type_name(t));
    }
    ++i;
  }
  if (!py::isinstance<Tensor>(values)) {
    throw py::type_error(fn + "(): argument 'values' must be Tensor, not " + short_type_name(values));
  }
  if (static_cast<int64_t>(key.size()) > target.dim()) {
    throw py::index_error(fn + "(): too many indices for tensor of dimension " +
                          std::to_string(target.dim()) + " (got " + std::to_string(key.size()) + ")");
  }
  int acc = PyObject_IsTrue(accumulate.ptr());
  if (acc < 0) throw py::error_already_set();
  lz::indexing::put(target, key, values.cast<Tensor>(), acc == 1, python_context());
}

}  // namespace

void bind_indexing(py::module_& m, py::class_<Tensor>& cls) {
  py::module_ np = py::module_::import("numpy");
  py::module_ abc = py::module_::import("collections.abc");
  py::module_ numbers = py::module_::import("numbers");
  auto keep = [](py::object o) { return o.release(); };  // a reference for the process's life
  g_classes = new PyClasses{keep(np), keep(np.attr("ndarray")), keep(np.attr("bool_")),
                            keep(np.attr("integer")), keep(np.attr("number")),
                            keep(abc.attr("Sequence")), keep(numbers.attr("Number"))};

  cls.def("__getitem__", [](py::object self, py::handle key) -> py::object {
    const Tensor& x = self.cast<const Tensor&>();
    lz::ir::UserOpScope scope("x[index]");  // a bad index found when the program runs names it
    Tensor r = lz::indexing::get(x, key_items(key), python_context());
    if (r.impl() == x.impl()) return self;  // x[()] is x, as before
    return py::cast(std::move(r));
  });
  cls.def("__setitem__", &setitem);
  cls.def(
      "index_put_",
      [](py::object self, py::handle indices, py::handle values, py::handle accumulate) {
        lz::ir::UserOpScope scope("index_put_");
        index_put_into(self.cast<const Tensor&>(), indices, values, accumulate, "index_put_");
        return self;
      },
      "self[indices] = values in place, or self[indices] += values with accumulate=True, where an "
      "index repeated adds every one of its values (torch.Tensor.index_put_). indices: a tuple of "
      "index tensors (integer or bool); None for a whole dim is accepted too.",
      py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  m.def(
      "index_put_",
      [](py::object self, py::handle indices, py::handle values, py::handle accumulate) {
        lz::ir::UserOpScope scope("index_put_");
        if (!py::isinstance<Tensor>(self)) {
          throw py::type_error("index_put_(): argument 'input' must be Tensor, not " +
                               short_type_name(self));
        }
        index_put_into(self.cast<const Tensor&>(), indices, values, accumulate, "index_put_");
        return self;
      },
      py::arg("input"), py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  // The out-of-place index_put_: a copy of the input with the values put (or added) there.
  auto index_put = [](py::handle self, py::handle indices, py::handle values,
                      py::handle accumulate) {
    lz::ir::UserOpScope scope("index_put");
    if (!py::isinstance<Tensor>(self)) {
      throw py::type_error("index_put(): argument 'input' must be Tensor, not " + short_type_name(self));
    }
    Tensor out = lz::contiguous(self.cast<Tensor>());
    index_put_into(out, indices, values, accumulate, "index_put");
    return out;
  };
  cls.def("index_put", index_put, py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  m.def("index_put", index_put, py::arg("input"), py::arg("indices"), py::arg("values"),
        py::arg("accumulate") = false);
}

}  // namespace lzpy
