// A fused kernel's structure: what code generation needs and all it may depend on.
//
// A kernel computes one expression (a DAG of elementwise ops over loads) at every point of a loop
// nest and stores it, or folds it into a reduction. Sizes, strides and offsets are not part of the
// spec: they arrive at run time in an int64 array (layout below), so one compiled kernel serves
// every shape with the same structure and a new batch size costs a new plan, not a new kernel.
//
// Loop nest (after the planner reordered and collapsed dims, see kernel_build.cpp):
//   Elementwise  dims [0, rank) all parallel; the range [begin, end) is over the linear index of
//                the whole space, cut into row segments of the innermost dim.
//   RowReduce    dims [0, nout) parallel, [nout, rank) reduced (innermost, folded in registers);
//                the range is over the linear index of the output dims.
//   ColReduce    dims [0, nred) reduced (outermost), [nred, rank) parallel; the range is over the
//                linear output index, in row segments of the innermost dim; the fold runs in the
//                output row (float32 sums: in a float64 tile of the row), which vectorizes across
//                outputs.
//   RowFused     dims [0, nout) parallel, [nout, rank) the row (innermost); the range is over the
//                rows. Per row: each reduction expression (a KExpr op ReduceSum/Prod/Max/Min, a
//                "stage", in expression order) folds its operand over the row as RowReduce does,
//                then the last expression is stored at every point of the row; expressions
//                after a stage read its value. The output has the whole space (fusion rule 5b:
//                softmax, layer_norm). A row output (row_outs) is a per-row expression (of
//                stages and constants only: layer_norm's mean and rstd, which the backward
//                reads) stored once per row into a value of its own, after the stages.
//   Scatter      the loop nest of ColReduce over the index space of a scatter_add (reduce_op
//                ScatterAdd) or index_copy (IndexCopy): dims [0, nred) are the scattered dim
//                (serial, in increasing order), [nred, rank) the others, cut into row segments
//                over threads. The output already holds the base (an earlier step wrote it);
//                each point adds (or copies) its value at the output position plus the checked
//                index times the output's dynamic stride. Two points that reach one output
//                element differ only in the scattered dim, so they run on one thread, in order:
//                results do not depend on the thread count (the reference's order, too).
//
// Indirect loads (gather, index_select): an operand's position may have dynamic terms, each a
// checked index expression (KExpr op Gather) times a runtime stride. A check compares the index
// value with its bound (an argument); out of range, the value used is 0 (memory stays in bounds)
// and the kernel reports the failure through the error sink (KernelErrorSink): the point with the
// smallest key (its row-major position in the kernel's iteration space, an extra operand with
// offset and strides like the others), the check, the value. The runtime raises the error.
//
// Runtime arguments (int64): sizes[rank], then for each input, the output and (when the kernel
// has checks) the key: offset, strides[rank] (elements); then the bit patterns of the kernel's
// scalar constants (doubles): a constant's value is an argument too, so `x / n` in a mean serves
// every n; then the bound of each check; then the dynamic strides, per input then the output, one
// per entry of its `dyn`; then per row output, its offset and strides[rank] (0 on the row's
// dims). Pointers: one per input (null for index inputs), then the output, then (with checks) the
// error sink, then the row outputs. The cpu target's kernel function and error sink:
// backend/cpu/kernel_abi.h.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "ir/ops.h"
#include "lazuli/dtype.h"

namespace lz::lower {

enum class Scheme : uint8_t { Elementwise, RowReduce, ColReduce, Scatter, RowFused };
// The scheme's name in plan notes and kernel dumps.
inline const char* scheme_name(Scheme s) {
  switch (s) {
    case Scheme::Elementwise: return "elementwise";
    case Scheme::RowReduce: return "row reduction";
    case Scheme::ColReduce: return "column reduction";
    case Scheme::Scatter: return "scatter";
    case Scheme::RowFused: return "rows with reductions";
  }
  return "?";
}
// How the innermost loop steps through an operand: broadcast, contiguous, or a runtime stride.
enum class StrideClass : uint8_t { Zero, One, Other };

// One node of the expression, operands before users. `op` is an elementwise OpKind, or
//   DeviceData: load input `input` at the current point;
//   Iota:       the current point's linear offset in index input `input`, converted to dtype;
//   Constant:   scalar argument `input` converted to dtype;
//   RngUniform, RngNormal: value number i of the draw with the int64 key `a`, where i is the
//               current point's linear offset in index input `input` (interp/kernels.h's
//               generator, bit for bit); RngAdvance is unary (key `a` -> next key);
//   Gather:     check `input` of the integer index `a`: the value as int64 when it lies in
//               [0, bound), else 0 and a reported failure;
//   ReduceSum, ReduceProd, ReduceMax, ReduceMin (RowFused only): expression `a` folded over the
//               current row, in dtype (a float32 sum accumulates as RowReduce's does).
struct KExpr {
  ir::OpKind op;
  DType dtype;
  int32_t a = -1, b = -1, c = -1;  // operand expressions
  int32_t input = -1;
  double scalar = 0;
};

struct KInput {
  KInput(DType t, bool index = false, std::vector<int32_t> d = {})
      : dtype(t), is_index(index), dyn(std::move(d)) {}
  DType dtype;
  bool is_index = false;     // an Iota or a draw's counter: no memory, the view's linear offset
  std::vector<int32_t> dyn;  // checked index expressions added (times a stride) to the position
};

// RowFused: expression `expr` (per row: it reads no input) stored once per row, in its dtype.
struct KRowOut {
  int32_t expr = -1;
  DType dtype = DType::Float32;
};

struct KernelSpec {
  Scheme scheme = Scheme::Elementwise;
  int rank = 1;
  int nred = 0;                                    // reduced dims (0 for Elementwise)
  ir::OpKind reduce_op = ir::OpKind::ReduceSum;    // for the two reduce schemes
  std::vector<KExpr> exprs;                        // the last one is stored / folded
  std::vector<KInput> inputs;
  int nscalars = 0;                                // scalar constant arguments
  std::vector<StrideClass> inner;                  // per input, the output, then the key
  DType out_dtype = DType::Float32;
  std::vector<int32_t> out_dyn;                    // Scatter: the output's dynamic terms
  int nchecks = 0;                                 // index bounds checks (KExpr op Gather)
  std::vector<KRowOut> row_outs;                   // RowFused: per-row values stored too

  int nout() const { return rank - nred; }
  // Structural hash: identical for every shape the kernel serves.
  Hash128 structure() const;
  // Readable loop nest, for debug.dump_kernels.
  std::string pseudo_c(const std::string& name) const;
};

}  // namespace lz::lower
