// Composite tensor ops (include/lazuli/ops.h, "composites"): tril/triu, masked_fill, flip, roll,
// repeat, clamp with tensor bounds, multinomial. Each is written in public ops only, so gradients
// come from the primitives' rules; each checks its arguments before recording anything, so a bad
// call leaves no node behind and its error names this op, not a primitive inside it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/shape.h"
#include "lazuli/autograd.h"
#include "lazuli/ops.h"
#include "ops/frontend.h"

namespace lz {
using frontend::desc;

namespace {

void check_defined(const char* op, const Tensor& x, const char* what = "input") {
  if (!x.defined()) throw ValueError(std::string(op) + ": the " + what + " is an undefined tensor");
}

// An integer fixed into the program (a structural argument: offsets, sizes), as int64.
Tensor baked(int64_t v) { return constant(v, DType::Int64); }

// The wrapped, deduplicated dims of a list; a repeated dim is a ValueError as in PyTorch.
std::vector<int64_t> unique_dims(const char* op, const Tensor& x, const IntList& dims) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), op);
    if (!seen.insert(w).second) {
      throw ValueError(desc(op, x) + ": dim " + std::to_string(w) +
                       " appears multiple times in the list of dims");
    }
    out.push_back(w);
  }
  return out;
}

// x's new value, assigned in place (copy_ keeps views writing through and refuses leaves that
// require grad); the out-of-place result must keep x's shape and dtype.
Tensor& assign(const char* op, Tensor& x, const Tensor& y) {
  if (y.shape() != x.shape()) {
    throw ValueError(desc(op, x) + ": the result's shape " + shape_str(y.shape()) +
                     " does not match the tensor's (in-place ops cannot broadcast the tensor)");
  }
  if (y.dtype() != x.dtype()) {
    throw TypeError(desc(op, x) + ": the result type " + std::string(dtype_name(y.dtype())) +
                    " cannot be written into " + std::string(dtype_name(x.dtype())));
  }
  return x.copy_(y);
}

Tensor tril_or_triu(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  check_defined(op, x);
  if (x.dim() < 2) {
    throw ValueError(desc(op, x) + ": needs a tensor with at least 2 dims (a matrix or a batch)");
  }
  int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  // column - row, compared with the diagonal: [rows, cols], broadcast over the batch dims.
  Tensor offset = sub(arange(cols), reshape(arange(rows), {rows, 1}));
  Tensor keep = lower ? le(offset, baked(diagonal)) : ge(offset, baked(diagonal));
  return where(keep, x, zeros({}, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return tril_or_triu("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return tril_or_triu("triu", x, diagonal, false); }
Tensor& tril_(Tensor& x, int64_t diagonal) {
  return assign("tril_", x, tril_or_triu("tril_", x, diagonal, true));
}
Tensor& triu_(Tensor& x, int64_t diagonal) {
  return assign("triu_", x, tril_or_triu("triu_", x, diagonal, false));
}

namespace {
Tensor masked_fill_impl(const char* op, const Tensor& x, const Tensor& mask, const Operand& value) {
  check_defined(op, x);
  check_defined(op, mask, "mask");
  if (mask.dtype() != DType::Bool) {
    throw TypeError(frontend::describe(op, {x, mask}) + ": the mask must be a bool tensor, got " +
                    std::string(dtype_name(mask.dtype())));
  }
  broadcast_shapes(x.shape(), mask.shape(), op);
  Tensor v;
  if (value.is_tensor()) {
    check_defined(op, value.tensor(), "value");
    if (value.tensor().dim() != 0) {
      throw ValueError(frontend::describe(op, {x, mask, value}) +
                       ": the value must be a number or a 0-d tensor, got a tensor with " +
                       std::to_string(value.tensor().dim()) + " dims");
    }
    v = value.tensor().to(x.dtype());
  } else {
    frontend::check_fill_value(op, value.scalar(), x.dtype());
    v = scalar_tensor(value.scalar(), x.dtype());
  }
  return where(mask, v, x);
}
}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Operand& value) {
  return masked_fill_impl("masked_fill", x, mask, value);
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Operand& value) {
  const char* op = "masked_fill_";
  if (x.defined() && mask.defined() && broadcast_shapes(x.shape(), mask.shape(), op) != x.shape()) {
    throw ValueError(frontend::describe(op, {x, mask}) + ": the mask " + shape_str(mask.shape()) +
                     " does not broadcast to the tensor's shape " + shape_str(x.shape()));
  }
  return assign(op, x, masked_fill_impl(op, x, mask, value));
}

Tensor flip(const Tensor& x, const IntList& dims) {
  check_defined("flip", x);
  std::vector<int64_t> ds = unique_dims("flip", x, dims);
  Tensor y = x;
  for (int64_t d : ds) {
    if (x.dim() == 0) break;
    int64_t n = x.shape()[d];
    if (n <= 1) continue;
    // n-1, n-2, ..., 0 from iota and a baked constant: nothing to upload.
    y = index_select(y, d, sub(baked(n - 1), arange(n)));
  }
  return y.impl() == x.impl() ? contiguous(x) : y;
}

Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims) {
  check_defined("roll", x);
  if (dims.empty()) {
    if (shifts.size() != 1) {
      throw ValueError(desc("roll", x) + ": without dims, expects one shift, got " +
                       std::to_string(shifts.size()));
    }
    return reshape(roll(flatten(x), shifts, {0}), x.shape());
  }
  if (shifts.size() != dims.size()) {
    throw ValueError(desc("roll", x) + ": shifts and dims must align, got " +
                     std::to_string(shifts.size()) + " shifts and " + std::to_string(dims.size()) +
                     " dims");
  }
  std::vector<int64_t> ds;
  for (int64_t d : dims) ds.push_back(wrap_dim(d, x.dim(), "roll"));
  if (x.dim() == 0) return contiguous(x);
  Tensor y = x;
  for (size_t i = 0; i < ds.size(); ++i) {
    int64_t n = x.shape()[ds[i]];
    if (n == 0) continue;
    int64_t k = ((shifts[i] % n) + n) % n;  // the first k elements come from the end
    if (k == 0) continue;
    y = cat({slice(y, ds[i], n - k, n), slice(y, ds[i], 0, n - k)}, ds[i]);
  }
  return y.impl() == x.impl() ? contiguous(x) : y;
}

Tensor repeat(const Tensor& x, const IntList& repeats) {
  check_defined("repeat", x);
  if (static_cast<int64_t>(repeats.size()) < x.dim()) {
    throw ValueError(
        desc("repeat", x) + ": the number of repeats (" + std::to_string(repeats.size()) +
        ") cannot be smaller than the tensor's dims (" + std::to_string(x.dim()) + ")");
  }
  for (int64_t r : repeats) {
    if (r < 0) {
      throw ValueError(desc("repeat", x) + ": repeats must be non-negative, got " +
                       shape_str(repeats));
    }
  }
  size_t lead = repeats.size() - static_cast<size_t>(x.dim());
  // [1, s0, 1, s1, ...] expanded to [r0, s0, r1, s1, ...], then merged pairwise.
  IntList split, expanded, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    int64_t s = i < lead ? 1 : x.shape()[i - lead];
    split.insert(split.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    out.push_back(repeats[i] * s);
  }
  check_tensor_size(desc("repeat", x) + " to " + shape_str(out), out, x.dtype());
  return reshape(expand(reshape(x, split), expanded), out);
}

namespace {
Tensor clamp_tensors(const char* op, const Tensor& x, const Tensor& min, const Tensor& max) {
  check_defined(op, x);
  if (!min.defined() && !max.defined()) {
    throw ValueError(std::string(op) + ": at least one of min and max must be given");
  }
  std::vector<Operand> ops{x};
  if (min.defined()) ops.push_back(min);
  if (max.defined()) ops.push_back(max);
  for (const Operand& o : ops) {
    if (o.tensor().dtype() == DType::Bool) {
      throw TypeError(frontend::describe(op, ops) + ": bool is not supported");
    }
  }
  Shape shape = x.shape();
  for (size_t i = 1; i < ops.size(); ++i) {
    shape = broadcast_shapes(shape, ops[i].tensor().shape(), op);
  }
  check_tensor_size(frontend::describe(op, ops), shape, result_type(ops));
  DType dt = result_type(ops);
  Tensor v = x.to(dt), lo, hi;
  if (min.defined()) lo = min.to(dt);
  if (max.defined()) hi = max.to(dt);
  // Selects, so each gradient goes where PyTorch 2.15 sends it: to x strictly inside (or at
  // min == max), to the bound it is clamped to, half each at a tie of x with one bound, and to
  // max alone when min > max. (An integer tie needs no split: it has no gradient.)
  auto tie = [&](const Tensor& b) { return is_floating(dt) ? (v + b) * 0.5 : v; };
  Tensor y = v;
  if (hi.defined()) {
    Tensor at_hi = eq(v, hi);
    if (lo.defined()) at_hi = logical_and(at_hi, lt(lo, hi));
    y = where(at_hi, tie(hi), y);
  }
  if (lo.defined()) {
    Tensor at_lo = eq(v, lo);
    if (hi.defined()) at_lo = logical_and(at_lo, lt(lo, hi));
    y = where(lt(v, lo), lo, where(at_lo, tie(lo), y));
  }
  if (hi.defined()) {
    Tensor to_hi = gt(v, hi);
    if (lo.defined()) to_hi = logical_or(to_hi, lt(hi, lo));
    y = where(to_hi, hi, y);
  }
  if (is_floating(dt)) {  // a nan in x or a bound gives nan
    Tensor nan = ne(v, v);
    if (lo.defined()) nan = logical_or(nan, ne(lo, lo));
    if (hi.defined()) nan = logical_or(nan, ne(hi, hi));
    y = where(nan, constant(std::numeric_limits<double>::quiet_NaN(), dt), y);
  }
  return y;
}
}  // namespace

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  return clamp_tensors("clamp", x, min, max);
}

Tensor& clamp_(Tensor& x, const Tensor& min, const Tensor& max) {
  return assign("clamp_", x, clamp_tensors("clamp_", x, min, max));
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  check_defined(op, probs);
  if (probs.dim() != 1 && probs.dim() != 2) {
    throw ValueError(desc(op, probs) + ": expects a 1-D or 2-D tensor of weights");
  }
  if (!is_floating(probs.dtype())) {
    throw TypeError(desc(op, probs) + ": expects floating-point weights");
  }
  int64_t c = probs.shape().back();
  if (c == 0) throw ValueError(desc(op, probs) + ": expects at least one category");
  if (num_samples <= 0) {
    throw ValueError(desc(op, probs) + ": num_samples must be positive, got " +
                     std::to_string(num_samples));
  }
  if (!replacement && num_samples > c) {
    throw ValueError(desc(op, probs) + ": cannot draw " + std::to_string(num_samples) +
                     " samples from " + std::to_string(c) + " categories without replacement");
  }
  NoGradGuard no_grad;  // samples are indices: nothing to differentiate
  DType dt = probs.dtype();
  Tensor logp = log(probs);  // a zero weight is -inf: never drawn
  // Gumbel-max: argmax(log p + g) with g = -log(-log(u)) draws index i with probability p_i / sum
  // p.
  auto gumbel = [&](const IntList& shape) { return neg(log(neg(log(rand(shape, dt))))); };
  if (replacement) {
    IntList shape = probs.shape();
    shape.insert(shape.end() - 1, num_samples);  // [..., num_samples, C]: one draw per sample
    return argmax(unsqueeze(logp, -2) + gumbel(shape), -1);
  }
  // Gumbel-top-k: the k largest perturbed keys are k draws without replacement, in order.
  Tensor keys = logp + gumbel(probs.shape());
  Tensor classes = arange(c);
  Tensor neg_inf = constant(-std::numeric_limits<double>::infinity(), dt);
  std::vector<Tensor> picked;
  for (int64_t i = 0; i < num_samples; ++i) {
    Tensor idx = argmax(keys, -1, true);
    picked.push_back(idx);
    if (i + 1 < num_samples) keys = where(eq(classes, idx), neg_inf, keys);
  }
  return cat(picked, -1);
}

}  // namespace lz
