// Scaled dot-product attention (include/lazuli/nn.h), written in public ops: two matrix products
// around a masked softmax. The causal mask is a comparison of two iotas that fuses into the
// kernel computing the masked scores, so no [L, S] mask tensor is stored; gradients come from the
// primitives' rules (the masked entries' where sends them nothing).
#include <cmath>
#include <limits>

#include "core/shape.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lazuli/ops.h"

namespace lz::nn {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

std::string arg_str(const char* name, const Tensor& t) {
  return std::string(name) + " " + std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}

std::string args_str(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  std::string s = arg_str("query", q) + ", " + arg_str("key", k);
  if (v.defined()) s += ", " + arg_str("value", v);
  if (mask.defined()) s += ", " + arg_str("attn_mask", mask);
  return s;
}

[[noreturn]] void fail_value(const std::string& why, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& mask) {
  throw ValueError(std::string(kOp) + ": " + why + " (" + args_str(q, k, v, mask) + ")");
}

int64_t size_at(const Tensor& t, int64_t dim_from_end) {
  return t.shape()[t.shape().size() - static_cast<size_t>(dim_from_end)];
}

Shape batch_dims(const Tensor& t, size_t trailing) {
  return Shape(t.shape().begin(), t.shape().end() - static_cast<std::ptrdiff_t>(trailing));
}

// k or v with each of its heads (dim -3) repeated `groups` times in place (repeat_interleave).
Tensor repeat_heads(const Tensor& t, int64_t groups) {
  if (groups == 1) return t;
  Shape s = t.shape();
  const size_t h = s.size() - 3;
  Shape expanded = s;
  expanded.insert(expanded.begin() + static_cast<std::ptrdiff_t>(h) + 1, groups);
  Shape merged = s;
  merged[h] *= groups;
  return reshape(expand(unsqueeze(t, static_cast<int64_t>(h) + 1), expanded), merged);
}

// What the functions beside scaled_dot_product_attention accept beyond its arguments.
struct Variant {
  bool value = true;             // v is an argument (the scores alone take none)
  bool causal_and_mask = false;  // is_causal and attn_mask may both apply, as in ATen's kernels
};

void check(const Tensor& q, const Tensor& k, const Tensor& value, const Tensor& mask,
           double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa,
           Variant variant = {}) {
  if (!q.defined() || !k.defined() || (variant.value && !value.defined())) {
    throw ValueError(std::string(kOp) + (variant.value
                                             ? ": query, key and value must be defined tensors"
                                             : ": query and key must be defined tensors"));
  }
  // Without a value, k stands in for it in the checks of v (which it passes).
  const Tensor& v = variant.value ? value : k;
  if (!is_floating(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) {
    throw TypeError(std::string(kOp) + ": query, key and value must have one floating dtype (" +
                    args_str(q, k, value, mask) + ")");
  }
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2) {
    fail_value("query, key and value need at least 2 dims ([..., L, E], [..., S, E], [..., S, Ev])",
               q, k, value, mask);
  }
  if (size_at(q, 1) != size_at(k, 1)) {
    fail_value("query and key must have the same embedding size (last dim)", q, k, value, mask);
  }
  if (size_at(k, 2) != size_at(v, 2)) {
    fail_value("key and value must have the same sequence length (dim -2)", q, k, value, mask);
  }
  if (enable_gqa) {
    if (q.dim() < 3 || k.dim() < 3 || v.dim() < 3) {
      fail_value("enable_gqa needs a head dim (-3) in query, key and value", q, k, value, mask);
    }
    if (size_at(k, 3) != size_at(v, 3) || size_at(k, 3) == 0 ||
        size_at(q, 3) % size_at(k, 3) != 0) {
      fail_value(
          "with enable_gqa, key and value must have the same number of heads (dim -3), "
          "a divisor of query's",
          q, k, value, mask);
    }
  }
  Shape qb = batch_dims(q, enable_gqa ? 3 : 2), kb = batch_dims(k, enable_gqa ? 3 : 2),
        vb = batch_dims(v, enable_gqa ? 3 : 2);
  Shape batch;
  try {
    batch = broadcast_shapes(broadcast_shapes(qb, kb, kOp), vb, kOp);
  } catch (const ValueError&) {
    fail_value("the batch dims of query, key and value do not broadcast", q, k, value, mask);
  }
  if (mask.defined()) {
    if (is_causal && !variant.causal_and_mask) {
      fail_value("an explicit attn_mask must not be given with is_causal=true", q, k, value, mask);
    }
    if (mask.dtype() != DType::Bool && mask.dtype() != q.dtype()) {
      throw TypeError(std::string(kOp) + ": attn_mask must be bool or have the query's dtype (" +
                      args_str(q, k, value, mask) + ")");
    }
    Shape scores = batch;
    if (enable_gqa) scores.push_back(size_at(q, 3));
    scores.push_back(size_at(q, 2));
    scores.push_back(size_at(k, 2));
    bool ok = mask.dim() <= static_cast<int64_t>(scores.size());
    if (ok) {
      try {
        ok = broadcast_shapes(mask.shape(), scores, kOp) == scores;
      } catch (const ValueError&) {
        ok = false;
      }
    }
    if (!ok) {
      fail_value("attn_mask does not broadcast to the scores' shape " + shape_str(scores), q, k,
                 value, mask);
    }
  }
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0)) {
    throw ValueError(std::string(kOp) + ": dropout_p must be in [0, 1], got " +
                     std::to_string(dropout_p));
  }
  if (scale && !std::isfinite(*scale)) {
    throw ValueError(std::string(kOp) + ": scale must be finite, got " + std::to_string(*scale));
  }
}

// The scores the softmax reads: q @ key^T * s, -inf where is_causal hides a key or a bool mask is
// false, plus a float mask. check() keeps is_causal and a mask apart where they must be.
Tensor masked_scores(const Tensor& q, const Tensor& key, const Tensor& mask, bool is_causal,
                     double s) {
  const int64_t n_q = size_at(q, 2), n_k = size_at(key, 2);
  const double inf = std::numeric_limits<double>::infinity();
  Tensor scores = matmul(q, transpose(key, -2, -1)) * s;
  if (is_causal) {  // query i sees keys 0..i: two iotas compared inside the kernel
    Tensor keep = ge(reshape(arange(n_q), {n_q, 1}), reshape(arange(n_k), {1, n_k}));
    scores = where(keep, scores, -inf);
  }
  if (mask.defined()) {
    scores = mask.dtype() == DType::Bool ? where(mask, scores, -inf) : scores + mask;
  }
  return scores;
}

double scale_or_default(const Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(size_at(q, 1)));
}

struct Softmax {
  Tensor weights;
  Tensor shift;  // the row's max (0 where every score is -inf), detached
  Tensor total;  // the row's sum of exp(scores - shift), 1 where it is 0
};

// A softmax that gives 0 on a row with every score -inf (not nan): the shift is 0 there and the
// sum, 0, is read as 1. The shift only keeps exp in range: no gradient flows through it.
Softmax masked_softmax(const Tensor& scores) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor row_max = amax(scores, {-1}, true);
  Tensor shift = detach(where(eq(row_max, -inf), 0.0, row_max));
  Tensor e = exp(scores - shift);
  Tensor total = sum(e, {-1}, true);
  Tensor nonzero = where(eq(total, 0.0), 1.0, total);
  return {e / nonzero, shift, nonzero};
}

// k and v with their heads repeated to q's (enable_gqa).
std::pair<Tensor, Tensor> grouped(const Tensor& q, const Tensor& k, const Tensor& v,
                                  bool enable_gqa) {
  if (!enable_gqa) return {k, v};
  const int64_t groups = size_at(q, 3) / size_at(k, 3);
  return {repeat_heads(k, groups), v.defined() ? repeat_heads(v, groups) : v};
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  check(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  auto [key, value] = grouped(q, k, v, enable_gqa);
  Tensor scores = masked_scores(q, key, attn_mask, is_causal, scale_or_default(q, scale));
  Tensor weights = masked_softmax(scores).weights;
  if (dropout_p > 0.0) {
    if (dropout_p >= 1.0) {
      weights = weights * 0.0;
    } else {
      Tensor keep = ge(rand(weights.shape(), weights.dtype()), dropout_p);
      weights = where(keep, weights * (1.0 / (1.0 - dropout_p)), 0.0);
    }
  }
  return matmul(weights, value);
}

Tensor scaled_dot_product_attention_scores(const Tensor& q, const Tensor& k,
                                           const Tensor& attn_mask, bool is_causal,
                                           std::optional<double> scale, bool enable_gqa) {
  check(q, k, Tensor(), attn_mask, 0.0, is_causal, scale, enable_gqa,
        {.value = false, .causal_and_mask = true});
  Tensor key = grouped(q, k, Tensor(), enable_gqa).first;
  return masked_scores(q, key, attn_mask, is_causal, scale_or_default(q, scale));
}

std::pair<Tensor, Tensor> scaled_dot_product_attention_with_logsumexp(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, bool is_causal,
    std::optional<double> scale, bool enable_gqa) {
  check(q, k, v, attn_mask, 0.0, is_causal, scale, enable_gqa, {.causal_and_mask = true});
  auto [key, value] = grouped(q, k, v, enable_gqa);
  Softmax p =
      masked_softmax(masked_scores(q, key, attn_mask, is_causal, scale_or_default(q, scale)));
  // log(total) + shift; 0 on a fully masked row, whose total reads 1 and shift 0.
  Tensor lse = squeeze(log(p.total) + p.shift, -1);
  return {matmul(p.weights, value), lse};
}

}  // namespace lz::nn
