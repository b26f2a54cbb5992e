#include "exec/compile_region.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/config.h"
#include "exec/graph_executor.h"
#include "lazuli/error.h"
#include "tensor/device.h"

namespace lz {
namespace {

thread_local std::vector<std::unique_ptr<RegionState>> t_regions;

struct KnownGraph {
  Hash128 hash;
  std::vector<Hash128> node_hashes;  // post-order
  std::vector<ir::OpKind> ops;
  std::vector<std::string> types;  // "float32[3]"
};

std::mutex g_known_mu;  // guards g_known
std::map<int64_t, std::vector<KnownGraph>> g_known;

std::string frame_str(const UserFrame& f) { return f.file + ":" + std::to_string(f.line) + " in " + f.function; }

}  // namespace

RegionState* current_region() { return t_regions.empty() ? nullptr : t_regions.back().get(); }

void enter_region(std::string name, bool full_graph, int max_graphs, int64_t key) {
  auto r = std::make_unique<RegionState>();
  r->name = std::move(name);
  r->full_graph = full_graph;
  r->max_graphs = max_graphs;
  r->key = key;
  t_regions.push_back(std::move(r));
}

void exit_region() {
  if (!t_regions.empty()) t_regions.pop_back();
}

void check_execution_allowed(CutReason reason, const std::vector<UserFrame>& f) {
  RegionState* r = current_region();
  if (!r || (!r->full_graph && !r->capture)) return;
  if (reason == CutReason::CompileRegionStart || reason == CutReason::CompileRegionEnd) return;
  if (r->capture && !r->full_graph) {
    if (r->executed.empty()) {
      r->executed = std::string(cut_reason_id(reason)) + (f.empty() ? std::string() : " at " + frame_str(f[0]));
    }
    return;
  }
  throw UnexpectedExecutionError(
      std::string(r->capture ? "capture" : "compile") + "(full_graph=True)" + (r->name.empty() ? std::string() : " '" + r->name + "'") +
      ": an execution (cause " + std::string(cut_reason_id(reason)) + ") was about to run inside the "
      "compiled function" + (f.empty() ? std::string() : ", at " + frame_str(f[0])) + ". " +
      std::string(cut_reason_advice(reason)));
}

void note_node_location(const ir::Node* n) {
  RegionState* r = current_region();
  if (!r || r->max_graphs < 0) return;
  std::vector<UserFrame> f = user_frames(1);
  if (!f.empty()) r->locations[n] = std::move(f[0]);
}

void check_region_graph() {
  RegionState* r = current_region();
  if (!r || r->max_graphs < 0) return;
  Roots roots = collect(internal::default_device().registry.snapshot(), /*include_views=*/false);
  if (roots.values.empty()) return;
  PostOrder po = post_order(roots.values);
  std::vector<std::pair<int, int>> donations;
  if (config().enable_param_aliasing) donations = find_donations(roots, po);
  KnownGraph g{graph_hash(roots, po, donations), {}, {}, {}};
  for (const ir::Node* n : po.nodes) {
    g.node_hashes.push_back(n->dag_hash);
    g.ops.push_back(n->op);
    g.types.push_back(std::string(dtype_name(n->dtype)) + shape_str(n->shape));
  }
  std::lock_guard<std::mutex> l(g_known_mu);
  auto& known = g_known[r->key];
  for (const KnownGraph& k : known) {
    if (k.hash == g.hash) return;
  }
  if (static_cast<int>(known.size()) < r->max_graphs) {
    known.push_back(std::move(g));
    return;
  }
  // The closest known graph is the one sharing the longest post-order prefix.
  size_t best_prefix = 0;
  const KnownGraph* best = nullptr;
  for (const KnownGraph& k : known) {
    size_t i = 0;
    while (i < k.node_hashes.size() && i < g.node_hashes.size() && k.node_hashes[i] == g.node_hashes[i]) ++i;
    if (!best || i > best_prefix) {
      best = &k;
      best_prefix = i;
    }
  }
  std::string msg = "compile(max_different_graphs=" + std::to_string(r->max_graphs) + ")" +
                    (r->name.empty() ? std::string() : " '" + r->name + "'") + ": traced a graph that differs from the " +
                    std::to_string(known.size()) + " already seen";
  if (best && best_prefix < g.ops.size()) {
    const ir::Node* n = po.nodes[best_prefix];
    msg += "; it diverges at node " + std::to_string(best_prefix) + " (" + std::string(ir::op_name(n->op)) +
           (n->user_op && std::string(n->user_op) != ir::op_name(n->op) ? " (" + std::string(n->user_op) + ")" : "") +
           " " + std::string(dtype_name(n->dtype)) + shape_str(n->shape);
    if (best_prefix < best->ops.size()) {
      msg += ", where the closest known graph has " + std::string(ir::op_name(best->ops[best_prefix])) + " " +
             best->types[best_prefix];
    }
    msg += ")";
    // The divergent node itself, or the first later node that an op recorded, has a location.
    for (size_t i = best_prefix; i < po.nodes.size(); ++i) {
      auto it = r->locations.find(po.nodes[i]);
      if (it != r->locations.end()) {
        msg += ", recorded at " + frame_str(it->second);
        break;
      }
    }
  } else {
    msg += "; it has more outputs than the closest known graph";
  }
  throw TooManyGraphsError(msg + ". A different input shape, dtype or Python branch makes a new graph.");
}

}  // namespace lz
