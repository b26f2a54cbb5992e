// Language-model ops (issue 13): cumsum/cumprod (lazuli._C and Tensor methods), scaled
// dot-product attention (lazuli._C._nn, re-exported by lz.nn.functional), and the keyed random
// draws the torch.compile bridge lowers dropout with (a key that is an input of the program, not
// the device's RNG state: python/lazuli/torch/lowering_random.py).
#include "bindings.h"
#include "ops/frontend.h"

namespace lzpy {
namespace {

using lz::Tensor;

std::optional<lz::DType> optional_dtype(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  return dtype_arg(dtype, lz::DType::Float32);
}

lz::ir::Value key_value(const Tensor& key, const char* op) {
  lz::ir::Value k = lz::frontend::value_of(key, op);
  if (key.dtype() != lz::DType::Int64 || key.dim() != 0) {
    throw lz::TypeError(std::string(op) + ": the key must be an int64 0-d tensor, got " +
                        std::string(lz::dtype_name(key.dtype())) + lz::shape_str(key.shape()));
  }
  return k;
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

  m.def(
      "_rand_from_key",
      [](const Tensor& key, const py::object& shape, const py::object& dtype) {
        lz::IntList s = shape_arg(shape, "size");
        lz::DType dt = dtype_arg(dtype, lz::DType::Float32);
        if (!lz::is_floating(dt)) throw lz::TypeError("_rand_from_key: dtype must be floating");
        lz::ir::Value k = key_value(key, "_rand_from_key");
        return lz::frontend::wrap(lz::frontend::node(lz::ir::OpKind::RngUniform, {k},
                                                     lz::ir::RandomAttrs{lz::Shape(s), dt}));
      },
      py::arg("key"), py::arg("size"), py::arg("dtype") = py::none(),
      "U[0, 1) draws of `size` from an int64 0-d key tensor (counter-based, as lz.rand's), "
      "without touching the device's RNG state.");
  m.def(
      "_rng_advance",
      [](const Tensor& key) {
        return lz::frontend::wrap(
            lz::frontend::node(lz::ir::OpKind::RngAdvance, {key_value(key, "_rng_advance")}));
      },
      py::arg("key"), "The key after `key` (as the device's RNG state advances).");
}

}  // namespace lzpy
