// Runtime calls: sync, sync_tensors, wait, step closures, eager mode, backend.
#include "bindings.h"
#include "exec/capture.h"
#include "tensor/handoff.h"
#include "exec/compile_region.h"
#include "exec/device_executor.h"
#include "backend/backend.h"
#include "core/config.h"
#include "exec/graph_executor.h"
#include "exec/step.h"

namespace lzpy {
namespace {

// A Python object kept by C++ code that may drop it from any thread, with or without the GIL
// (step closures, capture records and their replay guards).
template <typename T>
std::shared_ptr<T> hold_py(T o) {
  return std::shared_ptr<T>(new T(std::move(o)), [](T* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

void wait_all_interruptibly() {
  for (;;) {
    bool done;
    {
      py::gil_scoped_release release;
      done = lz::device_executor().wait_all_for_ms(50);
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  lz::raise_pending_async_error();
}


void sync_impl(bool wait, bool reset_scope, lz::CutReason reason) {
  resume_after_interrupt([&] {
    py::gil_scoped_release release;
    lz::step_barrier(false, reset_scope, reason);
  });
  if (wait || lz::config().sync_wait) wait_all_interruptibly();
}

using lz::internal::TensorImplPtr;

py::tuple capture_call(lz::CaptureCache& cache, const std::vector<lz::Tensor>& args, uint64_t key,
                       const py::function& body) {
  std::vector<TensorImplPtr> impls;
  impls.reserve(args.size());
  for (const lz::Tensor& t : args) impls.push_back(t.impl());
  std::shared_ptr<void> data;
  std::vector<TensorImplPtr> outs;
  {
    // Without the GIL: a trace's barrier may compile for seconds and a replay runs no Python, so
    // other Python threads go on meanwhile; the body, the guards and the user's frames take it.
    py::gil_scoped_release release;
    outs = cache.call(impls, key, [&body](const std::vector<TensorImplPtr>& a, std::shared_ptr<void>* fd) {
      py::gil_scoped_acquire gil;
      py::list in;
      for (const TensorImplPtr& t : a) in.append(py::cast(lz::Tensor(t)));
      py::tuple r = body(in);  // (tensors returned, the output structure)
      std::vector<TensorImplPtr> out;
      for (py::handle h : py::list(r[0])) out.push_back(h.cast<lz::Tensor>().impl());
      *fd = hold_py(py::object(r[1]));
      return out;
    }, &data);
  }
  py::list res;
  for (TensorImplPtr& t : outs) res.append(py::cast(lz::Tensor(std::move(t))));
  return py::make_tuple(res, data ? *static_cast<py::object*>(data.get()) : py::none());
}

}  // namespace

lz::CutReason reason_from_id(const std::string& id) {
  for (int r = 0; r <= static_cast<int>(lz::kLastCutReason); ++r) {
    if (lz::cut_reason_id(static_cast<lz::CutReason>(r)) == id) return static_cast<lz::CutReason>(r);
  }
  throw py::value_error("unknown cut reason '" + id + "'");
}

void bind_runtime(py::module_& m) {
  m.def("sync", [](bool wait, bool reset_scope) { sync_impl(wait, reset_scope, lz::CutReason::UserSync); },
        py::arg("wait") = false, py::arg("reset_scope") = true);
  m.def("_sync_with_reason", [](const std::string& reason, bool wait) { sync_impl(wait, true, reason_from_id(reason)); },
        py::arg("reason"), py::arg("wait") = false);
  m.def("sync_tensors", [](const std::vector<lz::Tensor>& ts, bool wait) {
          resume_after_interrupt([&] {
            py::gil_scoped_release release;
            lz::sync_tensors(ts, false);
          });
          if (wait) wait_all_interruptibly();
        }, py::arg("tensors"), py::arg("wait") = false);
  m.def("wait", &wait_all_interruptibly);
  // At interpreter exit (atexit): let queued programs finish, errors unreported.
  m.def("_drain", [] {
    py::gil_scoped_release release;
    lz::device_executor().wait_all();
  });
  m.def("add_step_closure", [](py::object fn, py::tuple args) {
          if (!PyCallable_Check(fn.ptr())) throw py::type_error("add_step_closure: fn must be callable");
          auto c = hold_py(py::make_tuple(fn, args));
          lz::add_step_closure([c] {
            py::gil_scoped_acquire gil;
            (*c)[0](*py::tuple((*c)[1]));
          });
        }, py::arg("fn"), py::arg("args") = py::tuple());
  m.def("_region_enter", &lz::enter_region, py::arg("name"), py::arg("full_graph"), py::arg("max_graphs"),
        py::arg("key"));
  m.def("_region_exit", &lz::exit_region);
  m.def("_region_check", &lz::check_region_graph);
  py::class_<lz::CaptureCache, std::shared_ptr<lz::CaptureCache>>(m, "_CaptureCache")
      .def(py::init<std::string, bool>(), py::arg("name"), py::arg("full_graph"))
      .def("call", &capture_call, py::arg("args"), py::arg("key"), py::arg("body"))
      .def_property_readonly("traces", &lz::CaptureCache::traces)
      .def_property_readonly("replays", &lz::CaptureCache::replays)
      .def_property_readonly("last_reason", &lz::CaptureCache::last_reason)
      .def_property_readonly("name", &lz::CaptureCache::name);
  m.def("_capture_tracing", &lz::capture_tracing);
  m.def("_capture_refuse", &lz::refuse_replay, py::arg("reason"));
  // Tensors to and from the PyTorch device by ticket (src/tensor/handoff.h; lazuli.torch.capture).
  m.def("_put_tensors", [](std::vector<lz::Tensor> ts) { return lz::internal::put_tensors(std::move(ts)); },
        py::arg("tensors"));
  m.def("_take_tensors", &lz::internal::take_tensors, py::arg("ticket"));
  m.def("_capture_note_kept", [](const lz::Tensor& t) { lz::note_kept_output(t.impl()); }, py::arg("tensor"));
  m.def("_capture_add_guard", [](py::function check, uint64_t identity) {
    auto fn = hold_py(std::move(check));
    lz::add_replay_guard([fn] {
      py::gil_scoped_acquire gil;
      py::object r = (*fn)();
      int truth = PyObject_IsTrue(r.ptr());
      if (truth < 0) throw py::error_already_set();
      return truth == 1;
    }, identity);
  }, py::arg("check"), py::arg("identity"));
  m.def("eager_mode", &lz::set_eager_mode, py::arg("enabled"));
  m.def("is_eager_mode", &lz::eager_mode);
  m.def("device_count", &lz::device_count);
  m.def("backend", &lz::backend);
  // Switch backends at run time (tests, comparisons); waits for in-flight programs first.
  m.def("_set_backend", [](const std::string& name) {
    wait_all_interruptibly();
    lz::set_active_backend(name);
  }, py::arg("name"));
  m.def("step_count", &lz::step_count);
}

}  // namespace lzpy
