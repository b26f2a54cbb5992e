// What a front end bringing its own tensors needs (lazuli.torch, DESIGN.md 5b): tensors over
// memory someone else owns, views of Lazuli buffers for the other side, counters bumped from
// Python, and programs compiled from a recording without running it (the warm-up route), then
// replayed with new inputs by schedule_program, with no node made and nothing hashed.
#include <Python.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "bindings.h"
#include "backend/backend.h"
#include "core/call_site.h"
#include "core/config.h"
#include "core/metrics.h"
#include "exec/cut_record.h"
#include "exec/debug_log.h"
#include "exec/graph_executor.h"
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

// One graph recorded on stand-in inputs, compiled without running (warm-up), then run on new
// inputs of the same dtypes and shapes: its parameters are the inputs' buffers and the constants
// the recording uploaded. Made before the recording (it notes the stand-ins' buffers, which a
// stand-in updated in place no longer holds), compiled after it. It holds the executable itself,
// so a compile-cache eviction never affects it. Donated pairs (input, output) compute the output
// into the input's own memory (an in-place update of the caller's tensor: no copy back), as a step
// barrier's donation does; a failed run leaves such an input as it was (backend.h).
class WarmProgram {
 public:
  WarmProgram(const std::vector<Tensor>& inputs, std::string name) : name_(std::move(name)) {
    for (const Tensor& t : inputs) {
      lz::BufferPtr b = t.impl()->buffer();
      if (!b) throw py::value_error("_WarmProgram: every input must hold device data");
      input_buffers_.push_back(std::move(b));
      input_types_.emplace_back(t.dtype(), t.shape());
    }
  }

  void compile(const std::vector<Tensor>& outputs,
               const std::vector<std::pair<int, int>>& donate = {}) {
    if (cap_.exe) throw py::value_error("_WarmProgram: already compiled");
    std::vector<TensorImplPtr> roots;
    for (const Tensor& t : outputs) roots.push_back(t.impl());
    lz::SyncConfig cfg;
    cfg.sync_data = false;
    cfg.compile_only = true;
    cfg.reason = lz::CutReason::CaptureWarmup;
    cfg.capture = &cap_;
    {
      py::gil_scoped_release r;
      lz::sync_tensors_graph(roots, cfg);
    }
    if (!cap_.exe) throw py::value_error("_WarmProgram: the outputs have nothing pending to compile");
    for (const Tensor& t : outputs) {
      int k = -1;
      for (size_t r = 0; r < cap_.roots.size(); ++r) {
        if (cap_.roots[r] == t.impl()) k = static_cast<int>(r);
      }
      if (k < 0) throw py::value_error("_WarmProgram: an output is not pending IR (pass it aside)");
      out_root_.push_back(k);
    }
    for (const lz::BufferPtr& p : cap_.params) {
      int source = -1;
      for (size_t i = 0; i < input_buffers_.size(); ++i) {
        if (input_buffers_[i] == p) source = static_cast<int>(i);
      }
      param_input_.push_back(source);  // -1: a constant of the recording, kept in cap_.params
    }
    for (auto [input, output] : donate) {
      if (output < 0 || output >= static_cast<int>(out_root_.size())) {
        throw py::value_error("_WarmProgram: donation to output " + std::to_string(output) +
                              " out of range");
      }
      const int root = out_root_[output];
      int param = -1;
      for (size_t k = 0; k < param_input_.size(); ++k) {
        if (param_input_[k] == input) param = static_cast<int>(k);
      }
      // An input the program does not read has no parameter: nothing to reuse. Types must match.
      if (param < 0 || input >= static_cast<int>(input_types_.size()) ||
          cap_.root_types[root] != input_types_[input]) {
        continue;
      }
      donations_.emplace_back(param, root);
    }
    // The stand-ins' buffers are not kept: each run brings its own (a torch input's memory).
    for (size_t k = 0; k < cap_.params.size(); ++k) {
      if (param_input_[k] >= 0) cap_.params[k].reset();
    }
    input_buffers_.clear();
    cap_.roots.clear();  // the recording's tensors may go now
  }

  std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
    if (!cap_.exe) throw py::value_error("_WarmProgram: not compiled");
    if (inputs.size() != input_types_.size()) {
      throw py::value_error(name_ + ": expected " + std::to_string(input_types_.size()) + " inputs");
    }
    std::vector<lz::BufferPtr> params(cap_.params.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].dtype() != input_types_[i].first || inputs[i].shape() != input_types_[i].second) {
        throw py::value_error(name_ + ": input " + std::to_string(i) + " is " +
                              std::string(lz::dtype_name(inputs[i].dtype())) +
                              lz::shape_str(inputs[i].shape()) + ", the program was compiled for " +
                              std::string(lz::dtype_name(input_types_[i].first)) +
                              lz::shape_str(input_types_[i].second));
      }
    }
    for (size_t k = 0; k < params.size(); ++k) {
      int i = param_input_[k];
      if (i < 0) {
        params[k] = cap_.params[k];
        continue;
      }
      params[k] = inputs[i].impl()->buffer();
      if (!params[k]) throw py::value_error(name_ + ": input " + std::to_string(i) + " is not device data");
    }
    auto exec = std::make_shared<lz::Execution>();
    std::vector<lz::BufferPtr> outs;
    outs.reserve(cap_.root_types.size());
    for (const auto& [dt, shape] : cap_.root_types) outs.push_back(std::make_shared<lz::DeviceBuffer>(dt, shape, exec));
    {
      py::gil_scoped_release r;
      auto lock = lz::lock_executor();
      lz::schedule_program(cap_.exe, cap_.hash, params, outs, donations_, exec, {}, cap_.origins);
    }
    LZ_COUNTER("WarmProgramRun", 1);
    lz::CutRecord record;
    record.reason = lz::CutReason::CaptureReplay;
    record.hash = cap_.hash;
    record.inputs = params.size();
    record.outputs = outs.size();
    record.name = name_;
    if (lz::config().debug > 0) {  // a replay never compiles: only the execution log shows it
      record.frames = lz::user_frames(lz::config().debug_max_frame);
      lz::report_execution(record);
    }
    lz::cut_log().add(std::move(record));
    std::vector<Tensor> fresh;
    fresh.reserve(outs.size());
    for (const lz::BufferPtr& b : outs) fresh.emplace_back(TensorImpl::from_buffer(b));
    std::vector<Tensor> result;
    result.reserve(out_root_.size());
    for (int k : out_root_) result.push_back(fresh[k]);
    return result;
  }

  std::string hash() const { return cap_.hash.hex(); }
  size_t num_constants() const {
    size_t n = 0;
    for (int i : param_input_) n += i < 0;
    return n;
  }

 private:
  std::string name_;
  lz::ProgramCapture cap_;
  std::vector<int> out_root_;     // output -> root of the program
  std::vector<int> param_input_;  // parameter -> input index, -1 for a constant
  std::vector<std::pair<lz::DType, lz::Shape>> input_types_;
  std::vector<lz::BufferPtr> input_buffers_;  // until compiled
  std::vector<std::pair<int, int>> donations_;  // (parameter, root): computed into the input
};

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
  py::class_<WarmProgram>(m, "_WarmProgram")
      .def(py::init<const std::vector<Tensor>&, std::string>(), py::arg("inputs"), py::arg("name"))
      .def("compile", &WarmProgram::compile, py::arg("outputs"),
           py::arg("donate") = std::vector<std::pair<int, int>>{})
      .def("run", &WarmProgram::run, py::arg("inputs"))
      .def_property_readonly("hash", &WarmProgram::hash)
      .def_property_readonly("num_constants", &WarmProgram::num_constants);
}

}  // namespace lzpy
