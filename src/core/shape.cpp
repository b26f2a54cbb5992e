#include "core/shape.h"

#include <cstdio>
#include <limits>

#include "lazuli/error.h"

namespace lz {

int64_t numel_or_overflow(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d == 0) return 0;  // an empty tensor, whatever its other dims
    overflow |= __builtin_mul_overflow(n, d, &n);
  }
  return overflow ? -1 : n;
}

int64_t numel(const Shape& s) {
  int64_t n = numel_or_overflow(s);
  return n < 0 ? std::numeric_limits<int64_t>::max() : n;
}

std::string bytes_str(double nbytes) {
  static const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  double v = nbytes;
  int u = 0;
  while (v >= 1024 && u < 8) {
    v /= 1024;
    ++u;
  }
  char buf[96];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%.0f bytes", nbytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f bytes (%.2f %s)", nbytes, v, kUnits[u]);
  }
  return buf;
}

int64_t check_tensor_size(const std::string& what, const Shape& s, DType dtype) {
  uint64_t n = 1, bytes = 0;
  bool over = false, empty = false;
  for (int64_t d : s) {
    if (d < 0) throw ValueError(what + ": negative dimension in shape " + shape_str(s));
    empty |= d == 0;
    over |= __builtin_mul_overflow(n, static_cast<uint64_t>(d == 0 ? 1 : d), &n);
  }
  const auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  over |= n > kMax;
  if (!over && !__builtin_mul_overflow(n, dtype_size(dtype), &bytes) && bytes <= kMax) {
    return empty ? 0 : static_cast<int64_t>(bytes);
  }
  std::string t = std::string(dtype_name(dtype)) + shape_str(s);
  if (over) {
    throw OutOfMemoryError(what + ": a " + t +
                           " tensor has more elements than fit in int64 (its dims" +
                           (empty ? ", counting a 0 as 1," : "") + " multiply past 2^63 - 1)");
  }
  throw OutOfMemoryError(
      what + ": a " + t + " tensor would need " +
      bytes_str(static_cast<double>(n) * static_cast<double>(dtype_size(dtype))) +
      ", more than a 64-bit size can hold (at most 2^63 - 1 bytes)");
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) {
    throw IndexError(std::string(op) + ": dimension " + std::to_string(dim) +
                     " is out of range for a tensor of rank " + std::to_string(rank) +
                     " (expected a dim in [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                     "])");
  }
  return dim < 0 ? dim + r : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ValueError(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                       " are not broadcastable (dim " + std::to_string(i) + ": " +
                       std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace lz
