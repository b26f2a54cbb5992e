#include "tensor/leaf_registry.h"

#include <mutex>
#include <unordered_map>

#include "tensor/lazy_tensor.h"

namespace lz::autograd {
namespace {

struct Entry {
  std::weak_ptr<const ir::Node> node;
  std::weak_ptr<internal::TensorImpl> tensor;
};

struct Registry {
  std::mutex mu;  // guards map and sweep_at
  std::unordered_map<const ir::Node*, Entry> map;
  size_t sweep_at = 1024;
};

Registry& registry() {
  static auto* r = new Registry;  // leaked: tensors may die during static destruction
  return *r;
}

}  // namespace

void register_leaf(const ir::NodePtr& node, std::weak_ptr<internal::TensorImpl> tensor) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  r.map[node.get()] = Entry{node, std::move(tensor)};
  if (r.map.size() >= r.sweep_at) {  // amortized: drop entries whose node or tensor died
    for (auto it = r.map.begin(); it != r.map.end();) {
      if (it->second.node.expired() || it->second.tensor.expired()) it = r.map.erase(it);
      else ++it;
    }
    r.sweep_at = std::max<size_t>(1024, 2 * r.map.size());
  }
}

std::shared_ptr<internal::TensorImpl> leaf_tensor(const ir::Node* node) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.map.find(node);
  if (it == r.map.end()) return nullptr;
  std::shared_ptr<const ir::Node> alive = it->second.node.lock();
  if (!alive || alive.get() != node) {
    r.map.erase(it);
    return nullptr;
  }
  return it->second.tensor.lock();
}

}  // namespace lz::autograd
