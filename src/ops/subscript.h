// x[key] and x[key] = value (<lazuli/indexing.h>), with what a front end chooses: the name its
// messages carry and how a mask is read. Tensor::index / index_put_ call these with the C++
// API's choices; the Python bindings (python/src/indexing_bindings.cpp) with Python's.
#pragma once
#include <functional>
#include <vector>

#include "lazuli/indexing.h"

namespace lz::indexing {

struct KeyContext {
  // Names the op in front of every message of the key's own checks: "index(float32[3, 4]): too
  // many indices for tensor of dimension 2". Null: the bare texts (PyTorch's words), as the Python
  // front end shows them. The user op (ir/origin.h) naming run-time index errors is the caller's.
  const char* op = nullptr;
  // The flat positions (int64, 1-D) of a bool mask's true elements: a value read with reason
  // data-dependent-shape. Null: true_positions (blocking); Python waits interruptibly.
  std::function<Tensor(const Tensor& mask)> read_positions;
};

// self[key]: a view for a key of ints, slices, None and ... only, else a copy.
Tensor get(const Tensor& self, const std::vector<TensorIndex>& key, const KeyContext& ctx);
// self[key] = value (or += with accumulate) in place. `value` is a tensor of any dtype (cast to
// self's). Every check runs before self changes.
void put(const Tensor& self, const std::vector<TensorIndex>& key, const Tensor& value,
         bool accumulate, const KeyContext& ctx);
// The flat positions of mask's true elements, read now (waits for the program computing it).
Tensor true_positions(const Tensor& mask);

}  // namespace lz::indexing
