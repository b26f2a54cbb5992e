// lazuli._C._nn: the functional ops, losses, attention, convolution, pooling and normalization
// (lz::nn, include/lazuli/nn.h), beside the composites of composite_bindings.cpp, under the names
// lz.nn.functional re-exports (so argument errors say "lz.nn.functional.conv2d()"). Ints or tuples
// of ints convert as PyTorch's _pair does; None for an optional tensor is an undefined Tensor.
#include "bindings.h"

namespace lzpy {
namespace {

// An int (every spatial dim) or a tuple/list of ints.
lz::IntList ints(const py::object& v, const char* arg) { return shape_arg(v, arg); }

lz::Tensor opt_tensor(const py::object& v, const char* arg) {
  return v.is_none() ? lz::Tensor() : tensor_arg(v, arg);
}

lz::nn::ConvPadding padding_arg(const py::object& v) {
  if (py::isinstance<py::str>(v)) return lz::nn::ConvPadding(v.cast<std::string>());
  return lz::nn::ConvPadding(ints(v, "padding"));
}

}  // namespace

void bind_nn_layers(py::module_& parent) {
  py::module_ m = parent.attr("_nn");
  // The functional ops lz.nn.functional wraps (its wrappers keep PyTorch's signatures and
  // argument messages; every semantic is here, in C++).
  m.def(
      "scaled_dot_product_attention",
      [](const lz::Tensor& q, const lz::Tensor& k, const lz::Tensor& v, const py::object& attn_mask,
         double dropout_p, bool is_causal, const py::object& scale, bool enable_gqa) {
        std::optional<double> s;
        if (!scale.is_none()) s = number_arg(scale, "scale").to_double();
        return lz::nn::scaled_dot_product_attention(q, k, v, opt_tensor(attn_mask, "attn_mask"),
                                                    dropout_p, is_causal, s, enable_gqa);
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
      py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::kw_only(),
      py::arg("scale") = py::none(), py::arg("enable_gqa") = false);
  m.def(
      "linear",
      [](const lz::Tensor& x, const lz::Tensor& w, const py::object& bias) {
        return lz::nn::linear(x, w, opt_tensor(bias, "bias"));
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("softmax", &lz::nn::softmax, py::arg("input"), py::arg("dim") = -1);
  m.def("log_softmax", &lz::nn::log_softmax, py::arg("input"), py::arg("dim") = -1);
  m.def(
      "gelu",
      [](const lz::Tensor& x, const std::string& approximate) {
        return lz::nn::gelu(x, approximate);
      },
      py::arg("input"), py::arg("approximate") = "none");
  m.def("dropout", &lz::nn::dropout, py::arg("input"), py::arg("p") = 0.5,
        py::arg("training") = true);
  m.def(
      "layer_norm",
      [](const lz::Tensor& x, const py::object& normalized_shape, const py::object& weight,
         const py::object& bias, double eps) {
        return lz::nn::layer_norm(x, ints(normalized_shape, "normalized_shape"),
                                  opt_tensor(weight, "weight"), opt_tensor(bias, "bias"), eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  m.def("embedding", &lz::nn::embedding, py::arg("input"), py::arg("weight"));
  m.def(
      "nll_loss",
      [](const lz::Tensor& x, const lz::Tensor& target, const py::object& weight,
         int64_t ignore_index, const std::string& reduction) {
        return lz::nn::nll_loss(x, target, opt_tensor(weight, "weight"), ignore_index, reduction);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("ignore_index") = -100, py::arg("reduction") = "mean");
  m.def(
      "cross_entropy",
      [](const lz::Tensor& x, const lz::Tensor& target, const py::object& weight,
         int64_t ignore_index, const std::string& reduction, double label_smoothing) {
        return lz::nn::cross_entropy(x, target, opt_tensor(weight, "weight"), ignore_index,
                                     reduction, label_smoothing);
      },
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("ignore_index") = -100, py::arg("reduction") = "mean",
      py::arg("label_smoothing") = 0.0);
  m.def(
      "mse_loss",
      [](const lz::Tensor& x, const lz::Tensor& target, const std::string& reduction) {
        return lz::nn::mse_loss(x, target, reduction);
      },
      py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");

  for (int sp : {1, 2}) {
    auto conv = [sp](const lz::Tensor& x, const lz::Tensor& w, const py::object& bias,
                     const py::object& stride, const py::object& padding,
                     const py::object& dilation, int64_t groups) {
      auto f = sp == 1 ? &lz::nn::conv1d : &lz::nn::conv2d;
      return f(x, w, opt_tensor(bias, "bias"), ints(stride, "stride"), padding_arg(padding),
               ints(dilation, "dilation"), groups);
    };
    m.def(sp == 1 ? "conv1d" : "conv2d", conv, py::arg("input"), py::arg("weight"),
          py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
          py::arg("dilation") = 1, py::arg("groups") = 1);
    auto conv_t = [sp](const lz::Tensor& x, const lz::Tensor& w, const py::object& bias,
                       const py::object& stride, const py::object& padding,
                       const py::object& output_padding, int64_t groups,
                       const py::object& dilation) {
      auto f = sp == 1 ? &lz::nn::conv_transpose1d : &lz::nn::conv_transpose2d;
      return f(x, w, opt_tensor(bias, "bias"), ints(stride, "stride"), ints(padding, "padding"),
               ints(output_padding, "output_padding"), groups, ints(dilation, "dilation"));
    };
    m.def(sp == 1 ? "conv_transpose1d" : "conv_transpose2d", conv_t, py::arg("input"),
          py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
          py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1,
          py::arg("dilation") = 1);
    auto max_pool = [sp](const lz::Tensor& x, const py::object& kernel, const py::object& stride,
                         const py::object& padding, const py::object& dilation, bool ceil_mode,
                         bool return_indices) -> py::object {
      auto f = sp == 1 ? &lz::nn::max_pool1d_with_indices : &lz::nn::max_pool2d_with_indices;
      lz::IntList st = stride.is_none() ? lz::IntList{} : ints(stride, "stride");
      auto [v, i] = f(x, ints(kernel, "kernel_size"), st, ints(padding, "padding"),
                      ints(dilation, "dilation"), ceil_mode);
      if (return_indices) return py::make_tuple(v, i);
      return py::cast(v);
    };
    m.def(sp == 1 ? "max_pool1d" : "max_pool2d", max_pool, py::arg("input"), py::arg("kernel_size"),
          py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
          py::arg("ceil_mode") = false, py::arg("return_indices") = false);
    m.def(
        sp == 1 ? "adaptive_avg_pool1d" : "adaptive_avg_pool2d",
        [sp](const lz::Tensor& x, const py::object& output_size) {
          auto f = sp == 1 ? &lz::nn::adaptive_avg_pool1d : &lz::nn::adaptive_avg_pool2d;
          return f(x, ints(output_size, "output_size"));
        },
        py::arg("input"), py::arg("output_size"));
  }
  m.def(
      "avg_pool1d",
      [](const lz::Tensor& x, const py::object& kernel, const py::object& stride,
         const py::object& padding, bool ceil_mode, bool count_include_pad) {
        lz::IntList st = stride.is_none() ? lz::IntList{} : ints(stride, "stride");
        return lz::nn::avg_pool1d(x, ints(kernel, "kernel_size"), st, ints(padding, "padding"),
                                  ceil_mode, count_include_pad);
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(),
      py::arg("padding") = 0, py::arg("ceil_mode") = false, py::arg("count_include_pad") = true);
  m.def(
      "avg_pool2d",
      [](const lz::Tensor& x, const py::object& kernel, const py::object& stride,
         const py::object& padding, bool ceil_mode, bool count_include_pad,
         const py::object& divisor_override) {
        lz::IntList st = stride.is_none() ? lz::IntList{} : ints(stride, "stride");
        return lz::nn::avg_pool2d(x, ints(kernel, "kernel_size"), st, ints(padding, "padding"),
                                  ceil_mode, count_include_pad,
                                  opt_int_arg(divisor_override, "divisor_override"));
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(),
      py::arg("padding") = 0, py::arg("ceil_mode") = false, py::arg("count_include_pad") = true,
      py::arg("divisor_override") = py::none());
  m.def(
      "batch_norm",
      [](const lz::Tensor& x, const py::object& running_mean, const py::object& running_var,
         const py::object& weight, const py::object& bias, bool training, double momentum,
         double eps) {
        return lz::nn::batch_norm(
            x, opt_tensor(running_mean, "running_mean"), opt_tensor(running_var, "running_var"),
            opt_tensor(weight, "weight"), opt_tensor(bias, "bias"), training, momentum, eps);
      },
      py::arg("input"), py::arg("running_mean"), py::arg("running_var"),
      py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("training") = false,
      py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  m.def(
      "group_norm",
      [](const lz::Tensor& x, int64_t num_groups, const py::object& weight, const py::object& bias,
         double eps) {
        return lz::nn::group_norm(x, num_groups, opt_tensor(weight, "weight"),
                                  opt_tensor(bias, "bias"), eps);
      },
      py::arg("input"), py::arg("num_groups"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  m.def(
      "rms_norm",
      [](const lz::Tensor& x, const py::object& normalized_shape, const py::object& weight,
         const py::object& eps) {
        std::optional<double> e;
        if (!eps.is_none()) e = eps.cast<double>();
        return lz::nn::rms_norm(x, ints(normalized_shape, "normalized_shape"),
                                opt_tensor(weight, "weight"), e);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("eps") = py::none());
  // The gradients, as ATen's convolution_backward and torch.nn.grad need them.
  m.def(
      "conv_input_grad",
      [](const py::object& input_shape, const lz::Tensor& w, const lz::Tensor& dy,
         const py::object& stride, const py::object& padding, const py::object& dilation,
         int64_t groups) {
        return lz::nn::conv_input_grad(ints(input_shape, "input_size"), w, dy,
                                       ints(stride, "stride"), ints(padding, "padding"),
                                       ints(dilation, "dilation"), groups);
      },
      py::arg("input_size"), py::arg("weight"), py::arg("grad_output"), py::arg("stride") = 1,
      py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  m.def(
      "conv_weight_grad",
      [](const lz::Tensor& x, const py::object& weight_shape, const lz::Tensor& dy,
         const py::object& stride, const py::object& padding, const py::object& dilation,
         int64_t groups) {
        return lz::nn::conv_weight_grad(x, ints(weight_shape, "weight_size"), dy,
                                        ints(stride, "stride"), ints(padding, "padding"),
                                        ints(dilation, "dilation"), groups);
      },
      py::arg("input"), py::arg("weight_size"), py::arg("grad_output"), py::arg("stride") = 1,
      py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
  m.def(
      "avg_pool_input_grad",
      [](const lz::Tensor& dy, const py::object& input_shape, const py::object& kernel,
         const py::object& stride, const py::object& padding, bool ceil_mode,
         bool count_include_pad, const py::object& divisor_override) {
        lz::IntList st = stride.is_none() ? lz::IntList{} : ints(stride, "stride");
        return lz::nn::avg_pool_input_grad(dy, ints(input_shape, "input_size"),
                                           ints(kernel, "kernel_size"), st,
                                           ints(padding, "padding"), ceil_mode, count_include_pad,
                                           opt_int_arg(divisor_override, "divisor_override"));
      },
      py::arg("grad_output"), py::arg("input_size"), py::arg("kernel_size"),
      py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
      py::arg("count_include_pad") = true, py::arg("divisor_override") = py::none());
}

}  // namespace lzpy
