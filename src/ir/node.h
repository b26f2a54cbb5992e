// IR nodes and values (DESIGN.md section 3).
//
// A Node is immutable after construction and reference-counted; operands own their producers.
// Hashes, computed once in make_node():
//   interior: node_hash = H(op, attrs); dag_hash = H(node_hash, operand value hashes in order).
//             The output shape is NOT hashed: it follows from the operands and attributes.
//   leaf:     hash = H(op, attrs, dtype, shape). DeviceData buffers are never hashed; Constant
//             hashes its value (only 0, 1 and explicit constants are baked; other scalars are
//             DeviceData parameters).
// Every node has exactly one output for now; Value keeps an index so multi-output ops can come.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/hash.h"
#include "core/shape.h"
#include "ir/ops.h"
#include "ir/origin.h"
#include "lazuli/dtype.h"

namespace lz::ir {

// Attribute meanings per op are listed in op_table.def.
struct Attrs {
  std::vector<int64_t> ints;
  DType dtype = DType::Float32;
  double scalar = 0;
  bool flag = false;
};

class Node;
using NodePtr = std::shared_ptr<const Node>;

struct Value {
  NodePtr node;
  int index = 0;
  explicit operator bool() const { return node != nullptr; }
  const Hash128& hash() const;
  DType dtype() const;
  const Shape& shape() const;
};

class Node {
 public:
  Node() = default;
  // Releases operand chains iteratively: dropping a 200k-node chain must not overflow the stack.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  OpKind op;
  std::vector<Value> operands;
  Attrs attrs;
  DType dtype;
  Shape shape;
  Hash128 node_hash;
  Hash128 dag_hash;
  BufferPtr data;  // DeviceData only
  // Scratch for graph traversals (exec/graph_executor.cpp post_order), guarded by its traversal
  // mutex; not part of the node's value: the traversal's epoch, and the node's post-order index.
  mutable uint64_t visit_mark = 0;
  mutable int32_t visit_index = -1;
  // Autograd (src/autograd), never hashed: the value depends on a tensor that requires grad,
  // recorded with grad mode on. Set at birth (make_node, or a leaf of such a tensor).
  bool requires_grad = false;
  // Set by backward() without retain_graph on the interior nodes it went through, so a second
  // backward through them raises instead of silently accumulating twice.
  // Atomic: a backward in one thread may set it while a sync in another reads it.
  mutable std::atomic<bool> grad_consumed{false};
  // Index ops only, never hashed: what the user called and where (ir/origin.h), for run-time errors.
  Origin origin;

  bool is_leaf() const { return operands.empty(); }
};

// Builds an interior node: hashes it, infers (memoized) its output, validating operands.
// Throws ValueError / TypeError naming the op, shapes and dtypes; then nothing is recorded.
NodePtr make_node(OpKind op, std::vector<Value> operands, Attrs attrs = {});
// Leaves.
// requires_grad: the buffer is the value of a leaf tensor that requires grad (see autograd).
NodePtr make_device_data(BufferPtr buffer, bool requires_grad = false);
NodePtr make_constant(double value, DType dtype);
NodePtr make_iota(int64_t n, DType dtype);

// Process-wide count of nodes created (for the pending-graph limit and benchmarks).
int64_t nodes_created();

}  // namespace lz::ir
