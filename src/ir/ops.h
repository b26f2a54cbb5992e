// OpKind and the static facts of each primitive, generated from op_table.def: the one description
// of a primitive. Who reads which column:
//   name, class, arity       shape inference (validation), dumps, every backend's dispatch
//   outputs                  make_node (how many Values a node has), executors, autograd
//   attrs                    make_node refuses a node carrying another attribute struct
//   accepts, result          shape inference (the dtype check and output dtype), the frontend
//                            (ops defined only for floats promote integer operands first)
//   LZ_LIBM rows             the reference kernels and the cpu code generator (ir/libm.h)
#pragma once
#include <cstdint>
#include <string_view>

#include "ir/attrs.h"

namespace lz::ir {

enum class OpKind : uint16_t {
#define LZ_OP(name, str, cls, arity, outputs, attrs, accepts, result, grad) name,
#include "ir/op_table.def"
#undef LZ_OP
  kNumOps
};

enum class OpClass : uint8_t { Leaf, Random, Unary, Binary, Compare, Ternary, Reduction, Library,
                               Movement, Index, Sort, Conv, Pool, Scan, Collective };

// The operand dtypes an op is defined for, as a set of categories.
enum DTypeSet : uint8_t {
  kFloatSet = 1,  // float32, float64, float16, bfloat16
  kIntSet = 2,    // int32, int64
  kBoolSet = 4,
};
// The table's spellings (op_table.def's accepts column).
namespace dtype_sets {
inline constexpr uint8_t F = kFloatSet, I = kIntSet, B = kBoolSet, FI = F | I, IB = I | B,
                         Any = F | I | B;
}  // namespace dtype_sets
bool accepts_dtype(uint8_t set, DType t);
// "float", "integer or bool", ... for messages.
const char* dtype_set_str(uint8_t set);

enum class ResultDType : uint8_t { Same, Bool, Int64, Attr };

struct OpInfo {
  std::string_view name;
  OpClass cls;
  int arity;    // -1: variadic
  int outputs;  // >= 1
  size_t attrs;  // variant index of its attribute struct in Attrs
  uint8_t accepts;  // DTypeSet
  ResultDType result;
};

const OpInfo& op_info(OpKind k);
inline std::string_view op_name(OpKind k) { return op_info(k).name; }
inline bool is_elementwise(OpKind k) {
  OpClass c = op_info(k).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Compare ||
         c == OpClass::Ternary;
}
// Defined only for floating operands: the frontend casts integer and bool operands to the default
// float dtype first (exp(int) is a float, as in PyTorch).
inline bool float_only(OpKind k) { return op_info(k).accepts == kFloatSet; }

}  // namespace lz::ir
