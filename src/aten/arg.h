// The ATen table's neutral argument form (DESIGN.md 5b): one value of an ATen call as a front end
// hands it over, with no torch type in sight. A front end (the torch.compile bridge's binding,
// the lazy device's boxed kernel) converts each argument of an overload, in schema order with
// the schema's defaults filled in; an entry reads them by position.
//
// A tensor argument is either a live Lazuli tensor (lowering) or only its type, a TensorMeta (the
// bridge decides which nodes lower before anything is traced, from FakeTensors). Conditions read
// tensors through tensor_dtype() / tensor_shape(), which work on both.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "lazuli/tensor.h"

namespace lz::aten {

// A tensor known only by its type. `dtype` is empty for a dtype Lazuli lacks; `unsupported`
// then (or for a device or layout Lazuli does not compute on) says why it cannot lower.
struct TensorMeta {
  std::optional<DType> dtype;
  Shape shape;
  std::string unsupported;  // "dtype int16", "device cuda:0", "layout torch.sparse_coo"; or ""
  // Eager's memory layout where the front end knows it at run time (as_strided reads memory, not
  // values); unknown for a tensor whose storage the program does not make (an input, or a view
  // of one: its storage offset is not known when the program is built).
  std::optional<std::vector<int64_t>> strides;
  int64_t storage_offset = 0;
  // A complex tensor (complex64, complex128): `dtype` is its components' (float32, float64).
  bool complex = false;
};

class Arg {
 public:
  // ForeignDType: a torch dtype Lazuli lacks (its name in text()). Device, Layout and
  // MemoryFormat carry torch's spelling ("cpu", "lazuli:0", "torch.strided",
  // "torch.channels_last").
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Double,
    String,
    DType,
    ForeignDType,
    Device,
    Layout,
    MemoryFormat,
    Tensor,
    List
  };

  Arg() = default;
  Arg(std::nullopt_t) {}
  Arg(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}
  Arg(int v) : Arg(static_cast<int64_t>(v)) {}
  Arg(long v) : kind_(Kind::Int), i_(v), d_(static_cast<double>(v)) {}
  Arg(long long v) : kind_(Kind::Int), i_(v), d_(static_cast<double>(v)) {}
  Arg(double v) : kind_(Kind::Double), d_(v) {}
  Arg(const char* s) : kind_(Kind::String), text_(s) {}
  Arg(std::string s) : kind_(Kind::String), text_(std::move(s)) {}
  Arg(DType t) : kind_(Kind::DType), dtype_(t) {}
  Arg(Tensor t);  // an undefined tensor is None (an optional tensor left out)
  Arg(TensorMeta m)
      : kind_(Kind::Tensor), meta_(std::make_shared<const TensorMeta>(std::move(m))) {}
  Arg(std::vector<Arg> items) : kind_(Kind::List), list_(std::move(items)) {}
  Arg(const std::vector<Tensor>& ts);
  Arg(const IntList& ints);
  Arg(const Scalar& s);
  // Values the table names but does not model.
  static Arg of_kind(Kind kind, std::string text);
  // A complex tensor of shape S, held as `pairs`: a real tensor of shape S + [2] whose last dim
  // is (real, imaginary), view_as_real's layout. Only entries flagged kComplex take one.
  static Arg complex(Tensor pairs);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_tensor() const { return kind_ == Kind::Tensor; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_number() const {
    return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Double;
  }
  // A tensor known only by its type (is_tensor() and not lowerable).
  bool is_meta() const { return kind_ == Kind::Tensor && meta_ != nullptr; }
  // A complex tensor (tensor() is its pairs; tensor_dtype() its components' dtype, tensor_shape()
  // its own shape).
  bool is_complex() const { return kind_ == Kind::Tensor && (meta_ ? meta_->complex : complex_); }
  // A dtype argument naming a complex dtype ("complex64", "complex128"), which Lazuli's tensors
  // lack; its components' dtype.
  std::optional<DType> complex_dtype() const;
  // The complex dtype whose components have dtype `parts`: "complex128" for float64, else
  // "complex64".
  static const char* complex_name(DType parts);

  // Accessors. Each throws TypeError naming the kind it found when the value is of another kind
  // (the front end converted an argument against the schema: a bug, not user input).
  bool to_bool() const;      // Bool, or an Int (0 or not)
  int64_t to_int() const;    // Int or Bool
  double to_double() const;  // Double, Int or Bool
  Scalar scalar() const;     // Bool, Int or Double, keeping its kind (type promotion reads it)
  const std::string& text() const;  // String, ForeignDType, Device, Layout, MemoryFormat
  DType dtype() const;              // DType
  const Tensor& tensor() const;     // a live tensor (a meta throws)
  const std::vector<Arg>& list() const;
  // int[] arguments: a list of ints, or one int standing for `n` copies (ATen's int[2] defaults).
  IntList ints(size_t n = 1) const;
  std::vector<Tensor> tensors() const;  // Tensor[]: every item a live tensor
  // Tensor?[] (aten.index's indices): undefined where the item is None.
  std::vector<Tensor> optional_tensors() const;

  // A tensor's type, live or meta.
  std::optional<DType> tensor_dtype() const;
  const Shape& tensor_shape() const;
  int64_t tensor_dim() const { return static_cast<int64_t>(tensor_shape().size()); }
  int64_t tensor_numel() const;
  // Why this tensor cannot lower whatever the entry ("dtype int16"), or "" (live tensors: never).
  const std::string& unsupported() const;
  // Whether eager holds this tensor's elements row-major from the start of its storage: a live
  // Lazuli tensor whose strides are contiguous, or a meta whose known layout is (an unknown
  // layout is not). What an entry reading memory (as_strided) needs to read values instead.
  bool dense_from_storage_start() const;

  // "float32[2, 3]", "3", "[1, 2]", "None": for messages.
  std::string describe() const;

 private:
  [[noreturn]] void wrong_kind(const char* wanted) const;

  Kind kind_ = Kind::None;
  int64_t i_ = 0;
  double d_ = 0;
  DType dtype_ = DType::Float32;
  std::string text_;
  Tensor tensor_;
  std::shared_ptr<const TensorMeta> meta_;
  std::vector<Arg> list_;
  bool complex_ = false;
  Shape complex_shape_;  // a live complex tensor's shape (its pairs' without the last dim)
};

using Args = std::vector<Arg>;

std::string_view kind_name(Arg::Kind k);

}  // namespace lz::aten
