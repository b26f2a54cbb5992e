#include "aten/arg.h"

#include <sstream>

#include "tensor/view_layout.h"

namespace lz::aten {

std::string_view kind_name(Arg::Kind k) {
  switch (k) {
    case Arg::Kind::None:
      return "None";
    case Arg::Kind::Bool:
      return "bool";
    case Arg::Kind::Int:
      return "int";
    case Arg::Kind::Double:
      return "float";
    case Arg::Kind::String:
      return "str";
    case Arg::Kind::DType:
      return "dtype";
    case Arg::Kind::ForeignDType:
      return "dtype Lazuli lacks";
    case Arg::Kind::Device:
      return "device";
    case Arg::Kind::Layout:
      return "layout";
    case Arg::Kind::MemoryFormat:
      return "memory_format";
    case Arg::Kind::Tensor:
      return "Tensor";
    case Arg::Kind::List:
      return "list";
  }
  return "?";
}

Arg::Arg(Tensor t) {
  if (t.defined()) {
    kind_ = Kind::Tensor;
    tensor_ = std::move(t);
  }
}

Arg Arg::complex(Tensor pairs) {
  if (!pairs.defined() || pairs.dim() == 0 || pairs.shape().back() != 2 ||
      !is_floating(pairs.dtype())) {
    throw ValueError(
        "ATen table: a complex tensor's pairs are a float tensor whose last dim is "
        "2, got " +
        (pairs.defined() ? std::string(dtype_name(pairs.dtype())) + shape_str(pairs.shape())
                         : std::string("None")));
  }
  const Shape& shape = pairs.shape();
  Arg a(std::move(pairs));
  a.complex_ = true;
  a.complex_shape_.assign(shape.begin(), shape.end() - 1);
  return a;
}

std::optional<DType> Arg::complex_dtype() const {
  if (kind_ != Kind::ForeignDType) return std::nullopt;
  for (DType parts : {DType::Float32, DType::Float64}) {
    if (text_ == complex_name(parts)) return parts;
  }
  return std::nullopt;
}

const char* Arg::complex_name(DType parts) {
  return parts == DType::Float64 ? "complex128" : "complex64";
}

Arg::Arg(const std::vector<Tensor>& ts) : kind_(Kind::List) {
  list_.reserve(ts.size());
  for (const Tensor& t : ts) list_.emplace_back(t);
}

Arg::Arg(const IntList& ints) : kind_(Kind::List) {
  list_.reserve(ints.size());
  for (int64_t i : ints) list_.emplace_back(i);
}

Arg::Arg(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      *this = Arg(s.to_int() != 0);
      break;
    case Scalar::Kind::Int:
      *this = Arg(s.to_int());
      break;
    case Scalar::Kind::Float:
      *this = Arg(s.to_double());
      break;
  }
}

Arg Arg::of_kind(Kind kind, std::string text) {
  Arg a;
  a.kind_ = kind;
  a.text_ = std::move(text);
  return a;
}

void Arg::wrong_kind(const char* wanted) const {
  throw TypeError(std::string("ATen table: expected ") + wanted + ", got " +
                  std::string(kind_name(kind_)) + " (" + describe() + ")");
}

bool Arg::to_bool() const {
  if (kind_ != Kind::Bool && kind_ != Kind::Int) wrong_kind("bool");
  return i_ != 0;
}

int64_t Arg::to_int() const {
  if (kind_ != Kind::Int && kind_ != Kind::Bool) wrong_kind("int");
  return i_;
}

double Arg::to_double() const {
  if (!is_number()) wrong_kind("a number");
  return d_;
}

Scalar Arg::scalar() const {
  switch (kind_) {
    case Kind::Bool:
      return Scalar(i_ != 0);
    case Kind::Int:
      return Scalar(static_cast<long long>(i_));
    case Kind::Double:
      return Scalar(d_);
    default:
      wrong_kind("a number");
  }
}

const std::string& Arg::text() const {
  if (kind_ != Kind::String && kind_ != Kind::ForeignDType && kind_ != Kind::Device &&
      kind_ != Kind::Layout && kind_ != Kind::MemoryFormat) {
    wrong_kind("str");
  }
  return text_;
}

DType Arg::dtype() const {
  if (kind_ != Kind::DType) wrong_kind("a Lazuli dtype");
  return dtype_;
}

const Tensor& Arg::tensor() const {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor");
  if (meta_)
    throw TypeError("ATen table: a tensor known only by its type (" + describe() +
                    ") cannot be lowered");
  return tensor_;
}

const std::vector<Arg>& Arg::list() const {
  if (kind_ != Kind::List) wrong_kind("list");
  return list_;
}

IntList Arg::ints(size_t n) const {
  if (kind_ == Kind::Int) return IntList(n, i_);
  IntList out;
  out.reserve(list().size());
  for (const Arg& a : list_) out.push_back(a.to_int());
  return out;
}

std::vector<Tensor> Arg::tensors() const {
  std::vector<Tensor> out;
  out.reserve(list().size());
  for (const Arg& a : list_) out.push_back(a.tensor());
  return out;
}

std::vector<Tensor> Arg::optional_tensors() const {
  std::vector<Tensor> out;
  out.reserve(list().size());
  for (const Arg& a : list_) out.push_back(a.is_none() ? Tensor() : a.tensor());
  return out;
}

std::optional<DType> Arg::tensor_dtype() const {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor");
  return meta_ ? meta_->dtype : std::optional<DType>(tensor_.dtype());
}

const Shape& Arg::tensor_shape() const {
  if (kind_ != Kind::Tensor) wrong_kind("Tensor");
  if (meta_) return meta_->shape;
  return complex_ ? complex_shape_ : tensor_.shape();
}

int64_t Arg::tensor_numel() const { return numel(tensor_shape()); }

bool Arg::dense_from_storage_start() const {
  if (kind_ != Kind::Tensor) wrong_kind("a tensor");
  if (!meta_) return tensor_.is_contiguous();
  return meta_->strides && meta_->storage_offset == 0 &&
         meta_->strides->size() == meta_->shape.size() &&
         internal::is_contiguous_layout(meta_->shape, *meta_->strides);
}

const std::string& Arg::unsupported() const {
  static const std::string none;
  return meta_ ? meta_->unsupported : none;
}

std::string Arg::describe() const {
  std::ostringstream o;
  switch (kind_) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return i_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Double:
      o << d_;
      return o.str();
    case Kind::DType:
      return std::string(dtype_name(dtype_));
    case Kind::Tensor: {
      std::optional<DType> dt = tensor_dtype();
      if (is_complex())
        return complex_name(dt.value_or(DType::Float32)) + shape_str(tensor_shape());
      return (dt ? std::string(dtype_name(*dt)) : std::string("?")) + shape_str(tensor_shape());
    }
    case Kind::List: {
      o << "[";
      for (size_t i = 0; i < list_.size(); ++i) o << (i ? ", " : "") << list_[i].describe();
      o << "]";
      return o.str();
    }
    default:
      return "'" + text_ + "'";
  }
}

}  // namespace lz::aten
