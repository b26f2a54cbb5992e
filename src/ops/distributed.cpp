// lz::distributed (include/lazuli/distributed.h): collectives recorded as IR nodes (op class
// Collective, CollectiveAttrs) over the default process group (dist/process_group.h).
#include "lazuli/distributed.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/config.h"
#include "dist/process_group.h"
#include "exec/device_executor.h"
#include "lazuli/autograd.h"
#include "lazuli/error.h"
#include "lazuli/runtime.h"
#include "ops/distributed.h"
#include "ops/frontend.h"

namespace lz {
namespace {

using ir::CollectiveAttrs;

ir::CollectiveAttrs attrs_for(const dist::ProcessGroup& g, CollectiveAttrs::Reduce reduce, int64_t root = 0) {
  CollectiveAttrs a;
  a.group = 0;
  a.world_size = g.size();
  a.reduce = reduce;
  a.root = root;
  static std::atomic<int64_t> recorded{0};
  a.sequence = ++recorded;
  return a;
}

// v / the group's size (AVG's second half).
ir::Value divide_by_size(ir::Value v, const dist::ProcessGroup& g) {
  if (g.size() == 1) return v;
  return frontend::node(ir::OpKind::Div, {v, frontend::scalar_value(Scalar(static_cast<double>(g.size())), v.dtype())});
}

CollectiveAttrs::Reduce reduce_of(distributed::ReduceOp op) {
  switch (op) {
    case distributed::ReduceOp::SUM:
    case distributed::ReduceOp::AVG: return CollectiveAttrs::Sum;
    case distributed::ReduceOp::PRODUCT: return CollectiveAttrs::Product;
    case distributed::ReduceOp::MAX: return CollectiveAttrs::Max;
    case distributed::ReduceOp::MIN: return CollectiveAttrs::Min;
  }
  throw ValueError("unknown ReduceOp");
}

// A reduction collective over `x`: float16/bfloat16 reduce in float32 (no engine reduces them
// portably), AVG divides the sum by the group's size.
// The operand of a collective: its gradient is not defined here (a collective over a tensor that
// requires grad would reach backward without a rule), so it is refused at the call.
ir::Value operand(const Tensor& x, const char* name) {
  ir::Value v = frontend::value_of(x, name);
  if (is_grad_enabled() && v.requires_grad()) {
    throw Error(std::string(name) + ": the tensor requires grad, and collectives have no gradient; "
                "detach() it or call under no_grad() (DistributedDataParallel averages gradients "
                "itself)");
  }
  return v;
}

ir::Value reduction(ir::OpKind kind, const Tensor& x, distributed::ReduceOp op, const char* name) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world(name);
  ir::Value v = operand(x, name);
  const DType dt = v.dtype();
  if (dt == DType::Bool) {
    throw TypeError(std::string(name) + ": cannot reduce a bool tensor (" +
                    frontend::desc(name, x) + "); convert it to an integer type first");
  }
  if (op == distributed::ReduceOp::AVG && !is_floating(dt)) {
    throw TypeError(std::string(name) + ": ReduceOp.AVG needs a float tensor (" +
                    frontend::desc(name, x) + "); use SUM and divide");
  }
  const bool widen = is_reduced_float(dt);
  if (widen) v = frontend::cast(v, DType::Float32);
  v = frontend::node(kind, {v}, attrs_for(*g, reduce_of(op)));
  if (op == distributed::ReduceOp::AVG) v = divide_by_size(v, *g);
  return widen ? frontend::cast(v, dt) : v;
}

void assign(Tensor& t, ir::Value v, const char* op) {
  if (!t.defined()) throw ValueError(std::string(op) + ": the tensor is undefined");
  t.impl()->set_value(frontend::cast(v, t.dtype()));
}

}  // namespace

namespace frontend {

ir::Value average_over_world(ir::Value v, const char* op) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world(op);
  return divide_by_size(frontend::node(ir::OpKind::AllReduce, {v}, attrs_for(*g, CollectiveAttrs::Sum)), *g);
}

}  // namespace frontend

namespace distributed {

void init_process_group(const std::string& backend) {
  dist::init_world(backend);
  // At exit, programs still queued (they may hold collectives) run before the engine shuts down.
  dist::set_before_shutdown([] { device_executor().wait_all(); });
}
bool is_initialized() { return dist::world() != nullptr; }
int get_rank() { return dist::require_world("get_rank")->rank(); }
int get_world_size() { return dist::require_world("get_world_size")->size(); }
std::string get_backend() { return dist::require_world("get_backend")->engine(); }

void destroy_process_group() {
  if (!dist::world()) return;
  lz::wait();  // programs already scheduled still run on the group
  dist::destroy_world();
}

void all_reduce(Tensor& t, ReduceOp op) {
  assign(t, reduction(ir::OpKind::AllReduce, t, op, "all_reduce"), "all_reduce");
}

void broadcast(Tensor& t, int src) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world("broadcast");
  if (src < 0 || src >= g->size()) {
    throw ValueError("broadcast: src " + std::to_string(src) + " is not a rank of the group (size " +
                     std::to_string(g->size()) + ")");
  }
  ir::Value v = operand(t, "broadcast");
  assign(t, frontend::node(ir::OpKind::Broadcast, {v}, attrs_for(*g, CollectiveAttrs::Sum, src)), "broadcast");
}

Tensor all_gather(const Tensor& t) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world("all_gather");
  ir::Value v = operand(t, "all_gather");
  return frontend::wrap(frontend::node(ir::OpKind::AllGather, {v}, attrs_for(*g, CollectiveAttrs::Sum)));
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
  return frontend::wrap(reduction(ir::OpKind::ReduceScatter, t, op, "reduce_scatter"));
}

void barrier() {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world("barrier");
  // Programs of this process may be running collectives on the executor thread: they finish
  // first, so every rank's engine sees its collectives in one order.
  lz::wait();
  // On the executor thread, behind anything another thread scheduled meanwhile, so the engine
  // sees this process's collectives in one order whichever thread asks.
  auto done = std::make_shared<Execution>();
  const double timeout = static_cast<double>(config().dist_timeout_s);
  device_executor().schedule(done, [g, done, timeout] {
    std::exception_ptr error;
    try {
      g->set_timeout(timeout);
      g->barrier();
    } catch (...) {
      error = std::current_exception();
    }
    done->complete(error);  // raised below, to the caller: not kept as a pending error
  });
  done->wait_done();
  if (std::exception_ptr e = done->error()) {
    try {
      std::rethrow_exception(e);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& x) {
      throw Error(std::string("barrier: ") + x.what());
    }
  }
}

void abort(int code) {
  std::shared_ptr<dist::ProcessGroup> g = dist::require_world("abort");
  g->abort(code);
  std::abort();  // an engine's abort does not return
}

void average_gradients(const Tensor& param, int64_t bucket_cap_bytes) {
  dist::require_world("average_gradients");
  if (!param.defined()) throw ValueError("average_gradients: the tensor is undefined");
  if (!param.impl()->requires_grad_flag()) {
    throw ValueError("average_gradients: the tensor is not a leaf that requires grad (" +
                     frontend::desc("average_gradients", param) + ")");
  }
  if (bucket_cap_bytes < 0) {
    throw ValueError("average_gradients: bucket_cap_bytes must be >= 0, got " +
                     std::to_string(bucket_cap_bytes));
  }
  param.impl()->set_averages_grad(true, bucket_cap_bytes);
}

}  // namespace distributed
}  // namespace lz
