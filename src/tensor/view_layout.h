// The strides a view would have in PyTorch. Lazuli's views are chains of IR movement ops, not
// strided memory, but PyTorch's aliasing rules depend on strides: view() refuses a shape its
// strides cannot express, reshape() copies there, contiguous() returns a contiguous tensor
// itself. A view's strides are computed once, at creation, from its base's (always contiguous)
// layout and the chain, so those rules can be followed exactly.
#pragma once
#include <optional>
#include <vector>

#include "core/shape.h"
#include "ir/node.h"

namespace lz::internal {

using Strides = std::vector<int64_t>;

// The strides after one view op (Slice, Permute, Reshape, Expand, StopGradient) applied to a
// value of `in_shape` laid out with `in_strides`. A Reshape the strides cannot express (see
// reshape_strides) throws: callers check it first and copy instead.
Strides strides_after(ir::OpKind op, const ir::Attrs& attrs, const Shape& in_shape,
                      const Strides& in_strides, const Shape& out_shape);

// The strides of `in_shape`/`in_strides` viewed as `out_shape` (same numel), or nullopt when one
// output dim would span memory the input does not lay out evenly (ATen's computeStride).
std::optional<Strides> reshape_strides(const Shape& in_shape, const Strides& in_strides,
                                       const Shape& out_shape);

// PyTorch's is_contiguous: every dim of size > 1 has the row-major stride; empty tensors are.
bool is_contiguous_layout(const Shape& shape, const Strides& strides);

}  // namespace lz::internal
