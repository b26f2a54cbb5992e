// The cpu target's description (lower/target.h).
#include "backend/cpu/cpu_target.h"

#include <algorithm>

namespace lz::cpu {
namespace {

using ir::Node;
using ir::OpClass;
using ir::OpKind;
using lower::touches_reduced_float;

// The elementwise nodes jit/codegen.cpp compiles; the planner gives the others their reference
// kernel.
bool compiles_elementwise(const Node& n) {
  const DType in = n.operands.empty() ? n.dtype : n.operands[0].node->dtype;
  const DType t = ir::op_info(n.op).cls == OpClass::Compare ? in : n.dtype;
  // Shape inference already refused the dtypes an op is not defined for (op_table.def); what
  // remains is where the code generator stops short of the reference kernels.
  // Rule 10: 16-bit floats are only converted (a cast) or passed through (the autograd
  // identities); the frontend never records other ops on them.
  if (touches_reduced_float(n) && n.op != OpKind::Cast && n.op != OpKind::GradLeaf &&
      n.op != OpKind::StopGradient) {
    return false;
  }
  switch (n.op) {
    case OpKind::FloorDiv:
    case OpKind::Remainder: return false;  // value-dependent errors and fix-ups: reference only
    case OpKind::Pow: return is_floating(t);  // integer powers: the reference's exact loop
    case OpKind::Neg: case OpKind::Abs: case OpKind::Relu: case OpKind::Add: case OpKind::Sub:
    case OpKind::Mul: case OpKind::Maximum: case OpKind::Minimum:
      return t != DType::Bool;
    case OpKind::Where: return n.operands[1].node->dtype == n.dtype;
    default: return true;
  }
}

lower::Target make_cpu_target() {
  lower::Target t;
  t.name = "cpu";
  t.compiles_elementwise = &compiles_elementwise;
  t.matmul_transpose_dtype = DType::Float32;   // sgemm's 'T' (library_calls.cpp)
  t.matmul_bias = true;                        // sgemm's beta = 1 over the bias rows
  t.convolution_library = "oneDNN (float32)";  // conv_dnnl.cpp
  t.pooling_library = "planes split across the pool";  // pool_planes.cpp
  t.host_fallbacks = true;
  t.launch = &cpu_launch;
  t.row_fusion_max_elements = 65536;  // 256 KiB of float32: a quarter of the 1 MiB L2 per core
  return t;
}

}  // namespace

lower::Launch cpu_launch(const lower::KernelExtent& k) {
  const int64_t weight = std::max<int64_t>(1, k.folded) * (1 + kMathCallWeight * k.math);
  const int64_t grain = std::max<int64_t>(1, kGrainElements / weight);
  const int64_t align =
      k.whole_rows ? 1
                   : std::max<int64_t>(kMinAlignElements,
                                       kLineBytes / static_cast<int64_t>(dtype_size(k.out_dtype)));
  return lower::Launch{{grain, align, 0, 0}};
}

const lower::Target& cpu_target() {
  static const lower::Target target = make_cpu_target();
  return target;
}

}  // namespace lz::cpu
