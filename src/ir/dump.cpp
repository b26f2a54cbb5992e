#include "ir/dump.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace lz::ir {
namespace {

// Iterative post-order (graphs are deep).
std::vector<const Node*> order(const std::vector<Value>& roots) {
  std::vector<const Node*> out;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const Value& r : roots) {
    if (!seen.insert(r.node.get()).second) continue;
    stack.push_back({r.node.get(), 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->operands.size()) {
        const Node* c = n->operands[i++].node.get();
        if (seen.insert(c).second) stack.push_back({c, 0});
        continue;
      }
      out.push_back(n);
      stack.pop_back();
    }
  }
  return out;
}

// "float32[2, 3]", or "(float32[4], int64[4])" for a multi-output node.
std::string types_str(const Node& n) {
  auto one = [&](int i) {
    return std::string(dtype_name(n.output_dtype(i))) + shape_str(n.output_shape(i));
  };
  if (n.num_outputs() == 1) return one(0);
  std::string s = "(";
  for (int i = 0; i < n.num_outputs(); ++i) s += (i ? ", " : "") + one(i);
  return s + ")";
}

}  // namespace

std::string dump_text(const std::vector<Value>& roots) {
  std::vector<const Node*> nodes = order(roots);
  std::unordered_map<const Node*, size_t> id;
  std::unordered_map<const Node*, std::vector<size_t>> root_of;
  for (size_t i = 0; i < roots.size(); ++i) root_of[roots[i].node.get()].push_back(i);
  std::ostringstream o;
  o << "graph (" << nodes.size() << " nodes, " << roots.size() << " roots)\n";
  for (const Node* n : nodes) {
    size_t k = id.size();
    id[n] = k;
    o << "  %" << k << " = " << op_name(n->op) << "(";
    for (size_t i = 0; i < n->operands.size(); ++i) {
      const Value& v = n->operands[i];
      o << (i ? ", " : "") << "%" << id[v.node.get()];
      if (v.node->num_outputs() > 1) o << "." << v.index;
    }
    std::string a = attrs_str(n->attrs);
    if (!a.empty()) o << (n->operands.empty() ? "" : ", ") << a;
    o << ") : " << types_str(*n);
    if (auto it = root_of.find(n); it != root_of.end()) {
      o << "  # root";
      for (size_t r : it->second) o << " " << r;
    }
    o << "\n";
  }
  return o.str();
}

std::string dump_dot(const std::vector<Value>& roots) {
  std::vector<const Node*> nodes = order(roots);
  std::unordered_map<const Node*, size_t> id;
  std::unordered_set<const Node*> is_root;
  for (const Value& r : roots) is_root.insert(r.node.get());
  std::ostringstream o;
  o << "digraph G {\n";
  for (const Node* n : nodes) {
    size_t k = id.size();
    id[n] = k;
    o << "  node" << k << " [label=\"" << op_name(n->op);
    std::string a = attrs_str(n->attrs);
    if (!a.empty()) o << "\\n" << a;
    o << "\\n" << types_str(*n) << "\"";
    if (is_root.count(n)) o << ", style=filled, fillcolor=lightblue";
    o << "];\n";
    for (size_t i = 0; i < n->operands.size(); ++i) {
      const Value& v = n->operands[i];
      o << "  node" << id[v.node.get()] << " -> node" << k << " [label=\"" << i;
      if (v.node->num_outputs() > 1) o << " (out " << v.index << ")";
      o << "\"];\n";
    }
  }
  o << "}\n";
  return o.str();
}

}  // namespace lz::ir
