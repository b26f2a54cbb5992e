// lz::Tensor: attributes, value reads and in-place updates.
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "core/reduced_float.h"
#include "core/metrics.h"
#include "exec/device_executor.h"
#include "exec/graph_executor.h"
#include "ops/frontend.h"

namespace lz {

void Tensor::check_defined(const char* what) const {
  if (!impl_) throw ValueError(std::string(what) + ": the tensor is undefined");
}
int64_t Tensor::id() const { check_defined("id"); return impl_->id(); }
DType Tensor::dtype() const { check_defined("dtype"); return impl_->dtype(); }
const std::vector<int64_t>& Tensor::shape() const { check_defined("shape"); return impl_->shape(); }
int64_t Tensor::dim() const { return static_cast<int64_t>(shape().size()); }
int64_t Tensor::numel() const { return lz::numel(shape()); }
int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }

namespace frontend {

BufferPtr schedule_read(const Tensor& t, CutReason reason) {
  const auto& impl = t.impl();
  if (!impl) throw ValueError("value read of an undefined tensor");
  BufferPtr b = impl->buffer();
  if (!b && impl->state() == internal::TensorState::View) {
    ir::Value v = impl->value();
    if (v.node->op == ir::OpKind::DeviceData) b = v.node->data;
  }
  if (!b && impl->state() == internal::TensorState::Host) {
    ir::Value v = impl->value();  // uploads (counted) and becomes device data
    b = v.node->data;
  }
  if (!b) {
    SyncConfig cfg;
    cfg.sync_data = true;
    cfg.barrier = false;
    cfg.wait = false;
    cfg.caller_waits = true;  // finish_read follows
    cfg.reason = reason;
    SyncResult r = sync_tensors_graph({impl}, cfg);
    for (size_t i = 0; i < r.tensors.size(); ++i) {
      if (r.tensors[i] == impl) b = r.outputs[i];
    }
    if (!b) b = impl->buffer();  // another thread synced it meanwhile
    if (!b) throw Error("internal: value read produced no buffer");
  }
  return b;
}

void finish_read(const BufferPtr& b) {
  // A short program next in line runs here rather than on the executor thread, which this thread
  // would otherwise sleep waiting for.
  if (const std::shared_ptr<Execution>& exec = b->producer(); exec && !exec->done()) {
    device_executor().run_here_if_next(exec.get());
  }
  try {
    b->wait();
  } catch (...) {
    if (b->producer()) device_executor().forget_error_of(b->producer().get());
    throw;
  }
  // The program failed elsewhere (this value was restored, or did not depend on the failure):
  // the first read of any of its values raises the failure, later reads see the values.
  if (b->producer() && b->producer()->error()) {
    if (std::exception_ptr e = device_executor().take_error_of(b->producer().get())) std::rethrow_exception(e);
  }
  LZ_COUNTER("TransferFromDevice", 1);
}

BufferPtr read_buffer(const Tensor& t) {
  BufferPtr b = schedule_read(t, CutReason::ValueRead);
  finish_read(b);
  return b;
}

}  // namespace frontend

namespace {
template <typename T>
T convert_element(DType dt, const void* p, int64_t i) {
  switch (dt) {
    case DType::Bool: return static_cast<T>(static_cast<const uint8_t*>(p)[i] != 0);
    case DType::Int32: return static_cast<T>(static_cast<const int32_t*>(p)[i]);
    case DType::Int64: return static_cast<T>(static_cast<const int64_t*>(p)[i]);
    case DType::Float32: return static_cast<T>(static_cast<const float*>(p)[i]);
    case DType::Float64: return static_cast<T>(static_cast<const double*>(p)[i]);
    case DType::Float16:
    case DType::BFloat16:
      return static_cast<T>(from_reduced(dt, static_cast<const uint16_t*>(p)[i]));
  }
  return T{};
}
}  // namespace

template <typename T>
T Tensor::item() const {
  check_defined("item");
  if (numel() != 1) {
    throw ValueError("item: a tensor with " + std::to_string(numel()) + " elements (shape " +
                     shape_str(shape()) + ") cannot be converted to a scalar");
  }
  BufferPtr b = frontend::read_buffer(*this);
  return convert_element<T>(b->dtype(), frontend::host_bytes(b).data(), 0);
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_defined("to_vector");
  BufferPtr b = frontend::read_buffer(*this);
  int64_t n = numel();
  std::vector<T> out(static_cast<size_t>(n));
  std::vector<uint8_t> bytes = frontend::host_bytes(b);
  const void* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = convert_element<T>(b->dtype(), p, i);
  return out;
}

template bool Tensor::item<bool>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;

std::string Tensor::to_string() const {
  check_defined("to_string");
  BufferPtr b = frontend::read_buffer(*this);
  std::vector<uint8_t> bytes = frontend::host_bytes(b);
  const void* p = bytes.data();
  DType dt = dtype();
  auto elem = [&](int64_t i) {
    std::ostringstream o;
    switch (dt) {
      case DType::Bool: o << (convert_element<int>(dt, p, i) ? "True" : "False"); break;
      case DType::Int32:
      case DType::Int64: o << convert_element<int64_t>(dt, p, i); break;
      default: {
        double v = convert_element<double>(dt, p, i);
        if (std::isnan(v)) o << "nan";
        else if (std::isinf(v)) o << (v > 0 ? "inf" : "-inf");
        else if (v == std::floor(v) && std::fabs(v) < 1e16) o << static_cast<int64_t>(v) << ".";
        else o << static_cast<float>(v);
      }
    }
    return o.str();
  };
  const Shape& s = shape();
  std::string out = "tensor(";
  if (numel() == 0) {  // as PyTorch: tensor([]) or tensor([], size=(2, 0))
    out += "[]";
    if (s.size() > 1) {
      out += ", size=(";
      for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
      out += ")";
    }
    if (dt != DType::Float32 && dt != DType::Int64 && dt != DType::Bool) {
      out += ", dtype=lazuli." + std::string(dtype_name(dt));
    }
    return out + ")";
  }
  std::vector<int64_t> st = contiguous_strides(s);
  // Recursive printer over dims, PyTorch style: nested brackets, rows on their own lines.
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    if (d == s.size()) {
      out += elem(off);
      return;
    }
    out += "[";
    for (int64_t i = 0; i < s[d]; ++i) {
      if (i) {
        out += ",";
        if (d + 1 < s.size()) out += std::string(s.size() - d - 1, '\n') + std::string(8 + d, ' ');
        else out += " ";
      }
      rec(d + 1, off + i * st[d]);
    }
    out += "]";
  };
  rec(0, 0);
  if (dt != DType::Float32 && dt != DType::Int64 && dt != DType::Bool) {
    out += ", dtype=lazuli." + std::string(dtype_name(dt));
  }
  return out + ")";
}

Tensor Tensor::operator-() const { return neg(*this); }
Tensor Tensor::operator~() const { return bitwise_not(*this); }
Tensor Tensor::to(DType dtype) const { return cast(*this, dtype); }
Tensor Tensor::exp() const { return lz::exp(*this); }
Tensor Tensor::log() const { return lz::log(*this); }
Tensor Tensor::sqrt() const { return lz::sqrt(*this); }
Tensor Tensor::abs() const { return lz::abs(*this); }
Tensor Tensor::relu() const { return lz::relu(*this); }
Tensor Tensor::tanh() const { return lz::tanh(*this); }
Tensor Tensor::sigmoid() const { return lz::sigmoid(*this); }
Tensor Tensor::pow(const Scalar& e) const { return lz::pow(*this, e); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const { return lz::clamp(*this, min, max); }
Tensor Tensor::sum(const IntList& d, bool k) const { return lz::sum(*this, d, k); }
Tensor Tensor::mean(const IntList& d, bool k) const { return lz::mean(*this, d, k); }
Tensor Tensor::amax(const IntList& d, bool k) const { return lz::amax(*this, d, k); }
Tensor Tensor::amin(const IntList& d, bool k) const { return lz::amin(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return lz::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return lz::argmin(*this, d, k); }
Tensor Tensor::matmul(const Tensor& o) const { return lz::matmul(*this, o); }
Tensor Tensor::reshape(const IntList& s) const { return lz::reshape(*this, s); }
Tensor Tensor::view(const IntList& s) const { return lz::view(*this, s); }
Tensor Tensor::flatten(int64_t a, int64_t b) const { return lz::flatten(*this, a, b); }
Tensor Tensor::squeeze(std::optional<int64_t> d) const { return lz::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return lz::unsqueeze(*this, d); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return lz::transpose(*this, a, b); }
Tensor Tensor::permute(const IntList& d) const { return lz::permute(*this, d); }
Tensor Tensor::T() const {
  IntList p(static_cast<size_t>(dim()));
  for (int64_t i = 0; i < dim(); ++i) p[i] = dim() - 1 - i;
  return lz::permute(*this, p);
}
Tensor Tensor::expand(const IntList& s) const { return lz::expand(*this, s); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) const {
  return lz::slice(*this, d, s, e, st);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return lz::select(*this, d, i); }
Tensor Tensor::contiguous() const { return lz::contiguous(*this); }
std::vector<int64_t> Tensor::strides() const {
  check_defined("strides");
  return impl_->strides();
}
bool Tensor::is_view() const {
  check_defined("is_view");
  return impl_->is_view();
}

bool Tensor::is_contiguous() const {
  check_defined("is_contiguous");
  return impl_->is_contiguous();
}

namespace {
// The result of an in-place op must keep self's shape and be castable to self's dtype.
void assign_in_place(Tensor& self, const Tensor& result, const char* op) {
  if (result.shape() != self.shape()) {
    throw ValueError(std::string(op) + ": the result shape " + shape_str(result.shape()) +
                     " does not match the shape " + shape_str(self.shape()) + " of the tensor updated in place");
  }
  if (dtype_category(result.dtype()) > dtype_category(self.dtype())) {
    throw TypeError(std::string(op) + ": the result type " + std::string(dtype_name(result.dtype())) +
                    " cannot be cast to the dtype " + std::string(dtype_name(self.dtype())) +
                    " of the tensor updated in place");
  }
  self.impl()->set_value(frontend::cast(result.impl()->value(), self.dtype()));
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) {
  check_defined("add_");
  Tensor r = alpha.to_double() == 1.0 ? add(*this, o) : add(*this, mul(o, alpha));
  assign_in_place(*this, r, "add_");
  return *this;
}
Tensor& Tensor::add_(const Scalar& o) { check_defined("add_"); assign_in_place(*this, add(*this, o), "add_"); return *this; }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) {
  check_defined("sub_");
  Tensor r = alpha.to_double() == 1.0 ? sub(*this, o) : sub(*this, mul(o, alpha));
  assign_in_place(*this, r, "sub_");
  return *this;
}
Tensor& Tensor::sub_(const Scalar& o) { check_defined("sub_"); assign_in_place(*this, sub(*this, o), "sub_"); return *this; }
Tensor& Tensor::mul_(const Tensor& o) { check_defined("mul_"); assign_in_place(*this, mul(*this, o), "mul_"); return *this; }
Tensor& Tensor::mul_(const Scalar& o) { check_defined("mul_"); assign_in_place(*this, mul(*this, o), "mul_"); return *this; }
Tensor& Tensor::div_(const Tensor& o) { check_defined("div_"); assign_in_place(*this, div(*this, o), "div_"); return *this; }
Tensor& Tensor::div_(const Scalar& o) { check_defined("div_"); assign_in_place(*this, div(*this, o), "div_"); return *this; }

Tensor& Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  if (!src.defined()) throw ValueError("copy_: the source tensor is undefined");
  Shape target = shape();
  try {
    if (broadcast_shapes(src.shape(), target, "copy_") != target) throw ValueError("");
  } catch (const ValueError&) {
    throw ValueError("copy_: source shape " + shape_str(src.shape()) + " cannot be broadcast to " + shape_str(target));
  }
  ir::Value v = frontend::cast(frontend::value_of(src, "copy_"), dtype());
  impl_->set_value(frontend::broadcast_to(v, target));
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::fill_(const Scalar& value) {
  check_defined("fill_");
  frontend::check_fill_value("fill_", value, dtype());
  impl_->set_value(frontend::broadcast_to(frontend::scalar_value(value, dtype()), shape()));
  return *this;
}

Tensor& Tensor::fill_(const Tensor& value) {
  check_defined("fill_");
  if (!value.defined()) throw ValueError("fill_: the value tensor is undefined");
  if (value.dim() != 0) {  // as PyTorch: a tensor value is one number, never broadcast
    throw ValueError(frontend::desc("fill_", *this) +
                     ": the value must be a 0-dim tensor, got shape " + shape_str(value.shape()));
  }
  return copy_(value);
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  check_defined("clamp_");
  assign_in_place(*this, lz::clamp(*this, min, max), "clamp_");
  return *this;
}

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add_");
  Tensor r = scatter_add(*this, dim, index, src);
  impl_->set_value(r.impl()->value());
  return *this;
}

}  // namespace lz
