// A program's plan: the lowering of one synced graph for a target (target.h). Steps (fused
// kernels, library calls, reference fallbacks) over values (materialized buffers) placed by a
// memory plan. Built by build_plan (planner.h) from an ir::LoweringGraph; it keeps no node and no
// buffer, only shapes, arguments and value homes. A backend runs it (the cpu backend:
// cpu_backend.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/lowering_graph.h"
#include "lower/kernel_spec.h"
#include "lower/target.h"

namespace lz::lower {

// Where a materialized value lives while the program runs.
struct ValueHome {
  enum Kind : uint8_t { Param, Output, Scratch } kind;
  int index = 0;       // Param: parameter index; Output: root index
  int64_t offset = 0;  // Scratch: byte offset in the step arena
};

struct PlanValue {
  ValueHome home;
  DType dtype;
  Shape shape;
  int64_t nbytes = 0;
  int def_step = -1;   // the step that writes it (-1: a parameter)
  int last_use = -1;   // the last step that reads it (INT_MAX: read by the final copies)
};

// A kernel's bounds check of an index op: what its error names.
struct IndexCheck {
  ir::OpKind op;
  int64_t dim = 0, size = 0;
  int node = -1;  // post-order index of the index op (error reports)
};

struct PlanStep {
  // Library: a library call (convolutions through oneDNN, pooling split across the pool) that
  // may decline a case (a dtype, a geometry), which then runs its reference kernel, counted as
  // `counter`.
  enum Kind : uint8_t { Kernel, MatMul, Library, Fallback } kind;
  // Kernel
  int kernel = -1;                  // index into Plan::kernels
  std::vector<int> inputs;          // value per kernel input (-1: index input); MatMul/Fallback: operands
  int output = -1;                  // value written (output 0 of a multi-output op)
  std::vector<int> more_outputs;    // Fallback of a multi-output op: its outputs 1..
  std::vector<int64_t> args;        // the kernel's runtime arguments (kernel_spec.h)
  int64_t range = 0;                // Kernel: the output points it computes
  Launch launch;                    // Kernel: as the target chose it (lower/target.h)
  std::vector<IndexCheck> checks;   // per KExpr Gather check of the kernel, in check order
  // MatMul / Fallback
  ir::OpKind op = ir::OpKind::DeviceData;
  ir::Attrs attrs;
  std::vector<Shape> in_shapes;     // the operands' dense shapes (a reshape alias has its own)
  std::vector<DType> in_dtypes;
  std::vector<uint8_t> trans;       // MatMul: operand read transposed (in_shapes holds its stored shape)
  // MatMul computing a sum (fusion rule 7b): the next input is a row [n] added to every row of
  // the product (bias), then the next a dense [m, n] value added to it (residual). The
  // product's shape [m, n] is `product`; the output value is the sum's, a reshape of it.
  bool bias = false;
  bool residual = false;
  Shape product;
  std::string counter;              // Fallback: "fallback::<op>"
  int node = -1;                    // MatMul / Fallback: the node's post-order index (error reports)
};

struct PlanKernel {
  KernelSpec spec;
  std::string name;  // "lzk_<structure hex>"
};

struct Plan {
  std::vector<PlanValue> values;
  std::vector<PlanKernel> kernels;  // distinct structures, in first-use order
  std::vector<PlanStep> steps;
  std::vector<int> root_value;      // per root: the value it reads
  std::vector<bool> root_copy;      // per root: copied from its value at the end (not written in place)
  std::vector<int> param_value;     // per parameter: its value, or -1 when no step reads it
  int64_t arena_bytes = 0;
  std::vector<std::string> notes;   // fusion decisions, when asked for
};

// Whether root `r`, computed in place (root_copy false), may be written into the storage of
// parameter `p` when the caller donated it: every read of the parameter is at or before the root's
// step, by the same element. Asked per donated pair at run time (a table of every root's candidates
// would hold roots x parameters entries: quadratic when thousands of tensors sync at once).
bool root_may_overwrite(const Plan& plan, int r, int p);

// Arena placement of scratch values, each alive from step `def` to step `last` (inclusive): no two
// values alive at one step overlap. LargestFirst is the tighter placement but compares each value
// with every one placed before it; Sweep reuses freed blocks best-fit in step order in O(n log n).
// The planner uses LargestFirst up to kLargestFirstLimit values (every ordinary program), Sweep
// above (a backward over a chain thousands of ops deep). Returns each value's offset; sets
// *arena_bytes. Raises OutOfMemoryError when the sum does not fit in 64 bits.
struct ScratchInterval {
  int64_t nbytes;
  int def, last;
};
enum class Placement { LargestFirst, Sweep };
inline constexpr size_t kLargestFirstLimit = 4096;
std::vector<int64_t> place_scratch(const std::vector<ScratchInterval>& values, int64_t* arena_bytes,
                                   Placement how);

// Builds the plan for `target` (what it compiles and calls, lower/target.h). `explain`: record
// each fusion decision in notes.
Plan build_plan(const ir::LoweringGraph& graph, const Target& target, bool explain);

// The plan in words: steps, values and each kernel's loop nest (pseudo-C).
std::string describe_plan(const Plan& plan);

// Each step in one line of words, for the program profile: its kind ("kernel", "matmul",
// "library", "fallback") and what it computes ("kernel lzk_1f2e elementwise: tanh, mul, add ->
// float32[64, 256]", "matmul float32[64, 64] x [1000, 64]^T -> float32[64, 1000]"); then one
// "copies" entry for the copies that end a run (the cpu backend's Executable::step_labels).
struct StepWords {
  const char* kind;
  std::string what;
};
std::vector<StepWords> describe_steps(const Plan& plan);

}  // namespace lz::lower
