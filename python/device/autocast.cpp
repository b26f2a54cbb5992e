// torch.autocast("lazuli", dtype=...): the device's autocast kernels are PyTorch's own cast
// policies (ATen/autocast_mode.h), the lists CUDA uses: matrix products and convolutions cast
// their floating inputs to the region's dtype, numerically sensitive ops (exp, softmax, norms,
// losses) to float32, and ops mixing dtypes to the widest. Every other op falls through.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace lzdev {
namespace {

// The macros spell ATen's types unqualified, as inside at::autocast.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

#define LZ_AUTOCAST_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define LZ_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define LZ_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define LZ_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  using namespace at::autocast;  // the macros name CastPolicy values and at:: ops
  AT_FORALL_LOWER_PRECISION_FP(LZ_AUTOCAST_LOW)
  AT_FORALL_FP32(LZ_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(LZ_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(LZ_AUTOCAST_PROMOTE)
}

}  // namespace
}  // namespace lzdev
