#include "exec/explain.h"

#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <algorithm>
#include <sstream>

#include "core/metrics.h"

namespace lz {
namespace {

constexpr size_t kHistoryPerSite = 16;

struct History {
  std::mutex mu;  // guards sites
  std::map<std::string, std::deque<GraphKeyInfo>> sites;
};

History& history() {
  static auto* h = new History();
  return *h;
}

std::string tensor_name(const GraphKeyInfo::Tensor_& t) {
  std::string s = t.id ? "tensor #" + std::to_string(t.id) : "a scalar parameter";
  if (!t.created_at.empty()) s += " (created at " + t.created_at + ")";
  return s;
}

std::string type_str(DType d, const Shape& s) { return std::string(dtype_name(d)) + shape_str(s); }

// Smaller is closer: differences in environment, structure, inputs and outputs, weighted so that
// the explanation names the smallest change.
double distance(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  double d = 0;
  if (a.env != b.env) d += 1000;
  d += 10.0 * std::abs(static_cast<double>(a.roots.size()) - static_cast<double>(b.roots.size()));
  d += 10.0 * std::abs(static_cast<double>(a.params.size()) - static_cast<double>(b.params.size()));
  size_t n = std::min(a.ops.size(), b.ops.size());
  d += std::abs(static_cast<double>(a.ops.size()) - static_cast<double>(b.ops.size()));
  for (size_t i = 0; i < n; ++i) d += a.node_hashes[i] != b.node_hashes[i] ? 0.5 : 0;
  for (size_t i = 0; i < std::min(a.params.size(), b.params.size()); ++i) {
    d += a.params[i].shape != b.params[i].shape || a.params[i].dtype != b.params[i].dtype;
  }
  return d;
}

Explanation compare(const GraphKeyInfo& now, const GraphKeyInfo& before) {
  std::ostringstream o;
  if (now.env != before.env) {
    return {"environment", "the compile environment changed (backend, a code-generating setting, "
                           "or a new build of the library)"};
  }
  // Equal dag hashes with another parameter sequence: the same values, aliased differently.
  bool same_values = now.roots.size() == before.roots.size();
  for (size_t i = 0; same_values && i < now.roots.size(); ++i) same_values = now.roots[i].hash == before.roots[i].hash;
  if (same_values && now.param_sequence != before.param_sequence) {
    return {"aliasing", "the same buffer is now passed where distinct ones were before (or the "
                        "reverse), e.g. f(a, a) after f(a, b): inputs alias differently"};
  }
  if (now.params.size() == before.params.size()) {
    for (size_t i = 0; i < now.params.size(); ++i) {
      const auto& a = before.params[i];
      const auto& b = now.params[i];
      if (a.dtype != b.dtype || a.shape != b.shape) {
        o << "input " << i << ", " << tensor_name(b) << ", changed from " << type_str(a.dtype, a.shape)
          << " to " << type_str(b.dtype, b.shape);
        return {a.dtype != b.dtype ? "input-dtype" : "input-shape", o.str()};
      }
    }
  }
  if (now.roots.size() != before.roots.size()) {
    // Outputs whose value was not an output before are the newly alive tensors.
    std::vector<std::string> extra;
    for (const auto& r : now.roots) {
      bool seen = false;
      for (const auto& p : before.roots) seen = seen || p.hash == r.hash;
      if (!seen) extra.push_back(tensor_name(r) + " " + type_str(r.dtype, r.shape));
    }
    if (now.roots.size() > before.roots.size()) {
      o << (now.roots.size() - before.roots.size()) << " more tensor(s) alive with pending work at the "
        << "barrier than at the earlier compile here, so they became outputs";
      if (!extra.empty()) {
        o << ": " << extra[0];
        if (extra.size() > 1) o << " and " << (extra.size() - 1) << " more";
      }
      o << "; drop references you do not need before sync(), or read them in a step closure";
      return {"new-live-tensor", o.str()};
    }
    o << (before.roots.size() - now.roots.size()) << " fewer tensor(s) alive at the barrier than at "
      << "the earlier compile here";
    return {"fewer-live-tensors", o.str()};
  }
  if (now.donations != before.donations) {
    o << "the set of donated buffers changed (" << before.donations.size() << " -> " << now.donations.size()
      << "): a tensor that still holds an old buffer blocks its donation";
    return {"donation", o.str()};
  }
  size_t n = std::min(now.ops.size(), before.ops.size());
  for (size_t i = 0; i < n; ++i) {
    if (now.ops[i] != before.ops[i]) {
      o << "the graph's structure changed: node " << i << " is " << ir::op_name(now.ops[i]) << " where it was "
        << ir::op_name(before.ops[i]);
      return {"structure", o.str()};
    }
    if (now.node_hashes[i] != before.node_hashes[i]) {
      if (now.ops[i] == ir::OpKind::Constant) {
        o << "a baked constant changed from " << before.constants[i] << " to " << now.constants[i]
          << " (only 0, 1 and lz.constant values are baked; other numbers are parameters)";
        return {"baked-constant", o.str()};
      }
      o << "an attribute of node " << i << " (" << ir::op_name(now.ops[i]) << ") changed";
      if (now.types[i] != before.types[i]) o << ": it now gives " << now.types[i] << " where it gave " << before.types[i];
      o << " (a target shape, dim, slice bound or dtype written in the code)";
      return {"attribute", o.str()};
    }
  }
  o << "the graph's structure changed: " << before.ops.size() << " -> " << now.ops.size() << " nodes";
  return {"structure", o.str()};
}

}  // namespace

GraphKeyInfo describe_graph_key(const std::string& call_site, const Hash128& graph,
                                const Roots& roots, const PostOrder& po,
                                const std::vector<std::pair<int, int>>& donations) {
  GraphKeyInfo k;
  k.call_site = call_site;
  k.env = compile_env_hash();
  k.graph = graph;
  for (size_t i = 0; i < roots.values.size(); ++i) {
    const auto& t = roots.tensors[i];
    k.roots.push_back({t->id(), roots.values[i].dtype(), roots.values[i].shape(), roots.values[i].hash(),
                       t->created_at() ? *t->created_at() : std::string()});
  }
  for (const BufferPtr& b : po.params) {
    k.params.push_back({b->owner_tensor_id, b->dtype(), b->shape(), {}, b->created_at ? *b->created_at : std::string()});
  }
  k.param_sequence = po.param_sequence;
  k.donations = donations;
  std::sort(k.donations.begin(), k.donations.end());
  for (const ir::Node* n : po.nodes) {
    k.ops.push_back(n->op);
    k.node_hashes.push_back(n->node_hash);
    k.constants.push_back(n->op == ir::OpKind::Constant ? n->attrs.scalar
                                                        : std::numeric_limits<double>::quiet_NaN());
    k.types.push_back(type_str(n->dtype, n->shape));
  }
  return k;
}

Explanation explain_and_remember(GraphKeyInfo info) {
  History& h = history();
  Explanation e;
  {
    std::lock_guard<std::mutex> l(h.mu);
    auto& site = h.sites[info.call_site];
    const GraphKeyInfo* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const auto& k : site) {
      double d = distance(info, k);
      if (d < best_d) {
        best_d = d;
        best = &k;
      }
    }
    e = best ? compare(info, *best)
             : Explanation{"new-call-site", "first compile at this call site (" +
                                                (info.call_site.empty() ? std::string("C++") : info.call_site) + ")"};
    site.push_back(std::move(info));
    if (site.size() > kHistoryPerSite) site.pop_front();
  }
  get_counter("RecompileReason::" + e.cause)->add(1);
  return e;
}

void clear_recompile_history() {
  History& h = history();
  std::lock_guard<std::mutex> l(h.mu);
  h.sites.clear();
}

}  // namespace lz
