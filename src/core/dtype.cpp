#include "lazuli/dtype.h"

namespace lz {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
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
  }
  return 0;
}

DType promote_types(DType a, DType b) {
  // The enum is ordered so that the larger one is the promoted type for every pair we support.
  return static_cast<uint8_t>(a) >= static_cast<uint8_t>(b) ? a : b;
}

DType default_float_dtype() { return DType::Float32; }

}  // namespace lz
