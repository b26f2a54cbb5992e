// What a front end bringing its own tensors needs (lazuli.torch, DESIGN.md 5b): tensors over
// memory someone else owns, views of Lazuli buffers for the other side, counters bumped from
// Python, and programs compiled from a recording without running it (the warm-up route), then
// replayed with new inputs (exec/warm_program.h), with no node made and nothing hashed.
#include <Python.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "bindings.h"
#include "torch_glue.h"

namespace lzpy {
namespace {

using lz::Tensor;

// A Storage over external memory may die on the executor thread, which must not take the GIL
// (a Python thread holding it may be waiting for that thread). Its Python owner is then released
// later on a Python thread, through Py_AddPendingCall. So it is when it dies on a Python thread
// that runs a program itself (a short one it waits for: DeviceExecutor::run_here_if_next), even
// one holding the GIL: a finalizer run there that waited for the executor would wait for itself.
// One pending call drains them all: a replay's program releases every input's owner at once
// (66 in one partition of a small transformer), and a pending call per owner cost more than the
// rest of the release.
std::mutex g_release_mu;  // guards g_release and g_drain_pending
std::deque<PyObject*> g_release;
bool g_drain_pending = false;  // a drain_releases call is queued and has not started

int drain_releases(void*) {
  std::deque<PyObject*> todo;
  {
    std::lock_guard<std::mutex> l(g_release_mu);
    g_drain_pending = false;
    todo.swap(g_release);
  }
  for (PyObject* o : todo) Py_DECREF(o);
  return 0;
}

void release_owner(PyObject* o) {
  if (!Py_IsInitialized()) return;  // at exit: the interpreter is gone, nothing to release
  if (PyGILState_Check() && !fe::running_program_here()) {
    Py_DECREF(o);
    return;
  }
  std::lock_guard<std::mutex> l(g_release_mu);
  g_release.push_back(o);
  if (g_drain_pending) return;  // the queued drain takes this one too
  // A full queue (-1) leaves the flag down: the next release tries again.
  g_drain_pending = Py_AddPendingCall(drain_releases, nullptr) == 0;
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

// The tensor's value as a writable numpy array over its Lazuli buffer (a value read when it is
// not computed yet). The array holds the buffer, so the buffer is never donated while it lives.
// raw_bf16: a bfloat16 tensor's view is a uint16 array over the same bits (numpy has no
// bfloat16; torch views it back with .view(torch.bfloat16)); otherwise it is a TypeError.
py::array numpy_view_of(const Tensor& t, const fe::PendingRead& r, bool raw_bf16) {
  py::dtype dt = raw_bf16 && t.dtype() == lz::DType::BFloat16 ? py::dtype::of<uint16_t>()
                                                              : numpy_dtype(t.dtype());
  void* data = r.expose_host_memory("numpy view");
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  auto* keep = new std::shared_ptr<const void>(r.keep_alive());
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  return py::array(dt, shape, data, base);
}

py::array numpy_view(const Tensor& t, bool raw_bf16) {
  return numpy_view_of(t, read_interruptibly(t, lz::CutReason::ValueRead), raw_bf16);
}

// One run of `p` over the memory of torch tensors (the torch.compile bridge's replay, once per
// partition call): each input is objects[i]'s memory, read as the dtype and shape the program was
// compiled for, with no Lazuli tensor made for it (WarmProgram::run_external). What this reads
// of each object is its address, element count and contiguity (object.data_ptr(), .nbytes,
// .is_contiguous()), in C++ rather than a Python loop: the bridge's own cost per input, which is
// most of a small model's step. The caller chose the program by the tensors' dtypes, shapes and
// layouts (the bridge's signature); an object whose byte count or layout differs from the input's
// is a ValueError, never a read outside its memory.
std::vector<Tensor> run_over(fe::WarmProgram& p, const py::list& objects,
                             const std::vector<uint64_t>& content_ids) {
  const std::vector<std::pair<lz::DType, lz::Shape>>& types = p.input_types();
  if (objects.size() != types.size() ||
      (!content_ids.empty() && content_ids.size() != types.size())) {
    throw lz::ValueError("run_over: " + std::to_string(objects.size()) + " tensors and " +
                         std::to_string(content_ids.size()) + " content ids for a program of " +
                         std::to_string(types.size()) + " inputs");
  }
  // Interned once, never freed (they outlive the interpreter's teardown): a replay reads three
  // attributes of every input on every call.
  static const py::handle nbytes_name = PyUnicode_InternFromString("nbytes");
  static const py::handle contiguous_name = PyUnicode_InternFromString("is_contiguous");
  static const py::handle data_ptr_name = PyUnicode_InternFromString("data_ptr");
  // One owner holds every input's tensor (a tuple of them, which the caller cannot change) until
  // the run has read them; a donated input, whose memory lives on as an output's, has its own.
  py::tuple held = py::reinterpret_steal<py::tuple>(PySequence_Tuple(objects.ptr()));
  if (!held) throw py::error_already_set();
  std::shared_ptr<void> shared_owner = python_owner(held);
  std::vector<lz::ExternalInput> inputs(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    py::handle o = PyTuple_GET_ITEM(held.ptr(), static_cast<py::ssize_t>(i));
    const auto& [dtype, shape] = types[i];
    const size_t want = static_cast<size_t>(lz::numel(shape)) * lz::dtype_size(dtype);
    if (o.attr(nbytes_name).cast<size_t>() != want || !o.attr(contiguous_name)().cast<bool>()) {
      throw lz::ValueError("run_over: tensor " + std::to_string(i) +
                           " is not a contiguous block of " + std::to_string(want) +
                           " bytes, as the program's input " + std::string(lz::dtype_name(dtype)) +
                           lz::shape_str(shape) + " is");
    }
    lz::ExternalInput& in = inputs[i];
    in.data = reinterpret_cast<void*>(o.attr(data_ptr_name)().cast<uintptr_t>());
    in.owner =
        p.donates_input(i) ? python_owner(py::reinterpret_borrow<py::object>(o)) : shared_owner;
    in.content_id = content_ids.empty() ? 0 : content_ids[i];
  }
  py::gil_scoped_release release;
  return p.run_external(inputs);
}

// Numpy arrays over the tensors' buffers, as _numpy_view makes each: one call for a partition's
// outputs, which one program computes, so the first read waits for them all.
std::vector<py::array> numpy_views(const std::vector<Tensor>& ts, bool raw_bf16) {
  std::vector<fe::PendingRead> reads = read_all_interruptibly(ts, lz::CutReason::ValueRead);
  std::vector<py::array> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) out.push_back(numpy_view_of(ts[i], reads[i], raw_bf16));
  return out;
}

// The torch glue's table (torch_glue.h), once lazuli.torch has handed it over; until then the
// replay below is refused and the bridge reads torch tensors through Python.
const LazuliTorchGlue* g_glue = nullptr;

void set_torch_glue(const py::capsule& api) {
  auto* glue = static_cast<const LazuliTorchGlue*>(
      PyCapsule_GetPointer(api.ptr(), "lazuli._torch_glue._API"));
  if (glue == nullptr) throw py::error_already_set();
  if (glue->version != LAZULI_TORCH_GLUE_VERSION) {
    throw lz::ValueError("_set_torch_glue: the glue is version " + std::to_string(glue->version) +
                         ", this build of _C reads version " +
                         std::to_string(LAZULI_TORCH_GLUE_VERSION) + " (rebuild both)");
  }
  g_glue = glue;
}

template <typename T>
void put(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// The bridge's input signature of a call, exactly (python/lazuli/torch/_bridge.py _signature):
// per tensor its dtype, sizes and layout (layout_of); per int, float, bool or None its type and
// value. Bytes, built without a Python object per argument; None where the glue is not loaded or
// an argument is anything else, and then the bridge builds its tuple key (bytes never equal one).
py::object torch_signature(const py::tuple& args) {
  if (g_glue == nullptr) return py::none();
  std::string key;
  key.reserve(args.size() * 24);
  for (py::handle a : args) {
    PyObject* o = a.ptr();
    LazuliTensorFacts f;
    const int is_tensor = g_glue->tensor_facts(o, &f);
    if (is_tensor < 0) return py::none();
    if (is_tensor == 1) {
      key.push_back('t');
      put<int16_t>(key, static_cast<int16_t>(f.scalar_type));
      put<int8_t>(key, static_cast<int8_t>(f.ndim));
      key.append(reinterpret_cast<const char*>(f.sizes), sizeof(int64_t) * f.ndim);
      key.push_back(static_cast<char>(f.layout));
      if (f.layout == LAZULI_LAYOUT_PERMUTED) {
        for (int64_t d = 0; d < f.ndim; ++d) key.push_back(static_cast<char>(f.perm[d]));
      }
    } else if (PyBool_Check(o)) {
      key.push_back(o == Py_True ? 'T' : 'F');
    } else if (PyLong_CheckExact(o)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0) return py::none();
      key.push_back('i');
      put<long long>(key, v);
    } else if (PyFloat_CheckExact(o)) {
      key.push_back('f');
      put<double>(key, PyFloat_AS_DOUBLE(o));
    } else if (o == Py_None) {
      key.push_back('n');
    } else {
      return py::none();
    }
  }
  return py::bytes(key);
}

void release_read(void* keep) { delete static_cast<std::shared_ptr<const void>*>(keep); }

// One run of `p` over torch tensors, in one call (the bridge's replay, _bridge._run_program):
// run_over, with each tensor's address, dtype, sizes and layout read in C++ through the glue; a
// torch tensor over each of the first n_run outputs' buffers (a bfloat16 one as bfloat16); and
// each (argument, output) of `writebacks` checked: the program wrote the argument in place, or
// the pair is returned for the caller to copy. The program's inputs are args[tensor_args[j]]
// (every argument where tensor_args is None), then `extra` where it is not None (the random
// key). An input is read as it is (contiguous), as the dense block it permutes, or from a
// contiguous copy (any other layout, counted TorchInputCopy), each checked against the program's
// input dtype and shape: a ValueError, never a read outside its memory.
py::tuple replay_torch(fe::WarmProgram& p, const py::tuple& args, const py::object& tensor_args,
                       const py::object& extra, const std::vector<uint64_t>& content_ids,
                       size_t n_run, const std::vector<std::pair<int, int>>& writebacks) {
  if (g_glue == nullptr) throw lz::ValueError("replay_torch: the torch glue is not loaded");
  const std::vector<std::pair<lz::DType, lz::Shape>>& types = p.input_types();
  std::vector<PyObject*> objects;
  objects.reserve(types.size());
  if (tensor_args.is_none()) {
    for (py::handle a : args) objects.push_back(a.ptr());
  } else {
    for (py::handle i : tensor_args) {
      objects.push_back(PyTuple_GetItem(args.ptr(), i.cast<py::ssize_t>()));
      if (objects.back() == nullptr) throw py::error_already_set();
    }
  }
  if (!extra.is_none()) objects.push_back(extra.ptr());
  if (objects.size() != types.size() ||
      (!content_ids.empty() && content_ids.size() != types.size())) {
    throw lz::ValueError("replay_torch: " + std::to_string(objects.size()) + " tensors and " +
                         std::to_string(content_ids.size()) + " content ids for a program of " +
                         std::to_string(types.size()) + " inputs");
  }
  // Each input's facts; an input of another layout (strided, expanded: LAZULI_LAYOUT_OTHER) is
  // read from a contiguous copy, which the run holds, and which a donation never writes back into
  // (the caller copies the new value back: a returned pair).
  std::vector<LazuliTensorFacts> facts(objects.size());
  std::vector<py::object> copies_made;
  for (size_t i = 0; i < types.size(); ++i) {
    const auto& [dtype, shape] = types[i];
    LazuliTensorFacts& f = facts[i];
    bool ok = g_glue->tensor_facts(objects[i], &f) == 1;
    if (ok && f.layout == LAZULI_LAYOUT_OTHER) {
      py::object copy = py::reinterpret_steal<py::object>(g_glue->contiguous(objects[i]));
      if (!copy) throw py::error_already_set();
      objects[i] = copy.ptr();
      copies_made.push_back(std::move(copy));
      fe::bump_counter("TorchInputCopy", 1);
      ok = g_glue->tensor_facts(objects[i], &f) == 1 && f.layout == LAZULI_LAYOUT_CONTIGUOUS;
    }
    ok = ok && f.lazuli_dtype == static_cast<int>(dtype) &&
         static_cast<size_t>(f.ndim) == shape.size();
    for (int64_t d = 0; ok && d < f.ndim; ++d) {
      const int64_t size = f.layout == LAZULI_LAYOUT_PERMUTED ? f.sizes[f.perm[d]] : f.sizes[d];
      ok = size == shape[static_cast<size_t>(d)];
    }
    if (!ok) {
      throw lz::ValueError("replay_torch: tensor " + std::to_string(i) + " is not a " +
                           std::string(lz::dtype_name(dtype)) + lz::shape_str(shape) +
                           " tensor (dense, or read through a copy), as the program's input is");
    }
  }
  py::tuple held(objects.size());  // one owner holds every input until the run has read them
  for (size_t i = 0; i < objects.size(); ++i) {
    PyTuple_SET_ITEM(held.ptr(), static_cast<py::ssize_t>(i), Py_NewRef(objects[i]));
  }
  std::shared_ptr<void> shared_owner = python_owner(held);
  std::vector<lz::ExternalInput> inputs(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    lz::ExternalInput& in = inputs[i];
    in.data = facts[i].data;
    in.owner = p.donates_input(i) ? python_owner(py::reinterpret_borrow<py::object>(objects[i]))
                                  : shared_owner;
    in.content_id = content_ids.empty() ? 0 : content_ids[i];
  }
  std::vector<Tensor> results;
  {
    py::gil_scoped_release release;
    results = p.run_external(inputs);
  }
  if (n_run > results.size()) {
    throw lz::ValueError("replay_torch: " + std::to_string(n_run) +
                         " outputs asked of a program of " + std::to_string(results.size()));
  }
  std::vector<Tensor> computed(results.begin(), results.begin() + static_cast<ptrdiff_t>(n_run));
  std::vector<fe::PendingRead> reads = read_all_interruptibly(computed, lz::CutReason::ValueRead);
  py::list outputs(n_run);
  for (size_t k = 0; k < n_run; ++k) {
    const Tensor& t = computed[k];
    void* data = reads[k].expose_host_memory("a torch.compile output");
    auto* keep = new std::shared_ptr<const void>(reads[k].keep_alive());
    std::vector<int64_t> sizes(t.shape().begin(), t.shape().end());
    PyObject* o =
        g_glue->tensor_over(data, static_cast<int>(t.dtype()), static_cast<int64_t>(sizes.size()),
                            sizes.data(), &release_read, keep);
    if (o == nullptr) throw py::error_already_set();
    PyList_SET_ITEM(outputs.ptr(), static_cast<py::ssize_t>(k), o);
  }
  py::list copies;
  for (const auto& [arg, k] : writebacks) {
    const Tensor& result = results.at(static_cast<size_t>(k));
    uintptr_t address;
    {
      py::gil_scoped_release release;
      address = fe::device_data_address(result);
    }
    LazuliTensorFacts f;
    PyObject* target = PyTuple_GetItem(args.ptr(), arg);
    if (target == nullptr) throw py::error_already_set();
    if (g_glue->tensor_facts(target, &f) == 1 && address == reinterpret_cast<uintptr_t>(f.data)) {
      fe::bump_counter("TorchWriteBackInPlace", 1);
    } else {
      copies.append(py::make_tuple(arg, result));
    }
  }
  return py::make_tuple(outputs, copies);
}

}  // namespace

void bind_bridge(py::module_& m) {
  m.def(
      "_from_memory",
      [](uintptr_t address, int dtype, const std::vector<int64_t>& shape, py::object owner,
         uint64_t content_id) {
        return fe::external_device_data(reinterpret_cast<void*>(address), dtype_of_code(dtype),
                                        shape, python_owner(owner), content_id);
      },
      py::arg("address"), py::arg("dtype"), py::arg("shape"), py::arg("owner"),
      py::arg("content_id") = 0,
      "A device-data tensor over memory `owner` keeps alive (C-contiguous, aligned): no copy. "
      "`content_id`: an id from _new_content_id() naming these bytes until _retire_content_id().");
  m.def("_new_content_id", &fe::new_content_id,
        "A content id to lend with external memory whose every write the caller sees.");
  m.def("_retire_content_id", &fe::retire_content_id, py::arg("id"),
        "The bytes a lent content id named may change: drop what was derived from them.");
  m.def("_numpy_view", &numpy_view, py::arg("tensor"), py::arg("raw_bfloat16") = false,
        "A writable numpy array over the tensor's Lazuli buffer (no copy); it keeps the buffer. "
        "raw_bfloat16: a bfloat16 tensor's array is uint16 over its bits (else a TypeError).");
  m.def("_numpy_views", &numpy_views, py::arg("tensors"), py::arg("raw_bfloat16") = false,
        "_numpy_view of each tensor, in one call (one wait).");
  // Waits for the tensor's producer without the GIL.
  m.def("_buffer_address", &fe::device_data_address, py::arg("tensor"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_set_torch_glue", &set_torch_glue, py::arg("api"),
        "Hands over _torch_glue._API: WarmProgram.replay_torch and _torch_signature work then.");
  m.def("_torch_signature", &torch_signature, py::arg("args"),
        "The torch.compile bridge's input signature of a call, as bytes; None where only Python "
        "can make it (no glue, or an argument of another type).");
  m.def("_bump_counter", &fe::bump_counter, py::arg("name"), py::arg("n") = 1);
  // Compiling and running release the GIL: a compile takes long, and a run waits for the
  // executor lock, which a thread holding it may need the GIL to give back (frames for logs).
  py::class_<fe::WarmProgram>(m, "_WarmProgram")
      .def(py::init(
               [](const std::vector<Tensor>& inputs, std::string name, const std::string& reason) {
                 return std::make_unique<fe::WarmProgram>(inputs, std::move(name),
                                                          fe::cut_reason_from_id(reason));
               }),
           py::arg("inputs"), py::arg("name"), py::arg("reason") = "capture-warmup")
      .def("compile", &fe::WarmProgram::compile, py::arg("outputs"),
           py::arg("donate") = std::vector<std::pair<int, int>>{},
           py::call_guard<py::gil_scoped_release>())
      .def("run", &fe::WarmProgram::run, py::arg("inputs"),
           py::call_guard<py::gil_scoped_release>())
      .def("run_over", &run_over, py::arg("tensors"),
           py::arg("content_ids") = std::vector<uint64_t>{},
           "run() on device data over the memory of torch tensors (contiguous, of the inputs' "
           "dtypes and shapes), each held by its tensor; content_ids: lent ids, one per tensor, or "
           "none")
      .def("replay_torch", &replay_torch, py::arg("args"), py::arg("tensor_args"), py::arg("extra"),
           py::arg("content_ids"), py::arg("n_run"), py::arg("writebacks"),
           "run_over through the torch glue, and torch tensors over the first n_run outputs: "
           "(outputs, [(argument, output) written back by copy])")
      .def_property_readonly("hash", &fe::WarmProgram::hash_hex)
      .def_property_readonly("num_constants", &fe::WarmProgram::num_constants);
}

}  // namespace lzpy
