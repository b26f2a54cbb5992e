// Shapes: sizes of each dim, row-major. Helpers for numel, strides, dim wrapping and broadcasting.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lz {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
// Row-major (contiguous) strides in elements.
std::vector<int64_t> contiguous_strides(const Shape& s);
// "[2, 3]"
std::string shape_str(const Shape& s);
// Wraps a possibly negative dim into [0, rank); throws IndexError naming `op` when out of range.
// A rank-0 tensor accepts dims -1 and 0, as in PyTorch.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);
// numpy broadcasting of two shapes; throws ValueError naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace lz
