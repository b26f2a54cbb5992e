#include "exec/explain.h"

#include <cmath>
#include <string_view>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/metrics.h"

namespace lz {
namespace {

// Memory bound: at most kHistoryKeys keys are remembered in all, at most kHistoryPerSite of one
// call site (so one line that keeps recompiling cannot push every other site out), and at most
// kHistoryNodes nodes in all, about 80 bytes each (about 80 MB at worst; a single larger graph is
// remembered alone). Call-site names seen are kept apart, up to kKnownSites, so a site whose keys
// were dropped is not called new.
constexpr size_t kHistoryKeys = 64;
constexpr size_t kHistoryPerSite = 16;
constexpr size_t kHistoryNodes = size_t{1} << 20;
constexpr size_t kKnownSites = 4096;
// An explanation names this many differences, then "and N more".
constexpr size_t kNamedDifferences = 4;

struct History {
  std::mutex mu;  // guards everything below
  std::deque<GraphKeyInfo> keys;  // oldest first
  size_t nodes = 0;               // sum of keys[i].ops.size()
  std::unordered_set<std::string> sites;
  std::deque<std::string> site_order;  // oldest first, for dropping names past kKnownSites
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

constexpr std::string_view kProgramPrefix = "program ";

bool is_program(const std::string& site) { return site.rfind(kProgramPrefix, 0) == 0; }

std::string site_name(const std::string& site) {
  if (is_program(site)) return site.substr(kProgramPrefix.size());
  return site.empty() ? std::string("C++") : site;
}

// A named program's kind: "graph0.backward.fused_0" -> "backward" (its second dotted part).
std::string program_kind(const std::string& site) {
  const std::string name = site_name(site);
  const size_t a = name.find('.');
  if (a == std::string::npos) return "";
  return name.substr(a + 1, name.find('.', a + 1) - a - 1);
}

// The first post-order position where the two graphs' wirings differ: before it they match node
// for node up to shapes and attributes.
size_t aligned_prefix(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  size_t n = std::min(a.wiring.size(), b.wiring.size()), i = 0;
  while (i < n && a.wiring[i] == b.wiring[i]) ++i;
  return i;
}

// How far apart two shapes are, in [0, 1]: a context grown by one token is closer than one grown
// by sixteen.
double shape_gap(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return 1;
  double g = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    g += std::abs(std::log((static_cast<double>(a[i]) + 1) / (static_cast<double>(b[i]) + 1)));
  }
  return std::min(1.0, g);
}

// Smaller is closer: differences in environment, structure, inputs and outputs, weighted so that
// the explanation names the smallest change.
double distance(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  double d = 0;
  if (a.env != b.env) d += 1000;
  d += 10.0 * std::abs(static_cast<double>(a.roots.size()) - static_cast<double>(b.roots.size()));
  d += 10.0 * std::abs(static_cast<double>(a.params.size()) - static_cast<double>(b.params.size()));
  const size_t p = aligned_prefix(a, b);
  d += static_cast<double>(a.ops.size() - p) + static_cast<double>(b.ops.size() - p);
  for (size_t i = 0; i < p; ++i) {
    if (a.ops[i] != ir::OpKind::DeviceData && a.node_hashes[i] != b.node_hashes[i]) d += 0.5;
  }
  for (size_t i = 0; i < std::min(a.params.size(), b.params.size()); ++i) {
    if (a.params[i].dtype != b.params[i].dtype) d += 1;
    if (a.params[i].shape != b.params[i].shape) d += 1 + shape_gap(a.params[i].shape, b.params[i].shape);
  }
  return d;
}

// The new roots that have no counterpart among the old ones: matched first by value (dag hash),
// then, for values whose inputs changed shape, by creation site and dtype, so a loop whose every
// value changed shape names the tensor that is new, not the first one.
std::vector<const GraphKeyInfo::Tensor_*> unmatched_roots(const GraphKeyInfo& now,
                                                          const GraphKeyInfo& before) {
  std::vector<bool> used(before.roots.size(), false);
  std::vector<const GraphKeyInfo::Tensor_*> left;
  for (const auto& r : now.roots) {
    bool found = false;
    for (size_t j = 0; j < before.roots.size() && !found; ++j) {
      if (!used[j] && before.roots[j].hash == r.hash) used[j] = found = true;
    }
    if (!found) left.push_back(&r);
  }
  std::vector<const GraphKeyInfo::Tensor_*> out;
  for (const auto* r : left) {
    bool found = false;
    for (size_t j = 0; j < before.roots.size() && !found && !r->created_at.empty(); ++j) {
      const auto& b = before.roots[j];
      if (!used[j] && b.created_at == r->created_at && b.dtype == r->dtype) used[j] = found = true;
    }
    if (!found) out.push_back(r);
  }
  return out;
}

// Node i in the user's terms: its op, and the op the user called when it differs
// ("addmm (aten.addmm.default)", "gather (cross_entropy)"), then its type.
std::string node_text(const GraphKeyInfo& k, size_t i, bool with_type = true) {
  std::string s(ir::op_name(k.ops[i]));
  const char* user = i < k.user_ops.size() ? k.user_ops[i] : nullptr;
  if (user && s != user) s += std::string(" (") + user + ")";
  if (with_type) s += " " + k.types[i];
  return s;
}

// Where two graphs' structures part. When the new graph is the old one with a run of k nodes
// inserted (the rest matching by op, dtype and rank), the run is named; where the k nodes just
// before a possible run are of the same sorts, it is one more link of a chain that grows every
// call, recomputed whole by every program, and the newest such link is named.
std::string structure_change(const GraphKeyInfo& now, const GraphKeyInfo& before, size_t p) {
  const size_t na = now.ops.size(), nb = before.ops.size();
  std::ostringstream o;
  o << "the graph's structure changed (" << nb << " -> " << na << " nodes): ";
  size_t suffix = 0;
  const size_t common = std::min(na, nb);
  while (suffix < common && now.sorts[na - 1 - suffix] == before.sorts[nb - 1 - suffix]) ++suffix;
  // Wirings ignore dtypes: two parameters of one slot match even where one is an int64 index and
  // the other float32 weights, so the run may start before p.
  size_t head = 0;
  while (head < p && now.sorts[head] == before.sorts[head]) ++head;
  if (na > nb && nb - suffix <= head) {
    // The run may start anywhere in [nb - suffix, head]: before it the graphs match node for
    // node, after it by sort.
    const size_t k = na - nb;
    size_t at = head;
    bool chain = false;
    for (size_t q = nb - suffix; q <= head; ++q) {
      bool repeats = q >= k;
      for (size_t i = 0; repeats && i < k; ++i) repeats = now.sorts[q - k + i] == now.sorts[q + i];
      if (repeats) at = q, chain = true;
    }
    // A new tensor kept alive at the barrier (debug = w * 10 beside loss = w * 3) repeats the
    // nodes before it too, but it is a new output, named as such, not a link nothing stores.
    if (now.roots.size() > before.roots.size()) chain = false;
    o << k << " node(s) inserted at node " << at << " (";
    for (size_t i = 0; i < k && i < 3; ++i) {
      o << (i ? ", " : "") << node_text(now, at + i);
    }
    o << (k > 3 ? ", ...)" : ")");
    if (chain) {
      o << ", one more link of a chain this graph recomputes from its start: a tensor grown in a "
           "loop (x = cat([x, y]), x = x + y) that nothing stores; lz.sync() or "
           "lz.sync_tensors([x]) each iteration makes it an input";
    }
    return o.str();
  }
  o << "from node " << p;
  if (p < na && p < nb) {
    o << " it has " << node_text(now, p) << " where it had " << node_text(before, p);
  } else if (p < na) {
    o << " it has " << (na - p) << " more node(s), the first " << node_text(now, p);
  } else {
    o << " it lacks the earlier graph's last " << (nb - p) << " node(s)";
  }
  return o.str();
}

// The same values computed from inputs passed differently (f(a, a) after f(a, b)): leaves hash
// their type, not their buffer, so the roots' value hashes agree.
bool same_values(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  if (a.roots.empty() || a.roots.size() != b.roots.size()) return false;
  for (size_t i = 0; i < a.roots.size(); ++i) {
    if (a.roots[i].hash != b.roots[i].hash) return false;
  }
  return true;
}

// Whether the nodes other than inputs are the same ops, dtypes and ranks in the same order.
bool same_interior(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  std::vector<uint64_t> x, y;
  for (size_t i = 0; i < a.ops.size(); ++i) {
    if (a.ops[i] != ir::OpKind::DeviceData) x.push_back(a.sorts[i]);
  }
  for (size_t i = 0; i < b.ops.size(); ++i) {
    if (b.ops[i] != ir::OpKind::DeviceData) y.push_back(b.sorts[i]);
  }
  return x == y;
}

// Every ingredient of the key that differs, the most telling first.
std::vector<Explanation> differences(const GraphKeyInfo& now, const GraphKeyInfo& before) {
  std::vector<Explanation> out;
  auto add = [&out](const char* cause, std::string text) { out.push_back({cause, std::move(text)}); };
  if (now.env != before.env) {
    add("environment", "the compile environment changed (backend, a code-generating setting, or a "
                       "new build of the library)");
  }
  // Equal dag hashes with another parameter sequence: the same values, aliased differently.
  const bool aliasing = same_values(now, before) && now.param_sequence != before.param_sequence;
  if (aliasing) {
    std::string names;
    for (size_t i = 0; i < now.params.size() && i < 3; ++i) names += (i ? ", " : "") + tensor_name(now.params[i]);
    if (now.params.size() > 3) names += " and " + std::to_string(now.params.size() - 3) + " more";
    add("aliasing", "the same buffer is now passed where distinct ones were before (or the reverse), "
                    "e.g. f(a, a) after f(a, b): inputs alias differently (" +
                        std::to_string(before.params.size()) + " distinct input buffer(s) before, " +
                        std::to_string(now.params.size()) + " now: " + names + ")");
  }
  if (now.params.size() == before.params.size()) {
    for (size_t i = 0; i < now.params.size(); ++i) {
      const auto& a = before.params[i];
      const auto& b = now.params[i];
      if (a.dtype == b.dtype && a.shape == b.shape) continue;
      add(a.dtype != b.dtype ? "input-dtype" : "input-shape",
          "input " + std::to_string(i) + ", " + tensor_name(b) + ", changed from " +
              type_str(a.dtype, a.shape) + " to " + type_str(b.dtype, b.shape));
    }
  }
  if (now.roots.size() != before.roots.size()) {
    std::ostringstream o;
    const char* where =
        now.value_read ? "computed by this read" : "alive with pending work at the barrier";
    if (now.roots.size() > before.roots.size()) {
      std::vector<std::string> extra;
      for (const auto* r : unmatched_roots(now, before)) {
        extra.push_back(tensor_name(*r) + " " + type_str(r->dtype, r->shape));
      }
      o << (now.roots.size() - before.roots.size()) << " more tensor(s) " << where
        << " than at the earlier compile, so they became outputs";
      if (!extra.empty()) {
        o << ": " << extra[0];
        if (extra.size() > 1) o << " and " << (extra.size() - 1) << " more";
      }
      if (now.value_read) {
        o << " (a read stores the tensors you hold that it computes; drop those you do not "
             "need)";
      } else {
        o << "; drop references you do not need before sync(), or read them in a step closure";
      }
      add("new-live-tensor", o.str());
    } else {
      o << (before.roots.size() - now.roots.size()) << " fewer tensor(s) " << where
        << " than at the earlier compile";
      add("fewer-live-tensors", o.str());
    }
  }
  if (now.donations != before.donations) {
    add("donation", "the set of donated buffers changed (" + std::to_string(before.donations.size()) +
                        " -> " + std::to_string(now.donations.size()) +
                        "): a tensor that still holds an old buffer blocks its donation");
  }
  // Nodes matched up to shapes: their changed attributes and constants. Inputs (DeviceData) were
  // named above.
  const size_t p = aligned_prefix(now, before);
  bool attribute_hinted = false;
  for (size_t i = 0; i < p; ++i) {
    if (now.ops[i] == ir::OpKind::DeviceData || now.node_hashes[i] == before.node_hashes[i]) continue;
    std::ostringstream o;
    if (now.ops[i] == ir::OpKind::Constant && now.constants[i] != before.constants[i]) {
      o << "a baked constant changed from " << before.constants[i] << " to " << now.constants[i]
        << " (only 0, 1 and lz.constant values are baked; other numbers are parameters)";
      add("baked-constant", o.str());
      continue;
    }
    o << "an attribute of node " << i << " (" << node_text(now, i, false) << ") changed";
    if (now.types[i] != before.types[i]) {
      o << ": it now gives " << now.types[i] << " where it gave " << before.types[i];
    }
    if (!attribute_hinted) o << " (a target shape, dim, slice bound or dtype written in the code)";
    attribute_hinted = true;
    add("attribute", o.str());
  }
  const size_t na = now.ops.size(), nb = before.ops.size();
  // Inputs passed differently change the input nodes, not the ops: aliasing said it all.
  if ((p < na || p < nb) && !(aliasing && same_interior(now, before))) {
    add("structure", structure_change(now, before, p));
  }
  if (out.empty()) add("structure", "the graph's structure changed");
  return out;
}

std::string join(const std::vector<Explanation>& diffs) {
  std::string s;
  for (size_t i = 0; i < diffs.size() && i < kNamedDifferences; ++i) {
    if (i) s += "; ";
    s += diffs[i].text;
  }
  if (diffs.size() > kNamedDifferences) {
    s += "; and " + std::to_string(diffs.size() - kNamedDifferences) + " more difference(s)";
  }
  return s;
}

// Worth naming as the closest graph of another call site: same environment, and matching node for
// node, past the leaves, over at least half of the larger graph.
bool similar(const GraphKeyInfo& a, const GraphKeyInfo& b) {
  if (a.env == b.env && same_values(a, b)) return true;
  const size_t p = aligned_prefix(a, b);
  bool interior = false;
  for (size_t i = 0; i < p && !interior; ++i) interior = a.ops[i] != ir::OpKind::DeviceData && a.ops[i] != ir::OpKind::Constant;
  return a.env == b.env && interior && 2 * p >= std::max(a.ops.size(), b.ops.size());
}

void remember(History& h, GraphKeyInfo info) {
  if (h.sites.insert(info.call_site).second) {
    h.site_order.push_back(info.call_site);
    if (h.site_order.size() > kKnownSites) {
      h.sites.erase(h.site_order.front());
      h.site_order.pop_front();
    }
  }
  size_t same_site = 0;
  for (const auto& k : h.keys) same_site += k.call_site == info.call_site;
  if (same_site >= kHistoryPerSite) {
    for (auto it = h.keys.begin(); it != h.keys.end(); ++it) {
      if (it->call_site != info.call_site) continue;
      h.nodes -= it->ops.size();
      h.keys.erase(it);
      break;
    }
  }
  h.nodes += info.ops.size();
  h.keys.push_back(std::move(info));
  while (h.keys.size() > 1 && (h.keys.size() > kHistoryKeys || h.nodes > kHistoryNodes)) {
    h.nodes -= h.keys.front().ops.size();
    h.keys.pop_front();
  }
}

}  // namespace

namespace {

// Hashes the fields of a node's attributes that are not sizes (GraphKeyInfo::fixed_attrs).
struct FixedFields {
  Hasher& h;
  bool count = false;  // a count constant: its value follows the sizes
  static bool is_size(const char* name) {
    static const std::unordered_set<std::string_view> sizes{"n", "shape", "sizes", "start", "end"};
    return sizes.count(name) > 0;
  }
  void operator()(const char* name, const std::vector<int64_t>& v) {
    if (is_size(name)) return;
    h.add<uint64_t>(v.size());
    for (int64_t x : v) h.add(x);
  }
  template <class T>
  void operator()(const char* name, const T& v) {
    if (is_size(name) || (count && std::string_view(name) == "value")) return;
    h.add(v);
  }
};

uint64_t fixed_attrs_hash(const ir::Node& n) {
  Hasher h;
  h.add(static_cast<uint8_t>(n.attrs.index()));
  FixedFields f{h};
  if (n.op == ir::OpKind::Constant) f.count = n.attr<ir::ConstantAttrs>().from_sizes;
  std::visit([&](const auto& a) { a.visit(f); }, n.attrs);
  return h.digest().lo;
}

}  // namespace

GraphKeyInfo describe_graph_key(const std::string& call_site, const Hash128& graph,
                                const Roots& roots, const PostOrder& po,
                                const std::vector<std::pair<int, int>>& donations,
                                bool value_read) {
  GraphKeyInfo k;
  k.call_site = call_site;
  k.value_read = value_read;
  k.env = active_backend().compile_env_hash();
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
  std::unordered_map<const ir::Node*, uint32_t> position;
  position.reserve(po.nodes.size());
  for (const ir::Node* n : po.nodes) {
    Hasher w;
    w.add(n->op);
    for (const ir::Value& v : n->operands) w.add(position.at(v.node.get())).add(v.index);
    if (n->op == ir::OpKind::DeviceData) w.add(po.param_slot.at(n));
    k.wiring.push_back(w.digest().lo);
    position.emplace(n, static_cast<uint32_t>(k.ops.size()));
    k.ops.push_back(n->op);
    k.node_hashes.push_back(n->node_hash);
    k.constants.push_back(n->op == ir::OpKind::Constant ? n->attr<ir::ConstantAttrs>().value
                                                        : std::numeric_limits<double>::quiet_NaN());
    k.types.push_back(type_str(n->dtype, n->shape));
    k.user_ops.push_back(n->user_op);
    k.sorts.push_back(Hasher().add(n->op).add(n->dtype).add<uint64_t>(n->shape.size()).digest().lo);
    // What a node's size attributes may follow: a slice's bounds the extents along its dim (its
    // own and its operands'), another node's its own and its operands' shapes.
    Hasher t;
    if (n->op == ir::OpKind::Slice || n->op == ir::OpKind::SliceScatter) {
      const int64_t dim = n->attr<ir::SliceAttrs>().dim;
      t.add(n->shape[dim]);
      for (const ir::Value& v : n->operands) t.add(v.shape()[dim]);
    } else {
      t.add<uint64_t>(n->shape.size());
      for (int64_t d : n->shape) t.add(d);
      for (const ir::Value& v : n->operands) {
        t.add<uint64_t>(v.shape().size());
        for (int64_t d : v.shape()) t.add(d);
      }
    }
    k.size_anchors.push_back(t.digest().lo);
    k.fixed_attrs.push_back(fixed_attrs_hash(*n));
  }
  for (const ir::Value& v : roots.values) {
    k.root_wiring.push_back(Hasher().add(position.at(v.node.get())).add(v.index).digest().lo);
  }
  return k;
}

std::string size_only_difference(const GraphKeyInfo& now, const GraphKeyInfo& before) {
  if (now.env != before.env) return "the compile environment changed";
  if (now.wiring != before.wiring || now.sorts != before.sorts) {
    return "the graph's structure differs (" + std::to_string(before.ops.size()) + " -> " +
           std::to_string(now.ops.size()) + " nodes, or other ops, dtypes or ranks)";
  }
  if (now.param_sequence != before.param_sequence || now.params.size() != before.params.size()) {
    return "the inputs alias differently";
  }
  for (size_t i = 0; i < now.params.size(); ++i) {
    if (now.params[i].dtype != before.params[i].dtype)
      return "input " + std::to_string(i) + " changed dtype";
  }
  if (now.donations != before.donations) return "the set of donated buffers differs";
  if (now.root_wiring != before.root_wiring) return "the outputs are other values";
  for (size_t i = 0; i < now.ops.size(); ++i) {
    if (now.ops[i] == ir::OpKind::DeviceData || now.node_hashes[i] == before.node_hashes[i])
      continue;
    const bool sizes_same = now.size_anchors[i] == before.size_anchors[i];
    // A count constant's value follows the sizes (a mean over a dim that changed).
    const bool count = now.ops[i] == ir::OpKind::Constant;
    if (now.fixed_attrs[i] != before.fixed_attrs[i] || (sizes_same && !count)) {
      return "an attribute of node " + std::to_string(i) + " (" + node_text(now, i) + ") changed" +
             (sizes_same && !count ? " although neither its sizes nor its operands' did" : "");
    }
  }
  return "";
}

std::string program_key(const std::string& name) { return std::string(kProgramPrefix) + name; }

Explanation explain_and_remember(GraphKeyInfo info) {
  History& h = history();
  Explanation e;
  {
    std::lock_guard<std::mutex> l(h.mu);
    const bool known_site = h.sites.count(info.call_site) > 0;
    bool site_has_keys = false;
    for (const auto& k : h.keys) site_has_keys = site_has_keys || k.call_site == info.call_site;
    // The same call site's keys when there are any, else every key; newest first, so that of two
    // equally close keys the later one is named.
    const GraphKeyInfo* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (auto it = h.keys.rbegin(); it != h.keys.rend(); ++it) {
      if (site_has_keys && it->call_site != info.call_site) continue;
      double d = distance(info, *it);
      if (d < best_d) {
        best_d = d;
        best = &*it;
      }
    }
    const std::string first = is_program(info.call_site)
                                  ? "first compile of " + site_name(info.call_site)
                                  : "first compile at this call site (" + site_name(info.call_site) + ")";
    // A named program is compared only with programs of its kind: a backward is not a changed
    // forward.
    const bool comparable = !best || !is_program(info.call_site) ||
                            program_kind(info.call_site) == program_kind(best->call_site);
    if (site_has_keys) {
      std::vector<Explanation> diffs = differences(info, *best);
      e = {diffs[0].cause, join(diffs)};
    } else if (!known_site) {
      e = {"new-call-site", first};
      if (best && comparable && similar(info, *best)) {
        e.text += "; the closest earlier graph, compiled at " + site_name(best->call_site) +
                  ", differs in: " + join(differences(info, *best));
      }
    } else if (best && comparable) {  // compiled here before, but its keys were dropped
      std::vector<Explanation> diffs = differences(info, *best);
      e = {diffs[0].cause, "the closest earlier graph, compiled at " + site_name(best->call_site) +
                               ", differs in: " + join(diffs)};
    } else {
      e = {"new-call-site", first};
    }
    remember(h, std::move(info));
  }
  get_counter("RecompileReason::" + e.cause)->add(1);
  return e;
}

void clear_recompile_history() {
  History& h = history();
  std::lock_guard<std::mutex> l(h.mu);
  h.keys.clear();
  h.nodes = 0;
  h.sites.clear();
  h.site_order.clear();
}

size_t recompile_history_size() {
  History& h = history();
  std::lock_guard<std::mutex> l(h.mu);
  return h.keys.size();
}

}  // namespace lz
