// The dtypes Lazuli and PyTorch share, each way: one mapping for the two modules built against
// torch's headers, the lazy device (python/device/) and the torch glue (python/glue/).
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <utility>

#include "lazuli/dtype.h"

namespace lztorch {

inline constexpr std::pair<c10::ScalarType, lz::DType> kSharedDtypes[] = {
    {c10::ScalarType::Bool, lz::DType::Bool},         {c10::ScalarType::Int, lz::DType::Int32},
    {c10::ScalarType::Long, lz::DType::Int64},        {c10::ScalarType::Float, lz::DType::Float32},
    {c10::ScalarType::Double, lz::DType::Float64},    {c10::ScalarType::Half, lz::DType::Float16},
    {c10::ScalarType::BFloat16, lz::DType::BFloat16},
};

// Lazuli's dtype for a torch dtype; none for those Lazuli does not have (complex, uint8, ...).
inline std::optional<lz::DType> lazuli_dtype(c10::ScalarType t) {
  for (const auto& [torch_type, lazuli_type] : kSharedDtypes) {
    if (torch_type == t) return lazuli_type;
  }
  return std::nullopt;
}

// torch's dtype for a Lazuli dtype (Undefined for a value outside the enum).
inline c10::ScalarType torch_dtype(lz::DType t) {
  for (const auto& [torch_type, lazuli_type] : kSharedDtypes) {
    if (lazuli_type == t) return torch_type;
  }
  return c10::ScalarType::Undefined;
}

}  // namespace lztorch
