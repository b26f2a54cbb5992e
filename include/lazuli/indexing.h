// x[key] for C++: the items of an indexing key, as libtorch's torch::indexing spells them.
//
//   using namespace lz::indexing;
//   x.index({0, Slice(1, None, 2), None, Ellipsis, idx});   // x[0, 1::2, None, ..., idx]
//   x.index_put_({mask}, 0.0);                              // x[mask] = 0
//   x.index_put_({rows, cols}, v, /*accumulate=*/true);     // x[rows, cols] += v, repeats adding
//
// The rules are PyTorch's (and Python's `x[key]` in lazuli is this code): ints, slices and None
// make views (select, slice, unsqueeze); a bool is a new dim of size 1 (true) or 0 (false);
// integer tensors (int64, int32), 0-d ones among them, are advanced indices and bool tensors
// masks over as many dims as they have. Several advanced indices broadcast together; their
// result dims take the place of the first one when they are adjacent, else they come first.
// Advanced results are copies. A mask's selection has a size that depends on its values, so
// reading it is a cut (a value read); `index_put_` through a mask with a value that does not
// depend on that size is where(mask, value, x) and reads nothing.
//
// Index values known at the call are checked there (IndexError, nothing recorded): ints, and the
// values of an index still on the host (a list, or lz::tensor(...) not yet used); an index
// computed by the program is checked when it runs (an error at the wait point naming the op).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "lazuli/tensor.h"

namespace lz::indexing {

// `None` as in x[None]: a new dim of size 1; also an open end of a Slice.
constexpr std::nullopt_t None = std::nullopt;

struct EllipsisIndexType {
  explicit constexpr EllipsisIndexType(int) {}
};
// `...`: as many whole dims as the other items leave.
constexpr EllipsisIndexType Ellipsis{0};

// start:stop:step. An open end is None; out-of-range ends clamp, negative ones count from the end
// (Python's rules). The step must be positive (checked when the key is applied: ValueError).
class Slice {
 public:
  explicit Slice(std::optional<int64_t> start = None, std::optional<int64_t> stop = None,
                 int64_t step = 1)
      : start_(start), stop_(stop), step_(step) {}
  const std::optional<int64_t>& start() const { return start_; }
  const std::optional<int64_t>& stop() const { return stop_; }
  int64_t step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_;
  int64_t step_;
};

// One item of a key.
class TensorIndex {
 public:
  enum class Kind : uint8_t { None, Ellipsis, Integer, Boolean, Slice, Tensor };

  TensorIndex(std::nullopt_t) : kind_(Kind::None) {}
  TensorIndex(EllipsisIndexType) : kind_(Kind::Ellipsis) {}
  // "..." (libtorch accepts the string); any other string throws ValueError.
  TensorIndex(const char* ellipsis);
  TensorIndex(int v) : kind_(Kind::Integer), integer_(v) {}
  TensorIndex(long v) : kind_(Kind::Integer), integer_(v) {}
  TensorIndex(long long v) : kind_(Kind::Integer), integer_(v) {}
  TensorIndex(bool v) : kind_(Kind::Boolean), boolean_(v) {}
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(s) {}
  // An integer (int64, int32) or bool tensor; other dtypes throw IndexError when applied.
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}
  // Index values given as a list (Python: x[[0, 2]]). A list's values are known at the call and
  // are checked there against the size of the dim they index, as PyTorch checks a list's.
  TensorIndex(const std::vector<int64_t>& values);
  // `values` (an int or bool tensor still on the host: a Python list or numpy array) indexing as
  // a list does; the Python front end makes its list and array keys this way.
  static TensorIndex list(Tensor values);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_ellipsis() const { return kind_ == Kind::Ellipsis; }
  bool is_integer() const { return kind_ == Kind::Integer; }
  bool is_boolean() const { return kind_ == Kind::Boolean; }
  bool is_slice() const { return kind_ == Kind::Slice; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  // A Tensor item made from a list (its values are checked at the call).
  bool is_list() const { return kind_ == Kind::Tensor && list_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return boolean_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  bool list_ = false;
  bool boolean_ = false;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

}  // namespace lz::indexing
