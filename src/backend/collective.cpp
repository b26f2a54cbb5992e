#include "backend/collective.h"

#include <cstring>
#include <memory>
#include <string>

#include "core/config.h"
#include "dist/process_group.h"
#include "lazuli/error.h"

namespace lz {

namespace {

// The group a collective recorded for `a` runs on: the world, of the size it was recorded for.
std::shared_ptr<dist::ProcessGroup> group_for(const std::string& name,
                                              const ir::CollectiveAttrs& a) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world(name.c_str());
  if (g->size() != a.world_size) {
    throw Error(name + ": the program was recorded for a group of " + std::to_string(a.world_size) +
                " ranks; the group now has " + std::to_string(g->size()));
  }
  return g;
}

// Runs `call` (the engine's), naming the op, the rank and the engine in what it throws.
template <class F>
void engine_call(const std::string& name, dist::ProcessGroup& g, F&& call) {
  try {
    g.set_timeout(static_cast<double>(config().dist_timeout_s));
    call();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(name + " on rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size()) +
                " (" + g.engine() + "): " + e.what());
  }
}

}  // namespace

std::function<void()> start_collective(ir::OpKind op, const ir::CollectiveAttrs& a,
                                       const interp::ConstArray& in, const interp::MutArray& out) {
  if (op != ir::OpKind::AllReduce && op != ir::OpKind::Broadcast) return {};
  std::string name(ir::op_name(op));
  std::shared_ptr<dist::ProcessGroup> g = group_for(name, a);
  const int64_t n = numel(*in.shape);
  const size_t bytes = static_cast<size_t>(n) * dtype_size(in.dtype);
  if (out.data != in.data && bytes) std::memcpy(out.data, in.data, bytes);
  void* buf = out.data;
  const DType dtype = in.dtype;
  if (op == ir::OpKind::AllReduce) {
    const auto reduce = static_cast<dist::Reduce>(a.reduce);
    return [name, g, buf, n, dtype, reduce] {
      engine_call(name, *g, [&] { g->all_reduce(buf, n, dtype, reduce); });
    };
  }
  const int root = static_cast<int>(a.root);
  return [name, g, buf, n, dtype, root] {
    engine_call(name, *g, [&] { g->broadcast(buf, n, dtype, root); });
  };
}

void run_collective(ir::OpKind op, const ir::CollectiveAttrs& a, const interp::ConstArray& in,
                    const interp::MutArray& out) {
  if (std::function<void()> call = start_collective(op, a, in, out)) {
    call();
    return;
  }
  const std::string name(ir::op_name(op));
  std::shared_ptr<dist::ProcessGroup> g = group_for(name, a);
  switch (op) {
    case ir::OpKind::AllGather:
      engine_call(name, *g, [&] { g->all_gather(in.data, out.data, numel(*in.shape), in.dtype); });
      return;
    case ir::OpKind::ReduceScatter:
      engine_call(name, *g, [&] {
        g->reduce_scatter(in.data, out.data, numel(*out.shape), in.dtype,
                          static_cast<dist::Reduce>(a.reduce));
      });
      return;
    default:
      break;
  }
  throw Error("internal: " + name + " is not a collective");
}

}  // namespace lz
