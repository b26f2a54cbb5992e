// The device's kernels that are not ATen ops over values but the device boundary itself: moving
// data in and out (copy_, _to_copy, _local_scalar_dense: uploads and value reads), allocation
// (empty_strided) and tensor metadata (resize_, set_, detach, as_strided). Everything else goes
// through the ATen table (dispatch.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/_reshape_alias_ops.h>
#include <ATen/ops/_to_copy_ops.h>
#include <ATen/ops/as_strided_ops.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/detach_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/resize_ops.h>
#include <ATen/ops/set_ops.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "aten/table.h"
#include "exec/front_end.h"
#include "lazuli/lazuli.h"
#include "lazuli_tensor.h"
#include "transfer.h"

namespace lzdev {
namespace {

// Where a fake tensor's op goes (is_fake, lazuli_tensor.h).
const c10::DispatchKeySet kMeta(c10::DispatchKey::Meta);

lz::DType dtype_for(std::optional<c10::ScalarType> t, lz::DType fallback, const char* op) {
  if (!t) return fallback;
  std::optional<lz::DType> dt = lazuli_dtype(*t);
  TORCH_CHECK_TYPE(dt.has_value(), "lazuli: ", op, ": the lazuli device has no ", *t,
                   " (it has bool, int32, int64, float16, bfloat16, float32, float64)");
  return *dt;
}

lz::Tensor zeros(c10::IntArrayRef size, lz::DType dt) {
  return lz::zeros(lz::IntList(size.begin(), size.end()), dt);
}

// empty: zeros (a lazy value has no uninitialized memory to hand out). An empty tensor of a dtype
// Lazuli lacks is made on the CPU: PyTorch makes such placeholders itself (batch norm's uint8
// reserve, which only its own backward reads) and never reads their values.
at::Tensor empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                 std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  if (dtype && !lazuli_dtype(*dtype) && c10::multiply_integers(size) == 0) {
    return at::empty(size, at::TensorOptions().dtype(*dtype).device(c10::kCPU));
  }
  return wrap(zeros(size, dtype_for(dtype, lz::default_float_dtype(), "empty")));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  // Strides are a request PyTorch itself may ignore for an empty tensor: a lazy value has none.
  return wrap(zeros(size, dtype_for(dtype, lz::default_float_dtype(), "empty_strided")));
}

// dst's new value is src's, cast to dst's dtype and broadcast to its shape; either side may be
// on the CPU.
at::Tensor& copy_(at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  if (is_fake(dst) || is_fake(src))
    return at::_ops::copy_::redispatch(kMeta, dst, src, non_blocking);
  try {
    if (LazuliTensorImpl* d = impl_of(dst)) {
      d->check_writable("copy_");
      // A CPU source is copied now: its later writes must not show on the device.
      lz::Tensor value = impl_of(src) ? impl_of(src)->value() : from_cpu(src.clone(), "the source");
      lz::Tensor target = d->value();
      if (value.dtype() != target.dtype()) value = value.to(target.dtype());
      target.copy_(lz::broadcast_to(value, target.shape()));
      return dst;
    }
    // To the CPU: a value read.
    at::Tensor cpu = read_to_cpu(value_of(src, "the source"), lz::CutReason::ValueRead);
    dst.copy_(cpu);
    return dst;
  } catch (...) {
    rethrow_as_torch_error("aten.copy_.default");
  }
}

at::Tensor _to_copy(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                    std::optional<bool> pin_memory, bool non_blocking,
                    std::optional<c10::MemoryFormat> memory_format) {
  if (is_fake(self)) {
    return at::_ops::_to_copy::redispatch(kMeta, self, dtype, layout, device, pin_memory,
                                          non_blocking, memory_format);
  }
  TORCH_CHECK(!layout || *layout == c10::kStrided, "lazuli: only strided tensors, got ", *layout);
  try {
    if (!impl_of(self)) {  // onto the device: an upload of a copy (later writes stay on the CPU)
      at::Tensor cpu = dtype ? self.to(*dtype) : self;
      return wrap(from_cpu(cpu.contiguous().clone(), "the tensor moved to lazuli"));
    }
    const lz::Tensor& v = value_of(self, "self");
    if (device && !device->is_privateuseone()) {
      // Off the device: a value read into a CPU tensor of its own.
      at::Tensor cpu = read_to_cpu(v, lz::CutReason::ValueRead).clone();
      at::Tensor out = dtype ? cpu.to(*dtype) : cpu;
      return device->is_cpu() ? out : out.to(*device, non_blocking);
    }
    lz::DType dt = dtype_for(dtype, v.dtype(), "_to_copy");
    return wrap(dt == v.dtype() ? v.clone() : v.to(dt));
  } catch (...) {
    rethrow_as_torch_error("aten._to_copy.default");
  }
}

c10::Scalar _local_scalar_dense(const at::Tensor& self) {
  try {
    at::Tensor cpu = read_to_cpu(value_of(self, "self"), lz::CutReason::ValueRead);
    return cpu.item();
  } catch (...) {
    rethrow_as_torch_error("aten._local_scalar_dense.default");
  }
}

// An out= argument's resize: a new value of the size (zeros: eager's are uninitialized).
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  if (is_fake(self))
    return at::_ops::resize_::redispatch(kMeta, self, c10::fromIntArrayRefSlow(size),
                                         memory_format);
  LazuliTensorImpl* impl = impl_of(self);
  TORCH_CHECK(impl != nullptr, "lazuli: resize_ of a ", self.device(), " tensor");
  if (impl->value().shape() != lz::IntList(size.begin(), size.end())) {
    impl->set_value(zeros(size, impl->value().dtype()));
  }
  return self;
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (is_fake(self) || is_fake(source))
    return at::_ops::set__source_Tensor::redispatch(kMeta, self, source);
  LazuliTensorImpl* impl = impl_of(self);
  TORCH_CHECK(impl != nullptr, "lazuli: set_ of a ", self.device(), " tensor");
  impl->set_value(value_of(source, "source"));
  return self;
}

// A new torch tensor over the same Lazuli tensor: detach() and alias share its value.
at::Tensor detach(const at::Tensor& self) {
  if (is_fake(self)) return at::_ops::detach::redispatch(kMeta, self);
  return wrap(value_of(self, "self"));
}

// as_strided over a lazy value: the ATen table's entry (a view where Lazuli has one, else the
// elements gathered) over v, or over a row-major copy of v where v is itself a strided view. A
// gather, or anything over such a copy, does not alias v: writes into it would not reach the
// base, so it is read-only; views PyTorch makes for writing are made by replaying their view ops
// instead (view replay is on for device tensors: _device.py). Known gap: storage_offset counts
// from v's first element, not from its storage's start (a device tensor has no storage offset).
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  if (is_fake(self))
    return at::_ops::as_strided::redispatch(
        kMeta, self, c10::fromIntArrayRefSlow(size), c10::fromIntArrayRefSlow(stride),
        storage_offset ? std::optional<c10::SymInt>(*storage_offset) : std::nullopt);
  try {
    const lz::Tensor& v = value_of(self, "self");
    lz::IntList sizes(size.begin(), size.end()), strides(stride.begin(), stride.end());
    const int64_t offset = storage_offset.value_or(0);
    if (sizes == v.shape() && strides == v.strides() && offset == 0) return wrap(v);
    const lz::Tensor src = v.is_contiguous() ? v : v.contiguous();
    const lz::aten::Entry& entry = *lz::aten::find("aten.as_strided.default");
    lz::aten::Args args{src, sizes, strides, offset};
    if (std::optional<std::string> why = lz::aten::why_not(entry, args)) {
      throw lz::ValueError("as_strided: size " + lz::shape_str(sizes) + ", stride " +
                           lz::shape_str(strides) + " and storage offset " +
                           std::to_string(offset) + " over a tensor of " +
                           std::to_string(v.numel()) + " elements: " + *why);
    }
    lz::aten::Call call;
    const lz::Tensor r = lz::aten::lower(entry, args, call).tensor();
    at::Tensor out = wrap(r);
    if (!r.is_view() || !v.is_contiguous()) {
      impl_of(out)->set_read_only("a copy made for as_strided (diagonal, unfold and the like)");
    }
    return out;
  } catch (...) {
    rethrow_as_torch_error("aten.as_strided.default");
  }
}

// reshape's view when the strides allow one: its strides are self's, so on a lazy value it is a
// reshape (a CPU fallback would apply them to a contiguous copy: wrong elements).
at::Tensor _reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  if (is_fake(self))
    return at::_ops::_reshape_alias::redispatch(kMeta, self, c10::fromIntArrayRefSlow(size),
                                                c10::fromIntArrayRefSlow(stride));
  try {
    return wrap(lz::reshape(value_of(self, "self"), lz::IntList(size.begin(), size.end())));
  } catch (...) {
    rethrow_as_torch_error("aten._reshape_alias.default");
  }
}

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  copy_(d, self, non_blocking);
  return dst;
}

at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (impl_of(dst)) {
    resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return _copy_from(self, dst, false);
}

}  // namespace

void register_boundary_kernels(torch::Library& m) {
  m.impl("empty.memory_format", empty);
  m.impl("empty_strided", empty_strided);
  m.impl("copy_", copy_);
  m.impl("_copy_from", _copy_from);
  m.impl("_copy_from_and_resize", _copy_from_and_resize);
  m.impl("_to_copy", _to_copy);
  m.impl("_local_scalar_dense", _local_scalar_dense);
  m.impl("resize_", resize_);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("detach", detach);
  m.impl("as_strided", as_strided);
  m.impl("_reshape_alias", _reshape_alias);
}

}  // namespace lzdev
