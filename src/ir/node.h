// IR nodes and values (DESIGN.md section 3).
//
// A Node is immutable after construction and reference-counted; operands own their producers.
// Hashes, computed once in make_node():
//   interior: node_hash = H(op, attrs); dag_hash = H(node_hash, operand value hashes in order).
//             The output shape is NOT hashed: it follows from the operands and attributes.
//   leaf:     hash = H(op, attrs, dtype, shape). DeviceData buffers are never hashed; Constant
//             hashes its value (only 0, 1 and explicit constants are baked; other scalars are
//             DeviceData parameters).
// A node has the number of outputs its op table row gives (sort: values and indices); a Value
// names one of them. Output 0 is the node's dtype/shape/dag_hash; output i > 0 has its own hash,
// H(dag_hash, i), so a consumer of the indices never shares a program with one of the values.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/hash.h"
#include "core/shape.h"
#include "ir/attrs.h"
#include "ir/ops.h"
#include "ir/origin.h"
#include "lazuli/dtype.h"

namespace lz::ir {

class Node;
using NodePtr = std::shared_ptr<const Node>;

struct OutputType {
  DType dtype;
  Shape shape;
};

struct Value {
  NodePtr node;
  int index = 0;
  explicit operator bool() const { return node != nullptr; }
  const Hash128& hash() const;
  DType dtype() const;
  const Shape& shape() const;
  // Gradients flow to this output: its node requires grad and the output is floating (a sort's
  // indices never require grad, its values may).
  bool requires_grad() const;
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
  DType dtype;  // output 0
  Shape shape;  // output 0
  Hash128 node_hash;
  Hash128 dag_hash;  // output 0's value hash
  // Outputs 1.. of a multi-output op, with their value hashes.
  struct ExtraOutput {
    DType dtype;
    Shape shape;
    Hash128 hash;
  };
  std::vector<ExtraOutput> extra_outputs;
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
  // The op the user called when this node was recorded (ir/origin.h: "aten.addmm.default" from
  // the PyTorch device, "cross_entropy" from a composite), or null; never hashed. Recompile
  // explanations name it beside the node's own op. Points at an interned or static name.
  const char* user_op = nullptr;

  bool is_leaf() const { return operands.empty(); }
  int num_outputs() const { return 1 + static_cast<int>(extra_outputs.size()); }
  DType output_dtype(int i) const { return i == 0 ? dtype : extra_outputs[i - 1].dtype; }
  const Shape& output_shape(int i) const { return i == 0 ? shape : extra_outputs[i - 1].shape; }
  // The node's attribute struct (the one its op's table row names; make_node checked it).
  template <class A>
  const A& attr() const {
    return std::get<A>(attrs);
  }
};

// Builds an interior node: hashes it, infers (memoized) its output, validating operands.
// Throws ValueError / TypeError naming the op, shapes and dtypes; then nothing is recorded.
NodePtr make_node(OpKind op, std::vector<Value> operands, Attrs attrs = {});
// Leaves.
// requires_grad: the buffer is the value of a leaf tensor that requires grad (see autograd).
NodePtr make_device_data(BufferPtr buffer, bool requires_grad = false);
NodePtr make_constant(double value, DType dtype, bool from_sizes = false);
NodePtr make_iota(int64_t n, DType dtype);

// Process-wide count of nodes created (for the pending-graph limit and benchmarks).
int64_t nodes_created();

}  // namespace lz::ir
