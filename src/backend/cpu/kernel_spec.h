// A fused kernel's structure: what code generation needs and all it may depend on.
//
// A kernel computes one expression (a DAG of elementwise ops over loads) at every point of a loop
// nest and stores it, or folds it into a reduction. Sizes, strides and offsets are not part of the
// spec: they arrive at run time in an int64 array (layout below), so one compiled kernel serves
// every shape with the same structure and a new batch size costs a new plan, not a new kernel.
//
// Loop nest (after the planner reordered and collapsed dims, see fusion.cpp):
//   Elementwise  dims [0, rank) all parallel; the range [begin, end) is over the linear index of
//                the whole space, cut into row segments of the innermost dim.
//   RowReduce    dims [0, nout) parallel, [nout, rank) reduced (innermost, folded in registers);
//                the range is over the linear index of the output dims.
//   ColReduce    dims [0, nred) reduced (outermost), [nred, rank) parallel; the range is over the
//                linear output index, in row segments of the innermost dim; the fold runs in the
//                output row, which vectorizes across outputs.
//
// Runtime arguments (int64): sizes[rank], then for each input and finally the output:
// offset, strides[rank] (elements), then the bit patterns of the kernel's scalar constants
// (doubles): a constant's value is an argument too, so `x / n` in a mean serves every n. Pointers: one per input (null for index inputs), then the
// output. The kernel function is `void k(int64 begin, int64 end, void* const* ptrs, const int64* args)`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/hash.h"
#include "ir/ops.h"
#include "lazuli/dtype.h"

namespace lz::cpu {

enum class Scheme : uint8_t { Elementwise, RowReduce, ColReduce };
// How the innermost loop steps through an operand: broadcast, contiguous, or a runtime stride.
enum class StrideClass : uint8_t { Zero, One, Other };

// One node of the expression, operands before users. `op` is an elementwise OpKind, or
//   DeviceData: load input `input` at the current point;
//   Iota:       the current point's linear offset in index input `input`, converted to dtype;
//   Constant:   scalar argument `input` converted to dtype.
struct KExpr {
  ir::OpKind op;
  DType dtype;
  int32_t a = -1, b = -1, c = -1;  // operand expressions
  int32_t input = -1;
  double scalar = 0;
};

struct KInput {
  DType dtype;
  bool is_index = false;  // an Iota: no memory, the value is the view's linear offset
};

struct KernelSpec {
  Scheme scheme = Scheme::Elementwise;
  int rank = 1;
  int nred = 0;                                    // reduced dims (0 for Elementwise)
  ir::OpKind reduce_op = ir::OpKind::ReduceSum;    // for the two reduce schemes
  std::vector<KExpr> exprs;                        // the last one is stored / folded
  std::vector<KInput> inputs;
  int nscalars = 0;                                // scalar constant arguments
  std::vector<StrideClass> inner;                  // per input, then the output
  DType out_dtype = DType::Float32;

  int nout() const { return rank - nred; }
  // Structural hash: identical for every shape the kernel serves.
  Hash128 structure() const;
  // Readable loop nest, for debug.dump_kernels.
  std::string pseudo_c(const std::string& name) const;
};

using KernelFn = void (*)(int64_t begin, int64_t end, void* const* ptrs, const int64_t* args);

}  // namespace lz::cpu
