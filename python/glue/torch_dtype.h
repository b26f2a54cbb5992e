// The dtypes Lazuli and PyTorch share, each way: one mapping for the two modules built against
// torch's headers, the lazy device (python/device/) and the torch glue (python/glue/).
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "lazuli/dtype.h"

namespace lztorch {

// Lazuli's dtype for a torch dtype; none for those Lazuli does not have (complex, uint8, ...).
inline std::optional<lz::DType> lazuli_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool:
      return lz::DType::Bool;
    case c10::ScalarType::Int:
      return lz::DType::Int32;
    case c10::ScalarType::Long:
      return lz::DType::Int64;
    case c10::ScalarType::Float:
      return lz::DType::Float32;
    case c10::ScalarType::Double:
      return lz::DType::Float64;
    case c10::ScalarType::Half:
      return lz::DType::Float16;
    case c10::ScalarType::BFloat16:
      return lz::DType::BFloat16;
    default:
      return std::nullopt;
  }
}

// torch's dtype for a Lazuli dtype (Undefined for a value outside the enum).
inline c10::ScalarType torch_dtype(lz::DType t) {
  switch (t) {
    case lz::DType::Bool:
      return c10::ScalarType::Bool;
    case lz::DType::Int32:
      return c10::ScalarType::Int;
    case lz::DType::Int64:
      return c10::ScalarType::Long;
    case lz::DType::Float32:
      return c10::ScalarType::Float;
    case lz::DType::Float64:
      return c10::ScalarType::Double;
    case lz::DType::Float16:
      return c10::ScalarType::Half;
    case lz::DType::BFloat16:
      return c10::ScalarType::BFloat16;
  }
  return c10::ScalarType::Undefined;
}

}  // namespace lztorch
