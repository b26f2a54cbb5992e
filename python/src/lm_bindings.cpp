// Language-model ops: cumsum/cumprod (lazuli._C and Tensor methods) and scaled dot-product
// attention (lazuli._C._nn, re-exported by lz.nn.functional).
#include "bindings.h"

namespace lzpy {
namespace {

using lz::Tensor;

std::optional<lz::DType> optional_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return dtype_arg(dtype, lz::DType::Float32);
}

}  // namespace

void bind_lm_ops(py::module_& m, py::class_<Tensor>& cls) {
  for (bool product : {false, true}) {
    auto f = product ? &lz::cumprod : &lz::cumsum;
    auto fn = [f](const Tensor& x, const py::object& dim, const py::object& dtype) {
      return f(x, int_arg(dim, "dim"), optional_dtype(dtype));
    };
    const char* name = product ? "cumprod" : "cumsum";
    m.def(name, fn, py::arg("input"), py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
    cls.def(name, fn, py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
  }

  py::module_ nn = m.attr("_nn");
  nn.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, const py::object& attn_mask,
         double dropout_p, bool is_causal, const py::object& scale, bool enable_gqa) {
        Tensor mask = attn_mask.is_none() ? Tensor() : tensor_arg(attn_mask, "attn_mask");
        std::optional<double> s;
        if (!scale.is_none()) s = number_arg(scale, "scale").to_double();
        return lz::nn::scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal, s,
                                                    enable_gqa);
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
      py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::kw_only(),
      py::arg("scale") = py::none(), py::arg("enable_gqa") = false);

}

}  // namespace lzpy
