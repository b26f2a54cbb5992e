// lazuli._C: module setup, error translation, dtypes, value reads and the Python frame provider
// for call sites (argument conversion: arguments.cpp).
#include <filesystem>
#include <string>
#include <unordered_map>

#include "bindings.h"

namespace lzpy {
namespace {

// Frames under these belong to a library (lazuli; torch once the lazy device is registered, so
// a device op's cut names the user's line, not torch's module code), not to the user.
std::vector<std::string> g_library_dirs;

// Per code object: is it user code, and its file and function names. Converting names to C++
// strings dominated the frame walk, so each code object is converted once. Entries hold a
// reference to their code object (so an address is never reused while cached); the cache is
// bounded and emptied when full.
struct CodeInfo {
  bool user;
  std::string file, function;
  std::unordered_map<int, lz::CallSite> sites;  // "file:line" per line, interned
};
std::unordered_map<PyCodeObject*, CodeInfo> g_code_cache;

CodeInfo& code_info(PyCodeObject* code) {
  auto it = g_code_cache.find(code);
  if (it != g_code_cache.end()) return it->second;
  if (g_code_cache.size() >= 4096) {
    for (auto& [c, info] : g_code_cache) Py_DECREF(c);
    g_code_cache.clear();
  }
  std::string file = py::str(code->co_filename);
  // Compared normalized: a sys.path entry such as "examples/../python" names the package's files
  // through "..", and they must still count as the library's.
  std::string normal = std::filesystem::path(file).lexically_normal().string();
  bool user = true;
  for (const std::string& dir : g_library_dirs) user = user && normal.rfind(dir, 0) != 0;
  // torch.fx's generated code (a GraphModule's forward) is not the user's either, once torch's
  // own directory counts as a library's (the lazy device, the torch.compile bridge).
  if (g_library_dirs.size() > 1 && file.rfind("<eval_with_key>", 0) == 0) user = false;
  Py_INCREF(code);
  return g_code_cache.emplace(code, CodeInfo{user, std::move(file), std::string(py::str(code->co_name)), {}})
      .first->second;
}

// The innermost user frame as an interned "file:line" (no allocation after the first time).
lz::CallSite python_call_site() {
  if (!Py_IsInitialized()) return nullptr;
  py::gil_scoped_acquire gil;
  PyFrameObject* f = PyEval_GetFrame();
  if (f) Py_INCREF(f);
  lz::CallSite site;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    CodeInfo& info = code_info(code);
    Py_DECREF(code);
    if (info.user) {
      int line = PyFrame_GetLineNumber(f);
      auto& s = info.sites[line];
      if (!s) s = std::make_shared<const std::string>(info.file + ":" + std::to_string(line));
      site = s;
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return site;
}

std::vector<lz::UserFrame> python_frames(int max_frames) {
  std::vector<lz::UserFrame> out;
  if (!Py_IsInitialized()) return out;
  py::gil_scoped_acquire gil;  // also guards g_code_cache
  PyFrameObject* f = PyEval_GetFrame();
  if (f) Py_INCREF(f);
  while (f && static_cast<int>(out.size()) < max_frames) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const CodeInfo& info = code_info(code);
    if (info.user) out.push_back({info.file, PyFrame_GetLineNumber(f), info.function});
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return out;
}

}  // namespace

namespace {
// Waits for `r` in slices without the GIL, so Ctrl-C works; a read already computed returns at
// once, with the GIL kept.
void wait_interruptibly(const fe::PendingRead& r) {
  while (!r.wait_for_ms(0)) {
    bool done;
    {
      py::gil_scoped_release release;
      done = r.wait_for_ms(50);
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}
}  // namespace

fe::PendingRead read_interruptibly(const lz::Tensor& t, lz::CutReason reason) {
  fe::PendingRead r;
  resume_after_interrupt([&] {
    // Whatever needs Python on the way (the user's frames) takes the GIL itself.
    py::gil_scoped_release release;
    r = fe::schedule_read(t, reason);
  });
  wait_interruptibly(r);
  r.finish();
  return r;
}

std::vector<fe::PendingRead> read_all_interruptibly(const std::vector<lz::Tensor>& ts,
                                                    lz::CutReason reason) {
  std::vector<fe::PendingRead> reads;
  resume_after_interrupt([&] {
    reads.clear();  // a resumed compile schedules them all again
    py::gil_scoped_release release;
    reads.reserve(ts.size());
    for (const lz::Tensor& t : ts) reads.push_back(fe::schedule_read(t, reason));
  });
  for (const fe::PendingRead& r : reads) wait_interruptibly(r);
  for (const fe::PendingRead& r : reads) r.finish();
  return reads;
}

py::dtype numpy_dtype(lz::DType t) {
  switch (t) {
    case lz::DType::Bool:
      return py::dtype::of<bool>();
    case lz::DType::Int32:
      return py::dtype::of<int32_t>();
    case lz::DType::Int64:
      return py::dtype::of<int64_t>();
    case lz::DType::Float32:
      return py::dtype::of<float>();
    case lz::DType::Float64:
      return py::dtype::of<double>();
    case lz::DType::Float16:
      return py::dtype("float16");
    case lz::DType::BFloat16:
      break;
  }
  throw py::type_error("numpy has no " + std::string(lz::dtype_name(t)) +
                       "; cast first, e.g. t.float().numpy()");
}

py::array to_numpy(const lz::Tensor& t) {
  fe::PendingRead r = read_interruptibly(t, lz::CutReason::ValueRead);
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::dtype dt = numpy_dtype(t.dtype());
  py::array out(dt, shape);
  r.copy_to(out.mutable_data(), static_cast<size_t>(t.numel()) * lz::dtype_size(t.dtype()));
  return out;
}

lz::Tensor from_numpy(const py::array& arr) {
  py::dtype dt = arr.dtype();
  char kind = dt.kind();
  size_t size = static_cast<size_t>(dt.itemsize());
  lz::DType t;
  if (kind == 'f' && size == 4) t = lz::DType::Float32;
  else if (kind == 'f' && size == 8) t = lz::DType::Float64;
  else if (kind == 'f' && size == 2) t = lz::DType::Float16;
  else if (kind == 'i' && size == 4) t = lz::DType::Int32;
  else if (kind == 'i' && size == 8) t = lz::DType::Int64;
  else if (kind == 'b') t = lz::DType::Bool;
  else {
    throw py::type_error("lazuli does not support numpy dtype " + std::string(py::str(dt)) +
                         "; supported: float16, float32, float64, int32, int64, bool (convert with .astype())");
  }
  // The tensor shares the array's memory, as PyTorch's from_numpy does: writes to the array show
  // in the tensor until it takes a new value, and a step barrier that updates the tensor in place
  // writes into the array when it may donate the buffer. Strided, non-native-order, misaligned
  // or read-only arrays become one C-contiguous, writable native copy first (np.require).
  py::object np = py::module_::import("numpy");
  py::array c = np.attr("require")(arr, dt.attr("newbyteorder")("="), "CAW");  // keeps 0-d arrays 0-d
  std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
  return fe::host_memory_tensor(c.mutable_data(), t, shape, python_owner(c));
}

}  // namespace lzpy

PYBIND11_MODULE(_C, m) {
  // The package's version, from CMakeLists.txt's project(VERSION) (python/CMakeLists.txt).
  m.attr("__version__") = LAZULI_VERSION;
  m.doc() = "Lazuli's C++ runtime (use the `lazuli` package, not this module).";

  py::object runtime_error = py::module_::import("builtins").attr("RuntimeError");
  static py::exception<lz::Error> error(m, "Error", runtime_error.ptr());
  static py::exception<lz::ExecutionError> exec_error(m, "ExecutionError", error.ptr());
  static py::exception<lz::UnexpectedExecutionError> unexpected(m, "UnexpectedExecutionError", error.ptr());
  static py::exception<lz::TooManyGraphsError> too_many(m, "TooManyGraphsError", error.ptr());
  // Both a lazuli error and Python's MemoryError: `except MemoryError` and `except lz.Error`
  // (a RuntimeError, as PyTorch's out-of-memory errors are) both catch it.
  py::tuple oom_bases = py::make_tuple(error, py::handle(PyExc_MemoryError));
  static py::exception<lz::OutOfMemoryError> oom(m, "OutOfMemoryError", oom_bases);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lz::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const lz::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const lz::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const lz::ExecutionError& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    } catch (const lz::UnexpectedExecutionError& e) {
      PyErr_SetString(unexpected.ptr(), e.what());
    } catch (const lz::TooManyGraphsError& e) {
      PyErr_SetString(too_many.ptr(), e.what());
    } catch (const lz::OutOfMemoryError& e) {
      PyErr_SetString(oom.ptr(), e.what());
    } catch (const std::bad_alloc& e) {
      // Lazuli's own allocations raise OutOfMemoryError naming their size; this is any other.
      PyErr_SetString(oom.ptr(), (std::string("out of memory (") + e.what() + ")").c_str());
    } catch (const lz::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const py::cast_error& e) {
      // An argument of the wrong Python type reached a conversion inside a binding.
      PyErr_SetString(PyExc_TypeError, (std::string("wrong argument type: ") + e.what()).c_str());
    }
  });

  py::enum_<lz::DType>(m, "dtype")
      .value("bool", lz::DType::Bool)
      .value("int32", lz::DType::Int32)
      .value("int64", lz::DType::Int64)
      .value("float32", lz::DType::Float32)
      .value("float64", lz::DType::Float64)
      .value("float16", lz::DType::Float16)
      .value("bfloat16", lz::DType::BFloat16)
      .def_property_readonly("itemsize", [](lz::DType d) { return lz::dtype_size(d); })
      .def_property_readonly("is_floating_point", [](lz::DType d) { return lz::is_floating(d); });

  m.def("_set_package_dir", [](std::string dir) {
    lzpy::g_library_dirs = {std::move(dir)};
    lz::set_frame_provider(&lzpy::python_frames);
    lz::set_call_site_provider(&lzpy::python_call_site);
  });
  m.def("_add_library_dir", [](std::string dir) {
    // Code objects already classified may now be a library's: classify them again.
    for (auto& [code, info] : lzpy::g_code_cache) Py_DECREF(code);
    lzpy::g_code_cache.clear();
    lzpy::g_library_dirs.push_back(std::move(dir));
  }, "Frames under `dir` are a library's, not the user's (cut reasons, call sites).");

  py::class_<lz::Tensor> tensor_cls = lzpy::bind_tensor(m);
  lzpy::bind_ops(m, tensor_cls);
  lzpy::bind_autograd(m, tensor_cls);
  lzpy::bind_runtime(m);
  lzpy::bind_debug(m);
  lzpy::bind_bridge(m);
  lzpy::bind_serialize(m);
  lzpy::bind_composites(m, tensor_cls);
  lzpy::bind_nn_layers(m);  // into the _nn submodule bind_composites made
  lzpy::bind_indexing(m, tensor_cls);
  lzpy::bind_aten(m);
  lzpy::bind_distributed(m);
  lzpy::install_compile_interrupt(m);
  lzpy::install_argument_errors(m);  // last: every function exists now
}
