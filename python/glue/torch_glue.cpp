// _torch_glue.so: the table of torch functions the bindings use to read torch tensors and make
// them without Python (python/src/torch_glue.h says why it is a module of its own). A plain
// CPython module, no pybind11: its one attribute, _API, is a capsule over the table, which
// lazuli.torch hands to _C._set_torch_glue when it is imported.
#include "torch_glue.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <numeric>

#include "lazuli/dtype.h"

namespace {

int lazuli_dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return static_cast<int>(lz::DType::Bool);
    case c10::ScalarType::Int:
      return static_cast<int>(lz::DType::Int32);
    case c10::ScalarType::Long:
      return static_cast<int>(lz::DType::Int64);
    case c10::ScalarType::Float:
      return static_cast<int>(lz::DType::Float32);
    case c10::ScalarType::Double:
      return static_cast<int>(lz::DType::Float64);
    case c10::ScalarType::Half:
      return static_cast<int>(lz::DType::Float16);
    case c10::ScalarType::BFloat16:
      return static_cast<int>(lz::DType::BFloat16);
    default:
      return -1;
  }
}

std::optional<c10::ScalarType> torch_dtype_of(int code) {
  switch (static_cast<lz::DType>(code)) {
    case lz::DType::Bool:
      return c10::ScalarType::Bool;
    case lz::DType::Int32:
      return c10::ScalarType::Int;
    case lz::DType::Int64:
      return c10::ScalarType::Long;
    case lz::DType::Float32:
      return c10::ScalarType::Float;
    case lz::DType::Float64:
      return c10::ScalarType::Double;
    case lz::DType::Float16:
      return c10::ScalarType::Half;
    case lz::DType::BFloat16:
      return c10::ScalarType::BFloat16;
  }
  return std::nullopt;
}

int tensor_facts(PyObject* o, LazuliTensorFacts* out) {
  if (!THPVariable_Check(o)) return 0;
  try {
    const at::Tensor& t = THPVariable_Unpack(o);
    if (!t.defined() || t.layout() != c10::kStrided || !t.device().is_cpu() || !t.has_storage() ||
        t.is_conj() || t.is_neg() || t.dim() > LAZULI_TORCH_GLUE_MAX_DIMS) {
      return -1;
    }
    const int64_t n = t.dim();
    out->data = t.data_ptr();
    out->ndim = n;
    std::copy(t.sizes().begin(), t.sizes().end(), out->sizes);
    out->scalar_type = static_cast<int>(t.scalar_type());
    out->lazuli_dtype = lazuli_dtype_of(t.scalar_type());
    if (t.is_contiguous()) {
      out->layout = LAZULI_LAYOUT_CONTIGUOUS;
      return 1;
    }
    // _boundary.dense_order, exactly: the dims by falling stride then falling size (a stable
    // sort, as Python's), and whether the tensor read in that order is contiguous.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (t.stride(a) != t.stride(b)) return t.stride(a) > t.stride(b);
      return t.size(a) > t.size(b);
    });
    if (t.permute(order).is_contiguous()) {
      out->layout = LAZULI_LAYOUT_PERMUTED;
      std::copy(order.begin(), order.end(), out->perm);
    } else {
      out->layout = LAZULI_LAYOUT_OTHER;
    }
    return 1;
  } catch (const std::exception&) {
    return -1;  // a tensor without memory to read (a meta or fake tensor): the Python route
  }
}

PyObject* tensor_over(void* data, int dtype, int64_t ndim, const int64_t* sizes,
                      void (*release)(void*), void* ctx) {
  std::optional<c10::ScalarType> st = torch_dtype_of(dtype);
  if (!st) {
    release(ctx);
    PyErr_Format(PyExc_ValueError, "lazuli: no torch dtype for lazuli dtype code %d", dtype);
    return nullptr;
  }
  try {
    // The storage's deleter releases ctx: from here on torch owns it, also if this throws.
    at::Tensor t = at::from_blob(
        data, at::IntArrayRef(sizes, static_cast<size_t>(ndim)),
        [release, ctx](void*) { release(ctx); }, at::TensorOptions().dtype(*st).device(c10::kCPU));
    return THPVariable_Wrap(std::move(t));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* contiguous(PyObject* o) {
  if (!THPVariable_Check(o)) {
    PyErr_SetString(PyExc_TypeError, "lazuli: contiguous() of an object that is not a tensor");
    return nullptr;
  }
  try {
    return THPVariable_Wrap(THPVariable_Unpack(o).contiguous());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

LazuliTorchGlue g_glue = {LAZULI_TORCH_GLUE_VERSION, &tensor_facts, &tensor_over, &contiguous};

PyModuleDef g_module = {PyModuleDef_HEAD_INIT,
                        "_torch_glue",
                        "Torch functions for lazuli._C, in a capsule (_API).",
                        -1,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_glue() {
  PyObject* m = PyModule_Create(&g_module);
  if (m == nullptr) return nullptr;
  PyObject* api = PyCapsule_New(&g_glue, "lazuli._torch_glue._API", nullptr);
  if (api == nullptr || PyModule_AddObject(m, "_API", api) != 0) {
    Py_XDECREF(api);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
