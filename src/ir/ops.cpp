#include "ir/ops.h"

namespace lz::ir {

const OpInfo& op_info(OpKind k) {
  using namespace dtype_sets;
  static const OpInfo kTable[] = {
#define LZ_OP(name, str, cls, arity, outputs, attrs, accepts, result, grad)                   \
  {str, OpClass::cls, arity, outputs, attrs_index<attrs>(), static_cast<uint8_t>(accepts), \
   ResultDType::result},
#include "ir/op_table.def"
#undef LZ_OP
  };
  return kTable[static_cast<size_t>(k)];
}

bool accepts_dtype(uint8_t set, DType t) {
  uint8_t cat = is_floating(t) ? kFloatSet : t == DType::Bool ? kBoolSet : kIntSet;
  return (set & cat) != 0;
}

const char* dtype_set_str(uint8_t set) {
  switch (set) {
    case kFloatSet: return "floating";
    case kIntSet: return "integer";
    case kFloatSet | kIntSet: return "floating or integer (not bool)";
    case kIntSet | kBoolSet: return "bool or integer";
    default: return "any";
  }
}

}  // namespace lz::ir
