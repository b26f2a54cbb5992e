// OpKind and the static facts of each primitive, generated from op_table.def.
#pragma once
#include <cstdint>
#include <string_view>

namespace lz::ir {

enum class OpKind : uint16_t {
#define LZ_OP(name, str, kind, arity) name,
#include "ir/op_table.def"
#undef LZ_OP
  kNumOps
};

enum class OpClass : uint8_t { Leaf, Random, Unary, Binary, Compare, Ternary, Reduction, Library,
                               Movement, Index };

struct OpInfo {
  std::string_view name;
  OpClass cls;
  int arity;  // -1: variadic
};

const OpInfo& op_info(OpKind k);
inline std::string_view op_name(OpKind k) { return op_info(k).name; }
inline bool is_elementwise(OpKind k) {
  OpClass c = op_info(k).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Compare ||
         c == OpClass::Ternary;
}

}  // namespace lz::ir
