#include "tensor/view_layout.h"

#include <algorithm>

#include "ir/ops.h"
#include "lazuli/error.h"

namespace lz::internal {

std::optional<Strides> reshape_strides(const Shape& in_shape, const Strides& in_strides,
                                       const Shape& out_shape) {
  // ATen's computeStride (aten/src/ATen/TensorUtils.cpp): the input dims are cut into chunks
  // that are contiguous among themselves; each chunk must map onto whole output dims.
  if (in_shape.empty()) return Strides(out_shape.size(), 1);
  if (numel(in_shape) == 0) {
    if (in_shape == out_shape) return in_strides;
    Strides out(out_shape.size());  // any strides do; PyTorch's count 0-size dims as 1
    int64_t acc = 1;
    for (size_t i = out_shape.size(); i-- > 0;) {
      out[i] = acc;
      acc *= std::max<int64_t>(out_shape[i], 1);
    }
    return out;
  }
  Strides out(out_shape.size());
  int64_t view_d = static_cast<int64_t>(out_shape.size()) - 1;
  int64_t chunk_base_stride = in_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(in_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= in_shape[d];
    bool chunk_ends =
        d == 0 || (in_shape[d - 1] != 1 && in_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || out_shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base_stride;
      view_numel *= out_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = in_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Strides strides_after(ir::OpKind op, const ir::Attrs& attrs, const Shape& in_shape,
                      const Strides& in_strides, const Shape& out_shape) {
  switch (op) {
    case ir::OpKind::Slice: {  // attrs: dim, start, end, step
      Strides s = in_strides;
      s[std::get<ir::SliceAttrs>(attrs).dim] *= std::get<ir::SliceAttrs>(attrs).step;
      return s;
    }
    case ir::OpKind::Permute: {
      const std::vector<int64_t>& perm = std::get<ir::PermuteAttrs>(attrs).perm;
      Strides s(perm.size());
      for (size_t i = 0; i < s.size(); ++i) s[i] = in_strides[perm[i]];
      return s;
    }
    case ir::OpKind::Expand: {  // same rank (new leading dims are reshaped in first)
      Strides s = in_strides;
      for (size_t i = 0; i < s.size(); ++i) {
        if (in_shape[i] == 1 && out_shape[i] != 1) s[i] = 0;
      }
      return s;
    }
    case ir::OpKind::Reshape: {
      std::optional<Strides> s = reshape_strides(in_shape, in_strides, out_shape);
      if (!s) {
        throw Error("internal: a view reshape from " + shape_str(in_shape) + " to " +
                    shape_str(out_shape) + " that its strides cannot express");
      }
      return *s;
    }
    case ir::OpKind::StopGradient:
      return in_strides;
    default:
      break;
  }
  throw Error("internal: not a view op: " + std::string(ir::op_name(op)));
}

bool is_contiguous_layout(const Shape& shape, const Strides& strides) {
  if (numel(shape) == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

}  // namespace lz::internal
