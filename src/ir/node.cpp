#include "ir/node.h"

#include <atomic>

#include "core/grad_mode.h"
#include "ir/shape_inference.h"
#include "lazuli/error.h"

namespace lz::ir {
namespace {

std::atomic<int64_t> g_nodes_created{0};

void hash_op(Hasher& h, OpKind op, const Attrs& a) {
  h.add(static_cast<uint16_t>(op));
  hash_attrs(h, a);
}

Hash128 leaf_hash(OpKind op, const Attrs& a, DType dtype, const Shape& shape) {
  Hasher h;
  hash_op(h, op, a);
  h.add(static_cast<uint8_t>(dtype));
  h.add<uint64_t>(shape.size());
  if (!shape.empty()) h.add_bytes(shape.data(), shape.size() * sizeof(int64_t));
  return h.digest();
}

NodePtr finish_leaf(std::shared_ptr<Node> n) {
  n->node_hash = leaf_hash(n->op, n->attrs, n->dtype, n->shape);
  n->dag_hash = n->node_hash;
  g_nodes_created.fetch_add(1, std::memory_order_relaxed);
  return n;
}

// True when `p` is the only reference to its node, ordered after every other owner's release: we
// are about to write the node (a sync in another thread may just have walked it and let go).
// use_count() is a relaxed load, so an acquire fence follows it. ThreadSanitizer does not model
// fences; under it a copy (an acquire-release increment) orders us instead (in a Release build
// the copy cost about 13 ns per node freed: BM_FreeGraph100 4.4 -> 5.7 us, the fence nothing).
bool sole_owner(const NodePtr& p) {
  if (p.use_count() != 1) return false;
#if defined(__SANITIZE_THREAD__)
  NodePtr ordered = p;
  return ordered.use_count() == 2;
#else
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
#endif
}

}  // namespace

Node::~Node() {
  // Operands we hold the last reference to are moved to a local stack and emptied there, so each
  // node's destructor finds no operands left to release recursively.
  std::vector<NodePtr> stack;
  auto take = [&stack](std::vector<Value>& ops) {
    for (Value& v : ops) {
      if (v.node && sole_owner(v.node)) stack.push_back(std::move(v.node));
    }
    ops.clear();
  };
  take(operands);
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    take(const_cast<Node&>(*n).operands);  // we hold the only reference
  }
}

const Hash128& Value::hash() const {
  return index == 0 ? node->dag_hash : node->extra_outputs[index - 1].hash;
}
DType Value::dtype() const { return node->output_dtype(index); }
bool Value::requires_grad() const { return node->requires_grad && is_floating(dtype()); }
const Shape& Value::shape() const { return node->output_shape(index); }

NodePtr make_node(OpKind op, std::vector<Value> operands, Attrs attrs) {
  if (attrs.index() != op_info(op).attrs) {  // a bug in the caller, not in the user's program
    throw Error("internal: " + std::string(op_name(op)) + " carries " + attrs_name(attrs.index()) +
                ", its op table row says " + attrs_name(op_info(op).attrs));
  }
  Hasher nh;
  hash_op(nh, op, attrs);
  Hash128 node_hash = nh.digest();
  Hasher dh;
  dh.add(node_hash);
  for (const Value& v : operands) dh.add(v.hash());  // an output i > 0 has a hash of its own
  Hash128 dag_hash = dh.digest();
  // Validates before anything is allocated: a bad op records nothing.
  NodeType type = cached_infer_output(dag_hash, op, operands, attrs);
  auto n = std::make_shared<Node>();
  n->op = op;
  n->operands = std::move(operands);
  n->attrs = std::move(attrs);
  n->dtype = type.out.dtype;
  n->shape = std::move(type.out.shape);
  for (size_t i = 0; i < type.extra.size(); ++i) {
    Hasher oh;
    oh.add(dag_hash);
    oh.add(static_cast<int32_t>(i + 1));
    n->extra_outputs.push_back({type.extra[i].dtype, std::move(type.extra[i].shape), oh.digest()});
  }
  n->node_hash = node_hash;
  n->dag_hash = dag_hash;
  n->origin = origin_for(op);
  n->user_op = current_user_op(nullptr);
  if (op != OpKind::StopGradient && is_floating(n->dtype) && autograd::grad_enabled()) {
    for (const Value& v : n->operands) {
      if (v.requires_grad()) {
        n->requires_grad = true;
        break;
      }
    }
  }
  g_nodes_created.fetch_add(1, std::memory_order_relaxed);
  return n;
}

NodePtr make_device_data(BufferPtr buffer, bool requires_grad) {
  auto n = std::make_shared<Node>();
  n->requires_grad = requires_grad;
  n->op = OpKind::DeviceData;
  n->dtype = buffer->dtype();
  n->shape = buffer->shape();
  n->data = std::move(buffer);
  return finish_leaf(std::move(n));
}

NodePtr make_constant(double value, DType dtype, bool from_sizes) {
  auto n = std::make_shared<Node>();
  n->op = OpKind::Constant;
  n->attrs = ConstantAttrs{value, dtype, from_sizes};
  n->dtype = dtype;
  return finish_leaf(std::move(n));
}

NodePtr make_iota(int64_t n_elems, DType dtype) {
  auto n = std::make_shared<Node>();
  n->op = OpKind::Iota;
  n->attrs = IotaAttrs{n_elems, dtype};
  n->dtype = dtype;
  n->shape = {n_elems};
  return finish_leaf(std::move(n));
}

int64_t nodes_created() { return g_nodes_created.load(std::memory_order_relaxed); }

}  // namespace lz::ir
