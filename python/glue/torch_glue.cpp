// _torch_glue.so: the table of torch functions the bindings use to read torch tensors and make
// them without Python (python/src/torch_glue.h says why it is a module of its own). A plain
// CPython module, no pybind11: its one attribute, _API, is a capsule over the table, which
// lazuli.torch hands to _C._set_torch_glue when it is imported.
#include "torch_glue.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <numeric>

#include "torch_dtype.h"

namespace {

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
    const std::optional<lz::DType> dtype = lztorch::lazuli_dtype(t.scalar_type());
    out->lazuli_dtype = dtype ? static_cast<int>(*dtype) : -1;
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
  const c10::ScalarType st = lztorch::torch_dtype(static_cast<lz::DType>(dtype));
  if (st == c10::ScalarType::Undefined) {
    release(ctx);
    PyErr_Format(PyExc_ValueError, "lazuli: no torch dtype for lazuli dtype code %d", dtype);
    return nullptr;
  }
  try {
    // The storage's deleter releases ctx once from_blob has made it. from_blob's only check
    // before that, of negative sizes, cannot fail for a Lazuli shape.
    at::Tensor t = at::from_blob(
        data, at::IntArrayRef(sizes, static_cast<size_t>(ndim)),
        [release, ctx](void*) { release(ctx); }, at::TensorOptions().dtype(st).device(c10::kCPU));
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
