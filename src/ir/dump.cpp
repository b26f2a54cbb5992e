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

std::string attrs_str(const Node& n) {
  std::ostringstream o;
  bool any = false;
  auto sep = [&] { o << (any ? ", " : ""); any = true; };
  if (!n.attrs.ints.empty()) { sep(); o << "ints=" << shape_str(n.attrs.ints); }
  if (n.op == OpKind::Cast || n.op == OpKind::Constant || n.op == OpKind::Iota ||
      n.op == OpKind::RngUniform || n.op == OpKind::RngNormal) {
    sep();
    o << "dtype=" << dtype_name(n.attrs.dtype);
  }
  if (n.op == OpKind::Constant) { sep(); o << "value=" << n.attrs.scalar; }
  if (op_info(n.op).cls == OpClass::Reduction && n.attrs.flag) { sep(); o << "keepdim"; }
  return o.str();
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
    for (size_t i = 0; i < n->operands.size(); ++i) o << (i ? ", " : "") << "%" << id[n->operands[i].node.get()];
    std::string a = attrs_str(*n);
    if (!a.empty()) o << (n->operands.empty() ? "" : ", ") << a;
    o << ") : " << dtype_name(n->dtype) << shape_str(n->shape);
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
    std::string a = attrs_str(*n);
    if (!a.empty()) o << "\\n" << a;
    o << "\\n" << dtype_name(n->dtype) << shape_str(n->shape) << "\"";
    if (is_root.count(n)) o << ", style=filled, fillcolor=lightblue";
    o << "];\n";
    for (size_t i = 0; i < n->operands.size(); ++i) {
      o << "  node" << id[n->operands[i].node.get()] << " -> node" << k << " [label=\"" << i << "\"];\n";
    }
  }
  o << "}\n";
  return o.str();
}

}  // namespace lz::ir
