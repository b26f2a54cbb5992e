// The device: its live-tensor registry, the RNG state, and per-device bookkeeping.
// There is one device ("cpu:0") today; the type leaves room for more.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/lazy_tensor.h"

namespace lz::internal {

// Every tensor from creation to destruction, ordered by id (DESIGN.md section 2). An intrusive
// list: ids are handed out under the same mutex as the append, so list order is id order, and
// insert/erase allocate nothing. A tensor is added only once its state is complete
// (TensorImpl::create), so a snapshot never hands out a half-built tensor.
// Locking: `mu_` is a leaf lock (nothing else is locked while holding it; snapshot() takes no
// tensor lock); a tensor's lock may be held while taking it.
class LiveTensorRegistry {
 public:
  // Assigns the next id and appends.
  void add(TensorImpl* t, int64_t* id_out);
  void remove(TensorImpl* t);
  // Strong references to the tensors alive now, in id order.
  std::vector<TensorImplPtr> snapshot() const;
  int64_t size() const;

 private:
  mutable std::mutex mu_;  // guards the list links, next_id_ and count_
  TensorImpl* head_ = nullptr;
  TensorImpl* tail_ = nullptr;
  int64_t next_id_ = 1;
  int64_t count_ = 0;
};

class Device {
 public:
  LiveTensorRegistry registry;

  // The RNG key as a device tensor (int64 []): random ops read it in-graph and replace it with
  // an advanced key, so seeding and new steps never change a graph hash.
  ir::Value rng_key_and_advance();
  void manual_seed(int64_t seed);

  // Count of ir nodes created at the last barrier (for the graph-too-large cut).
  std::atomic<int64_t> nodes_at_last_cut{0};

 private:
  // Guards rng_state_ (the pointer). Held while locking rng_state_'s own tensor lock; never
  // taken by a sync.
  std::mutex rng_mu_;
  TensorImplPtr rng_state_;
};

Device& default_device();

}  // namespace lz::internal
