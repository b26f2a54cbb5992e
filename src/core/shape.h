// Shapes: sizes of each dim, row-major. Helpers for numel, strides, dim wrapping and broadcasting,
// and the size limit every tensor and IR value is checked against when it is recorded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lazuli/dtype.h"

namespace lz {

using Shape = std::vector<int64_t>;

// Elements in a tensor of this shape (0 when a dim is 0). Shapes of tensors and IR values pass
// check_tensor_size when recorded, so for them this never overflows; for an unchecked shape whose
// product passes int64 it saturates at INT64_MAX instead of wrapping.
int64_t numel(const Shape& s);
// numel(s), or -1 when the product passes int64 (for checking a user's target shape).
int64_t numel_or_overflow(const Shape& s);
// Row-major (contiguous) strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& s);
// "[2, 3]"
std::string shape_str(const Shape& s);
// "4398046511104 bytes (4.00 TiB)"
std::string bytes_str(double nbytes);

// The size limit: a tensor exists only if its dims (a 0 counted as 1, so no stride overflows
// either) times its element size fit in int64, because kernels compute element and byte offsets
// in 64-bit. Returns the byte count; else throws OutOfMemoryError naming `what`, the dtype and
// the shape (and ValueError for a negative dim). Whether the bytes can be allocated is decided
// when a program runs (Storage), not here: a lazy value that is never materialized may be huge.
int64_t check_tensor_size(const std::string& what, const Shape& s, DType dtype);

// Wraps a possibly negative dim into [0, rank); throws IndexError naming `op` when out of range.
// A rank-0 tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);
// numpy broadcasting of two shapes; throws ValueError naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace lz
