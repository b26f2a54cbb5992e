// run_kernel: routes each primitive to its family's kernel by the op table's class. The kernels
// themselves live in kernels_elementwise.cpp, kernels_reduce.cpp and kernels_movement.cpp.
#include <string>

#include "backend/collective.h"
#include "backend/interp/kernels_impl.h"

namespace lz::interp {

void run_kernel(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                MutArray out) {
  switch (ir::op_info(op).cls) {
    case ir::OpClass::Leaf:
      // DeviceData is a buffer the executor binds, never computed.
      if (op == ir::OpKind::DeviceData) break;
      return run_leaf(op, attrs, out);
    case ir::OpClass::Random: return run_random(op, inputs[0], out);
    case ir::OpClass::Unary: return run_unary(op, inputs[0], out);
    case ir::OpClass::Binary: return run_binary(op, inputs[0], inputs[1], out);
    case ir::OpClass::Compare: return run_compare(op, inputs[0], inputs[1], out);
    case ir::OpClass::Ternary: return run_where(inputs[0], inputs[1], inputs[2], out);
    case ir::OpClass::Reduction: return run_reduction(op, attrs, inputs[0], out);
    case ir::OpClass::Library: return run_matmul(inputs[0], inputs[1], out);
    case ir::OpClass::Movement: return run_movement(op, attrs, inputs, out);
    case ir::OpClass::Index: return run_index(op, attrs, inputs, out);
    case ir::OpClass::Conv:
      return run_conv(op, std::get<ir::ConvAttrs>(attrs), inputs[0], inputs[1], out);
    case ir::OpClass::Scan: return run_scan(op, std::get<ir::ScanAttrs>(attrs), inputs[0], out);
    case ir::OpClass::Collective:  // the engine's call is every backend's implementation
      return run_collective(op, std::get<ir::CollectiveAttrs>(attrs), inputs[0], out);
    case ir::OpClass::Sort:
    case ir::OpClass::Pool: return run_kernel(op, attrs, inputs, std::vector<MutArray>{out});
  }
  throw Error("interp: no reference kernel for " + std::string(ir::op_name(op)));
}

void run_kernel(ir::OpKind op, const ir::Attrs& attrs, const std::vector<ConstArray>& inputs,
                const std::vector<MutArray>& outputs) {
  if (ir::op_info(op).cls == ir::OpClass::Sort) {
    return run_sort(std::get<ir::SortAttrs>(attrs), inputs[0], outputs[0], outputs[1]);
  }
  if (ir::op_info(op).cls == ir::OpClass::Pool) {
    return run_pool(op, std::get<ir::PoolAttrs>(attrs), inputs[0], outputs);
  }
  run_kernel(op, attrs, inputs, outputs[0]);
}

}  // namespace lz::interp
