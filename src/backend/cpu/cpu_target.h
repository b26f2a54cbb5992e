// The cpu backend as a lowering target (lower/target.h): what its LLVM code generator compiles,
// its library calls (oneDNN's sgemm and convolutions), and how a kernel is cut over the pool.
#pragma once
#include "lower/target.h"

namespace lz::cpu {

const lower::Target& cpu_target();

// A kernel step's launch on the cpu backend: ThreadPool::parallel_for over its range in pieces of
// about `grain` points, each piece starting at a multiple of `align` points (except the first).
struct CpuLaunch {
  int64_t grain = 1, align = 1;
};
// The cut: pieces of about kGrainElements points folded (so a reduction's pieces hold as much work
// as an elementwise kernel's), starting at whole 64-byte lines of the output (at least 16
// elements) so two threads never write one cache line; rows are whole already (align 1).
// A math library call (libmvec's exp, tanh) costs a point about kMathCallWeight simple ops' worth
// (an exp kernel over [64, 1000] took 25.6 us on one thread, an add 5.4 us), so a kernel that
// calls one is cut into correspondingly fewer points per piece (bench/RESULTS.md 33).
inline constexpr int64_t kGrainElements = 32768;
inline constexpr int64_t kMathCallWeight = 4;
inline constexpr int64_t kLineBytes = 64;
inline constexpr int64_t kMinAlignElements = 16;
lower::Launch cpu_launch(const lower::KernelExtent& k);
inline CpuLaunch cpu_launch_of(const lower::Launch& l) { return {l.v[0], l.v[1]}; }

}  // namespace lz::cpu
