// Creation ops. Host data starts in the host state; zeros/ones/full/arange/eye are IR built from
// baked 0/1 constants, parameters and iota, so their shapes and dtypes (not values) are hashed.
#include <cmath>
#include <cstring>

#include "exec/capture.h"
#include "ops/frontend.h"
#include "tensor/device.h"

namespace lz {
using frontend::node;
using frontend::wrap;
using ir::OpKind;

namespace {
void check_shape(const char* op, const IntList& shape) {
  for (int64_t s : shape) {
    if (s < 0) throw ValueError(std::string(op) + ": negative dimension in shape " + shape_str(shape));
  }
}

ir::Value expand_scalar(ir::Value v, const IntList& shape) {
  return frontend::broadcast_to(std::move(v), shape);
}
}  // namespace

Tensor from_data(const void* data, DType dtype, const IntList& shape) {
  check_shape("tensor", shape);
  size_t nbytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  auto st = std::make_shared<Storage>(nbytes);
  if (nbytes) std::memcpy(st->data(), data, nbytes);
  if (dtype == DType::Bool) {  // normalize to 0/1 so kernels may treat bool as a byte
    auto* b = static_cast<uint8_t*>(st->data());
    for (size_t i = 0; i < nbytes; ++i) b[i] = b[i] != 0;
  }
  return Tensor(internal::TensorImpl::from_host(dtype, shape, std::move(st)));
}

Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype) {
  DType dt = dtype.value_or(result_type({value}));
  return wrap(frontend::scalar_value(value, dt));
}

Tensor constant(const Scalar& value, DType dtype) {
  double d = value.kind() == Scalar::Kind::Float ? value.to_double() : static_cast<double>(value.to_int());
  return wrap({ir::make_constant(d, dtype), 0});
}

Tensor zeros(const IntList& shape, DType dtype) {
  check_shape("zeros", shape);
  return wrap(expand_scalar({ir::make_constant(0, dtype), 0}, shape));
}

Tensor ones(const IntList& shape, DType dtype) {
  check_shape("ones", shape);
  return wrap(expand_scalar({ir::make_constant(1, dtype), 0}, shape));
}

Tensor full(const IntList& shape, const Scalar& value, std::optional<DType> dtype) {
  check_shape("full", shape);
  DType dt = dtype.value_or(result_type({value}));
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

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype) {
  DType dt = dtype.value_or(result_type({start, end, step}));
  if (dt == DType::Bool) throw TypeError("arange: bool is not supported");
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) throw ValueError("arange: step must be nonzero");
  if (!std::isfinite(s) || !std::isfinite(e)) throw ValueError("arange: start and end must be finite");
  if ((st > 0 && e < s) || (st < 0 && e > s)) {
    throw ValueError("arange: upper bound and step sign are inconsistent (start " + std::to_string(s) +
                     ", end " + std::to_string(e) + ", step " + std::to_string(st) + ")");
  }
  int64_t n = static_cast<int64_t>(std::ceil((e - s) / st));
  // The length is part of the shape (and so of the hash); start and step are parameters.
  DType compute = is_floating(dt) ? DType::Float64 : DType::Int64;
  ir::Value i{ir::make_iota(n, compute), 0};
  ir::Value v = node(OpKind::Add, {node(OpKind::Mul, {i, frontend::scalar_value(step, compute)}),
                                   frontend::scalar_value(start, compute)});
  return wrap(frontend::cast(v, dt));
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) throw ValueError("eye: sizes must be non-negative");
  ir::Attrs rr, rc;
  rr.ints = {n, 1};
  rc.ints = {1, cols};
  ir::Value r = node(OpKind::Reshape, {{ir::make_iota(n, DType::Int64), 0}}, rr);
  ir::Value c = node(OpKind::Reshape, {{ir::make_iota(cols, DType::Int64), 0}}, rc);
  return wrap(frontend::cast(node(OpKind::Eq, {r, c}), dtype));
}

namespace {
ir::Value random(OpKind op, const IntList& shape, DType dtype, const char* name) {
  check_shape(name, shape);
  if (!is_floating(dtype)) {
    throw TypeError(std::string(name) + ": dtype " + std::string(dtype_name(dtype)) + " is not a floating type");
  }
  ir::Attrs a;
  a.ints = shape;
  a.dtype = dtype;
  return node(op, {internal::default_device().rng_key_and_advance()}, a);
}
}  // namespace

Tensor rand(const IntList& shape, DType dtype) { return wrap(random(OpKind::RngUniform, shape, dtype, "rand")); }
Tensor randn(const IntList& shape, DType dtype) { return wrap(random(OpKind::RngNormal, shape, dtype, "randn")); }

Tensor randint(int64_t low, int64_t high, const IntList& shape, DType dtype) {
  if (high <= low) {
    throw ValueError("randint: high (" + std::to_string(high) + ") must be greater than low (" +
                     std::to_string(low) + ")");
  }
  if (is_floating(dtype) || dtype == DType::Bool) {
    if (dtype == DType::Bool) throw TypeError("randint: bool is not supported");
  }
  ir::Value u = random(OpKind::RngUniform, shape, DType::Float64, "randint");
  // floor(u * (high - low)) + low; u < 1 so the result stays below high.
  ir::Value span = frontend::scalar_value(static_cast<double>(high - low), DType::Float64);
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
