// The cpu backend's library calls: matrix products (library_calls.cpp: oneDNN sgemm for float32,
// matmul_dnnl.cpp: oneDNN's matmul for bf16 and batches), convolutions (conv_dnnl.cpp) and
// pooling (pool_planes.cpp). Each returns false
// where the library has no implementation, and the caller runs the reference kernel instead.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/interp/kernels.h"
#include "ir/attrs.h"
#include "ir/ops.h"

namespace lz::cpu {

// Makes this thread's OpenMP team itself: oneDNN runs on the runtime pool's threads, one
// single-threaded call each, never with its own team (library_calls.cpp says why).
void single_threaded_onednn();

// Gives the calling thread its OpenMP team size back when the scope ends. PyTorch in the same
// process shares the OpenMP runtime, and a program may run on a thread of the user's (a waiter
// runs a short program itself: DeviceExecutor::run_here_if_next): single_threaded_onednn there
// would otherwise leave PyTorch's own ops on that thread single-threaded.
class KeepOpenmpThreads {
 public:
  KeepOpenmpThreads();
  ~KeepOpenmpThreads();
  KeepOpenmpThreads(const KeepOpenmpThreads&) = delete;
  KeepOpenmpThreads& operator=(const KeepOpenmpThreads&) = delete;

 private:
  int threads_;
};

// The libraries' identity (name and version), part of every plan's cache key.
std::string library_id();

// The least work, in multiply-adds, worth a block of its own on the runtime pool: about 3 us of
// a core's sgemm here (90 GFLOP/s), against well under a microsecond to hand a block to a warm
// worker. Smaller products stay whole on the calling thread.
inline constexpr int64_t kMinBlockMultiplyAdds = int64_t{1} << 18;

// How a float32 product C[m, n] = A[m, k] B[k, n] is cut for the runtime pool: blocks of rows
// (or of columns, when C is short and wide), each at least `grain` of them (at least
// kMinBlockMultiplyAdds and 32 rows or columns, so sgemm's micro-kernels stay full).
struct GemmCut {
  bool rows;
  int64_t extent;  // m or n
  int64_t grain;
};
GemmCut gemm_cut(int64_t m, int64_t n, int64_t k);

// out = op(a) op(b) for float32 2-D operands, a stored transposed when ta (b when tb); plus
// `bias` (a float32 row of out's width) on every row and `residual` (a dense float32 value of
// out's size), where given.
bool sgemm_2d(const interp::ConstArray& a, bool ta, const interp::ConstArray& b, bool tb,
              interp::MutArray out, const interp::ConstArray* bias = nullptr,
              const interp::ConstArray* residual = nullptr);

// A MatMul (float32 or bfloat16), a convolution or a pooling op through its library; `outs`:
// one array per output of the op.
bool library_call(ir::OpKind op, const ir::Attrs& attrs, const std::vector<interp::ConstArray>& in,
                  const std::vector<interp::MutArray>& outs);
// Pooling: the reference kernel's planes split across the runtime pool (pool_planes.cpp).
bool pool_library_call(ir::OpKind op, const ir::PoolAttrs& a,
                       const std::vector<interp::ConstArray>& in,
                       const std::vector<interp::MutArray>& outs);

bool conv_library_call(ir::OpKind op, const ir::ConvAttrs& a,
                       const std::vector<interp::ConstArray>& in, interp::MutArray out);
// A bfloat16 or float32 product [..., m, k] x [..., k, n] (dense, batch dims broadcast) through
// oneDNN's matmul primitive (matmul_dnnl.cpp).
bool dnnl_matmul(const interp::ConstArray& a, const interp::ConstArray& b, interp::MutArray out);

// Offset, in elements, of batch entry `b` of a dense operand of `shape` ([..., rows, cols], each
// matrix `matrix_size` elements) whose batch dims broadcast to `batch`.
int64_t batch_offset(int64_t b, const Shape& batch, const Shape& shape, int64_t matrix_size);

}  // namespace lz::cpu
