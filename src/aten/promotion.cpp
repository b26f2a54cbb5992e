// The helpers the group files share (aten/entries.h): PyTorch's type promotion over ATen
// arguments, casts of operands, dims and dtype arguments.
#include <array>

#include "aten/entries.h"

namespace lz::aten {

Operand operand(const Arg& a) {
  if (a.is_tensor()) return Operand(a.tensor());
  return Operand(a.scalar());
}

DType dtype_of(const Arg& a) {
  std::optional<DType> dt = a.tensor_dtype();
  if (!dt) throw TypeError("ATen table: a tensor of a dtype Lazuli lacks (" + a.describe() + ")");
  return *dt;
}

DType promote(std::initializer_list<const Arg*> args) {
  // Tiers: dimensioned tensors, 0-d tensors, numbers.
  std::array<std::optional<DType>, 3> tiers;
  for (const Arg* a : args) {
    if (a == nullptr || a->is_none()) continue;
    int tier;
    DType dt;
    if (a->is_tensor()) {
      tier = a->tensor_dim() ? 0 : 1;
      dt = dtype_of(*a);
    } else {
      tier = 2;
      switch (a->kind()) {
        case Arg::Kind::Bool:
          dt = DType::Bool;
          break;
        case Arg::Kind::Int:
          dt = DType::Int64;
          break;
        case Arg::Kind::Double:
          dt = default_float_dtype();
          break;
        default:
          throw TypeError("ATen table: cannot promote " + a->describe());
      }
    }
    tiers[tier] = tiers[tier] ? promote_types(*tiers[tier], dt) : dt;
  }
  std::optional<DType> r;
  for (const std::optional<DType>& dt : tiers) {
    if (dt && (!r || dtype_category(*dt) > dtype_category(*r))) r = dt;
  }
  if (!r) throw TypeError("ATen table: nothing to promote");
  return *r;
}

Operand cast(const Operand& o, DType dtype) {
  if (o.is_tensor()) {
    return o.tensor().dtype() == dtype ? o : Operand(o.tensor().to(dtype));
  }
  const Scalar& s = o.scalar();
  if (dtype == DType::Bool) {
    return Operand(
        Scalar(s.kind() == Scalar::Kind::Float ? s.to_double() != 0.0 : s.to_int() != 0));
  }
  if (is_floating(dtype)) return Operand(Scalar(s.to_double()));
  return Operand(Scalar(static_cast<long long>(s.to_int())));
}

IntList reduce_dims(const Arg& dim, int64_t rank) {
  if (dim.is_none() || rank == 0) return {};
  if (dim.kind() == Arg::Kind::Int) return {dim.to_int()};
  return dim.ints();
}

int64_t wrap(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  return dim < 0 ? dim + r : dim;
}

std::optional<std::string> dtype_arg_refused(const Arg& dtype) {
  if (dtype.kind() == Arg::Kind::ForeignDType) return "dtype " + dtype.text() + " not supported";
  return std::nullopt;
}

DType dtype_or(const Arg& dtype, DType fallback) {
  return dtype.is_none() ? fallback : dtype.dtype();
}

}  // namespace lz::aten
