// A PyTorch tensor on the lazy Lazuli device: a c10::TensorImpl whose value is a Lazuli tensor
// (lz::Tensor, in one of its four states), with no storage of its own. Sizes and strides are the
// Lazuli tensor's (a Lazuli view reports the strides PyTorch would give it), so aliasing rules
// and is_contiguous() read as in eager PyTorch. data_ptr() raises, as on PyTorch's own lazy
// devices: values leave through .cpu() or .item() (value reads, DESIGN.md 4). storage() is an
// empty storage per root tensor, so is_alias_of() answers as in eager PyTorch.
//
// Identity: the impl shares the Lazuli tensor's handle, so an in-place op recorded on the Lazuli
// tensor (it takes a new IR value) is seen by every torch tensor over it; detach() and .data
// share it too. Only resize_ and set_ give an impl another Lazuli tensor.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/TensorImpl.h>

#include <optional>
#include <string>

#include "lazuli/tensor.h"
#include "torch_dtype.h"

namespace lzdev {

class LazuliTensorImpl final : public c10::TensorImpl {
 public:
  LazuliTensorImpl(lz::Tensor value, c10::DeviceIndex index);

  const lz::Tensor& value() const { return value_; }
  // Another Lazuli tensor (resize_, set_, an in-place view op such as t_): sizes, strides and
  // dtype follow it.
  void set_value(lz::Tensor value);

  // A copy standing for a strided view Lazuli cannot express (as_strided: diagonal, unfold):
  // reading it is right, writing into it would not reach its base, so writes raise (the reason
  // is what they say).
  void set_read_only(std::string reason) { read_only_ = std::move(reason); }
  // Throws, naming `op`, if this tensor may not be written.
  void check_writable(const std::string& op) const;

  // False: the storage it holds has no bytes and only says which tensors alias (a tensor and its
  // views share one), so data_ptr() raises and torch.save copies the values out through .cpu().
  bool has_storage() const override;

  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      const c10::VariableVersion& version_counter,
      bool allow_tensor_metadata_change) const override;
  c10::intrusive_ptr<c10::TensorImpl> shallow_copy_and_detach(
      c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const override;
  void shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) override;

 private:
  void refresh_metadata();

  lz::Tensor value_;
  std::string read_only_;  // why writes raise, or empty
};

// The device tensor over `value` (undefined stays undefined).
at::Tensor wrap(lz::Tensor value);
// The impl of a device tensor, or null for any other tensor.
LazuliTensorImpl* impl_of(const at::Tensor& t);
// The Lazuli tensor of a device tensor (TypeError naming `what` for any other).
const lz::Tensor& value_of(const at::Tensor& t, const char* what);

// A fake tensor of this device: a meta tensor carrying the device's dispatch keys, as
// FakeTensorMode makes them (DTensor's sharding propagation, FSDP2). Its ops are shape
// computations: the kernels send them to the Meta kernels instead of recording anything.
inline bool is_fake(const at::Tensor& t) { return t.defined() && t.is_meta(); }
// Whether any tensor argument on `stack` (the op's arguments) is fake.
bool has_fake_tensor(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// Dtypes both ways; nullopt for a torch dtype Lazuli lacks.
using lztorch::lazuli_dtype;  // torch_dtype.h (python/glue/), shared with the glue
using lztorch::torch_dtype;

}  // namespace lzdev
