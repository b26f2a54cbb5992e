// Recompile explanations (DESIGN.md section 6). Every compile-cache miss records what its graph
// key was made of and where it was compiled; the next miss is compared with the closest earlier
// key from the same call site, or, at a new call site, from anywhere (naming where that one was
// compiled). Every ingredient that differs is said in user terms (a few, then "and N more"):
// which inputs changed shape or dtype, which tensors are newly alive at the barrier, a changed
// aliasing or donation set, a changed environment, changed baked constants or attributes, where
// the structure diverges. The first names the cause; each cause has a counter,
// RecompileReason::<cause>.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/shape.h"
#include "exec/graph_executor.h"

namespace lz {

struct GraphKeyInfo {
  struct Tensor_ {
    int64_t id = 0;
    DType dtype = DType::Float32;
    Shape shape;
    Hash128 hash;
    std::string created_at;  // "file:line" when debugging recorded it, else ""
  };
  std::string call_site;
  bool value_read = false;  // a read's extra outputs are the live tensors it computed (DESIGN.md 4)
  Hash128 env, graph;
  std::vector<Tensor_> roots;
  std::vector<Tensor_> params;
  std::vector<int> param_sequence;
  std::vector<std::pair<int, int>> donations;
  std::vector<ir::OpKind> ops;       // post-order
  std::vector<Hash128> node_hashes;  // post-order (op + attributes, incl. baked constants)
  std::vector<double> constants;     // value of each node that is a Constant, else NaN
  std::vector<std::string> types;    // post-order: "float32[4, 3]"
  std::vector<const char*> user_ops;  // post-order: the op the user called (ir::Node::user_op), or null
  std::vector<uint64_t> sorts;       // post-order: op, dtype and rank (not sizes) of each node
  // Post-order: the sizes a node's size attributes follow (a slice: the extents along its dim,
  // its own and its operands'; any other node: its own and its operands' shapes).
  std::vector<uint64_t> size_anchors;
  // Post-order: the attributes that are not sizes (every field but an iota's length, a slice's
  // bounds, a target shape, a count constant's value: size_only_difference).
  std::vector<uint64_t> fixed_attrs;
  std::vector<uint64_t> root_wiring;  // per root: its node's post-order position and output
  // Post-order, per node: op, operand positions and parameter slot, never shapes or attributes;
  // two graphs whose wirings are equal match node for node up to shapes and attributes.
  std::vector<uint64_t> wiring;
};

// The call-site key of a program a front end named (SyncConfig::name): its recompiles are
// compared with earlier compiles of that name, and explained as "first compile of <name>".
std::string program_key(const std::string& name);

GraphKeyInfo describe_graph_key(const std::string& call_site, const Hash128& graph,
                                const Roots& roots, const PostOrder& po,
                                const std::vector<std::pair<int, int>>& donations,
                                bool value_read = false);

// "" when `now` is the graph `before` at other sizes (a captured function called with new input
// sizes; exec/capture.cpp): the same environment, wiring, roots, inputs' dtypes, aliasing and
// donations, every node the same op, dtype and rank with the same attributes that are not sizes
// (fixed_attrs), and the same sizes in its attributes wherever the sizes they follow did not
// change (size_anchors: so a view's target shape, an iota's length, a slice bound along a dim
// whose extent changed, a slice's gradient into an unchanged table may follow the sizes; a
// slice that moves along a dim of unchanged extent, a random crop, may not). A count constant (a
// mean's divisor) may differ: it follows from the sizes. Otherwise the first difference, in
// words.
std::string size_only_difference(const GraphKeyInfo& now, const GraphKeyInfo& before);

struct Explanation {
  std::string cause;  // new-call-site | environment | input-shape | input-dtype | new-live-tensor |
                      // fewer-live-tensors | aliasing | donation | baked-constant | attribute |
                      // structure
  std::string text;   // one or two lines for the user
};

// Compares with the closest earlier key from the same call site (from anywhere when the site is
// new), remembers `info`, bumps the cause's counter, and returns the explanation.
Explanation explain_and_remember(GraphKeyInfo info);
void clear_recompile_history();
// How many graph keys the history holds now (bounded: see explain.cpp).
size_t recompile_history_size();

}  // namespace lz
