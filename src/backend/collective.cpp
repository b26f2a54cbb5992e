#include "backend/collective.h"

#include <cstring>
#include <string>

#include "core/config.h"
#include "dist/process_group.h"
#include "lazuli/error.h"

namespace lz {

void run_collective(ir::OpKind op, const ir::CollectiveAttrs& a, const interp::ConstArray& in,
                    const interp::MutArray& out) {
  const std::string name(ir::op_name(op));
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world(name.c_str());
  if (g->size() != a.world_size) {
    throw Error(name + ": the program was recorded for a group of " + std::to_string(a.world_size) +
                " ranks; the group now has " + std::to_string(g->size()));
  }
  g->set_timeout(static_cast<double>(config().dist_timeout_s));
  const int64_t n = numel(*in.shape);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(in.dtype);
  const auto reduce = static_cast<dist::Reduce>(a.reduce);
  try {
    switch (op) {
      case ir::OpKind::AllReduce:
        if (out.data != in.data && bytes) std::memcpy(out.data, in.data, bytes);
        g->all_reduce(out.data, n, in.dtype, reduce);
        return;
      case ir::OpKind::Broadcast:
        if (out.data != in.data && bytes) std::memcpy(out.data, in.data, bytes);
        g->broadcast(out.data, n, in.dtype, static_cast<int>(a.root));
        return;
      case ir::OpKind::AllGather:
        g->all_gather(in.data, out.data, n, in.dtype);
        return;
      case ir::OpKind::ReduceScatter:
        g->reduce_scatter(in.data, out.data, numel(*out.shape), in.dtype, reduce);
        return;
      default: break;
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(name + " on rank " + std::to_string(g->rank()) + " of " + std::to_string(g->size()) +
                " (" + g->engine() + "): " + e.what());
  }
  throw Error("internal: " + name + " is not a collective");
}

}  // namespace lz
