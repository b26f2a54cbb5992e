#include "ir/ops.h"

namespace lz::ir {

const OpInfo& op_info(OpKind k) {
  static const OpInfo kTable[] = {
#define LZ_OP(name, str, kind, arity) {str, OpClass::kind, arity},
#include "ir/op_table.def"
#undef LZ_OP
  };
  return kTable[static_cast<size_t>(k)];
}

}  // namespace lz::ir
