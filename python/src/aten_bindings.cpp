// lazuli._C._aten: the one binding of the ATen lowering table (src/aten/table.h) for Python front
// ends. It converts Python values to the table's neutral form and back; which values mean what
// (a torch dtype, a FakeTensor) is the caller's business (python/lazuli/torch/_aten.py).
//
// Python -> Arg: None, bool, int, float, str, lz.Tensor, lz dtype, TensorMeta (a tensor known by
// its type), Foreign (a device, layout, memory format or a dtype Lazuli lacks), and lists or
// tuples of those. Arg -> Python: a result is a Tensor, a number, None, or a tuple of those.
#include "aten/graph.h"
#include "aten/table.h"
#include "bindings.h"

namespace lzpy {
namespace {

using lz::aten::Arg;

struct Foreign {
  Arg::Kind kind;
  std::string text;
};

// A complex value between two entries (Arg::complex): its (real, imaginary) pairs.
struct Complex {
  lz::Tensor pairs;
};

// Where this thread's last Graph.record failed (Graph::record's failed_at), for the front end to
// name the node; -1 before any step.
thread_local int last_failed_value = -1;

// A reference to a value of an ATen graph inside a step's arguments (Graph::ref).
struct Ref {
  int index;
};

Arg::Kind foreign_kind(const std::string& kind) {
  if (kind == "dtype") return Arg::Kind::ForeignDType;
  if (kind == "device") return Arg::Kind::Device;
  if (kind == "layout") return Arg::Kind::Layout;
  if (kind == "memory_format") return Arg::Kind::MemoryFormat;
  throw py::value_error(
      "_aten.Foreign: kind must be dtype, device, layout or memory_format, not '" + kind + "'");
}

Arg to_arg(py::handle h) {
  if (h.is_none()) return Arg();
  if (py::isinstance<lz::Tensor>(h)) return Arg(h.cast<lz::Tensor>());
  if (PyBool_Check(h.ptr())) return Arg(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) return Arg(h.cast<int64_t>());
  if (PyFloat_Check(h.ptr())) return Arg(PyFloat_AS_DOUBLE(h.ptr()));
  if (PyUnicode_Check(h.ptr())) return Arg(h.cast<std::string>());
  if (py::isinstance<lz::DType>(h)) return Arg(h.cast<lz::DType>());
  if (py::isinstance<lz::aten::TensorMeta>(h)) return Arg(h.cast<lz::aten::TensorMeta>());
  if (py::isinstance<Complex>(h)) return Arg::complex(h.cast<const Complex&>().pairs);
  if (py::isinstance<Foreign>(h)) {
    const Foreign& f = h.cast<const Foreign&>();
    return Arg::of_kind(f.kind, f.text);
  }
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    std::vector<Arg> items;
    items.reserve(py::len(h));
    for (py::handle item : h) items.push_back(to_arg(item));
    return Arg(std::move(items));
  }
  throw py::type_error("_aten: cannot pass a " + type_name(h) + " to the ATen table");
}

lz::aten::Args to_args(const py::sequence& args) {
  lz::aten::Args out;
  out.reserve(args.size());
  for (py::handle h : args) out.push_back(to_arg(h));
  return out;
}

py::object to_python(const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::None:
      return py::none();
    case Arg::Kind::Bool:
      return py::bool_(a.to_bool());
    case Arg::Kind::Int:
      return py::int_(a.to_int());
    case Arg::Kind::Double:
      return py::float_(a.to_double());
    case Arg::Kind::Tensor:
      if (a.is_complex()) return py::cast(Complex{a.tensor()});
      return py::cast(a.tensor());
    case Arg::Kind::List: {
      py::tuple t(a.list().size());
      for (size_t i = 0; i < a.list().size(); ++i) t[i] = to_python(a.list()[i]);
      return t;
    }
    default:
      throw py::type_error("_aten: an entry returned a " +
                           std::string(lz::aten::kind_name(a.kind())));
  }
}

// A step's argument: Ref, a list or tuple (of templates), or any value to_arg takes.
lz::aten::Graph::Template to_template(py::handle h) {
  using lz::aten::Graph;
  if (py::isinstance<Ref>(h)) return Graph::ref(h.cast<const Ref&>().index);
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    std::vector<Graph::Template> items;
    items.reserve(py::len(h));
    for (py::handle item : h) items.push_back(to_template(item));
    return Graph::list(std::move(items));
  }
  return Graph::value(to_arg(h));
}

std::vector<lz::aten::Graph::Template> to_templates(const py::sequence& args) {
  std::vector<lz::aten::Graph::Template> out;
  out.reserve(args.size());
  for (py::handle h : args) out.push_back(to_template(h));
  return out;
}

std::optional<std::vector<std::optional<lz::DType>>> to_result_dtypes(const py::object& dtypes) {
  if (dtypes.is_none()) return std::nullopt;
  std::vector<std::optional<lz::DType>> out;
  for (py::handle h : dtypes) {
    out.push_back(h.is_none() ? std::nullopt : std::optional<lz::DType>(h.cast<lz::DType>()));
  }
  return out;
}

std::vector<py::object> dtype_list(const lz::aten::DTypeSet& set) {
  std::vector<py::object> out;
  for (lz::DType t : set.list()) out.push_back(py::cast(t));
  return out;
}

// Records the entry on `args`; `user_op` names the op run-time errors report (ir/origin.h).
py::object lower(const lz::aten::Entry& e, const py::sequence& args,
                 const py::object& result_dtypes, lz::aten::Call* call,
                 const std::string& user_op) {
  lz::aten::Args converted = to_args(args);
  std::optional<std::vector<std::optional<lz::DType>>> dtypes = to_result_dtypes(result_dtypes);
  lz::aten::Call device_rng;
  if (call == nullptr) call = &device_rng;
  bool outer = user_op.empty() ? false : lz::ir::enter_user_op(user_op);
  Arg out;
  try {
    out = lz::aten::lower(e, converted, *call, dtypes ? &*dtypes : nullptr);
  } catch (...) {
    if (!user_op.empty()) lz::ir::exit_user_op(outer);
    throw;
  }
  if (!user_op.empty()) lz::ir::exit_user_op(outer);
  return to_python(out);
}

}  // namespace

void bind_aten(py::module_& m) {
  py::module_ a = m.def_submodule("_aten", "The ATen lowering table (src/aten/table.h).");
  py::class_<lz::aten::TensorMeta>(a, "TensorMeta")
      .def(py::init([](const py::object& dtype, const std::vector<int64_t>& shape,
                       const std::string& unsupported,
                       const std::optional<std::vector<int64_t>>& strides, int64_t storage_offset,
                       bool complex) {
             lz::aten::TensorMeta m;
             if (!dtype.is_none()) m.dtype = dtype.cast<lz::DType>();
             m.shape = shape;
             m.unsupported = unsupported;
             m.strides = strides;
             m.storage_offset = storage_offset;
             m.complex = complex;
             return m;
           }),
           py::arg("dtype"), py::arg("shape"), py::arg("unsupported") = "",
           py::arg("strides") = py::none(), py::arg("storage_offset") = 0,
           py::arg("complex") = false,
           "A tensor known only by its type: dtype None (a dtype Lazuli lacks) needs "
           "`unsupported`; `strides` and `storage_offset`: eager's layout at run time, where "
           "known; `complex`: a complex tensor whose components have `dtype`.");
  py::class_<Complex>(a, "Complex")
      .def(py::init([](const lz::Tensor& pairs) {
             Arg::complex(pairs);  // checks the layout
             return Complex{pairs};
           }),
           py::arg("pairs"))
      .def_property_readonly("pairs", [](const Complex& c) { return c.pairs; })
      .def("__repr__",
           [](const Complex& c) {
             return "<complex value over " + Arg(c.pairs).describe() + " pairs>";
           })
      .doc() =
      "A complex tensor between two entries of a partition: its (real, imaginary) pairs, a "
      "real tensor whose last dim is 2 (view_as_real's layout).";
  py::class_<Foreign>(a, "Foreign")
      .def(py::init([](const std::string& kind, const std::string& text) {
             return Foreign{foreign_kind(kind), text};
           }),
           py::arg("kind"), py::arg("text"),
           "A value the table names but does not model: kind 'dtype' (one Lazuli lacks), "
           "'device', 'layout' or 'memory_format', with torch's spelling.");
  py::class_<lz::aten::Call>(a, "Call").def(
      py::init([](const lz::Tensor& key) { return lz::aten::Call(key); }), py::arg("key"),
      "Random draws of the entries lowered with this Call come from `key` (an int64 0-d "
      "tensor), advanced once per draw inside the program.");
  py::class_<lz::aten::Entry>(a, "Entry")
      .def_property_readonly("name", [](const lz::aten::Entry& e) { return e.name; })
      .def_property_readonly("dtypes",
                             [](const lz::aten::Entry& e) { return dtype_list(e.dtypes); })
      .def_property_readonly("note", [](const lz::aten::Entry& e) { return e.note; })
      .def_property_readonly("random",
                             [](const lz::aten::Entry& e) { return e.has(lz::aten::kRandom); })
      .def_property_readonly(
          "view",
          [](const lz::aten::Entry& e) {  // an ATen view, lowered as one or as a copy
            return e.has(lz::aten::kView) || e.has(lz::aten::kCopiedView);
          })
      .def_property_readonly("mutates",
                             [](const lz::aten::Entry& e) { return e.has(lz::aten::kMutates); })
      .def_property_readonly("complex",
                             [](const lz::aten::Entry& e) { return e.has(lz::aten::kComplex); })
      .def(
          "why_not",
          [](const lz::aten::Entry& e, const py::sequence& args) {
            return lz::aten::why_not(e, to_args(args));
          },
          py::arg("args"),
          "None when the entry applies to `args` (schema order, defaults filled), else why not.")
      .def("lower", &lower, py::arg("args"), py::arg("result_dtypes") = py::none(),
           py::arg("call") = nullptr, py::arg("user_op") = "",
           "Records the entry on `args` (Lazuli tensors in tensor positions) and returns its "
           "result. result_dtypes: eager's dtype per tensor result, when known. call: a Call "
           "whose key the random draws come from (else the device's RNG). user_op: the name "
           "run-time errors of the recorded ops report.")
      .def("__repr__",
           [](const lz::aten::Entry& e) { return "<ATen table entry " + e.name + ">"; });
  py::class_<Ref>(a, "Ref")
      .def(py::init([](int index) { return Ref{index}; }), py::arg("index"))
      .def_property_readonly("index", [](const Ref& r) { return r.index; })
      .def("__repr__", [](const Ref& r) { return "Ref(" + std::to_string(r.index) + ")"; })
      .doc() = "Value `index` of an ATen graph, as an argument of a later step (Graph).";
  using lz::aten::Graph;
  py::class_<Graph>(a, "Graph",
                    "An ATen graph in the table's neutral form (src/aten/graph.h): a front end's "
                    "graph converted once, recorded on each new input signature in C++.")
      .def(py::init<>())
      .def("input", &Graph::input, "A new value: the next input of record(). Its index.")
      .def(
          "constant", [](Graph& g, const py::handle& v) { return g.constant(to_arg(v)); },
          py::arg("value"), "A value every recording sees as it is. Its index.")
      .def(
          "call",
          [](Graph& g, const lz::aten::Entry& e, const py::sequence& args,
             const py::object& result_dtypes, const std::string& user_op) {
            return g.call(e, to_templates(args), to_result_dtypes(result_dtypes), user_op);
          },
          py::arg("entry"), py::arg("args"), py::arg("result_dtypes") = py::none(),
          py::arg("user_op") = "",
          "`entry` applied to `args` (schema order; Ref for a value of the graph). Its index.")
      .def(
          "size_op",
          [](Graph& g, const std::string& name, const py::sequence& args) {
            return g.size_op(name, to_templates(args));
          },
          py::arg("name"), py::arg("args"),
          "Python's operator `name` (\"mul\", \"floordiv\"...) on sizes. Its index.")
      .def("item", &Graph::item, py::arg("of"), py::arg("index"),
           "Item `index` of the list value `of`. Its index.")
      .def(
          "set_outputs",
          [](Graph& g, const py::sequence& outputs) { g.set_outputs(to_templates(outputs)); },
          py::arg("outputs"))
      .def_static("is_size_op", &Graph::is_size_op, py::arg("name"))
      .def_property_readonly("num_values", &Graph::num_values)
      .def_property_readonly("num_inputs", &Graph::num_inputs)
      .def(
          "record",
          [](const Graph& g, const py::sequence& inputs, lz::aten::Call* call, bool keep) {
            lz::aten::Call device_rng;
            lz::aten::Args values;
            last_failed_value = -1;
            lz::aten::Args outs = g.record(to_args(inputs), call ? *call : device_rng,
                                           keep ? &values : nullptr, &last_failed_value);
            py::list out(outs.size());
            for (size_t i = 0; i < outs.size(); ++i) out[i] = to_python(outs[i]);
            if (!keep) return py::object(std::move(out));
            py::list all(values.size());
            for (size_t i = 0; i < values.size(); ++i) {
              try {
                all[i] = to_python(values[i]);
              } catch (const py::type_error&) {  // a constant Python has no form for: unread
                all[i] = py::none();
              }
            }
            return py::object(py::make_tuple(out, all));
          },
          py::arg("inputs"), py::arg("call") = nullptr, py::arg("keep_values") = false,
          "Records the graph on `inputs` and returns its outputs (a list); with keep_values, "
          "(outputs, every value of the graph by index). After it raises, "
          "last_failed_value() is the index of the value that failed.");
  a.def(
      "last_failed_value", [] { return last_failed_value; },
      "The index of the value the last Graph.record of this thread failed at, -1 where it "
      "failed before any (or did not fail).");
  a.def("find", &lz::aten::find, py::arg("name"), py::return_value_policy::reference,
        "The entry for an overload (\"aten.add.Tensor\"), or None.");
  a.def("entries", &lz::aten::entries, py::return_value_policy::reference,
        "Every entry, sorted by name.");
  a.def("extra_decompositions", &lz::aten::extra_decompositions);
  a.def("kept_whole", &lz::aten::kept_whole);
  a.def("raises_index_error", &lz::aten::raises_index_error, py::arg("overload"),
        "Whether eager raises IndexError where `overload` (\"aten.embedding.default\") meets an "
        "index out of range.");
}

}  // namespace lzpy
