// The cpu backend as a lowering target (lower/target.h): what its LLVM code generator compiles,
// its library calls (oneDNN's sgemm and convolutions), and its threads' work grain.
#pragma once
#include "lower/target.h"

namespace lz::cpu {

const lower::Target& cpu_target();

}  // namespace lz::cpu
