// Reference kernels: one plain-loop implementation per primitive of ir/op_table.def. They are
// the ground truth the compiled backend is tested against, so they favour obvious code over speed.
//
// Inputs and the output are dense row-major arrays. Shapes, dtypes and attributes have already
// been validated by shape inference. Errors that depend on values (an index out of range) throw
// lz::IndexError with the op name, index value and size.
#pragma once
#include <functional>
#include <vector>

#include "core/shape.h"
#include "ir/node.h"

namespace lz {
class Storage;
}

namespace lz::interp {

struct ConstArray {
  DType dtype;
  const Shape* shape;
  const void* data;
  // The Storage `data` is the start of, when nothing writes it while the kernel runs (a
  // parameter no output of the program overwrites): a library call may key what it derives from
  // the bytes by its content id (cpu/conv_weights.h). Null: no such promise.
  const Storage* storage = nullptr;
};

struct MutArray {
  DType dtype;
  const Shape* shape;
  void* data;
};

// Computes `op` with `attrs` over `inputs` into `out` (preallocated, out.shape and out.dtype are
// the node's inferred output). DeviceData is never passed here.
void run_kernel(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                MutArray out);
// Any op, one preallocated array per output (op_table.def's outputs column).
void run_kernel(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                const std::vector<MutArray>& outputs);

// Pooling (MaxPool, AvgPool, AvgPoolBackward) is independent per plane (the leading dims before
// the pooled ones, of its output): run_pool_planes computes planes [p0, p1) only, the same code
// run_kernel runs over all of them, so a backend may split the planes across threads and get
// the reference's results bit for bit. pool_planes is their count.
int64_t pool_planes(const ir::PoolAttrs& a, const std::vector<MutArray>& outputs);
void run_pool_planes(ir::OpKind op, const ir::PoolAttrs& a, const ConstArray& x,
                     const std::vector<MutArray>& outputs, int64_t p0, int64_t p1);

// The counter-based generator every backend shares (ir/rng.h states it): rng_bits(k, i) and
// rng_advance(k).
uint64_t rng_bits(int64_t key, uint64_t i);
int64_t rng_advance(int64_t key);

// A bfloat16 or float16 product computed as a float32 one: the operands widened (exact), `f32`
// run on them, each result rounded to out's dtype once (oneDNN's bf16 arithmetic). The reference
// kernel's and the cpu backend's way where oneDNN has no bf16 matmul. False when `f32` is.
bool matmul_through_float32(
    const ConstArray& a, const ConstArray& b, MutArray out,
    const std::function<bool(const ConstArray&, const ConstArray&, MutArray)>& f32);

}  // namespace lz::interp
