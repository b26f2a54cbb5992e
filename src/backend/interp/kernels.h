// Reference kernels: one plain-loop implementation per primitive of ir/op_table.def. They are
// the ground truth the compiled backend is tested against, so they favour obvious code over speed.
//
// Inputs and the output are dense row-major arrays. Shapes, dtypes and attributes have already
// been validated by shape inference. Errors that depend on values (an index out of range) throw
// lz::IndexError with the op name, index value and size.
#pragma once
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

// The counter-based generator shared by every backend: the i-th value of a random op with key k.
// Deterministic and platform independent so every backend draws the same numbers.
//   mix(z)         = splitmix64 finalizer: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//                    z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31   (all mod 2^64)
//   splitmix64(x)  = mix(x + G), G = 0x9E3779B97F4A7C15
//   rng_bits(k, i) = mix(mix(splitmix64(uint64(k)) ^ (i * G)))
//   rng_advance(k) = int64(splitmix64(uint64(k) ^ 0x5851F42D4C957F2D))
// Value i of an op with key k:
//   rng_uniform float32: (rng_bits(k, i) >> 40) * 2^-24;  float64: (rng_bits(k, i) >> 11) * 2^-53
//   rng_normal: u1 = 1 - (rng_bits(k, 2i) >> 11) * 2^-53 (in (0, 1]),
//               u2 = (rng_bits(k, 2i+1) >> 11) * 2^-53,
//               z = sqrt(-2 ln u1) * cos(2 pi u2) in double, then cast to the dtype.
//   rng_advance: the op's [] int64 output is rng_advance(k).
uint64_t rng_bits(int64_t key, uint64_t i);
int64_t rng_advance(int64_t key);

}  // namespace lz::interp
