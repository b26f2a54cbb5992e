// Names the function and the argument in every argument error of lazuli._C (see arguments.cpp).
//
// pybind11 calls every bound function through one C entry point, `cpp_function::dispatcher`, named
// in each function's PyMethodDef. install_argument_errors points those at `dispatch`, which calls
// pybind11's and, only when the call failed with a TypeError, ValueError, IndexError or
// OverflowError, rewrites the message:
// - "argument 'dim' must be ..." (our converters) gets the function's name in front;
// - pybind11's "incompatible function arguments" (the signature and the call's values) becomes
//   "lz.sum(): argument 'keepdim' (position 3) must be bool, not str": the call is bound to the
//   signature's parameters and each value is tried against its parameter's type;
// - "Unable to cast Python instance of type X" (a cast inside a binding) names the argument of
//   type X.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"

namespace lzpy {
namespace {

using py::detail::function_record;

PyCFunctionWithKeywords g_pybind_dispatch = nullptr;

struct Param {
  std::string name, type;
  bool has_default = false;
  bool keyword_only = false;
  bool var_args = false, var_kwargs = false;
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// "(input: lazuli._C.Tensor, dim: object = None, *, keepdim: bool = False) -> ..." as parameters.
std::vector<Param> parse_signature(const char* sig) {
  std::vector<Param> out;
  if (!sig || sig[0] != '(') return out;
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (const char* p = sig + 1; *p; ++p) {
    char c = *p;
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '(' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}' || (c == ')' && depth > 0)) {
      --depth;
    } else if (c == ')') {
      break;
    } else if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty()) parts.push_back(cur);
  bool keyword_only = false;
  for (const std::string& raw : parts) {
    std::string s = trim(raw);
    if (s == "/") continue;
    if (s == "*") {
      keyword_only = true;
      continue;
    }
    Param p;
    p.keyword_only = keyword_only;
    if (starts_with(s, "**")) {
      p.var_kwargs = true;
      p.name = s.substr(2);
    } else if (starts_with(s, "*")) {
      p.var_args = true;
      p.name = s.substr(1);
      keyword_only = true;
    } else {
      size_t eq = s.find(" = ");
      if (eq != std::string::npos) {
        p.has_default = true;
        s = s.substr(0, eq);
      }
      size_t colon = s.find(": ");
      p.name = s.substr(0, colon);
      if (colon != std::string::npos) p.type = s.substr(colon + 2);
    }
    out.push_back(p);
  }
  return out;
}

std::string display_type(std::string t) {
  if (starts_with(t, "Optional[") && t.back() == ']')
    return display_type(t.substr(9, t.size() - 10)) + " or None";
  if (t == "Tensor | number") return "Tensor or number";
  if (t == "List[lazuli._C.Tensor]") return "a list of Tensors";
  if (t == "List[int]") return "a list of ints";
  if (t == "lazuli._C.dtype")
    return "a lazuli dtype (lz.float32, lz.float64, lz.int32, lz.int64, lz.bool)";
  for (std::string prefix : {"lazuli._C.debug.", "lazuli._C."}) {
    for (size_t at; (at = t.find(prefix)) != std::string::npos;) t.erase(at, prefix.size());
  }
  return t;
}

// Whether pybind11's caster for the signature's type `t` takes `h` (conversions allowed). Types
// this cannot test count as taken, so only a value that surely fails is blamed.
bool accepts(const std::string& t, py::handle h) {
  using py::detail::make_caster;
  if (starts_with(t, "Optional[") && t.back() == ']') {
    return h.is_none() || accepts(t.substr(9, t.size() - 10), h);
  }
  try {
    // (pybind11's class caster takes None, as a null pointer; a Tensor argument does not.)
    if (t == "lazuli._C.Tensor") return py::isinstance<lz::Tensor>(h);
    if (t == "Tensor | number") return make_caster<lz::Operand>().load(h, true);
    if (t == "int") return make_caster<int64_t>().load(h, true);
    if (t == "float") return make_caster<double>().load(h, true);
    if (t == "bool") return make_caster<bool>().load(h, true);
    if (t == "str") return make_caster<std::string>().load(h, true);
    if (t == "List[lazuli._C.Tensor]") {
      if (!PySequence_Check(h.ptr()) || PyUnicode_Check(h.ptr())) return false;
      for (py::handle e : h) {
        if (!py::isinstance<lz::Tensor>(e)) return false;
      }
      return true;
    }
    if (t == "List[int]") return make_caster<std::vector<int64_t>>().load(h, true);
    if (t == "lazuli._C.dtype") return make_caster<lz::DType>().load(h, true);
    if (t == "numpy.ndarray") return py::isinstance<py::array>(h);
    if (t == "tuple") return PyTuple_Check(h.ptr());
    if (t == "function") return PyCallable_Check(h.ptr());
  } catch (py::error_already_set&) {
    return false;
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

std::string function_name(const function_record* rec) {
  std::string scope;
  if (rec->scope) {
    py::handle s = rec->scope;
    if (rec->is_method && py::hasattr(s, "__name__")) {
      scope = py::str(s.attr("__name__"));
    } else if (py::hasattr(s, "__name__")) {
      scope = py::str(s.attr("__name__"));
      if (starts_with(scope, "lazuli._C")) scope = "lz" + scope.substr(std::strlen("lazuli._C"));
    }
  }
  return (scope.empty() ? "" : scope + ".") + rec->name;
}

// "argument 'dim' (position 2)", or "argument 2" for pybind11's unnamed "argN" parameters.
std::string argument_words(const Param& p, int position) {
  bool unnamed = p.name.size() > 3 && starts_with(p.name, "arg") &&
                 p.name.find_first_not_of("0123456789", 3) == std::string::npos;
  if (unnamed) return "argument " + std::to_string(position);
  std::string s = "argument '" + p.name + "'";
  if (position > 0) s += " (position " + std::to_string(position) + ")";
  return s;
}

std::string call_types(PyObject* args, PyObject* kwargs, bool skip_self) {
  std::string s = "(";
  bool first = true;
  for (Py_ssize_t i = skip_self ? 1 : 0; i < PyTuple_GET_SIZE(args); ++i) {
    s += (first ? "" : ", ") + type_name(PyTuple_GET_ITEM(args, i));
    first = false;
  }
  if (kwargs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      s += (first ? "" : ", ") + std::string(py::str(k)) + "=" + type_name(v);
      first = false;
    }
  }
  return s + ")";
}

std::string display_signature(const function_record* rec) {
  std::string sig = rec->signature ? rec->signature : "()";
  size_t arrow = sig.rfind(" -> ");
  if (arrow != std::string::npos) sig = sig.substr(0, arrow);
  if (rec->is_method && starts_with(sig, "(self: lazuli._C.Tensor")) {
    sig = "(" + sig.substr(std::strlen("(self: lazuli._C.Tensor"));
    if (starts_with(sig, "(, ")) sig = "(" + sig.substr(3);
  }
  return display_type(sig);
}

// Why `rec` (one overload) refuses the call, or "" when no single argument is to blame.
std::string blame(const function_record* rec, PyObject* args, PyObject* kwargs,
                  const std::string& name) {
  std::vector<Param> params = parse_signature(rec->signature);
  const int self_offset = rec->is_method ? 0 : 1;  // positions count from 1, not counting self
  std::vector<py::handle> bound(params.size());
  std::vector<int> position(params.size(), 0);
  size_t n_positional = 0;
  bool var_args = false, var_kwargs = false;
  for (const Param& p : params) {
    if (p.var_args) var_args = true;
    if (p.var_kwargs) var_kwargs = true;
    if (!p.keyword_only && !p.var_args && !p.var_kwargs) ++n_positional;
  }
  const Py_ssize_t n_args = PyTuple_GET_SIZE(args);
  if (static_cast<size_t>(n_args) > n_positional && !var_args) {
    size_t self = rec->is_method ? 1 : 0;
    return name + "() takes " + std::to_string(n_positional - self) + " positional argument" +
           (n_positional - self == 1 ? "" : "s") + " but " + std::to_string(n_args - self) +
           (n_args - static_cast<Py_ssize_t>(self) == 1 ? " was" : " were") + " given";
  }
  for (Py_ssize_t i = 0; i < n_args && static_cast<size_t>(i) < n_positional; ++i) {
    bound[i] = PyTuple_GET_ITEM(args, i);
    position[i] = static_cast<int>(i) + self_offset;
  }
  if (kwargs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      std::string key = py::str(k);
      size_t j = 0;
      while (j < params.size() &&
             (params[j].name != key || params[j].var_args || params[j].var_kwargs))
        ++j;
      if (j == params.size()) {
        if (var_kwargs) continue;
        return name + "() got an unexpected keyword argument '" + key + "'";
      }
      if (bound[j]) return name + "() got multiple values for argument '" + key + "'";
      bound[j] = v;
    }
  }
  for (size_t j = 0; j < params.size(); ++j) {
    const Param& p = params[j];
    if (p.var_args || p.var_kwargs) continue;
    if (!bound[j]) {
      if (p.has_default) continue;
      return name + "() missing required " + argument_words(p, static_cast<int>(j) + self_offset);
    }
    if (!accepts(p.type, bound[j])) {
      py::handle h = bound[j];
      if (p.type == "int" && PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
        return name + "(): " + argument_words(p, position[j]) + " is " + std::string(py::str(h)) +
               ", which does not fit in int64";
      }
      std::string found = "not " + type_name(h);
      if (starts_with(p.type, "List[") && (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()))) {
        std::string inner = p.type.substr(5, p.type.size() - 6);
        Py_ssize_t i = 0;
        for (py::handle e : h) {
          if (!accepts(inner, e)) {
            found = "but found element of type " + type_name(e) + " at pos " + std::to_string(i);
            break;
          }
          ++i;
        }
      }
      return name + "(): " + argument_words(p, position[j]) + " must be " + display_type(p.type) +
             ", " + found;
    }
  }
  return "";
}

std::string incompatible_arguments(const function_record* chain, PyObject* args, PyObject* kwargs) {
  std::string name = function_name(chain);
  if (!chain->next) {
    std::string why = blame(chain, args, kwargs, name);
    if (!why.empty()) return why;
  }
  std::string s = name + "(): invalid arguments " + call_types(args, kwargs, chain->is_method) +
                  "; expected " + (chain->next ? "one of " : "");
  for (const function_record* r = chain; r; r = r->next) {
    s += (r == chain ? "" : " or ") + display_signature(r);
  }
  return s;
}

// pybind11's "Unable to cast Python instance of type <class 'X'> to C++ type ..." names the type;
// the argument holding a value of that type is the one to blame.
std::string cast_failure(const function_record* rec, PyObject* args, PyObject* kwargs,
                         const std::string& msg) {
  std::string name = function_name(rec);
  const std::string generic = name + "(): an argument has the wrong type; got " +
                              call_types(args, kwargs, rec->is_method);
  size_t at = msg.find("of type <class '");
  if (at == std::string::npos) return generic;  // pybind11 < 2.12 without detailed messages
  at += std::strlen("of type <class '");
  std::string type = msg.substr(at, msg.find('\'', at) - at);
  std::vector<Param> params = parse_signature(rec->signature);
  const int self_offset = rec->is_method ? 0 : 1;
  auto same_type = [&](PyObject* v) {
    std::string t = Py_TYPE(v)->tp_name;
    return t == type ||
           (type.size() > t.size() && type.compare(type.size() - t.size(), t.size(), t) == 0);
  };
  // Two arguments of that type: which one failed is unknown, so none is blamed.
  int holders = 0;
  for (Py_ssize_t i = rec->is_method ? 1 : 0; i < PyTuple_GET_SIZE(args); ++i) {
    holders += same_type(PyTuple_GET_ITEM(args, i));
  }
  if (kwargs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &k, &v)) holders += same_type(v);
  }
  if (holders > 1) return generic;
  for (Py_ssize_t i = rec->is_method ? 1 : 0; i < PyTuple_GET_SIZE(args); ++i) {
    if (!same_type(PyTuple_GET_ITEM(args, i))) continue;
    Param p;
    if (static_cast<size_t>(i) < params.size() && !params[i].var_args)
      p = params[i];
    else
      p.name = "arg";
    return name + "(): " + argument_words(p, static_cast<int>(i) + self_offset) +
           " has an unsupported type: " + type;
  }
  if (kwargs) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      if (!same_type(v)) continue;
      Param p;
      p.name = py::str(k);
      return name + "(): " + argument_words(p, 0) + " has an unsupported type: " + type;
    }
  }
  return name + "(): an argument has an unsupported type: " + type;
}

// The dtype of the call's first tensor, for an integer that does not fit.
std::string first_tensor_dtype(PyObject* args) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i) {
    py::handle h = PyTuple_GET_ITEM(args, i);
    if (py::isinstance<lz::Tensor>(h))
      return std::string(lz::dtype_name(h.cast<lz::Tensor>().dtype()));
  }
  return "";
}

void rewrite_error(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  const bool ours = type == PyExc_TypeError || type == PyExc_ValueError ||
                    type == PyExc_IndexError || type == PyExc_OverflowError;
  auto* rec = static_cast<const function_record*>(
      ours ? PyCapsule_GetPointer(self, py::detail::get_function_record_capsule_name()) : nullptr);
  if (!rec) {
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return;
  }
  std::string fresh;
  PyObject* fresh_type = type;
  try {
    PyErr_NormalizeException(&type, &value, &tb);
    std::string msg = py::str(value);
    if (msg.find("incompatible function arguments") != std::string::npos) {
      fresh = incompatible_arguments(rec, args, kwargs);
      fresh_type = PyExc_TypeError;
    } else if (starts_with(msg, "wrong argument type: Unable to cast")) {
      fresh = cast_failure(rec, args, kwargs, msg.substr(std::strlen("wrong argument type: ")));
    } else if (starts_with(msg, "argument") || starts_with(msg, "the integer ")) {
      fresh = function_name(rec) + "(): " + msg;
      if (type == PyExc_OverflowError) {
        std::string dt = first_tensor_dtype(args);
        if (!dt.empty()) fresh += " (the tensor is " + dt + ")";
      }
    }
  } catch (...) {
    fresh.clear();
  }
  PyErr_Clear();
  if (fresh.empty()) {
    PyErr_Restore(type, value, tb);
    return;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_SetString(fresh_type, fresh.c_str());
}

PyObject* dispatch(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* result = g_pybind_dispatch(self, args, kwargs);
  if (!result) rewrite_error(self, args, kwargs);
  return result;
}

// Points a pybind11 function object (or a method or property wrapping one) at `dispatch`. A
// property's accessors are named after it (pybind11 leaves them unnamed).
void reroute(py::handle obj, const char* property = nullptr) {
  PyObject* o = obj.ptr();
  if (PyInstanceMethod_Check(o)) o = PyInstanceMethod_GET_FUNCTION(o);
  if (PyObject_TypeCheck(o, &PyProperty_Type)) {
    for (const char* part : {"fget", "fset"}) {
      py::object f = py::reinterpret_borrow<py::object>(o).attr(part);
      if (!f.is_none()) reroute(f, property);
    }
    return;
  }
  if (!PyCFunction_Check(o)) return;
  PyObject* self = PyCFunction_GET_SELF(o);
  if (!self || !PyCapsule_CheckExact(self)) return;
  auto* rec = static_cast<function_record*>(
      PyCapsule_GetPointer(self, py::detail::get_function_record_capsule_name()));
  if (!rec) {
    PyErr_Clear();
    return;
  }
  PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(o)->m_ml;
  if (property && rec->name && !rec->name[0]) {
    std::free(rec->name);  // pybind11 strdup()s names and free()s them
    rec->name = strdup(property);
    def->ml_name = rec->name;
  }
  auto meth = reinterpret_cast<PyCFunctionWithKeywords>(reinterpret_cast<void (*)()>(def->ml_meth));
  if (meth == &dispatch) return;
  if (!g_pybind_dispatch) g_pybind_dispatch = meth;
  if (meth != g_pybind_dispatch) return;  // not pybind11's dispatcher: leave it alone
  def->ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatch));
}

void reroute_all(py::handle module) {
  py::dict d = py::reinterpret_borrow<py::dict>(PyModule_GetDict(module.ptr()));
  for (auto [key, value] : d) {
    if (PyModule_Check(value.ptr())) {
      // Submodules of lazuli._C only (lz.debug): never a module imported into it.
      if (starts_with(PyModule_GetName(value.ptr()), "lazuli._C.")) reroute_all(value);
    } else if (PyType_Check(value.ptr())) {
      py::dict members =
          py::reinterpret_borrow<py::dict>(reinterpret_cast<PyTypeObject*>(value.ptr())->tp_dict);
      for (auto [k, member] : members) {
        std::string key = py::str(k);
        reroute(member, key.c_str());
      }
    } else {
      reroute(value);
    }
  }
}

}  // namespace

void install_argument_errors(py::module_& m) { reroute_all(m); }

}  // namespace lzpy
