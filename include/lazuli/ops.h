// The C++ frontend: one function per public op (API.md). Each checks its arguments (throwing
// ValueError / TypeError / IndexError naming the op, shapes and dtypes, with nothing recorded),
// applies numpy broadcasting and PyTorch's type promotion, and records IR.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lazuli/device.h"
#include "lazuli/tensor.h"

namespace lz {

// A tensor or a number, for ops that accept either on each side.
class Operand {
 public:
  Operand() : scalar_(0) {}
  Operand(const Tensor& t) : tensor_(t), scalar_(false), is_tensor_(true) {}
  Operand(const Scalar& s) : scalar_(s) {}
  Operand(bool v) : scalar_(v) {}
  Operand(int v) : scalar_(v) {}
  Operand(long v) : scalar_(v) {}
  Operand(long long v) : scalar_(v) {}
  Operand(float v) : scalar_(v) {}
  Operand(double v) : scalar_(v) {}
  // True for a Tensor operand, even an undefined one (ops reject those with a ValueError).
  bool is_tensor() const { return is_tensor_; }
  const Tensor& tensor() const { return tensor_; }
  const Scalar& scalar() const { return scalar_; }

 private:
  Tensor tensor_;
  Scalar scalar_;
  bool is_tensor_ = false;
};

// ---- creation -------------------------------------------------------------------------------
// Copies `data` (numel(shape) elements of `dtype`): the tensor starts in the host state. `data`
// must hold that many elements (it cannot be checked); a null `data` throws ValueError unless the
// shape is empty.
Tensor from_data(const void* data, DType dtype, const IntList& shape);
// A tensor over memory the caller owns, without a copy (as torch::from_blob): `data` holds
// numel(shape) C-contiguous elements of `dtype`, aligned for it, on `device`. `release`, if
// given, runs once when Lazuli no longer uses the memory. Writes to the memory show in the tensor
// until it takes a new value, and a sync that updates the tensor in place may write into it.
// Throws ValueError (recording nothing, `release` not called) for a null or misaligned `data`, or
// memory on a device the active backend does not compute on.
Tensor from_blob(void* data, DType dtype, const IntList& shape, std::function<void()> release = {},
                 DeviceId device = DeviceId::host());
namespace internal {
// Throws ValueError naming `op` unless `count` values fill `shape` exactly.
void check_value_count(const char* op, size_t count, const IntList& shape);
}  // namespace internal
template <typename T>
Tensor tensor(const std::vector<T>& values, const IntList& shape) {
  internal::check_value_count("tensor", values.size(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> b(values.begin(), values.end());
    return from_data(b.data(), DType::Bool, shape);
  } else {
    return from_data(values.data(), dtype_of<T>::value, shape);
  }
}
template <typename T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, IntList{static_cast<int64_t>(values.size())});
}
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt);
Tensor zeros(const IntList& shape, DType dtype = DType::Float32);
Tensor ones(const IntList& shape, DType dtype = DType::Float32);
Tensor full(const IntList& shape, const Scalar& value, std::optional<DType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
// arange(end) or arange(start, end, step); integer arguments give int64, else float32.
Tensor arange(const Scalar& end);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::Float32);
Tensor rand(const IntList& shape, DType dtype = DType::Float32);
Tensor randn(const IntList& shape, DType dtype = DType::Float32);
Tensor randint(int64_t low, int64_t high, const IntList& shape, DType dtype = DType::Int64);
void manual_seed(int64_t seed);
// A baked constant: its value enters the graph hash (unlike other scalars, which are parameters).
Tensor constant(const Scalar& value, DType dtype);

// ---- elementwise ----------------------------------------------------------------------------
// The functions that are one primitive each (abs, exp, ..., add, ..., bitwise_xor), from the one
// list of them (lazuli/elementwise.def says what each kind of line means).
#define LZ_UNARY(fn, op) Tensor fn(const Tensor& x);
#define LZ_UNARY_ROUNDING(fn, op) Tensor fn(const Tensor& x);
#define LZ_BINARY(fn, op) Tensor fn(const Operand& a, const Operand& b);
#define LZ_BINARY_LOGICAL(fn, op) Tensor fn(const Operand& a, const Operand& b);
#include "lazuli/elementwise.def"
#undef LZ_UNARY
#undef LZ_UNARY_ROUNDING
#undef LZ_BINARY
#undef LZ_BINARY_LOGICAL

// Those with rules of their own.
Tensor neg(const Tensor& x);  // refuses bool (use logical_not), as PyTorch
Tensor logical_not(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);
// x ** 0.5 and x ** -0.5 of a float tensor are sqrt and rsqrt, and x ** 1, 2, 3, -1, -2 (float32,
// float64; 1, 2 and 3 also of integers) are x, x * x, x * x * x, 1 / x, 1 / (x * x), as PyTorch's
// CPU kernel computes them; an integer tensor to a negative integer number is refused, as PyTorch.
Tensor pow(const Operand& a, const Operand& b);
Tensor where(const Tensor& cond, const Operand& a, const Operand& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// The dtype PyTorch's promotion gives for these operands (tensors with dims > zero-dim tensors >
// numbers, by category).
DType result_type(const std::vector<Operand>& operands);

// ---- reductions: empty dims = all dims ------------------------------------------------------
Tensor sum(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// (values, indices) along dim.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor var(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, const IntList& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const IntList& dims = {}, bool keepdim = false);

// ---- ordering ---------------------------------------------------------------------------------
// (values, indices) sorted along dim, ascending unless `descending`; NaN sorts as the largest
// value; equal elements keep their input order (every sort is stable; `stable` is accepted as in
// PyTorch).
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                               bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor msort(const Tensor& x);  // sort(x, 0).values
// The k largest (or smallest) along dim, as (values, indices), in sorted order.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);

// ---- matrix -----------------------------------------------------------------------------------
// numpy/PyTorch matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- shape and movement (views unless noted) --------------------------------------------------
// One -1 allowed. As in PyTorch, a view where the strides PyTorch would give x allow one, else a
// copy (a transposed tensor flattened): writes to the copy never reach x.
Tensor reshape(const Tensor& x, const IntList& shape);
// reshape that is always a view: throws Error (PyTorch's RuntimeError) where reshape would copy.
Tensor view(const Tensor& x, const IntList& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const IntList& dims);
Tensor expand(const Tensor& x, const IntList& sizes);  // -1 keeps a size; new dims in front
Tensor broadcast_to(const Tensor& x, const IntList& shape);
// Python slice semantics: out-of-range start/end clamp; negative values count from the end.
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor contiguous(const Tensor& x);  // a copy, not a view
Tensor cat(const std::vector<Tensor>& ts, int64_t dim = 0);  // copies; dtypes promoted
Tensor stack(const std::vector<Tensor>& ts, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const IntList& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// ---- operators ---------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Operand& b);
Tensor operator-(const Tensor& a, const Operand& b);
Tensor operator*(const Tensor& a, const Operand& b);
Tensor operator/(const Tensor& a, const Operand& b);
Tensor operator%(const Tensor& a, const Operand& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Operand& b);
Tensor operator!=(const Tensor& a, const Operand& b);
Tensor operator<(const Tensor& a, const Operand& b);
Tensor operator<=(const Tensor& a, const Operand& b);
Tensor operator>(const Tensor& a, const Operand& b);
Tensor operator>=(const Tensor& a, const Operand& b);
Tensor operator&(const Tensor& a, const Operand& b);
Tensor operator|(const Tensor& a, const Operand& b);
Tensor operator^(const Tensor& a, const Operand& b);

// ---- composites (src/ops/composite*.cpp) ------------------------------------------------------
// Written in the public ops above, so their gradients come from the primitives' rules. Each checks
// its arguments first and records nothing on bad input. Integer arguments that fix the structure
// (diagonal, shifts, dims) are baked into the program: changing them compiles a new one.
Tensor tril(const Tensor& x, int64_t diagonal = 0);  // zeros above the diagonal of the last 2 dims
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// x where mask is false, value where it is true; mask (bool) and x broadcast together. value: a
// number or a 0-d tensor, converted to x's dtype (as PyTorch: 2.7 into an int64 tensor is 2).
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Operand& value);
// In place: mask must broadcast to x's shape. Returns x.
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Operand& value);
Tensor& tril_(Tensor& x, int64_t diagonal = 0);
Tensor& triu_(Tensor& x, int64_t diagonal = 0);
Tensor flip(const Tensor& x, const IntList& dims);  // a copy, reversed along each of dims
// Elements shifted by shifts[i] along dims[i], wrapping around; with no dims, over the flattened
// tensor (one shift), keeping the shape.
Tensor roll(const Tensor& x, const IntList& shifts, const IntList& dims = {});
// Tiles x repeats[i] times along each dim (PyTorch's Tensor.repeat); extra leading repeats add
// dims.
Tensor repeat(const Tensor& x, const IntList& repeats);
// clamp with tensor bounds (an undefined tensor is no bound), all three broadcast together; the
// dtype is their promoted type. Gradients as PyTorch 2.15's: to x strictly inside [min, max]
// (and where min == max == x), to the bound x is clamped to, half to each at a tie of x with one
// bound, to max wherever min > max; a nan anywhere gives nan.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor& clamp_(Tensor& x, const Tensor& min, const Tensor& max);
// num_samples class indices (int64) per row of non-negative weights probs ([C] or [B, C], not
// necessarily normalized), drawn from the device RNG by the Gumbel-max trick (without
// replacement: Gumbel-top-k, one argmax per sample until a sort lands). Weights are data:
// PyTorch's checks of their values (negative, inf, too few non-zero for num_samples without
// replacement) are not made.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

// Norms, as torch.norm / Tensor.norm: a number p is the vector p-norm over dims (all when empty);
// "fro" is the 2-norm over at most 2 dims. dtype casts x first. Gradients at a zero norm are 0.
Tensor norm(const Tensor& x, double p = 2.0, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor norm(const Tensor& x, const std::string& p, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

namespace linalg {
// ord: any p (inf: max |x|, -inf: min |x|, 0: count of non-zeros); dims empty = all.
Tensor vector_norm(const Tensor& x, double ord = 2.0, const IntList& dims = {},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// ord "fro", 1, -1, inf, -inf over the two dims ("nuc", 2 and -2 need singular values: ValueError).
Tensor matrix_norm(const Tensor& x, const std::string& ord = "fro", const IntList& dims = {-2, -1},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor matrix_norm(const Tensor& x, double ord, const IntList& dims = {-2, -1},
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// torch.linalg.norm: one dim (or a 1-D x) is a vector norm, two dims (or a 2-D x with ord given)
// a matrix norm; no ord and no dims is the 2-norm of the flattened x.
Tensor norm(const Tensor& x, std::optional<double> ord = std::nullopt, const IntList& dims = {},
            bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor norm(const Tensor& x, double ord, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor norm(const Tensor& x, const std::string& ord, const IntList& dims = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
}  // namespace linalg

// ---- scans (src/ops/scan.cpp; primitives CumSum and CumProd) ----------------------------------
// Running sum / product along dim, as torch.cumsum / torch.cumprod: bool and integer inputs give
// int64 unless `dtype` is given; `dtype` casts the input first. Gradients: cumsum's is the reversed
// cumsum; cumprod's handles zeros as PyTorch's (at a line's first zero, the product of the other
// factors; after it, 0).
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace lz
