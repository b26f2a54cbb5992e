#include "lazuli/dtype.h"

namespace lz {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
  }
  return 0;
}

namespace {
// Rank within PyTorch's promotion lattice; the two 16-bit floats share a rank (neither holds the
// other, so together they meet at float32).
int promotion_rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::Int32: return 1;
    case DType::Int64: return 2;
    case DType::Float16:
    case DType::BFloat16: return 3;
    case DType::Float32: return 4;
    case DType::Float64: return 5;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;
  return promotion_rank(a) >= promotion_rank(b) ? a : b;
}

DType default_float_dtype() { return DType::Float32; }

}  // namespace lz
