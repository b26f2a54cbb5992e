// Creation ops. Host data starts in the host state; zeros/ones/full/arange/eye are IR built from
// baked 0/1 constants, parameters and iota, so their shapes and dtypes (not values) are hashed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "backend/backend.h"
#include "exec/capture.h"
#include "ops/frontend.h"
#include "ops/keyed_random.h"
#include "tensor/device.h"

namespace lz {
using frontend::node;
using frontend::wrap;
using ir::OpKind;

namespace {
// Negative dims are ValueErrors; a shape too large to ever exist is an OutOfMemoryError, raised
// here, at the op, rather than at a later allocation (core/shape.h, check_tensor_size).
void check_shape(const char* op, const IntList& shape, DType dtype) {
  for (int64_t s : shape) {
    if (s < 0) throw ValueError(std::string(op) + ": negative dimension in shape " + shape_str(shape));
  }
  check_tensor_size(op, shape, dtype);
}

}  // namespace

size_t frontend::check_memory(const char* op, const void* data, DType dtype, const IntList& shape) {
  check_shape(op, shape, dtype);
  size_t nbytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  // Built only for an error: a replay checks every input's memory on every call.
  auto what = [&] {
    return std::string(op) + "(" + std::string(dtype_name(dtype)) + shape_str(shape) + ")";
  };
  if (!data && nbytes) throw ValueError(what() + ": the data pointer is null");
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) != 0) {
    throw ValueError(what() + ": the data pointer is not aligned for " +
                     std::string(dtype_name(dtype)));
  }
  return nbytes;
}

namespace {

ir::Value expand_scalar(ir::Value v, const IntList& shape) {
  return frontend::broadcast_to(std::move(v), shape);
}

std::string scalar_str(const Scalar& s) {
  if (s.kind() != Scalar::Kind::Float) return std::to_string(s.to_int());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", s.to_double());
  return buf;
}
}  // namespace

namespace frontend {
void check_fill_value(const char* op, const Scalar& s, DType dtype) {
  bool ok = true;
  double d = s.to_double();
  switch (dtype) {
    case DType::Bool:
    case DType::Float64:
      break;
    case DType::Float32:
      ok = !std::isfinite(d) || std::fabs(d) <= std::numeric_limits<float>::max();
      break;
    case DType::Float16:
      ok = !std::isfinite(d) || std::fabs(d) <= 65504.0;
      break;
    case DType::BFloat16:
      ok = !std::isfinite(d) || std::fabs(d) <= 0x1.fep127;  // the largest finite bfloat16
      break;
    case DType::Int32:
    case DType::Int64: {
      double lo = dtype == DType::Int32 ? -0x1p31 : -0x1p63, hi = -lo;  // [lo, hi)
      if (s.kind() == Scalar::Kind::Float) {
        ok = std::isfinite(d) && std::trunc(d) >= lo && std::trunc(d) < hi;
      } else if (dtype == DType::Int32) {
        ok = s.to_int() >= std::numeric_limits<int32_t>::min() &&
             s.to_int() <= std::numeric_limits<int32_t>::max();
      }
      break;
    }
  }
  if (!ok) {
    throw ValueError(std::string(op) + ": the value " + scalar_str(s) + " cannot be converted to " +
                     std::string(dtype_name(dtype)) + " without overflow");
  }
}
}  // namespace frontend

namespace internal {
void check_value_count(const char* op, size_t count, const IntList& shape) {
  for (int64_t s : shape) {
    if (s < 0)
      throw ValueError(std::string(op) + ": negative dimension in shape " + shape_str(shape));
  }
  int64_t n = numel_or_overflow(shape);
  if (n < 0 || static_cast<uint64_t>(n) != count) {
    throw ValueError(std::string(op) + ": " + std::to_string(count) + " values do not fill shape " +
                     shape_str(shape) + " (" +
                     (n < 0 ? std::string("more than 2^63") : std::to_string(n)) + " elements)");
  }
}
}  // namespace internal

Tensor from_data(const void* data, DType dtype, const IntList& shape) {
  check_shape("tensor", shape, dtype);
  size_t nbytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  std::string what = "tensor(" + std::string(dtype_name(dtype)) + shape_str(shape) + ")";
  if (!data && nbytes) throw ValueError(what + ": the data pointer is null");
  std::vector<uint8_t> normalized;
  if (dtype == DType::Bool) {  // normalize to 0/1 so kernels may treat bool as a byte
    normalized.resize(nbytes);
    frontend::bools_as_0_1(normalized.data(), static_cast<const uint8_t*>(data), nbytes);
    data = normalized.data();
  }
  std::shared_ptr<Storage> st;
  try {
    st = frontend::upload(data, nbytes);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(what + ": " + e.what());
  }
  return Tensor(internal::TensorImpl::from_host(dtype, shape, std::move(st)));
}

Tensor from_blob(void* data, DType dtype, const IntList& shape, std::function<void()> release,
                 DeviceId device) {
  const size_t nbytes = frontend::check_memory("from_blob", data, dtype, shape);
  std::string what = "from_blob(" + std::string(dtype_name(dtype)) + shape_str(shape) + ")";
  Backend& be = active_backend();
  if (device != be.device()) {
    throw ValueError(what + ": the memory is on " + device.str() + ", but the " + be.name() +
                     " backend computes on " + be.device().str());
  }
  // The deleter runs when the last Storage reference goes; nothing above can throw after this.
  std::shared_ptr<void> owner(data, [release = std::move(release)](void*) {
    if (release) release();
  });
  auto st = std::make_shared<Storage>(data, nbytes, std::move(owner), device);
  return Tensor(internal::TensorImpl::from_host(dtype, shape, std::move(st)));
}

Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype) {
  DType dt = dtype.value_or(result_type({value}));
  frontend::check_fill_value("scalar_tensor", value, dt);
  return wrap(frontend::scalar_value(value, dt));
}

Tensor constant(const Scalar& value, DType dtype) {
  frontend::check_fill_value("constant", value, dtype);
  double d = value.kind() == Scalar::Kind::Float ? value.to_double() : static_cast<double>(value.to_int());
  return wrap({ir::make_constant(d, dtype), 0});
}

Tensor zeros(const IntList& shape, DType dtype) {
  check_shape("zeros", shape, dtype);
  return wrap(expand_scalar({ir::make_constant(0, dtype), 0}, shape));
}

Tensor ones(const IntList& shape, DType dtype) {
  check_shape("ones", shape, dtype);
  return wrap(expand_scalar({ir::make_constant(1, dtype), 0}, shape));
}

Tensor full(const IntList& shape, const Scalar& value, std::optional<DType> dtype) {
  DType dt = dtype.value_or(result_type({value}));
  check_shape("full", shape, dt);
  frontend::check_fill_value("full", value, dt);
  return wrap(expand_scalar(frontend::scalar_value(value, dt), shape));
}

Tensor zeros_like(const Tensor& t) {
  if (!t.defined()) throw ValueError("zeros_like: got an undefined tensor");
  return zeros(t.shape(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  if (!t.defined()) throw ValueError("ones_like: got an undefined tensor");
  return ones(t.shape(), t.dtype());
}
Tensor full_like(const Tensor& t, const Scalar& value) {
  if (!t.defined()) throw ValueError("full_like: got an undefined tensor");
  return full(t.shape(), value, t.dtype());
}

Tensor arange(const Scalar& end) { return arange(0, end, 1); }

namespace {
// The number of elements of arange(start, end, step), exact for integer arguments (a double
// loses the last unit past 2^53); throws OutOfMemoryError when it passes int64.
int64_t arange_length(const Scalar& start, const Scalar& end, const Scalar& step) {
  auto is_int = [](const Scalar& x) { return x.kind() != Scalar::Kind::Float; };
  if (is_int(start) && is_int(end) && is_int(step)) {
    __extension__ typedef __int128 Wide;  // exact: int64 differences need 65 bits
    Wide span = static_cast<Wide>(end.to_int()) - start.to_int(), st = step.to_int();
    Wide n = (span + st + (st > 0 ? -1 : 1)) / st;  // ceil(span / st): span and st agree in sign
    if (n <= std::numeric_limits<int64_t>::max()) return static_cast<int64_t>(n);
  } else {
    double n = std::ceil((end.to_double() - start.to_double()) / step.to_double());
    if (n < 0x1p63) return static_cast<int64_t>(n);
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "arange(%s, %s, %s): the result would have %.4g elements, more than fit in int64",
                scalar_str(start).c_str(), scalar_str(end).c_str(), scalar_str(step).c_str(),
                std::ceil((end.to_double() - start.to_double()) / step.to_double()));
  throw OutOfMemoryError(buf);
}
}  // namespace

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  DType dt = dtype.value_or(result_type({start, end, step}));
  if (dt == DType::Bool) throw TypeError("arange: bool is not supported");
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) throw ValueError("arange: step must be nonzero");
  if (!std::isfinite(s) || !std::isfinite(e)) throw ValueError("arange: start and end must be finite");
  if (!std::isfinite(st)) throw ValueError("arange: step must be finite");
  if ((st > 0 && e < s) || (st < 0 && e > s)) {
    throw ValueError("arange: upper bound and step sign are inconsistent (start " + std::to_string(s) +
                     ", end " + std::to_string(e) + ", step " + std::to_string(st) + ")");
  }
  int64_t n = arange_length(start, end, step);
  // The length is part of the shape (and so of the hash); start and step are parameters.
  DType compute = is_floating(dt) ? DType::Float64 : DType::Int64;
  check_tensor_size("arange", {n}, dt);
  check_tensor_size("arange (computed in " + std::string(dtype_name(compute)) + ")", {n}, compute);
  ir::Value i{ir::make_iota(n, compute), 0};
  ir::Value v = node(OpKind::Add, {node(OpKind::Mul, {i, frontend::scalar_value(step, compute)}),
                                   frontend::scalar_value(start, compute)});
  return wrap(frontend::cast(v, dt));
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) throw ValueError("eye: sizes must be non-negative");
  check_tensor_size("eye", {n, cols}, dtype);
  check_tensor_size("eye (row indices)", {n}, DType::Int64);
  check_tensor_size("eye (column indices)", {cols}, DType::Int64);
  ir::Value r = node(OpKind::Reshape, {{ir::make_iota(n, DType::Int64), 0}}, ir::ShapeAttrs{{n, 1}});
  ir::Value c =
      node(OpKind::Reshape, {{ir::make_iota(cols, DType::Int64), 0}}, ir::ShapeAttrs{{1, cols}});
  return wrap(frontend::cast(node(OpKind::Eq, {r, c}), dtype));
}

namespace {
ir::Value random(OpKind op, const IntList& shape, DType dtype, const char* name) {
  if (!is_floating(dtype)) {
    throw TypeError(std::string(name) + ": dtype " + std::string(dtype_name(dtype)) + " is not a floating type");
  }
  check_shape(name, shape, dtype);
  if (op == OpKind::RngUniform && is_reduced_float(dtype)) {
    // As PyTorch: a 16-bit uniform is k / 2^digits for a random k below 2^digits (digits 8 for
    // bfloat16, 11 for float16), exact in the type and below 1, where rounding a float32 draw
    // could give 1.
    ir::Value u = random(op, shape, DType::Float32, name);
    double steps = dtype == DType::BFloat16 ? 256.0 : 2048.0;
    auto c = [](double v) { return ir::Value{ir::make_constant(v, DType::Float32), 0}; };
    ir::Value k = node(OpKind::Floor, {node(OpKind::Mul, {u, c(steps)})});
    return frontend::cast(node(OpKind::Mul, {k, c(1.0 / steps)}), dtype);
  }
  return node(op, {internal::default_device().rng_key_and_advance()},
              ir::RandomAttrs{Shape(shape.begin(), shape.end()), dtype});
}
}  // namespace

Tensor rand(const IntList& shape, DType dtype) { return wrap(random(OpKind::RngUniform, shape, dtype, "rand")); }
Tensor randn(const IntList& shape, DType dtype) { return wrap(random(OpKind::RngNormal, shape, dtype, "randn")); }

Tensor randint(int64_t low, int64_t high, const IntList& shape, DType dtype) {
  if (high <= low) {
    throw ValueError("randint: high (" + std::to_string(high) + ") must be greater than low (" +
                     std::to_string(low) + ")");
  }
  if (dtype == DType::Bool) throw TypeError("randint: bool is not supported");
  check_shape("randint", shape, dtype);
  ir::Value u = random(OpKind::RngUniform, shape, DType::Float64, "randint (drawn in float64)");
  // floor(u * (high - low)) + low; u < 1 so the result stays below high. The span is computed in
  // double: high - low may pass int64.
  ir::Value span =
      frontend::scalar_value(static_cast<double>(high) - static_cast<double>(low), DType::Float64);
  ir::Value v = node(OpKind::Floor, {node(OpKind::Mul, {u, span})});
  v = node(OpKind::Add, {frontend::cast(v, DType::Int64), frontend::scalar_value(low, DType::Int64)});
  return wrap(frontend::cast(v, dtype));
}

void manual_seed(int64_t seed) {
  // The key tensor keeps its identity (a captured step reading it keeps replaying); a reseed inside
  // a captured function would then be read as state, so such a function is not replayed.
  if (capture_tracing()) refuse_replay("lz.manual_seed is called inside the function");
  internal::default_device().manual_seed(seed);
}

}  // namespace lz

namespace lz::internal {

namespace {
ir::Value key_value(const Tensor& key, const char* op) {
  ir::Value k = frontend::value_of(key, op);
  if (key.dtype() != DType::Int64 || key.dim() != 0) {
    throw TypeError(std::string(op) + ": the key must be an int64 0-d tensor, got " +
                    std::string(dtype_name(key.dtype())) + shape_str(key.shape()));
  }
  return k;
}
}  // namespace

Tensor rand_from_key(const Tensor& key, const IntList& shape, DType dtype) {
  if (!is_floating(dtype)) throw TypeError("rand_from_key: dtype must be floating");
  ir::Value k = key_value(key, "rand_from_key");
  check_shape("rand_from_key", shape, dtype);
  return frontend::wrap(
      frontend::node(ir::OpKind::RngUniform, {k}, ir::RandomAttrs{Shape(shape.begin(), shape.end()), dtype}));
}

Tensor rng_advance(const Tensor& key) {
  return frontend::wrap(frontend::node(ir::OpKind::RngAdvance, {key_value(key, "rng_advance")}));
}

}  // namespace lz::internal
