#include "tensor/device.h"

#include <cstring>

#include "backend/backend.h"
#include "ir/node.h"

namespace lz::internal {

void LiveTensorRegistry::add(TensorImpl* t, int64_t* id_out) {
  std::lock_guard<std::mutex> l(mu_);
  *id_out = next_id_++;
  t->reg_prev = tail_;
  t->reg_next = nullptr;
  if (tail_) tail_->reg_next = t;
  else head_ = t;
  tail_ = t;
  ++count_;
}

void LiveTensorRegistry::remove(TensorImpl* t) {
  std::lock_guard<std::mutex> l(mu_);
  if (t->reg_prev) t->reg_prev->reg_next = t->reg_next;
  else head_ = t->reg_next;
  if (t->reg_next) t->reg_next->reg_prev = t->reg_prev;
  else tail_ = t->reg_prev;
  --count_;
}

std::vector<TensorImplPtr> LiveTensorRegistry::snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<TensorImplPtr> out;
  out.reserve(static_cast<size_t>(count_));
  for (TensorImpl* t = head_; t; t = t->reg_next) {
    // A tensor whose destructor is waiting for our mutex has expired: lock() gives null.
    if (auto sp = t->weak_from_this().lock()) out.push_back(std::move(sp));
  }
  return out;
}

int64_t LiveTensorRegistry::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return count_;
}

namespace {
BufferPtr seed_buffer(int64_t seed) {
  return std::make_shared<DeviceBuffer>(DType::Int64, Shape{}, active_backend().upload(&seed, sizeof(seed)));
}
}  // namespace

ir::Value Device::rng_key_and_advance() {
  std::lock_guard<std::mutex> l(rng_mu_);
  if (!rng_state_) rng_state_ = TensorImpl::from_buffer(seed_buffer(0));
  ir::Value key = rng_state_->value();
  rng_state_->set_value({ir::make_node(ir::OpKind::RngAdvance, {key}), 0});
  return key;
}

void Device::manual_seed(int64_t seed) {
  std::lock_guard<std::mutex> l(rng_mu_);
  // New contents of the same dtype and shape: the graph hash does not change. The tensor object
  // stays, so a captured step (exec/capture.cpp) that reads and advances the key keeps replaying.
  if (rng_state_) {
    rng_state_->replay_assign(seed_buffer(seed));
  } else {
    rng_state_ = TensorImpl::from_buffer(seed_buffer(seed));
  }
}

Device& default_device() {
  static Device* d = new Device();  // never destroyed: tensors may outlive static destructors
  return *d;
}

}  // namespace lz::internal
