// Ops as lazuli functions and, where PyTorch has them, Tensor methods.
#include <algorithm>
#include <cstring>

#include "bindings.h"

namespace lzpy {
namespace {

using lz::Operand;
using lz::Tensor;
using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Operand&, const Operand&);

std::optional<lz::Scalar> opt_scalar(const py::object& o, const char* arg) {
  if (o.is_none()) return std::nullopt;
  return number_arg(o, arg);  // PyTorch also takes tensor bounds; Lazuli takes numbers
}

// max(dim) and min(dim) return (values, indices) as a named tuple, as torch.return_types.max.
py::object max_or_min(const Tensor& x, const py::object& dim, bool keepdim, bool is_max,
                      py::handle result_type) {
  if (dim.is_none()) return py::cast(is_max ? lz::max(x) : lz::min(x));
  if (py::isinstance<Tensor>(dim)) {  // torch.max(a, b): elementwise
    Tensor o = dim.cast<Tensor>();
    return py::cast(is_max ? lz::maximum(x, o) : lz::minimum(x, o));
  }
  int64_t d = int_arg(dim, "dim");
  auto r = is_max ? lz::max(x, d, keepdim) : lz::min(x, d, keepdim);
  return result_type(r.first, r.second);
}

lz::IntList varargs_shape(const py::args& args) { return shape_args(args); }

py::object split_impl(const Tensor& x, const py::object& size_or_sections, int64_t dim) {
  const char* arg = "split_size_or_sections";
  std::vector<Tensor> parts = PyLong_Check(size_or_sections.ptr()) || PyIndex_Check(size_or_sections.ptr())
                                  ? lz::split(x, int_arg(size_or_sections, arg), dim)
                                  : lz::split(x, int_list_arg(size_or_sections, arg), dim);
  return py::tuple(py::cast(parts));
}

// A device for Tensor.to: a string or a torch.device-like object (with .type and .index). Lazuli
// runs everything on one device; these are its names.
void check_device(py::handle d) {
  std::string spec;
  if (py::isinstance<py::str>(d)) {
    spec = d.cast<std::string>();
  } else if (py::hasattr(d, "type") && py::isinstance<py::str>(d.attr("type"))) {
    spec = d.attr("type").cast<std::string>();
    py::object index = d.attr("index");
    if (py::hasattr(d, "index") && !index.is_none()) spec += ":" + std::string(py::str(index));
  } else {
    throw py::type_error("Tensor.to(): expected a dtype, a device or a Tensor, got " + type_name(d));
  }
  std::string kind = spec.substr(0, spec.find(':'));
  bool ok = kind == "cpu" || kind == "lazy" || kind == "lazuli";
  if (ok && kind.size() < spec.size()) {
    std::string index = spec.substr(kind.size() + 1);
    ok = !index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
         index.size() < 6 && std::stoi(index) < std::max(1, lz::device_count());
  }
  if (ok) return;
  std::string msg = "Tensor.to(): '" + spec + "' is not a Lazuli device (its one device is 'cpu', "
                    "also called 'lazy' or 'lazuli', optionally with ':0')";
  for (const char* dt : {"float32", "float64", "float16", "bfloat16", "int32", "int64", "bool",
                         "float", "double", "half", "long", "int"}) {
    if (spec == dt) msg += "; for a dtype pass lz." + spec + ", not a string";
  }
  throw py::value_error(msg);
}

// Tensor.to in PyTorch's forms: to(dtype, non_blocking=False, copy=False), to(device=None,
// dtype=None, non_blocking=False, copy=False), to(other, non_blocking=False, copy=False). Like
// PyTorch it returns the tensor itself when nothing changes (and copy is false).
py::object tensor_to(py::object self, py::args args, py::kwargs kwargs) {
  const Tensor& x = self.cast<const Tensor&>();
  std::optional<lz::DType> dtype;
  bool copy = false;
  size_t next = 0;  // the next positional argument
  auto take_dtype = [&](py::handle h) {
    if (h.is_none()) return;
    if (!py::isinstance<lz::DType>(h)) {
      throw py::type_error("Tensor.to(): argument 'dtype' must be a lazuli dtype (lz.float32, lz.float64, "
                           "lz.int32, lz.int64, lz.bool), not " + type_name(h));
    }
    dtype = h.cast<lz::DType>();
  };
  bool first_is_device = true;
  if (args.size() > 0) {
    py::handle a = args[0];
    if (py::isinstance<lz::DType>(a)) {
      dtype = a.cast<lz::DType>();
      first_is_device = false;
    } else if (py::isinstance<Tensor>(a)) {
      dtype = a.cast<Tensor>().dtype();
      first_is_device = false;
    } else if (!a.is_none()) {
      check_device(a);
    }
    next = 1;
    if (first_is_device && args.size() > 1) take_dtype(args[next++]);
  }
  const char* flags[] = {"non_blocking", "copy"};
  for (size_t f = 0; next < args.size(); ++f, ++next) {
    if (f == 2) {
      throw py::type_error("Tensor.to() takes at most " + std::to_string(next) + " positional arguments (" +
                           std::to_string(args.size()) + " given)");
    }
    bool v = bool_arg(args[next], flags[f]);
    if (f == 1) copy = v;
  }
  for (auto [key, value] : kwargs) {
    std::string k = py::str(key);
    if (k == "dtype") {
      take_dtype(value);
    } else if (k == "device") {
      if (!value.is_none()) check_device(value);
    } else if (k == "copy") {
      copy = bool_arg(value, "copy");
    } else if (k == "non_blocking") {
      bool_arg(value, "non_blocking");  // every transfer is asynchronous already
    } else if (k != "memory_format") {
      throw py::type_error("Tensor.to() got an unexpected keyword argument '" + k + "'");
    }
  }
  if (dtype && *dtype != x.dtype()) return py::cast(lz::cast(x, *dtype));
  return copy ? py::cast(lz::contiguous(x)) : self;
}

}  // namespace

Tensor nonzero_flat(const Tensor& mask) {
  if (mask.dtype() != lz::DType::Bool) throw py::type_error("mask must be a bool tensor");
  fe::PendingRead r = read_interruptibly(mask, lz::CutReason::DataDependentShape);
  std::vector<uint8_t> bytes(static_cast<size_t>(mask.numel()));
  r.copy_to(bytes.data(), bytes.size());
  std::vector<int64_t> idx;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i]) idx.push_back(static_cast<int64_t>(i));
  }
  return lz::tensor<int64_t>(idx);
}

void bind_ops(py::module_& m, py::class_<Tensor>& cls) {
  // The functions of lazuli/elementwise.def, as lazuli functions and Tensor methods; their names
  // go to lazuli/__init__.py as _elementwise_names.
  const std::pair<const char*, Unary> unary[] = {
#define LZ_UNARY(fn, op) {#fn, lz::fn},
#define LZ_UNARY_ROUNDING(fn, op) {#fn, lz::fn},
#include "lazuli/elementwise.def"
#undef LZ_UNARY
#undef LZ_UNARY_ROUNDING
      {"neg", lz::neg}, {"logical_not", lz::logical_not}};
  const std::pair<const char*, Binary> binary[] = {
#define LZ_BINARY(fn, op) {#fn, lz::fn},
#define LZ_BINARY_LOGICAL(fn, op) {#fn, lz::fn},
#include "lazuli/elementwise.def"
#undef LZ_BINARY
#undef LZ_BINARY_LOGICAL
      {"pow", lz::pow}};
  py::list names;
  for (auto [name, f] : unary) {
    m.def(name, f, py::arg("input"));
    cls.def(name, f);
    names.append(name);
  }
  for (auto [name, f] : binary) {
    m.def(name, f, py::arg("input"), py::arg("other"));
    cls.def(name, [f](const Tensor& a, const Operand& b) { return f(a, b); }, py::arg("other"));
    names.append(name);
  }
  m.attr("_elementwise_names") = py::tuple(names);
  m.def("where", &lz::where, py::arg("condition"), py::arg("input"), py::arg("other"));
  auto clamp = [](const Tensor& x, py::object min, py::object max) {
    return lz::clamp(x, opt_scalar(min, "min"), opt_scalar(max, "max"));
  };
  m.def("clamp", clamp, py::arg("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
  cls.def("clamp", clamp, py::arg("min") = py::none(), py::arg("max") = py::none());
  cls.def("clip", clamp, py::arg("min") = py::none(), py::arg("max") = py::none());
  cls.def("to", &tensor_to, "to(dtype), to(device=None, dtype=None), to(other); non_blocking and copy "
          "keywords: PyTorch's forms. Lazuli's one device is 'cpu' (also 'lazy', 'lazuli', with ':0').");
  // As to(dtype): the tensor itself when it has the dtype already.
  const std::pair<const char*, lz::DType> casts[] = {
      {"float", lz::DType::Float32}, {"double", lz::DType::Float64}, {"int", lz::DType::Int32},
      {"long", lz::DType::Int64}, {"bool", lz::DType::Bool},
      {"half", lz::DType::Float16}, {"bfloat16", lz::DType::BFloat16}};
  for (auto [name, dt] : casts) {
    cls.def(name, [dt = dt](py::object self) -> py::object {
      const Tensor& x = self.cast<const Tensor&>();
      return x.dtype() == dt ? self : py::cast(lz::cast(x, dt));
    });
  }

  // reductions
  using Reduce = Tensor (*)(const Tensor&, const lz::IntList&, bool);
  const std::pair<const char*, Reduce> reductions[] = {
      {"sum", lz::sum}, {"mean", lz::mean}, {"prod", lz::prod}, {"amax", lz::amax},
      {"amin", lz::amin}, {"logsumexp", lz::logsumexp}, {"all", lz::all}, {"any", lz::any}};
  for (auto [name, f] : reductions) {
    auto fn = [f](const Tensor& x, py::object dim, bool keepdim) { return f(x, dims_arg(dim), keepdim); };
    m.def(name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    cls.def(name, fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  // scans
  for (bool product : {false, true}) {
    auto f = product ? &lz::cumprod : &lz::cumsum;
    auto fn = [f](const Tensor& x, const py::object& dim, const py::object& dtype) {
      std::optional<lz::DType> dt;
      if (!dtype.is_none()) dt = dtype_arg(dtype, lz::DType::Float32);
      return f(x, int_arg(dim, "dim"), dt);
    };
    const char* name = product ? "cumprod" : "cumsum";
    m.def(name, fn, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
    cls.def(name, fn, py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  }
  py::object namedtuple = py::module_::import("collections").attr("namedtuple");
  for (const char* name : {"max", "min"}) {  // kept alive by the module
    m.attr(("_" + std::string(name) + "_result").c_str()) =
        namedtuple(name, py::make_tuple("values", "indices"), py::arg("module") = "lazuli.return_types");
  }
  for (bool is_max : {true, false}) {
    py::handle result_type = m.attr(is_max ? "_max_result" : "_min_result");
    auto fn = [is_max, result_type](const Tensor& x, py::object dim, bool keepdim) {
      return max_or_min(x, dim, keepdim, is_max, result_type);
    };
    m.def(is_max ? "max" : "min", fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    cls.def(is_max ? "max" : "min", fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  // Ordering: named tuples (values, indices) as torch.return_types.sort / topk.
  for (const char* name : {"sort", "topk"}) {
    m.attr(("_" + std::string(name) + "_result").c_str()) =
        namedtuple(name, py::make_tuple("values", "indices"), py::arg("module") = "lazuli.return_types");
  }
  {
    py::handle sort_result = m.attr("_sort_result"), topk_result = m.attr("_topk_result");
    auto sort = [sort_result](const Tensor& x, int64_t dim, bool descending, bool stable) {
      auto r = lz::sort(x, dim, descending, stable);
      return sort_result(r.first, r.second);
    };
    m.def("sort", sort, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false,
          py::kw_only(), py::arg("stable") = false);
    cls.def("sort", sort, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(),
            py::arg("stable") = false);
    auto argsort = [](const Tensor& x, int64_t dim, bool descending, bool stable) {
      return lz::argsort(x, dim, descending, stable);
    };
    m.def("argsort", argsort, py::arg("input"), py::arg("dim") = -1, py::arg("descending") = false,
          py::arg("stable") = false);
    cls.def("argsort", argsort, py::arg("dim") = -1, py::arg("descending") = false,
            py::arg("stable") = false);
    m.def("msort", &lz::msort, py::arg("input"));
    cls.def("msort", &lz::msort);
    auto topk = [topk_result](const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
      auto r = lz::topk(x, k, dim, largest, sorted);
      return topk_result(r.first, r.second);
    };
    m.def("topk", topk, py::arg("input"), py::arg("k"), py::arg("dim") = -1,
          py::arg("largest") = true, py::arg("sorted") = true);
    cls.def("topk", topk, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true,
            py::arg("sorted") = true);
  }
  for (bool is_max : {true, false}) {
    auto fn = [is_max](const Tensor& x, py::object dim, bool keepdim) {
      std::optional<int64_t> d = opt_int_arg(dim, "dim");
      return is_max ? lz::argmax(x, d, keepdim) : lz::argmin(x, d, keepdim);
    };
    m.def(is_max ? "argmax" : "argmin", fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
    cls.def(is_max ? "argmax" : "argmin", fn, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  // var/std in PyTorch's overloads: (input, dim=None, unbiased=None, keepdim=False, *, correction)
  // and (input, unbiased), where a bool in dim's place is `unbiased`, never dim 0 or 1.
  for (bool is_std : {false, true}) {
    const char* name = is_std ? "std" : "var";
    auto fn = [is_std, name](const Tensor& x, py::object dim, py::object unbiased, py::object keepdim,
                             py::object correction) {
      if (PyBool_Check(dim.ptr())) {
        if (!unbiased.is_none()) {
          throw py::type_error(std::string(name) + "(): a bool in the place of 'dim' is 'unbiased' "
                               "(PyTorch's " + name + "(input, unbiased)); 'unbiased' was given too");
        }
        std::swap(dim, unbiased);
      }
      if (!unbiased.is_none() && !correction.is_none()) {
        throw py::type_error(std::string(name) + "(): give 'unbiased' or 'correction', not both");
      }
      int64_t c = correction.is_none() ? 1 : int_arg(correction, "correction");
      if (!unbiased.is_none()) c = bool_arg(unbiased, "unbiased") ? 1 : 0;
      bool kd = bool_arg(keepdim, "keepdim");
      return is_std ? lz::std(x, dims_arg(dim), c, kd) : lz::var(x, dims_arg(dim), c, kd);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim") = py::none(), py::arg("unbiased") = py::none(),
          py::arg("keepdim") = false, py::kw_only(), py::arg("correction") = py::none());
    cls.def(name, fn, py::arg("dim") = py::none(), py::arg("unbiased") = py::none(),
            py::arg("keepdim") = false, py::kw_only(), py::arg("correction") = py::none());
  }

  // matrix
  m.def("matmul", &lz::matmul, py::arg("input"), py::arg("other"));
  cls.def("matmul", &lz::matmul, py::arg("other"));

  // shape and movement
  cls.def("reshape", [](const Tensor& x, py::args shape) { return lz::reshape(x, varargs_shape(shape)); });
  cls.def("view", [](const Tensor& x, py::args shape) { return lz::view(x, varargs_shape(shape)); });
  m.def("reshape", [](const Tensor& x, py::object shape) { return lz::reshape(x, shape_arg(shape)); },
        py::arg("input"), py::arg("shape"));
  m.def("flatten", &lz::flatten, py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  cls.def("flatten", &lz::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  auto squeeze = [](const Tensor& x, py::object dim) { return lz::squeeze(x, opt_int_arg(dim, "dim")); };
  m.def("squeeze", squeeze, py::arg("input"), py::arg("dim") = py::none());
  cls.def("squeeze", squeeze, py::arg("dim") = py::none());
  m.def("unsqueeze", &lz::unsqueeze, py::arg("input"), py::arg("dim"));
  cls.def("unsqueeze", &lz::unsqueeze, py::arg("dim"));
  m.def("transpose", &lz::transpose, py::arg("input"), py::arg("dim0"), py::arg("dim1"));
  cls.def("transpose", &lz::transpose, py::arg("dim0"), py::arg("dim1"));
  m.def("permute", [](const Tensor& x, py::object dims) { return lz::permute(x, shape_arg(dims)); },
        py::arg("input"), py::arg("dims"));
  cls.def("permute", [](const Tensor& x, py::args dims) { return lz::permute(x, varargs_shape(dims)); });
  cls.def_property_readonly("T", [](const Tensor& x) { return x.T(); });
  cls.def("expand", [](const Tensor& x, py::args sizes) { return lz::expand(x, varargs_shape(sizes)); });
  m.def("broadcast_to", [](const Tensor& x, py::object s) { return lz::broadcast_to(x, shape_arg(s)); },
        py::arg("input"), py::arg("shape"));
  cls.def("broadcast_to", [](const Tensor& x, py::object s) { return lz::broadcast_to(x, shape_arg(s)); });
  cls.def("expand_as", [](const Tensor& x, const Tensor& o) { return lz::expand(x, o.shape()); });
  // As PyTorch: a contiguous tensor itself (y is x), else a copy.
  cls.def("contiguous", [](py::object self) -> py::object {
    const Tensor& x = self.cast<const Tensor&>();
    return x.is_contiguous() ? self : py::cast(lz::contiguous(x));
  });
  cls.def("is_contiguous", &Tensor::is_contiguous);
  cls.def("stride", [](const Tensor& x, py::object dim) -> py::object {
    std::vector<int64_t> st = x.strides();
    if (dim.is_none()) return py::tuple(py::cast(st));
    if (x.dim() == 0) throw py::index_error("stride(): a 0-d tensor has no dim to ask about");
    return py::int_(st[lz::wrap_dim(int_arg(dim, "dim"), x.dim(), "stride")]);
  }, py::arg("dim") = py::none());
  cls.def("clone", &lz::contiguous);
  cls.def("select", &lz::select, py::arg("dim"), py::arg("index"));
  cls.def("_slice", [](const Tensor& x, int64_t dim, py::object start, py::object end, int64_t step) {
    return lz::slice(x, dim, opt_int_arg(start, "start"), opt_int_arg(end, "end"), step);
  });
  // Tensors as a list or tuple, not a tensor (whose rows a sequence caster would take).
  auto cat = [](py::object ts, int64_t dim) { return lz::cat(tensors_arg(ts, "tensors"), dim); };
  m.def("cat", cat, py::arg("tensors"), py::arg("dim") = 0);
  m.def("concat", cat, py::arg("tensors"), py::arg("dim") = 0);
  m.def("stack", [](py::object ts, int64_t dim) { return lz::stack(tensors_arg(ts, "tensors"), dim); },
        py::arg("tensors"), py::arg("dim") = 0);
  m.def("split", &split_impl, py::arg("tensor"), py::arg("split_size_or_sections"), py::arg("dim") = 0);
  cls.def("split", &split_impl, py::arg("split_size_or_sections"), py::arg("dim") = 0);
  auto chunk = [](const Tensor& x, int64_t chunks, int64_t dim) { return py::tuple(py::cast(lz::chunk(x, chunks, dim))); };
  m.def("chunk", chunk, py::arg("input"), py::arg("chunks"), py::arg("dim") = 0);
  cls.def("chunk", chunk, py::arg("chunks"), py::arg("dim") = 0);
  m.def("index_select", &lz::index_select, py::arg("input"), py::arg("dim"), py::arg("index"));
  cls.def("index_select", &lz::index_select, py::arg("dim"), py::arg("index"));
  m.def("gather", &lz::gather, py::arg("input"), py::arg("dim"), py::arg("index"));
  cls.def("gather", &lz::gather, py::arg("dim"), py::arg("index"));
  m.def("scatter_add", &lz::scatter_add, py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"));
  cls.def("scatter_add", &lz::scatter_add, py::arg("dim"), py::arg("index"), py::arg("src"));
  m.def("_nonzero_flat", &nonzero_flat);
  // Run-time errors name the op the user called (src/ir/origin.h): Python composites mark it.
  m.def("_enter_user_op", &lz::ir::enter_user_op);
  m.def("_exit_user_op", &lz::ir::exit_user_op);
  // A host index's values checked at the line (negative values count from the end).
  m.def(
      "_check_index_bounds",
      [](const Tensor& index, int64_t size, const std::string& op, bool allow_negative,
         std::optional<int64_t> ignore_index) {
        fe::check_index_values(index, size, allow_negative, op.c_str(), ignore_index);
      },
      py::arg("index"), py::arg("size"), py::arg("op"), py::arg("allow_negative") = true,
      py::arg("ignore_index") = py::none());

  // creation
  m.def("from_numpy", &from_numpy, py::arg("array"));
  // New contents for an existing tensor (same dtype and shape) without recording IR: optimizers
  // refresh their hyper-parameter scalars this way, so a captured step reads the new values.
  m.def("_set_host_data", [](const Tensor& t, const py::array& arr) {
    Tensor src = from_numpy(arr);
    if (src.dtype() != t.dtype() || src.shape() != t.shape()) {
      throw py::value_error("_set_host_data: expected " + std::string(lz::dtype_name(t.dtype())) +
                            " data of the tensor's shape");
    }
    py::array c = py::module_::import("numpy").attr("ascontiguousarray")(arr);
    fe::set_host_data(t, c.data(), static_cast<size_t>(c.nbytes()));
  }, py::arg("tensor"), py::arg("array"));
  m.def("_scalar_tensor", [](const Operand& v, py::object dtype) {
    if (v.is_tensor()) return v.tensor().contiguous();
    std::optional<lz::DType> dt;
    if (!dtype.is_none()) dt = dtype_arg(dtype, lz::DType::Float32);
    return lz::scalar_tensor(v.scalar(), dt);
  });
  m.def("zeros", [](py::args shape, py::object dtype) { return lz::zeros(shape_args(shape), dtype_arg(dtype, lz::DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("ones", [](py::args shape, py::object dtype) { return lz::ones(shape_args(shape), dtype_arg(dtype, lz::DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("full", [](py::object shape, const Operand& value, py::object dtype) {
          if (value.is_tensor()) throw py::type_error("full: the fill value must be a number");
          std::optional<lz::DType> dt;
          if (!dtype.is_none()) dt = dtype_arg(dtype, lz::DType::Float32);
          return lz::full(shape_arg(shape), value.scalar(), dt);
        }, py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("zeros_like", [](const Tensor& t, py::object dtype) { return lz::zeros(t.shape(), dtype_arg(dtype, t.dtype())); },
        py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("ones_like", [](const Tensor& t, py::object dtype) { return lz::ones(t.shape(), dtype_arg(dtype, t.dtype())); },
        py::arg("input"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("full_like", [](const Tensor& t, const Operand& v, py::object dtype) {
          if (v.is_tensor()) throw py::type_error("full_like: the fill value must be a number");
          return lz::full(t.shape(), v.scalar(), dtype_arg(dtype, t.dtype()));
        }, py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none());
  m.def("arange", [](py::object start, py::object end, py::object step, py::object dtype) {
          std::optional<lz::DType> dt;
          if (!dtype.is_none()) dt = dtype_arg(dtype, lz::DType::Float32);
          lz::Scalar first = number_arg(start, end.is_none() ? "end" : "start");
          lz::Scalar by = number_arg(step, "step");
          if (end.is_none()) return lz::arange(0, first, by, dt);
          return lz::arange(first, number_arg(end, "end"), by, dt);
        }, py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none());
  m.def("eye", [](int64_t n, py::object mcols, py::object dtype) {
          return lz::eye(n, opt_int_arg(mcols, "m"), dtype_arg(dtype, lz::DType::Float32));
        }, py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("dtype") = py::none());
  m.def("rand", [](py::args shape, py::object dtype) { return lz::rand(shape_args(shape), dtype_arg(dtype, lz::DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("randn", [](py::args shape, py::object dtype) { return lz::randn(shape_args(shape), dtype_arg(dtype, lz::DType::Float32)); },
        py::kw_only(), py::arg("dtype") = py::none());
  m.def("randint", [](int64_t low, py::object high, py::object size, py::object dtype) {
          // randint(high, size) or randint(low, high, size), as in PyTorch.
          if (size.is_none()) return lz::randint(0, low, shape_arg(high, "size"), dtype_arg(dtype, lz::DType::Int64));
          return lz::randint(low, int_arg(high, "high"), shape_arg(size), dtype_arg(dtype, lz::DType::Int64));
        }, py::arg("low"), py::arg("high"), py::arg("size") = py::none(), py::kw_only(), py::arg("dtype") = py::none());
  m.def("manual_seed", &lz::manual_seed, py::arg("seed"));
  m.def("constant", [](const Operand& v, py::object dtype) {
          if (v.is_tensor()) throw py::type_error("constant: the value must be a number");
          lz::DType dt = dtype_arg(dtype, lz::result_type({v}));
          return lz::constant(v.scalar(), dt);
        }, py::arg("value"), py::arg("dtype") = py::none(),
        "A number baked into the program: its value enters the graph hash (unlike plain numbers, "
        "which are parameters). Changing it recompiles.");
  m.def("result_type", [](const Operand& a, const Operand& b) { return lz::result_type({a, b}); });
}

}  // namespace lzpy
