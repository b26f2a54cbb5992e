#include "lazuli_tensor.h"

#include <c10/core/DispatchKeySet.h>
#include <c10/core/StorageImpl.h>

#include <memory>

#include "exec/front_end.h"

namespace lzdev {

namespace {

// The storage that stands for the data of `value`'s base (the tensor its views read and write
// through): one per base, kept by the base (lz::front_end::alias_token), so
// `is_alias_of` is true exactly for a tensor and its views, as in eager PyTorch
// (DistributedDataParallel's reducer asks it of every gradient). It holds no bytes and no
// pointer; has_storage() stays false, so data_ptr(), torch.save and deepcopy take the
// storage-less routes (values leave through .cpu()).
std::shared_ptr<void> new_identity() {
  c10::StorageImpl* s =
      c10::make_intrusive<c10::StorageImpl>(
          c10::StorageImpl::use_byte_size_t(), 0,
          c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, 0)), nullptr,
          /*resizable=*/false)
          .release();
  return std::shared_ptr<void>(s, [](void* p) {
    c10::intrusive_ptr<c10::StorageImpl>::reclaim(static_cast<c10::StorageImpl*>(p));
  });
}

c10::Storage identity_storage(const lz::Tensor& value) {
  std::shared_ptr<void> token = lz::front_end::alias_token(value, &new_identity);
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
      static_cast<c10::StorageImpl*>(token.get())));
}

}  // namespace

LazuliTensorImpl::LazuliTensorImpl(lz::Tensor value, c10::DeviceIndex index)
    : c10::TensorImpl(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                      c10::scalarTypeToTypeMeta(torch_dtype(value.dtype())),
                      c10::Device(c10::DeviceType::PrivateUse1, index)),
      value_(std::move(value)) {
  refresh_metadata();
}

bool LazuliTensorImpl::has_storage() const { return false; }

void LazuliTensorImpl::refresh_metadata() {
  storage_ = identity_storage(value_);
  data_type_ = c10::scalarTypeToTypeMeta(torch_dtype(value_.dtype()));
  set_sizes_and_strides(value_.shape(), value_.strides());
  refresh_numel();
  refresh_contiguous();
}

void LazuliTensorImpl::check_writable(const std::string& op) const {
  TORCH_CHECK(
      read_only_.empty(), "lazuli: ", op, " writes into a tensor that is ", read_only_,
      "; a write would not reach the tensor it was taken from. Write through views the "
      "device has (slicing, select, view, transpose) or compute the new value out of place");
}

void LazuliTensorImpl::set_value(lz::Tensor value) {
  value_ = std::move(value);
  refresh_metadata();
}

c10::intrusive_ptr<c10::TensorImpl> LazuliTensorImpl::shallow_copy_and_detach(
    const c10::VariableVersion& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<LazuliTensorImpl>(value_, device().index());
  copy_tensor_metadata(this, impl.get(), version_counter, allow_tensor_metadata_change);
  impl->read_only_ = read_only_;
  return impl;
}

c10::intrusive_ptr<c10::TensorImpl> LazuliTensorImpl::shallow_copy_and_detach(
    c10::VariableVersion&& version_counter, bool allow_tensor_metadata_change) const {
  auto impl = c10::make_intrusive<LazuliTensorImpl>(value_, device().index());
  copy_tensor_metadata(this, impl.get(), std::move(version_counter), allow_tensor_metadata_change);
  impl->read_only_ = read_only_;
  return impl;
}

void LazuliTensorImpl::shallow_copy_from(const c10::intrusive_ptr<c10::TensorImpl>& impl) {
  auto* other = dynamic_cast<LazuliTensorImpl*>(impl.get());
  TORCH_CHECK(other != nullptr, "lazuli: cannot take the data of a ", impl->device(),
              " tensor into a lazuli tensor (move it with .to('lazuli') first)");
  copy_tensor_metadata(other, this, version_counter(), allow_tensor_metadata_change());
  value_ = other->value_;
  read_only_ = other->read_only_;
}

at::Tensor wrap(lz::Tensor value) {
  if (!value.defined()) return at::Tensor();
  return at::Tensor(c10::make_intrusive<LazuliTensorImpl>(std::move(value), 0));
}

bool has_fake_tensor(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && is_fake(v.toTensor())) return true;
    if (v.isList()) {  // Tensor[] and Tensor?[] (index.Tensor's indices)
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && is_fake(e.toTensor())) return true;
      }
    }
  }
  return false;
}

LazuliTensorImpl* impl_of(const at::Tensor& t) {
  if (!t.defined() || !t.unsafeGetTensorImpl()->is_privateuseone()) return nullptr;
  return dynamic_cast<LazuliTensorImpl*>(t.unsafeGetTensorImpl());
}

const lz::Tensor& value_of(const at::Tensor& t, const char* what) {
  LazuliTensorImpl* impl = impl_of(t);
  TORCH_CHECK_TYPE(impl != nullptr, "lazuli: ", what, " must be a lazuli tensor, got ",
                   t.defined() ? t.device().str() : std::string("an undefined tensor"));
  return impl->value();
}

}  // namespace lzdev
