// What a front end bringing its own tensors needs (lazuli.torch, DESIGN.md 5b): tensors over
// memory someone else owns, views of Lazuli buffers for the other side, counters bumped from
// Python, and programs compiled from a recording without running it (the warm-up route), then
// replayed with new inputs (exec/warm_program.h), with no node made and nothing hashed.
#include <Python.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "bindings.h"
#include "backend/backend.h"
#include "core/metrics.h"
#include "exec/warm_program.h"
#include "ops/frontend.h"
#include "tensor/lazy_tensor.h"

namespace lzpy {
namespace {

using lz::Tensor;
using lz::internal::TensorImpl;
using lz::internal::TensorImplPtr;

// A Storage over external memory may die on the executor thread, which must not take the GIL
// (a Python thread holding it may be waiting for that thread). Its Python owner is then released
// later on a Python thread, through Py_AddPendingCall.
std::mutex g_release_mu;  // guards g_release
std::deque<PyObject*> g_release;

int drain_releases(void*) {
  std::deque<PyObject*> todo;
  {
    std::lock_guard<std::mutex> l(g_release_mu);
    todo.swap(g_release);
  }
  for (PyObject* o : todo) Py_DECREF(o);
  return 0;
}

void release_owner(PyObject* o) {
  if (!Py_IsInitialized()) return;  // at exit: the interpreter is gone, nothing to release
  if (PyGILState_Check()) {
    Py_DECREF(o);
    return;
  }
  {
    std::lock_guard<std::mutex> l(g_release_mu);
    g_release.push_back(o);
  }
  Py_AddPendingCall(drain_releases, nullptr);  // a full queue is fine: the next drain takes it
}


}  // namespace

std::shared_ptr<void> python_owner(const py::object& owner) {
  PyObject* p = owner.inc_ref().ptr();
  return std::shared_ptr<void>(p, [](void* q) { release_owner(static_cast<PyObject*>(q)); });
}

namespace {

lz::DType dtype_of_code(int code) {
  switch (code) {
    case static_cast<int>(lz::DType::Bool): return lz::DType::Bool;
    case static_cast<int>(lz::DType::Int32): return lz::DType::Int32;
    case static_cast<int>(lz::DType::Int64): return lz::DType::Int64;
    case static_cast<int>(lz::DType::Float32): return lz::DType::Float32;
    case static_cast<int>(lz::DType::Float64): return lz::DType::Float64;
    case static_cast<int>(lz::DType::Float16): return lz::DType::Float16;
    case static_cast<int>(lz::DType::BFloat16): return lz::DType::BFloat16;
  }
  throw py::value_error("unknown lazuli dtype code " + std::to_string(code));
}

// A tensor in the device-data state over `nbytes` at `address`, owned by `owner` (kept alive).
// `content_id`: an id lent for these bytes (lz::Storage, "lent ids"), or 0.
Tensor from_memory(uintptr_t address, lz::DType dtype, const std::vector<int64_t>& shape,
                   const py::object& owner, uint64_t content_id) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw py::value_error("_from_memory: negative dimension");
    n *= d;
  }
  size_t nbytes = static_cast<size_t>(n) * lz::dtype_size(dtype);
  if (address % lz::dtype_size(dtype) != 0) {
    throw py::value_error("_from_memory: address not aligned for " + std::string(lz::dtype_name(dtype)));
  }
  if (!address && nbytes) throw py::value_error("_from_memory: null address");
  auto st = std::make_shared<lz::Storage>(reinterpret_cast<void*>(address), nbytes,
                                          python_owner(owner), lz::DeviceId::host(), content_id);
  auto buf = std::make_shared<lz::DeviceBuffer>(dtype, lz::Shape(shape.begin(), shape.end()), std::move(st));
  TensorImplPtr impl = TensorImpl::from_buffer(std::move(buf));
  return Tensor(std::move(impl));
}

py::dtype numpy_dtype(lz::DType t) {
  switch (t) {
    case lz::DType::Bool: return py::dtype::of<bool>();
    case lz::DType::Int32: return py::dtype::of<int32_t>();
    case lz::DType::Int64: return py::dtype::of<int64_t>();
    case lz::DType::Float32: return py::dtype::of<float>();
    case lz::DType::Float64: return py::dtype::of<double>();
    case lz::DType::Float16: return py::dtype("float16");
    case lz::DType::BFloat16: break;
  }
  throw py::type_error("numpy has no " + std::string(lz::dtype_name(t)) +
                       "; cast to float32 first");
}

// The tensor's value as a writable numpy array over its Lazuli buffer (a value read when it is
// not computed yet). The array holds the buffer, so the buffer is never donated while it lives.
py::array numpy_view(const Tensor& t) {
  lz::BufferPtr b;
  resume_after_interrupt([&] { b = lz::frontend::schedule_read(t, lz::CutReason::ValueRead); });
  wait_interruptibly(b->producer());
  lz::frontend::finish_read(b);
  const std::shared_ptr<lz::Storage>& st = b->wait();
  lz::active_backend().check_device(*st, "numpy view");  // a host array over the memory itself
  st->expose();  // the array may be written: nothing derived from these bytes may be kept
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new lz::BufferPtr(b);
  py::capsule base(keep, [](void* p) { delete static_cast<lz::BufferPtr*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, st->data(), base);
}

// The address of a device-data tensor's memory (waiting for its producer), or 0 in other states.
uintptr_t buffer_address(const Tensor& t) {
  lz::BufferPtr b = t.impl()->buffer();
  if (!b) return 0;
  py::gil_scoped_release r;
  const std::shared_ptr<lz::Storage>& st = b->wait();
  st->expose();  // whoever asks may write there (a torch tensor over the memory)
  return reinterpret_cast<uintptr_t>(st->data());
}

}  // namespace

void bind_bridge(py::module_& m) {
  m.def("_from_memory", [](uintptr_t address, int dtype, const std::vector<int64_t>& shape,
                           py::object owner, uint64_t content_id) {
    return from_memory(address, dtype_of_code(dtype), shape, owner, content_id);
  }, py::arg("address"), py::arg("dtype"), py::arg("shape"), py::arg("owner"),
     py::arg("content_id") = 0,
     "A device-data tensor over memory `owner` keeps alive (C-contiguous, aligned): no copy. "
     "`content_id`: an id from _new_content_id() naming these bytes until _retire_content_id().");
  m.def("_new_content_id", &lz::Storage::new_content_id,
        "A content id to lend with external memory whose every write the caller sees.");
  m.def("_retire_content_id", &lz::Storage::retire_content_id, py::arg("id"),
        "The bytes a lent content id named may change: drop what was derived from them.");
  m.def("_numpy_view", &numpy_view, py::arg("tensor"),
        "A writable numpy array over the tensor's Lazuli buffer (no copy); it keeps the buffer.");
  m.def("_buffer_address", &buffer_address, py::arg("tensor"));
  m.def("_bump_counter", [](const std::string& name, int64_t n) { lz::get_counter(name)->add(n); },
        py::arg("name"), py::arg("n") = 1);
  // Compiling and running release the GIL: a compile takes long, and a run waits for the
  // executor lock, which a thread holding it may need the GIL to give back (frames for logs).
  py::class_<lz::WarmProgram>(m, "_WarmProgram")
      .def(py::init([](const std::vector<Tensor>& inputs, std::string name, const std::string& reason) {
             return std::make_unique<lz::WarmProgram>(inputs, std::move(name), reason_from_id(reason));
           }),
           py::arg("inputs"), py::arg("name"), py::arg("reason") = "capture-warmup")
      .def("compile", &lz::WarmProgram::compile, py::arg("outputs"),
           py::arg("donate") = std::vector<std::pair<int, int>>{},
           py::call_guard<py::gil_scoped_release>())
      .def("run", &lz::WarmProgram::run, py::arg("inputs"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("hash", [](const lz::WarmProgram& p) { return p.hash().hex(); })
      .def_property_readonly("num_constants", &lz::WarmProgram::num_constants);
}

}  // namespace lzpy
