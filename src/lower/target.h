// What a lowering target can do, as the planner (planner.h) needs to know it: which nodes its
// code generator compiles, which library calls it has, and how it launches a kernel.
// The planner knows no target itself; a backend describes its own once (the cpu backend:
// backend/cpu/cpu_target.cpp) and passes it to build_plan. The description is fixed for a
// backend build, so it needs no place in the compile environment (the build revision covers it).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "ir/node.h"
#include "lazuli/dtype.h"

namespace lz::lower {

// What the planner knows of one kernel step, for its target to choose the launch (Target::launch).
struct KernelExtent {
  int64_t points = 0;       // the output points the kernel computes (PlanStep::range)
  int64_t folded = 1;       // the points each output point folds (a reduction's extent; else 1)
  bool whole_rows = false;  // each point computes a whole row (row reductions, fused rows)
  DType out_dtype = DType::Float32;
  int64_t math = 0;  // math library calls per point (ir::calls_libm: exp, tanh, erf...)
};

// A kernel step's launch as its target chose it: kept in the plan step, never read by the
// planner, read by the backend that made the target (the cpu backend: how the range is cut over
// the pool's threads, backend/cpu/cpu_target.h). A GPU backend would keep its block and grid here.
struct Launch {
  std::array<int64_t, 4> v{};
  bool operator==(const Launch&) const = default;
};

struct Target {
  std::string name;  // in errors: "<name> backend: ..."

  // Whether the code generator compiles elementwise node `n` (its op at its dtypes). The planner
  // gives the others their reference kernel (a counted fallback). Shape inference has already
  // refused the dtypes an op is not defined for: this lists only where code generation stops
  // short of the reference kernels.
  bool (*compiles_elementwise)(const ir::Node& n) = nullptr;

  // Library calls. Matrix products are always one (PlanStep::MatMul, which may still decline a
  // case and run the reference kernel). For 2-D products of `matmul_transpose_dtype` the call
  // reads an operand transposed (BLAS's 'T'): a chain of permutes under an operand folds into
  // the call, and a product whose only user transposes it computes the transpose directly
  // (fusion rule 7). Empty: operands are always dense buffers.
  std::optional<DType> matmul_transpose_dtype;
  // Whether such a 2-D product's call also adds a bias row to every row of its result
  // (PlanStep::bias: BLAS's beta = 1 over a C filled with the row, as addmm does), so that
  // `matmul(x, w) + b` is one call (fusion rule 7b).
  bool matmul_bias = false;
  // Convolutions (op class Conv) are a library call (PlanStep::Library, which may decline a case)
  // through the library named here, as plan notes print it; empty: their reference kernel.
  std::string convolution_library;
  // Pooling (op class Pool) likewise.
  std::string pooling_library;

  // Whether the reference kernels can run on this target's buffers (host memory), as fallbacks
  // do and library calls do for the cases they decline. Without them, a graph that needs a
  // fallback is refused when it is planned.
  bool host_fallbacks = true;

  // The launch of each kernel step. Null: an all-zero Launch.
  Launch (*launch)(const KernelExtent& k) = nullptr;

  // Fusion rule 5b keeps a row in the core's cache between its passes: rows longer than this
  // are not fused (they would not stay in cache, and a kernel of few long rows runs its outputs
  // on few threads, one row each).
  int64_t row_fusion_max_elements = 65536;
};

// A node reading or writing float16/bfloat16 (fusion rule 10; targets' predicates use it too).
inline bool touches_reduced_float(const ir::Node& n) {
  if (is_reduced_float(n.dtype)) return true;
  for (const ir::Value& v : n.operands) {
    if (is_reduced_float(v.dtype())) return true;
  }
  return false;
}

}  // namespace lz::lower
