// Runtime calls: sync, sync_tensors, wait, step closures, eager mode, backend.
#include "bindings.h"

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
      done = fe::wait_all_for_ms(50);
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  fe::raise_pending_async_error();
}


void sync_impl(bool wait, bool reset_scope, lz::CutReason reason) {
  resume_after_interrupt([&] {
    py::gil_scoped_release release;
    fe::sync_for_reason(reset_scope, reason);
  });
  if (wait || fe::sync_waits()) wait_all_interruptibly();
}

py::tuple capture_call(fe::CaptureFunction& fn, const std::vector<lz::Tensor>& args, uint64_t key,
                       const py::function& body) {
  std::shared_ptr<void> data;
  std::vector<lz::Tensor> outs;
  {
    // Without the GIL: a trace's barrier may compile for seconds and a replay runs no Python, so
    // other Python threads go on meanwhile; the body, the guards and the user's frames take it.
    py::gil_scoped_release release;
    outs = fn.call(
        args, key,
        [&body](const std::vector<lz::Tensor>& a, std::shared_ptr<void>* fd) {
          py::gil_scoped_acquire gil;
          py::tuple r = body(py::cast(a));  // (tensors returned, the output structure)
          std::vector<lz::Tensor> out;
          for (py::handle h : py::list(r[0])) out.push_back(h.cast<lz::Tensor>());
          *fd = hold_py(py::object(r[1]));
          return out;
        },
        &data);
  }
  return py::make_tuple(py::cast(outs), data ? *static_cast<py::object*>(data.get()) : py::none());
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("sync", [](bool wait, bool reset_scope) { sync_impl(wait, reset_scope, lz::CutReason::UserSync); },
        py::arg("wait") = false, py::arg("reset_scope") = true);
  m.def(
      "_sync_with_reason",
      [](const std::string& reason, bool wait) {
        sync_impl(wait, true, fe::cut_reason_from_id(reason));
      },
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
    fe::drain();
  });
  m.def("add_step_closure", [](py::object fn, py::tuple args) {
          if (!PyCallable_Check(fn.ptr())) throw py::type_error("add_step_closure: fn must be callable");
          auto c = hold_py(py::make_tuple(fn, args));
          lz::add_step_closure([c] {
            py::gil_scoped_acquire gil;
            (*c)[0](*py::tuple((*c)[1]));
          });
        }, py::arg("fn"), py::arg("args") = py::tuple());
  m.def("_region_enter", &fe::enter_region, py::arg("name"), py::arg("full_graph"),
        py::arg("max_graphs"), py::arg("key"));
  m.def("_region_exit", &fe::exit_region);
  m.def("_region_check", &fe::check_region_graph);
  py::class_<fe::CaptureFunction, std::shared_ptr<fe::CaptureFunction>>(m, "_CaptureCache")
      .def(py::init<std::string, bool>(), py::arg("name"), py::arg("full_graph"))
      .def("call", &capture_call, py::arg("args"), py::arg("key"), py::arg("body"))
      .def_property_readonly("traces", &fe::CaptureFunction::traces)
      .def_property_readonly("replays", &fe::CaptureFunction::replays)
      .def_property_readonly("last_reason", &fe::CaptureFunction::last_reason)
      .def_property_readonly("name", &fe::CaptureFunction::name);
  m.def("_capture_tracing", &fe::capture_tracing);
  m.def("_capture_refuse", &fe::refuse_replay, py::arg("reason"));
  // Tensors to and from the PyTorch device by ticket (src/tensor/handoff.h; lazuli.torch.capture).
  m.def("_put_tensors", [](std::vector<lz::Tensor> ts) { return lz::internal::put_tensors(std::move(ts)); },
        py::arg("tensors"));
  m.def("_take_tensors", &lz::internal::take_tensors, py::arg("ticket"));
  m.def("_capture_note_kept", &fe::note_kept_output, py::arg("tensor"));
  m.def("_capture_add_guard", [](py::function check, uint64_t identity) {
    auto fn = hold_py(std::move(check));
    fe::add_replay_guard(
        [fn] {
          py::gil_scoped_acquire gil;
          py::object r = (*fn)();
          int truth = PyObject_IsTrue(r.ptr());
          if (truth < 0) throw py::error_already_set();
          return truth == 1;
        },
        identity);
  }, py::arg("check"), py::arg("identity"));
  m.def("eager_mode", &fe::set_eager_mode, py::arg("enabled"));
  m.def("is_eager_mode", &fe::eager_mode);
  m.def("device_count", &lz::device_count);
  m.def("backend", &lz::backend);
  // Switch backends at run time (tests, comparisons); waits for in-flight programs first.
  m.def("_set_backend", [](const std::string& name) {
    wait_all_interruptibly();
    fe::set_backend(name);
  }, py::arg("name"));
  m.def("step_count", &fe::step_count);
}

}  // namespace lzpy
