// lazuli._C.Tensor: attributes, value reads, operators and methods (indexing:
// indexing_bindings.cpp).
#include "bindings.h"

namespace lzpy {
namespace {

using lz::Operand;
using lz::Tensor;

// The values as numpy holds them: a bfloat16 tensor, which numpy has no dtype for, reads as
// float32 (exact), so item(), tolist() and float() work on it as in PyTorch.
py::array to_numpy_values(const Tensor& t) {
  return to_numpy(t.dtype() == lz::DType::BFloat16 ? lz::cast(t, lz::DType::Float32) : t);
}

py::object read_scalar(const Tensor& t, const char* what) {
  if (t.numel() != 1) {
    throw py::value_error(std::string(what) + ": only one-element tensors can be converted to Python scalars (shape " +
                          lz::shape_str(t.shape()) + ")");
  }
  py::array a = to_numpy_values(t);
  return a.attr("reshape")(py::tuple()).attr("item")();
}

lz::Scalar number(const Operand& o, const char* op, const char* what) {
  if (o.is_tensor()) throw py::type_error(std::string(op) + ": " + what + " must be a number");
  return o.scalar();
}

// other * alpha as one number, keeping an int an int.
lz::Scalar scaled(const lz::Scalar& s, const lz::Scalar& alpha) {
  if (s.kind() != lz::Scalar::Kind::Float && alpha.kind() != lz::Scalar::Kind::Float) {
    return lz::Scalar(static_cast<long long>(s.to_int() * alpha.to_int()));
  }
  return lz::Scalar(s.to_double() * alpha.to_double());
}

}  // namespace

py::class_<Tensor> bind_tensor(py::module_& m) {
  py::class_<Tensor> t(m, "Tensor");
  t.def_property_readonly("shape", [](const Tensor& x) { return py::tuple(py::cast(x.shape())); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("_id", &Tensor::id)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("size", [](const Tensor& x, py::object dim) -> py::object {
             if (dim.is_none()) return py::tuple(py::cast(x.shape()));
             return py::int_(x.size(int_arg(dim, "dim")));
           }, py::arg("dim") = py::none())
      .def("__len__", [](const Tensor& x) {
        if (x.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return x.shape()[0];
      })
      // value reads
      .def("numpy", &to_numpy)
      .def("__array__", [](const Tensor& x, py::object dtype) {
             py::array a = to_numpy(x);
             return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
           }, py::arg("dtype") = py::none())
      .def("item", [](const Tensor& x) { return read_scalar(x, "item"); })
      .def("tolist", [](const Tensor& x) { return to_numpy_values(x).attr("tolist")(); })
      .def("__float__", [](const Tensor& x) { return read_scalar(x, "float").cast<double>(); })
      .def("__int__", [](const Tensor& x) { return read_scalar(x, "int").attr("__int__")(); })
      .def("__index__", [](const Tensor& x) {
        if (lz::is_floating(x.dtype()) || x.dtype() == lz::DType::Bool) {
          throw py::type_error("only integer tensors of a single element can be converted to an index");
        }
        return read_scalar(x, "index").attr("__int__")();
      })
      .def("__bool__", [](const Tensor& x) {
        if (x.numel() != 1) {
          throw py::value_error("the truth value of a tensor with " + std::to_string(x.numel()) +
                                " elements is ambiguous; use .any() or .all()");
        }
        return read_scalar(x, "bool").attr("__bool__")();
      })
      .def("__repr__", [](const Tensor& x) {
        std::string s;
        resume_after_interrupt([&] {
          // to_string may wait for a program; let other threads run.
          py::gil_scoped_release r;
          s = x.to_string();
        });
        return s;
      })
      // arithmetic (NotImplemented for operands that are neither tensors nor numbers)
      .def("__add__", [](const Tensor& a, const Operand& b) { return lz::add(a, b); }, py::is_operator())
      .def("__radd__", [](const Tensor& a, const Operand& b) { return lz::add(b, a); }, py::is_operator())
      .def("__sub__", [](const Tensor& a, const Operand& b) { return lz::sub(a, b); }, py::is_operator())
      .def("__rsub__", [](const Tensor& a, const Operand& b) { return lz::sub(b, a); }, py::is_operator())
      .def("__mul__", [](const Tensor& a, const Operand& b) { return lz::mul(a, b); }, py::is_operator())
      .def("__rmul__", [](const Tensor& a, const Operand& b) { return lz::mul(b, a); }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, const Operand& b) { return lz::div(a, b); }, py::is_operator())
      .def("__rtruediv__", [](const Tensor& a, const Operand& b) { return lz::div(b, a); }, py::is_operator())
      .def("__floordiv__", [](const Tensor& a, const Operand& b) { return lz::floor_divide(a, b); }, py::is_operator())
      .def("__rfloordiv__", [](const Tensor& a, const Operand& b) { return lz::floor_divide(b, a); }, py::is_operator())
      .def("__mod__", [](const Tensor& a, const Operand& b) { return lz::remainder(a, b); }, py::is_operator())
      .def("__rmod__", [](const Tensor& a, const Operand& b) { return lz::remainder(b, a); }, py::is_operator())
      .def("__pow__", [](const Tensor& a, const Operand& b) { return lz::pow(a, b); }, py::is_operator())
      .def("__rpow__", [](const Tensor& a, const Operand& b) { return lz::pow(b, a); }, py::is_operator())
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return lz::matmul(a, b); }, py::is_operator())
      .def("__eq__", [](const Tensor& a, const Operand& b) { return lz::eq(a, b); }, py::is_operator())
      .def("__ne__", [](const Tensor& a, const Operand& b) { return lz::ne(a, b); }, py::is_operator())
      .def("__lt__", [](const Tensor& a, const Operand& b) { return lz::lt(a, b); }, py::is_operator())
      .def("__le__", [](const Tensor& a, const Operand& b) { return lz::le(a, b); }, py::is_operator())
      .def("__gt__", [](const Tensor& a, const Operand& b) { return lz::gt(a, b); }, py::is_operator())
      .def("__ge__", [](const Tensor& a, const Operand& b) { return lz::ge(a, b); }, py::is_operator())
      .def("__and__", [](const Tensor& a, const Operand& b) { return lz::bitwise_and(a, b); }, py::is_operator())
      .def("__rand__", [](const Tensor& a, const Operand& b) { return lz::bitwise_and(b, a); }, py::is_operator())
      .def("__or__", [](const Tensor& a, const Operand& b) { return lz::bitwise_or(a, b); }, py::is_operator())
      .def("__ror__", [](const Tensor& a, const Operand& b) { return lz::bitwise_or(b, a); }, py::is_operator())
      .def("__xor__", [](const Tensor& a, const Operand& b) { return lz::bitwise_xor(a, b); }, py::is_operator())
      .def("__rxor__", [](const Tensor& a, const Operand& b) { return lz::bitwise_xor(b, a); }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return lz::neg(a); })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return lz::abs(a); })
      .def("__invert__", [](const Tensor& a) { return lz::bitwise_not(a); })
      .def("__iadd__", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.add_(b.tensor()) : a.add_(b.scalar());
           }, py::is_operator())
      .def("__isub__", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.sub_(b.tensor()) : a.sub_(b.scalar());
           }, py::is_operator())
      .def("__imul__", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.mul_(b.tensor()) : a.mul_(b.scalar());
           }, py::is_operator())
      .def("__itruediv__", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.div_(b.tensor()) : a.div_(b.scalar());
           }, py::is_operator())
      .def("__hash__", [](const Tensor& x) { return x.id(); })
      // in-place methods
      .def("add_", [](Tensor& a, const Operand& b, const Operand& alpha) -> Tensor& {
             lz::Scalar al = number(alpha, "add_", "alpha");
             return b.is_tensor() ? a.add_(b.tensor(), al) : a.add_(scaled(b.scalar(), al));
           }, py::arg("other"), py::kw_only(), py::arg("alpha") = 1)
      .def("sub_", [](Tensor& a, const Operand& b, const Operand& alpha) -> Tensor& {
             lz::Scalar al = number(alpha, "sub_", "alpha");
             return b.is_tensor() ? a.sub_(b.tensor(), al) : a.sub_(scaled(b.scalar(), al));
           }, py::arg("other"), py::kw_only(), py::arg("alpha") = 1)
      .def("mul_", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.mul_(b.tensor()) : a.mul_(b.scalar());
           })
      .def("div_", [](Tensor& a, const Operand& b) -> Tensor& {
             return b.is_tensor() ? a.div_(b.tensor()) : a.div_(b.scalar());
           })
      .def("copy_", &Tensor::copy_, py::arg("src"))
      .def("zero_", &Tensor::zero_)
      .def("fill_", [](Tensor& a, const Operand& v) -> Tensor& {
             return v.is_tensor() ? a.fill_(v.tensor()) : a.fill_(v.scalar());
           })
      .def("clamp_", [](Tensor& a, py::object min, py::object max) -> Tensor& {
             std::optional<lz::Scalar> lo, hi;
             if (!min.is_none()) lo = number_arg(min, "min");
             if (!max.is_none()) hi = number_arg(max, "max");
             return a.clamp_(lo, hi);
           }, py::arg("min") = py::none(), py::arg("max") = py::none())
      .def("scatter_add_", &Tensor::scatter_add_, py::arg("dim"), py::arg("index"), py::arg("src"))
      .def("_index_copy", [](const Tensor& a, int64_t dim, const Tensor& idx, const Tensor& src) {
        return lz::index_copy(a, dim, idx, src);
      });
  return t;
}

}  // namespace lzpy
