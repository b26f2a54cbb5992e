// Composite nn functions (include/lazuli/nn.h, "composites"): activations, dropout2d, one_hot,
// pad and interpolate, in public ops. Padding and resampling gather along each dim with an index
// computed inside the program from iota and baked constants, so a call uploads nothing and its
// graph depends only on shapes and the structural arguments.
#include <cmath>
#include <limits>

#include "core/shape.h"
#include "ir/origin.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lazuli/runtime.h"
#include "ops/frontend.h"

namespace lz::nn {
using frontend::desc;

namespace {

void check_float(const char* op, const Tensor& x) {
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is an undefined tensor");
  if (!is_floating(x.dtype())) {
    throw TypeError(desc(op, x) + ": expects a floating-point tensor");
  }
}

Tensor baked(int64_t v) { return constant(v, DType::Int64); }

// [n] reshaped to broadcast along dim `d` of a rank-`rank` tensor.
Tensor along(const Tensor& v, int64_t d, int64_t rank) {
  IntList shape(static_cast<size_t>(rank - d), 1);
  shape[0] = v.numel();
  return reshape(v, shape);
}

}  // namespace

Tensor silu(const Tensor& x) {
  check_float("silu", x);
  return x * sigmoid(x);
}

Tensor hardsigmoid(const Tensor& x) {
  check_float("hardsigmoid", x);
  // Selects rather than a clamp: PyTorch's gradient is 0 at -3 and 3 themselves.
  Tensor zero = zeros({}, x.dtype()), one = ones({}, x.dtype());
  return where(le(x, -3.0), zero, where(ge(x, 3.0), one, x / 6.0 + 0.5));
}

Tensor hardswish(const Tensor& x) {
  check_float("hardswish", x);
  // Selects: PyTorch's gradient is 0 at -3 and 1 at 3 (the outer pieces'), x / 3 + 1/2 between.
  Tensor zero = zeros({}, x.dtype());
  return where(le(x, -3.0), zero, where(ge(x, 3.0), x, x * (x + 3.0) / 6.0));
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  check_float("dropout2d", x);
  if (!(p >= 0.0 && p <= 1.0)) {
    throw ValueError(desc("dropout2d", x) + ": p must be in [0, 1], got " + std::to_string(p));
  }
  if (x.dim() < 2) {
    throw ValueError(desc("dropout2d", x) + ": needs at least 2 dims ([N, C, ...] or [C, ...])");
  }
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  // One draw per (sample, channel), broadcast over the rest, as PyTorch's feature dropout.
  IntList mask_shape = x.shape();
  for (size_t i = 2; i < mask_shape.size(); ++i) mask_shape[i] = 1;
  Tensor keep = ge(rand(mask_shape, x.dtype()), p).to(x.dtype());
  return x * keep * (1.0 / (1.0 - p));
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  const char* op = "one_hot";
  if (!x.defined()) throw ValueError("one_hot: the input is an undefined tensor");
  if (x.dtype() != DType::Int64) {
    throw TypeError(desc(op, x) + ": expects an int64 tensor of class indices");
  }
  if (num_classes < -1) {
    throw ValueError(desc(op, x) + ": num_classes must be -1 (inferred) or non-negative, got " +
                     std::to_string(num_classes));
  }
  ir::UserOpScope scope(op);  // a bad index is reported as one_hot's, at the user's line
  if (num_classes == -1) {
    if (x.numel() == 0) {
      throw ValueError(desc(op, x) + ": cannot infer the number of classes from an empty tensor");
    }
    // PyTorch reads the values too; one program gives both ends.
    std::vector<int64_t> ends = stack({amin(x), amax(x)}).to_vector<int64_t>();
    if (ends[0] < 0) throw IndexError(desc(op, x) + ": class values must be non-negative");
    num_classes = ends[1] + 1;
  }
  frontend::check_index_values(x, num_classes, false, op);
  Tensor hot = eq(unsqueeze(x, -1), arange(num_classes)).to(DType::Int64);
  // The comparison alone would give an all-zero row for a bad index. An index_select of zeros
  // adds 0 to every row and makes the program check each index against num_classes.
  Tensor checked = index_select(zeros({num_classes}, DType::Int64), 0, reshape(x, {-1}));
  return hot + unsqueeze(reshape(checked, x.shape()), -1);
}

namespace {

const char* kPadModes = "'constant', 'reflect', 'replicate' or 'circular'";

// Source index along a dim of size n for each of the out = n + l + r padded positions.
Tensor pad_index(const std::string& mode, int64_t n, int64_t l, int64_t out) {
  Tensor s = sub(arange(out), baked(l));  // the position in x before reflecting or wrapping
  if (mode == "reflect") {                // (n-1) - |(n-1) - |s||
    Tensor last = baked(n - 1);
    return sub(last, abs(sub(last, abs(s))));
  }
  if (mode == "replicate") return minimum(maximum(s, baked(0)), baked(n - 1));
  return remainder(s, baked(n));  // circular; Python's % keeps it in [0, n)
}

}  // namespace

Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode,
           std::optional<Scalar> value) {
  const char* op = "pad";
  if (!x.defined()) throw ValueError("pad: the input is an undefined tensor");
  if (pad.size() % 2 != 0) {
    throw ValueError(desc(op, x) + ": the padding length must be divisible by 2, got " +
                     shape_str(pad));
  }
  int64_t k = static_cast<int64_t>(pad.size() / 2);
  if (k > x.dim()) {
    throw ValueError(desc(op, x) + ": padding " + shape_str(pad) + " pads " + std::to_string(k) +
                     " dims, more than the input has");
  }
  bool constant_mode = mode == "constant";
  if (!constant_mode && mode != "reflect" && mode != "replicate" && mode != "circular") {
    throw ValueError(desc(op, x) + ": mode must be " + kPadModes + ", got '" + mode + "'");
  }
  if (!constant_mode) {
    if (value && value->to_double() != 0.0) {
      throw ValueError(desc(op, x) + ": padding mode '" + mode + "' takes no value");
    }
    if (k < 1 || k > 3 || x.dim() < k + 1 || x.dim() > k + 2) {
      throw ValueError(desc(op, x) + ": padding " + shape_str(pad) + " in mode '" + mode +
                       "' is not supported for a " + std::to_string(x.dim()) +
                       "-D input; it pads the last 1, 2 or 3 dims (a padding of 2, 4 or 6 values) "
                       "of an input with one or two more dims");
    }
  }
  Scalar fill = value.value_or(Scalar(0));
  if (constant_mode) frontend::check_fill_value(op, fill, x.dtype());
  // Check every dim before recording anything.
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = x.dim() - 1 - i, n = x.shape()[d], l = pad[2 * i], r = pad[2 * i + 1];
    int64_t out = n + l + r;
    std::string where_ = ": padding (" + std::to_string(l) + ", " + std::to_string(r) +
                         ") of dim " + std::to_string(d) + " (size " + std::to_string(n) + ")";
    if (out < 0 || (!constant_mode && mode != "circular" && out < 1)) {
      throw ValueError(desc(op, x) + where_ + " leaves an output of size " + std::to_string(out));
    }
    if (mode == "reflect" && (l >= n || r >= n)) {
      throw ValueError(desc(op, x) + where_ + ": reflect padding must be smaller than the size");
    }
    int64_t kept = n - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
    if (mode == "circular" && (kept < 0 || l > kept || r > kept)) {
      throw ValueError(desc(op, x) + where_ +
                       ": circular padding cannot wrap around more than once");
    }
    if (mode == "replicate" && n == 0 && out > 0) {
      throw ValueError(desc(op, x) + where_ + ": cannot replicate an empty dim");
    }
  }
  Tensor y = x;
  for (int64_t i = 0; i < k; ++i) {
    int64_t d = x.dim() - 1 - i, n = x.shape()[d], l = pad[2 * i], r = pad[2 * i + 1];
    if (l == 0 && r == 0) continue;
    if (mode == "circular") {
      // PyTorch crops first and wraps within what is left.
      y = slice(y, d, std::max<int64_t>(-l, 0), n - std::max<int64_t>(-r, 0));
      int64_t m = y.shape()[d], lp = std::max<int64_t>(l, 0), rp = std::max<int64_t>(r, 0);
      if (lp + rp > 0) y = index_select(y, d, pad_index(mode, m, lp, m + lp + rp));
      continue;
    }
    if (!constant_mode) {  // reflect and replicate index the uncropped dim, as PyTorch's kernels
      y = index_select(y, d, pad_index(mode, n, l, n + l + r));
      continue;
    }
    // Negative pads crop; positive ones add filled blocks on each side.
    y = slice(y, d, std::max<int64_t>(-l, 0), n - std::max<int64_t>(-r, 0));
    std::vector<Tensor> parts;
    IntList block = y.shape();
    if (l > 0) {
      block[d] = l;
      parts.push_back(full(block, fill, x.dtype()));
    }
    parts.push_back(y);
    if (r > 0) {
      block[d] = r;
      parts.push_back(full(block, fill, x.dtype()));
    }
    if (parts.size() > 1) y = cat(parts, d);
  }
  return y.impl() == x.impl() ? contiguous(x) : y;
}

namespace {

struct ResampleDim {
  int64_t dim, in, out;
  std::optional<double> scale;  // the user's scale factor, when it decides the source positions
};

// PyTorch's compute_scales_value: 1/scale_factor when one was given, else in/out, in the
// kernel's compute type (float for float32 inputs).
double scale_value(const ResampleDim& r, bool single) {
  if (r.scale && *r.scale > 0) {
    return single ? static_cast<float>(1.0 / *r.scale) : 1.0 / *r.scale;
  }
  return single ? static_cast<float>(r.in) / static_cast<float>(r.out)
                : static_cast<double>(r.in) / static_cast<double>(r.out);
}

Tensor nearest(const Tensor& x, const ResampleDim& r, bool exact) {
  if (!exact && r.out == r.in) return x;
  Tensor j = arange(r.out);
  Tensor idx;
  if (!exact && r.out == 2 * r.in) {
    idx = floor_divide(j, 2);  // PyTorch's exact shortcut for a factor of 2
  } else {
    // floorf(j * scale) in float32 (nearest-exact: (j + 0.5) in double times scale, then
    // rounded to float), capped at in - 1, as PyTorch's CPU kernel.
    float scale = static_cast<float>(scale_value(r, true));
    Tensor src =
        exact
            ? ((j.to(DType::Float64) + 0.5) * constant(static_cast<double>(scale), DType::Float64))
                  .to(DType::Float32)
            : j.to(DType::Float32) * constant(static_cast<double>(scale), DType::Float32);
    idx = minimum(floor(src).to(DType::Int64), baked(r.in - 1));
  }
  return index_select(x, r.dim, idx);
}

Tensor linear_resample(const Tensor& x, const ResampleDim& r, bool align_corners) {
  bool single = x.dtype() == DType::Float32;
  double scale;
  if (align_corners) {
    scale = r.out > 1 ? (single ? static_cast<float>(r.in - 1) / static_cast<float>(r.out - 1)
                                : static_cast<double>(r.in - 1) / static_cast<double>(r.out - 1))
                      : 0.0;
  } else {
    scale = scale_value(r, single);
  }
  if (r.out == r.in && scale == 1.0) return x;  // every source position is exact
  DType dt = x.dtype();
  Tensor j = arange(r.out).to(dt), sc = constant(scale, dt);
  // PyTorch's area_pixel_compute_source_index (non-cubic), then guard_index_and_lambda.
  Tensor src = align_corners ? j * sc : maximum((j + 0.5) * sc - 0.5, zeros({}, dt));
  Tensor i0 = minimum(floor(src).to(DType::Int64), baked(r.in - 1));
  Tensor l1 = clamp(src - i0.to(dt), Scalar(0.0), Scalar(1.0));
  Tensor l0 = 1.0 - l1;
  Tensor i1 = minimum(i0 + 1, baked(r.in - 1));
  return index_select(x, r.dim, i0) * along(l0, r.dim, x.dim()) +
         index_select(x, r.dim, i1) * along(l1, r.dim, x.dim());
}

}  // namespace

Tensor interpolate(const Tensor& x, const std::optional<IntList>& size,
                   const std::optional<std::vector<double>>& scale_factor, const std::string& mode,
                   std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor) {
  const char* op = "interpolate";
  if (!x.defined()) throw ValueError("interpolate: the input is an undefined tensor");
  bool is_nearest = mode == "nearest" || mode == "nearest-exact";
  int64_t linear_rank = mode == "linear" ? 3 : mode == "bilinear" ? 4 : mode == "trilinear" ? 5 : 0;
  if (!is_nearest && linear_rank == 0) {
    throw ValueError(desc(op, x) +
                     ": mode must be 'nearest', 'nearest-exact', 'linear', "
                     "'bilinear' or 'trilinear', got '" +
                     mode + "'");
  }
  if (x.dim() < 3 || x.dim() > 5) {
    throw ValueError(desc(op, x) + ": expects a 3-D, 4-D or 5-D input ([N, C, spatial...]), got " +
                     std::to_string(x.dim()) + "-D");
  }
  if (linear_rank && x.dim() != linear_rank) {
    throw ValueError(desc(op, x) + ": mode '" + mode + "' needs a " + std::to_string(linear_rank) +
                     "-D input, got " + std::to_string(x.dim()) + "-D");
  }
  if (is_nearest && align_corners) {
    throw ValueError(desc(op, x) +
                     ": align_corners can only be set with the interpolating modes "
                     "'linear', 'bilinear' and 'trilinear'");
  }
  if (!is_nearest && !is_floating(x.dtype())) {
    throw TypeError(desc(op, x) + ": mode '" + mode + "' expects a floating-point tensor");
  }
  if (size.has_value() == scale_factor.has_value()) {
    throw ValueError(desc(op, x) + (size ? ": give only one of size and scale_factor"
                                         : ": give one of size and scale_factor"));
  }
  if (size && recompute_scale_factor.value_or(false)) {
    throw ValueError(desc(op, x) +
                     ": recompute_scale_factor is not meaningful with an explicit size");
  }
  size_t spatial = static_cast<size_t>(x.dim() - 2);
  std::vector<ResampleDim> dims;
  std::string given;
  if (size) {
    if (size->size() != 1 && size->size() != spatial) {
      throw ValueError(desc(op, x) + ": size " + shape_str(*size) +
                       " must have one value or one "
                       "per spatial dim (" +
                       std::to_string(spatial) + ")");
    }
    for (size_t i = 0; i < spatial; ++i) {
      int64_t o = (*size)[size->size() == 1 ? 0 : i];
      dims.push_back({static_cast<int64_t>(i) + 2, x.shape()[i + 2], o, std::nullopt});
    }
  } else {
    const std::vector<double>& sf = *scale_factor;
    if (sf.size() != 1 && sf.size() != spatial) {
      throw ValueError(desc(op, x) + ": scale_factor must have one value or one per spatial dim (" +
                       std::to_string(spatial) + "), got " + std::to_string(sf.size()));
    }
    for (size_t i = 0; i < spatial; ++i) {
      double s = sf[sf.size() == 1 ? 0 : i];
      if (!std::isfinite(s) || s <= 0) {
        throw ValueError(desc(op, x) + ": scale_factor must be positive and finite, got " +
                         std::to_string(s));
      }
      int64_t n = x.shape()[i + 2];
      auto o = static_cast<int64_t>(std::floor(static_cast<double>(n) * s));
      std::optional<double> used;
      if (!recompute_scale_factor.value_or(false)) used = s;
      dims.push_back({static_cast<int64_t>(i) + 2, n, o, used});
    }
  }
  for (const ResampleDim& r : dims) {
    if (r.in <= 0 || r.out <= 0) {
      IntList in, out;
      for (const ResampleDim& q : dims) {
        in.push_back(q.in);
        out.push_back(q.out);
      }
      throw ValueError(desc(op, x) + ": input and output sizes must be greater than 0, got input " +
                       shape_str(in) + " and output " + shape_str(out));
    }
  }
  Tensor y = x;
  for (const ResampleDim& r : dims) {
    y = is_nearest ? nearest(y, r, mode == "nearest-exact")
                   : linear_resample(y, r, align_corners.value_or(false));
  }
  return y.impl() == x.impl() ? contiguous(x) : y;
}

}  // namespace lz::nn
