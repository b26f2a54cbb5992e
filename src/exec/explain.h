// Recompile explanations (DESIGN.md section 6). Every compile-cache miss records what its graph
// key was made of, per call site; the next miss at the same call site is compared with the
// closest earlier key there, and the difference is said in user terms: which input changed shape
// or dtype, which tensors are newly alive at the barrier, a changed aliasing or donation set, a
// changed environment, a changed baked constant or attribute, or a new call site. Each cause has
// a counter, RecompileReason::<cause>.
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
  Hash128 env, graph;
  std::vector<Tensor_> roots;
  std::vector<Tensor_> params;
  std::vector<int> param_sequence;
  std::vector<std::pair<int, int>> donations;
  std::vector<ir::OpKind> ops;       // post-order
  std::vector<Hash128> node_hashes;  // post-order (op + attributes, incl. baked constants)
  std::vector<double> constants;     // value of each node that is a Constant, else NaN
  std::vector<std::string> types;    // post-order: "float32[4, 3]" 
};

GraphKeyInfo describe_graph_key(const std::string& call_site, const Hash128& graph,
                                const Roots& roots, const PostOrder& po,
                                const std::vector<std::pair<int, int>>& donations);

struct Explanation {
  std::string cause;  // new-call-site | environment | input-shape | input-dtype | new-live-tensor |
                      // fewer-live-tensors | aliasing | donation | baked-constant | attribute |
                      // structure
  std::string text;   // one or two lines for the user
};

// Compares with the closest earlier key from the same call site, remembers `info`, bumps the
// cause's counter, and returns the explanation.
Explanation explain_and_remember(GraphKeyInfo info);
void clear_recompile_history();

}  // namespace lz
