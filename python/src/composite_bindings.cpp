// The composite ops (src/ops/composite*.cpp) as lazuli functions, Tensor methods, and the
// functions behind lz.nn.functional (lazuli._C._nn) and lz.linalg (lazuli._C._linalg). The
// bindings convert arguments in PyTorch's forms and forward; the ops live in the C++ core.
#include "bindings.h"

namespace lzpy {
namespace {

using lz::Operand;
using lz::Tensor;

// A dims argument in PyTorch's forms: an int, a tuple or list, or (for methods) varargs.
lz::IntList varargs_or_list(const py::args& args, const char* arg) {
  if (args.size() == 1) {
    py::handle a = args[0];
    if (py::isinstance<py::tuple>(a) || py::isinstance<py::list>(a)) return int_list_arg(a, arg);
  }
  lz::IntList out;
  for (py::handle a : args) out.push_back(int_arg(a, arg));
  return out;
}

// An int or a sequence of ints.
lz::IntList int_or_list(const py::object& o, const char* arg) {
  if (py::isinstance<py::tuple>(o) || py::isinstance<py::list>(o)) return int_list_arg(o, arg);
  return {int_arg(o, arg)};
}

// None, a number or a tensor as a clamp bound: numbers become 0-d tensors when the other bound
// is a tensor (PyTorch accepts the mix).
Tensor bound_tensor(const py::object& o, const char* arg) {
  if (o.is_none()) return Tensor();
  if (py::isinstance<Tensor>(o)) return o.cast<Tensor>();
  return lz::scalar_tensor(number_arg(o, arg));
}

py::object clamp_any(const Tensor& x, const py::object& min, const py::object& max) {
  if (py::isinstance<Tensor>(min) || py::isinstance<Tensor>(max)) {
    return py::cast(lz::clamp(x, bound_tensor(min, "min"), bound_tensor(max, "max")));
  }
  std::optional<lz::Scalar> lo, hi;
  if (!min.is_none()) lo = number_arg(min, "min");
  if (!max.is_none()) hi = number_arg(max, "max");
  return py::cast(lz::clamp(x, lo, hi));
}

std::optional<lz::DType> opt_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return dtype_arg(dtype, lz::DType::Float32);
}

// dim=None (all dims), an int, or a tuple of ints.
lz::IntList norm_dims(const py::object& dim) {
  if (dim.is_none()) return {};
  return dims_arg(dim);
}

// torch.norm / Tensor.norm: p a number or 'fro' / 'nuc' (None is 2).
Tensor norm_any(const Tensor& x, const py::object& p, const py::object& dim, bool keepdim,
                const py::object& dtype) {
  if (py::isinstance<py::str>(p)) {
    return lz::norm(x, p.cast<std::string>(), norm_dims(dim), keepdim, opt_dtype(dtype));
  }
  double pv = p.is_none() ? 2.0 : number_arg(p, "p").to_double();
  return lz::norm(x, pv, norm_dims(dim), keepdim, opt_dtype(dtype));
}

std::optional<lz::IntList> opt_int_list(const py::object& o, const char* arg) {
  if (o.is_none()) return std::nullopt;
  return int_or_list(o, arg);
}

std::optional<std::vector<double>> opt_float_list(const py::object& o, const char* arg) {
  if (o.is_none()) return std::nullopt;
  std::vector<double> out;
  if (py::isinstance<py::tuple>(o) || py::isinstance<py::list>(o)) {
    for (py::handle h : o) out.push_back(number_arg(h, arg).to_double());
  } else {
    out.push_back(number_arg(o, arg).to_double());
  }
  return out;
}

std::optional<bool> opt_bool(const py::object& o, const char* arg) {
  if (o.is_none()) return std::nullopt;
  return bool_arg(o, arg);
}

void bind_nn(py::module_& nn) {
  nn.def("silu", &lz::nn::silu, py::arg("input"));
  nn.def("hardsigmoid", &lz::nn::hardsigmoid, py::arg("input"));
  nn.def("hardswish", &lz::nn::hardswish, py::arg("input"));
  nn.def("dropout2d", &lz::nn::dropout2d, py::arg("input"), py::arg("p") = 0.5,
         py::arg("training") = true);
  nn.def("one_hot", &lz::nn::one_hot, py::arg("tensor"), py::arg("num_classes") = -1);
  nn.def(
      "pad",
      [](const Tensor& x, py::object pad, const std::string& mode, py::object value) {
        std::optional<lz::Scalar> v;
        if (!value.is_none()) v = number_arg(value, "value");
        return lz::nn::pad(x, int_list_arg(pad, "pad"), mode, v);
      },
      py::arg("input"), py::arg("pad"), py::arg("mode") = "constant",
      py::arg("value") = py::none());
  nn.def(
      "interpolate",
      [](const Tensor& x, py::object size, py::object scale_factor, const std::string& mode,
         py::object align_corners, py::object recompute_scale_factor) {
        return lz::nn::interpolate(x, opt_int_list(size, "size"),
                                   opt_float_list(scale_factor, "scale_factor"), mode,
                                   opt_bool(align_corners, "align_corners"),
                                   opt_bool(recompute_scale_factor, "recompute_scale_factor"));
      },
      py::arg("input"), py::arg("size") = py::none(), py::arg("scale_factor") = py::none(),
      py::arg("mode") = "nearest", py::arg("align_corners") = py::none(),
      py::arg("recompute_scale_factor") = py::none());
}

void bind_linalg(py::module_& la) {
  la.def(
      "vector_norm",
      [](const Tensor& x, py::object ord, py::object dim, bool keepdim, py::object dtype) {
        return lz::linalg::vector_norm(x, number_arg(ord, "ord").to_double(), norm_dims(dim),
                                       keepdim, opt_dtype(dtype));
      },
      py::arg("x"), py::arg("ord") = 2, py::arg("dim") = py::none(), py::arg("keepdim") = false,
      py::kw_only(), py::arg("dtype") = py::none());
  la.def(
      "matrix_norm",
      [](const Tensor& x, py::object ord, py::object dim, bool keepdim, py::object dtype) {
        lz::IntList ds = int_list_arg(dim, "dim");
        if (py::isinstance<py::str>(ord)) {
          return lz::linalg::matrix_norm(x, ord.cast<std::string>(), ds, keepdim, opt_dtype(dtype));
        }
        return lz::linalg::matrix_norm(x, number_arg(ord, "ord").to_double(), ds, keepdim,
                                       opt_dtype(dtype));
      },
      py::arg("A"), py::arg("ord") = "fro", py::arg("dim") = py::make_tuple(-2, -1),
      py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  la.def(
      "norm",
      [](const Tensor& x, py::object ord, py::object dim, bool keepdim, py::object dtype) {
        lz::IntList ds = norm_dims(dim);
        if (py::isinstance<py::str>(ord)) {
          return lz::linalg::norm(x, ord.cast<std::string>(), ds, keepdim, opt_dtype(dtype));
        }
        std::optional<double> o;
        if (!ord.is_none()) o = number_arg(ord, "ord").to_double();
        return lz::linalg::norm(x, o, ds, keepdim, opt_dtype(dtype));
      },
      py::arg("A"), py::arg("ord") = py::none(), py::arg("dim") = py::none(),
      py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
}

}  // namespace

void bind_composites(py::module_& m, py::class_<Tensor>& cls) {
  for (bool lower : {true, false}) {
    auto f = lower ? &lz::tril : &lz::triu;
    auto f_ = lower ? &lz::tril_ : &lz::triu_;
    const char* name = lower ? "tril" : "triu";
    m.def(name, f, py::arg("input"), py::arg("diagonal") = 0);
    cls.def(name, f, py::arg("diagonal") = 0);
    cls.def(lower ? "tril_" : "triu_", f_, py::arg("diagonal") = 0);
  }
  m.def("masked_fill", &lz::masked_fill, py::arg("input"), py::arg("mask"), py::arg("value"));
  cls.def("masked_fill", &lz::masked_fill, py::arg("mask"), py::arg("value"));
  cls.def("masked_fill_", &lz::masked_fill_, py::arg("mask"), py::arg("value"));
  m.def(
      "flip",
      [](const Tensor& x, py::object dims) { return lz::flip(x, int_or_list(dims, "dims")); },
      py::arg("input"), py::arg("dims"));
  cls.def("flip", [](const Tensor& x, py::args dims) {
    return lz::flip(x, varargs_or_list(dims, "dims"));
  });
  auto roll = [](const Tensor& x, py::object shifts, py::object dims) {
    return lz::roll(x, int_or_list(shifts, "shifts"),
                    dims.is_none() ? lz::IntList{} : int_or_list(dims, "dims"));
  };
  m.def("roll", roll, py::arg("input"), py::arg("shifts"), py::arg("dims") = py::none());
  cls.def("roll", roll, py::arg("shifts"), py::arg("dims") = py::none());
  cls.def("repeat", [](const Tensor& x, py::args sizes) {
    return lz::repeat(x, varargs_or_list(sizes, "repeats"));
  });
  m.def("multinomial", &lz::multinomial, py::arg("input"), py::arg("num_samples"),
        py::arg("replacement") = false);
  cls.def("multinomial", &lz::multinomial, py::arg("num_samples"), py::arg("replacement") = false);

  // clamp with number or tensor bounds replaces the numbers-only binding (ops_bindings.cpp).
  for (const char* name : {"clamp", "clip"}) {
    if (py::hasattr(m, name)) py::delattr(m, name);
    if (py::hasattr(cls, name)) py::delattr(cls, name);
    m.def(name, &clamp_any, py::arg("input"), py::arg("min") = py::none(),
          py::arg("max") = py::none());
    cls.def(name, &clamp_any, py::arg("min") = py::none(), py::arg("max") = py::none());
  }
  for (const char* name : {"clamp_", "clip_"}) {
    if (py::hasattr(cls, name)) py::delattr(cls, name);
    cls.def(
        name,
        [name](Tensor& x, py::object min, py::object max) -> Tensor& {
          if (min.is_none() && max.is_none()) {
            throw py::value_error(std::string("Tensor.") + name +
                                  "(): at least one of min and max must be given");
          }
          if (py::isinstance<Tensor>(min) || py::isinstance<Tensor>(max)) {
            return lz::clamp_(x, bound_tensor(min, "min"), bound_tensor(max, "max"));
          }
          std::optional<lz::Scalar> lo, hi;
          if (!min.is_none()) lo = number_arg(min, "min");
          if (!max.is_none()) hi = number_arg(max, "max");
          return x.clamp_(lo, hi);
        },
        py::arg("min") = py::none(), py::arg("max") = py::none());
  }

  m.def("norm", &norm_any, py::arg("input"), py::arg("p") = "fro", py::arg("dim") = py::none(),
        py::arg("keepdim") = false, py::arg("dtype") = py::none());
  cls.def("norm", &norm_any, py::arg("p") = "fro", py::arg("dim") = py::none(),
          py::arg("keepdim") = false, py::arg("dtype") = py::none());

  // Named after the public modules that re-export them, so argument errors say
  // "lz.nn.functional.pad()" and "lz.linalg.norm()" (argument_errors.cpp reads __name__).
  py::module_ nn =
      m.def_submodule("_nn", "lz.nn.functional's composite ops (src/ops/composite_nn.cpp)");
  nn.attr("__name__") = "lazuli._C.nn.functional";
  bind_nn(nn);
  py::module_ la = m.def_submodule("_linalg", "lz.linalg (src/ops/linalg_norms.cpp)");
  la.attr("__name__") = "lazuli._C.linalg";
  bind_linalg(la);
}

}  // namespace lzpy
