// lz::nn losses (include/lazuli/nn.h): nll_loss, cross_entropy and mse_loss with PyTorch's weight,
// ignore_index, reduction and label_smoothing, composite in public ops (their gradients come from
// the primitives' rules). lz.nn.functional binds these; its wrappers only convert arguments.
#include <string>
#include <utility>

#include "core/shape.h"
#include "ir/origin.h"
#include "lazuli/nn.h"
#include "ops/frontend.h"
#include "ops/nn_checks.h"

namespace lz::nn {
using detail::check_defined;
using detail::number_str;

namespace {

// "(4, 3)", "(3,)", "()": shapes as a Python user writes them, since these messages reach Python.
std::string tuple_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

// "float32 (4, 3)"
std::string arg_str(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " " + tuple_str(t.shape());
}

void check_reduction(const char* op, const std::string& reduction) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none") {
    throw ValueError(std::string(op) + ": reduction must be 'mean', 'sum' or 'none', got '" +
                     reduction + "'");
  }
}

Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "mean") return mean(loss);
  if (reduction == "sum") return sum(loss);
  return loss;
}

// The class dim at 1 with at least one batch dim: PyTorch's (C,) input with a () target is one
// unbatched sample (squeeze: its "none" loss is 0-d again).
struct ClassLayout {
  Tensor input, target;
  bool squeeze = false;
};

ClassLayout class_layout(const char* op, const Tensor& input, const Tensor& target) {
  if (input.dim() == 0) {
    throw ValueError(std::string(op) + ": expects an input with a class dim, got a 0-d tensor (" +
                     arg_str(input) + ")");
  }
  if (input.dim() == 1) return {unsqueeze(input, 0), unsqueeze(target, 0), true};
  return {input, target, false};
}

void check_weight(const char* op, const Tensor& weight, int64_t n_classes) {
  if (weight.defined() && weight.shape() != Shape{n_classes}) {
    throw ValueError(std::string(op) + ": weight must have shape (" + std::to_string(n_classes) +
                     ",) (one per class), got " + arg_str(weight));
  }
}

// Per-element -w[t] * log_probs[t] (0 where target == ignore_index) and the weights used, for
// log_probs (N, C, d...) and class indices (N, d...).
std::pair<Tensor, Tensor> class_weighted_loss(const char* op, const Tensor& log_probs,
                                              const Tensor& target, const Tensor& weight,
                                              int64_t ignore_index) {
  const Shape& lp = log_probs.shape();
  Shape want{lp[0]};
  want.insert(want.end(), lp.begin() + 2, lp.end());
  if (target.shape() != want) {
    std::string hint;
    if (lp.size() >= 3 && target.shape() == Shape(lp.begin(), lp.end() - 1)) {
      // A language model's [B, T, V] logits with [B, T] targets (PyTorch refuses them too).
      hint =
          " (the class dim is dim 1, as in PyTorch: pass [B, T, C] logits as "
          "input.transpose(1, 2), or input.reshape(-1, C) with target.reshape(-1))";
    }
    throw ValueError(std::string(op) + ": expects input (N, C, d...) and target (N, d...), got " +
                     arg_str(log_probs) + " and " + arg_str(target) + hint);
  }
  if (target.dtype() != DType::Int64 && target.dtype() != DType::Int32) {
    throw TypeError(std::string(op) + ": target must hold class indices (int64), got " +
                    arg_str(target));
  }
  frontend::check_index_values(target, lp[1], /*allow_negative=*/false, op, ignore_index);
  Tensor keep = ne(target, ignore_index);
  // Ignored targets read class 0 (any valid index) and get weight 0.
  Tensor safe = where(keep, target, 0);
  Tensor picked = squeeze(gather(log_probs, 1, unsqueeze(safe, 1)), 1);
  Tensor w;
  if (!weight.defined()) {
    w = keep.to(log_probs.dtype());
  } else {
    Tensor w_t =
        reshape(index_select(weight.to(log_probs.dtype()), 0, reshape(safe, {-1})), safe.shape());
    w = where(keep, w_t, 0.0);
  }
  return {-picked * w, w};
}

// A class-index loss reduced: "mean" is the weighted mean over the targets not ignored.
Tensor reduce_weighted(const Tensor& loss, const Tensor& w, const std::string& reduction) {
  return reduction == "mean" ? sum(loss) / sum(w) : reduce(loss, reduction);
}

Tensor unsqueezed_result(const Tensor& out, const ClassLayout& l, const std::string& reduction) {
  return l.squeeze && reduction == "none" ? reshape(out, IntList{}) : out;
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                int64_t ignore_index, const std::string& reduction) {
  const char* op = "nll_loss";
  ir::UserOpScope scope(op);  // a bad target is reported as nll_loss's
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_reduction(op, reduction);
  ClassLayout l = class_layout(op, frontend::autocast_float32(input), target);
  check_weight(op, weight, l.input.shape()[1]);
  auto [loss, w] = class_weighted_loss(op, l.input, l.target, weight, ignore_index);
  return unsqueezed_result(reduce_weighted(loss, w, reduction), l, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  ir::UserOpScope scope(op);  // a bad target is reported as cross_entropy's
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  const double ls = label_smoothing;
  if (!(ls >= 0.0 && ls <= 1.0)) {
    throw ValueError(std::string(op) + ": label_smoothing must be between 0.0 and 1.0, got " +
                     number_str(ls));
  }
  check_reduction(op, reduction);
  const bool probabilities = target.shape() == input.shape();
  ClassLayout l =
      class_layout(op, frontend::autocast_float32(input), frontend::autocast_float32(target));
  const int64_t n_classes = l.input.shape()[1];
  check_weight(op, weight, n_classes);
  if (probabilities) {
    if (!is_floating(l.target.dtype())) {
      throw TypeError(std::string(op) + ": a target of the input's shape holds class " +
                      "probabilities and must be floating point, got " + arg_str(target));
    }
    if (ignore_index >= 0) {
      throw ValueError(std::string(op) +
                       ": ignore_index is not supported for class-probability targets");
    }
  }
  Tensor log_probs = log_softmax(l.input, 1);
  // The weight broadcast over the class dim of (N, C, d...).
  Tensor w_c;
  if (weight.defined()) {
    IntList s(static_cast<size_t>(log_probs.dim() - 1), 1);
    s[0] = n_classes;
    w_c = reshape(weight.to(log_probs.dtype()), s);
  }
  const double n = static_cast<double>(n_classes);
  if (probabilities) {
    Tensor tgt = l.target;
    if (ls > 0.0) tgt = tgt * (1.0 - ls) + ls / n;
    Tensor terms = w_c.defined() ? log_probs * tgt * w_c : log_probs * tgt;
    Tensor loss = -sum(terms, {1});
    if (reduction == "mean") {  // over the samples, not the weights (PyTorch)
      loss = sum(loss) / static_cast<double>(loss.numel());
    } else if (reduction == "sum") {
      loss = sum(loss);
    }
    return unsqueezed_result(loss, l, reduction);
  }
  auto [loss, w] = class_weighted_loss(op, log_probs, l.target, weight, ignore_index);
  Tensor out = reduce_weighted(loss, w, reduction);
  if (ls > 0.0) {
    // PyTorch's form: (1 - e) * nll + e / C * (the loss against a uniform target).
    Tensor smooth = -sum(w_c.defined() ? log_probs * w_c : log_probs, {1});
    smooth = where(ne(l.target, ignore_index), smooth, 0.0);
    out = out * (1.0 - ls) + reduce_weighted(smooth, w, reduction) * (ls / n);
  }
  return unsqueezed_result(out, l, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index) {
  return cross_entropy(input, target, Tensor(), ignore_index, "mean", 0.0);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "mse_loss";
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_reduction(op, reduction);
  Tensor d = frontend::autocast_float32(input) - frontend::autocast_float32(target);
  return reduce(d * d, reduction);
}

}  // namespace lz::nn
