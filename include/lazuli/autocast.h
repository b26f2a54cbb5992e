// Autocast (mixed precision), as torch.autocast on CPUs: a thread-local region, default off. While
// it is on, every matrix product and convolution recorded (matmul and what is built on it: linear,
// bmm, einsum, attention; conv and conv_transpose) casts its float32 operands to the region's
// dtype, bfloat16 or float16, and computes in it; linear's and conv's bias is cast with them, so
// their result has the region's dtype. Losses (cross_entropy, nll_loss, mse_loss, ...) cast
// 16-bit inputs to float32 and return float32. Every other op runs in its inputs' dtypes.
// float64 operands are never cast. The casts are ordinary IR (lz::cast), so gradients flow back
// through them to the float32 parameters.
//
//   { lz::AutocastGuard amp(lz::DType::BFloat16); loss = lz::nn::cross_entropy(model(x), y); }
//   lz::backward(loss);  // outside the region, as PyTorch recommends
#pragma once
#include "lazuli/dtype.h"

namespace lz {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::BFloat16;
};

// This thread's autocast state.
AutocastState autocast_state();
// Sets it; throws lz::Error for a dtype other than bfloat16 or float16.
void set_autocast_state(AutocastState state);

// On (or, with enabled = false, off) for its scope; restores the previous state.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::BFloat16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState previous_;
};

}  // namespace lz
