// The leaf registry: from a node that starts gradients (a requires-grad tensor's DeviceData leaf
// or GradLeaf) to its tensor, so backward knows whose .grad to accumulate into.
//
// Entries hold weak references to both. A raw node address can be reused after the node dies,
// so a lookup checks that the registered node is still alive and is the node asked about.
// Locking: one mutex guards the map; it is never held while taking a tensor's lock.
#pragma once
#include <memory>

#include "ir/node.h"

namespace lz::internal {
class TensorImpl;
}

namespace lz::autograd {

void register_leaf(const ir::NodePtr& node, std::weak_ptr<internal::TensorImpl> tensor);
// The live tensor whose leaf `node` is, or null (tensor gone, or not a registered leaf).
std::shared_ptr<internal::TensorImpl> leaf_tensor(const ir::Node* node);

}  // namespace lz::autograd
