// lz::Tensor: a handle to a lazy tensor. Copying a Tensor copies the handle (both see in-place
// updates), as in PyTorch. Ops record IR nodes; nothing runs until a sync or a value read
// (item, to_vector), see <lazuli/runtime.h>.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lazuli/dtype.h"
#include "lazuli/error.h"

namespace lz {

namespace internal {
class TensorImpl;
}
namespace indexing {
class TensorIndex;  // <lazuli/indexing.h>
}

using IntList = std::vector<int64_t>;

// A number used as an op operand. Like a Python number: its kind (bool, int, float) takes part
// in type promotion with lower priority than tensors.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}
  Scalar(int v) : kind_(Kind::Int), i_(v), d_(v) {}
  Scalar(long v) : kind_(Kind::Int), i_(v), d_(static_cast<double>(v)) {}
  Scalar(long long v) : kind_(Kind::Int), i_(v), d_(static_cast<double>(v)) {}
  Scalar(float v) : kind_(Kind::Float), i_(saturate(v)), d_(v) {}
  Scalar(double v) : kind_(Kind::Float), i_(saturate(v)), d_(v) {}
  Kind kind() const { return kind_; }
  double to_double() const { return d_; }
  // A float's value truncated toward zero, clamped to int64 (nan gives 0): ops that convert a
  // number into an integer tensor check the range first (full, fill_).
  int64_t to_int() const { return i_; }

 private:
  // static_cast of nan or of a double past int64 is undefined behaviour; this is not.
  static int64_t saturate(double v) {
    if (!(v == v)) return 0;
    if (v >= 0x1p63) return INT64_MAX;
    if (v <= -0x1p63) return INT64_MIN;
    return static_cast<int64_t>(v);
  }

  Kind kind_;
  int64_t i_;
  double d_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<internal::TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  int64_t id() const;
  DType dtype() const;
  const std::vector<int64_t>& shape() const;
  int64_t dim() const;
  int64_t ndim() const { return dim(); }
  int64_t numel() const;
  int64_t size(int64_t dim) const;

  // Value reads (each may run a program and waits for it).
  template <typename T> T item() const;
  template <typename T> std::vector<T> to_vector() const;
  std::string to_string() const;  // values, shape and dtype, like PyTorch's repr

  // Arithmetic and math (free functions in <lazuli/ops.h> have the full list).
  Tensor operator-() const;
  Tensor operator~() const;
  Tensor to(DType dtype) const;
  Tensor float_() const { return to(DType::Float32); }
  Tensor double_() const { return to(DType::Float64); }
  Tensor int_() const { return to(DType::Int32); }
  Tensor long_() const { return to(DType::Int64); }
  Tensor bool_() const { return to(DType::Bool); }
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor pow(const Scalar& e) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;

  Tensor sum(const IntList& dims = {}, bool keepdim = false) const;
  Tensor mean(const IntList& dims = {}, bool keepdim = false) const;
  Tensor amax(const IntList& dims = {}, bool keepdim = false) const;
  Tensor amin(const IntList& dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;

  // Views: share the base's data; an in-place update of a view writes through to the base.
  Tensor reshape(const IntList& shape) const;  // a copy where no view can express the shape
  Tensor view(const IntList& shape) const;     // throws where reshape would copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze(std::optional<int64_t> dim = std::nullopt) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const IntList& dims) const;
  Tensor T() const;
  Tensor expand(const IntList& sizes) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // x[key] with PyTorch's rules (<lazuli/indexing.h>): a view when the key holds only ints,
  // slices, None and ..., else a copy. Bad keys throw IndexError / ValueError / TypeError naming
  // "index", the tensor's dtype and shape; nothing is recorded.
  Tensor index(std::initializer_list<indexing::TensorIndex> key) const;
  Tensor index(const std::vector<indexing::TensorIndex>& key) const;
  // The strides PyTorch would give this tensor (row-major unless it is a view), and whether they
  // are row-major: view() and reshape() follow PyTorch's aliasing rules through them.
  std::vector<int64_t> strides() const;
  bool is_contiguous() const;
  // Whether this tensor is a view of another: writes to it reach its base.
  bool is_view() const;
  // A copy that is no longer a view.
  Tensor contiguous() const;
  Tensor clone() const { return contiguous(); }

  // In-place updates (return *this). The tensor takes a new IR value; through a view, the base.
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor& copy_(const Tensor& src);
  Tensor& zero_();
  Tensor& fill_(
      const Scalar& value);  // throws ValueError if value overflows the dtype (nan into int)
  Tensor& fill_(const Tensor& value);  // value: a 0-dim tensor
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  // x[key] = value in place (x[key] += value with accumulate, where an index repeated adds each
  // of its values), with PyTorch's rules (<lazuli/indexing.h>). The value (cast to x's dtype)
  // broadcasts to the shape x.index(key) has, leading dims of size 1 dropped first. Errors name
  // "index_put_"; on a bad key or value nothing changes.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> key, const Tensor& value,
                     bool accumulate = false);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& key, const Tensor& value,
                     bool accumulate = false);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> key, const Scalar& value);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& key, const Scalar& value);
  // index_put_({index}, values): one integer or bool tensor indexing dim 0.
  Tensor& index_put_(const Tensor& index, const Tensor& values);
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& operator+=(const Tensor& o) { return add_(o); }
  Tensor& operator+=(const Scalar& o) { return add_(o); }
  Tensor& operator-=(const Tensor& o) { return sub_(o); }
  Tensor& operator-=(const Scalar& o) { return sub_(o); }
  Tensor& operator*=(const Tensor& o) { return mul_(o); }
  Tensor& operator*=(const Scalar& o) { return mul_(o); }
  Tensor& operator/=(const Tensor& o) { return div_(o); }
  Tensor& operator/=(const Scalar& o) { return div_(o); }

  const std::shared_ptr<internal::TensorImpl>& impl() const { return impl_; }

 private:
  void check_defined(const char* what) const;
  std::shared_ptr<internal::TensorImpl> impl_;
};

// Explicit instantiations exist for bool, int32_t, int64_t, float, double.
extern template bool Tensor::item<bool>() const;
extern template int32_t Tensor::item<int32_t>() const;
extern template int64_t Tensor::item<int64_t>() const;
extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;

}  // namespace lz
