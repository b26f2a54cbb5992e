#include "tensor/lazy_tensor.h"

#include "core/grad_mode.h"
#include "tensor/leaf_registry.h"
#include "core/call_site.h"
#include "core/metrics.h"
#include "lazuli/error.h"
#include "tensor/device.h"

namespace lz::internal {

const char* tensor_state_name(TensorState s) {
  switch (s) {
    case TensorState::DeviceData: return "device_data";
    case TensorState::IR: return "ir";
    case TensorState::Host: return "host";
    case TensorState::View: return "view";
  }
  return "?";
}

template <typename Init>
std::shared_ptr<TensorImpl> TensorImpl::create(DType dtype, Shape shape, Init init) {
  auto t = std::make_shared<TensorImpl>(Key{}, dtype, std::move(shape));
  t->device_ = &default_device();
  if (record_creation_sites()) t->created_at_ = user_call_site();
  // The state is complete before the registry publishes the tensor: a sync in another thread
  // finds it there (registry lock, then the tensor's), never half-built.
  init(*t);
  t->device_->registry.add(t.get(), &t->id_);
  return t;
}

TensorImpl::~TensorImpl() {
  if (device_) device_->registry.remove(this);
}

std::shared_ptr<TensorImpl> TensorImpl::from_value(ir::Value v) {
  return create(v.dtype(), v.shape(), [&](TensorImpl& t) {
    t.state_ = TensorState::IR;
    t.ir_ = std::move(v);
  });
}

std::shared_ptr<TensorImpl> TensorImpl::from_buffer(BufferPtr b) {
  auto t = create(b->dtype(), b->shape(), [&](TensorImpl& t) {
    t.state_ = TensorState::DeviceData;
    if (t.created_at_) b->created_at = t.created_at_;
    t.buffer_ = b;
  });
  // The id exists only now. Readers of owner_tensor_id reach the buffer through this tensor's
  // lock (its DeviceData node) or hold the executor lock, as the callers that pass buffers do.
  std::lock_guard<std::mutex> l(t->mu_);
  b->owner_tensor_id = t->id_;
  return t;
}

std::shared_ptr<TensorImpl> TensorImpl::from_host(DType dtype, Shape shape,
                                                  std::shared_ptr<Storage> s) {
  return create(dtype, std::move(shape), [&](TensorImpl& t) {
    t.state_ = TensorState::Host;
    t.host_ = std::move(s);
  });
}

std::shared_ptr<TensorImpl> TensorImpl::make_view(const std::shared_ptr<TensorImpl>& of, ViewOp op,
                                                  DType dtype, Shape out_shape) {
  std::shared_ptr<TensorImpl> base;
  std::vector<ViewOp> ops;
  {
    std::lock_guard<std::mutex> l(of->mu_);
    if (of->state_ == TensorState::View) {  // flatten: a view's base is never a view
      base = of->view_base_;
      ops = of->view_ops_;
    } else {
      base = of;
    }
  }
  Strides strides = strides_after(op.op, op.attrs, of->shape_, of->strides(), out_shape);
  ops.push_back(std::move(op));
  return create(dtype, std::move(out_shape), [&](TensorImpl& t) {
    t.state_ = TensorState::View;
    t.view_base_ = std::move(base);
    t.view_ops_ = std::move(ops);
    t.view_strides_ = std::move(strides);
  });
}

TensorState TensorImpl::state() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

ir::Value TensorImpl::value() {
  std::lock_guard<std::mutex> l(mu_);
  return value_locked();
}

ir::Value TensorImpl::value_locked() {
  switch (state_) {
    case TensorState::IR:
      if (requires_grad_ && autograd::grad_enabled()) {
        // A leaf updated in place (under no_grad) and not synced yet: an identity node carries the
        // flag, so ir_ itself (shared with the update's graph) stays a plain value.
        if (!grad_leaf_node_) {
          ir::NodePtr n = ir::make_node(ir::OpKind::GradLeaf, {ir_});
          const_cast<ir::Node&>(*n).requires_grad = true;  // not yet shared
          autograd::register_leaf(n, weak_from_this());
          grad_leaf_node_ = std::move(n);
        }
        return ir::Value{grad_leaf_node_, 0};
      }
      return ir_;
    case TensorState::DeviceData:
      if (tape_ && autograd::grad_enabled()) return tape_;  // recomputed so gradients flow
      if (!data_node_) {
        data_node_ = ir::make_device_data(buffer_, requires_grad_);
        if (requires_grad_) autograd::register_leaf(data_node_, weak_from_this());
      }
      return ir::Value{data_node_, 0};
    case TensorState::Host: {
      // The host copy made at creation becomes the device memory: on the CPU device the upload
      // is a hand-over, but it is still the tensor's one transfer and is counted as such.
      LZ_COUNTER("TransferToDevice", 1);
      buffer_ = std::make_shared<DeviceBuffer>(dtype_, shape_, std::move(host_));
      buffer_->owner_tensor_id = id_;
      buffer_->created_at = created_at_;
      host_.reset();
      state_ = TensorState::DeviceData;
      data_node_ = ir::make_device_data(buffer_, requires_grad_);
      if (requires_grad_) autograd::register_leaf(data_node_, weak_from_this());
      return ir::Value{data_node_, 0};
    }
    case TensorState::View: return view_value_locked();
  }
  return {};
}

ir::Value TensorImpl::view_value_locked() {
  ir::Value v = view_base_->value();
  // A cache built in the other grad mode has the wrong requires_grad flags.
  bool want_grad = v.requires_grad() && autograd::grad_enabled();
  for (const ViewOp& op : view_ops_) want_grad &= op.op != ir::OpKind::StopGradient;
  if (view_cache_ && view_cache_base_ == v.node && view_cache_.requires_grad() == want_grad) {
    return view_cache_;
  }
  view_cache_base_ = v.node;
  for (const ViewOp& op : view_ops_) v = ir::Value{ir::make_node(op.op, {v}, op.attrs), 0};
  view_cache_ = v;
  return v;
}

namespace {

// The base value after writing `update` into the view op's output, given the op's input `in`.
ir::Value inverse_view(const ViewOp& op, const ir::Value& in, const ir::Value& update) {
  switch (op.op) {
    case ir::OpKind::Slice: return {ir::make_node(ir::OpKind::SliceScatter, {in, update}, op.attrs), 0};
    case ir::OpKind::Permute: {
      const std::vector<int64_t>& perm = std::get<ir::PermuteAttrs>(op.attrs).perm;
      ir::PermuteAttrs inv{std::vector<int64_t>(perm.size())};
      for (size_t i = 0; i < perm.size(); ++i) inv.perm[perm[i]] = static_cast<int64_t>(i);
      return {ir::make_node(ir::OpKind::Permute, {update}, inv), 0};
    }
    case ir::OpKind::Reshape:
      return {ir::make_node(ir::OpKind::Reshape, {update}, ir::ShapeAttrs{op.in_shape}), 0};
    case ir::OpKind::StopGradient: return update;  // detach(): writes go to the same value
    case ir::OpKind::Expand:
      throw ValueError("in-place update of an expanded view is not supported: it would write one "
                       "element several times (call .contiguous() first, or update the base)");
    default: break;
  }
  throw Error("internal: not a view op: " + std::string(ir::op_name(op.op)));
}

}  // namespace

void TensorImpl::set_value(ir::Value v) {
  if (autograd::grad_enabled()) {
    bool detached = false;
    for (const ViewOp& op : view_ops_) detached |= op.op == ir::OpKind::StopGradient;
    if (requires_grad_flag() || (view_base_ && !detached && view_base_->requires_grad_flag())) {
      throw Error(std::string(view_base_ ? "a view of a leaf tensor" : "a leaf tensor") +
                  " that requires grad is used in an in-place operation; update it under "
                  "no_grad (lz.no_grad() / lz::NoGradGuard), or detach() it");
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  set_value_locked(std::move(v));
}

void TensorImpl::set_value_locked(ir::Value v) {
  if (v.dtype() != dtype_ || v.shape() != shape_) {
    throw Error("internal: in-place value of shape " + shape_str(v.shape()) + " " +
                std::string(dtype_name(v.dtype())) + " for tensor of shape " + shape_str(shape_));
  }
  if (state_ != TensorState::View) {
    if (state_ == TensorState::DeviceData && buffer_) {
      restore_ = buffer_->slot();
    } else if (state_ == TensorState::Host && host_) {
      restore_ = std::make_shared<BufferSlot>();
      restore_->storage = host_;
    }
    state_ = TensorState::IR;
    ir_ = std::move(v);
    // The old buffer keeps owner_tensor_id == id_: at a barrier it may be donated to our new value.
    buffer_.reset();
    data_node_.reset();
    host_.reset();
    grad_leaf_node_.reset();
    tape_ = {};
    return;
  }
  // Write through: recompute each link's input from the base, then fold the update back.
  std::lock_guard<std::mutex> bl(view_base_->mu_);
  ir::Value base = view_base_->value_locked();
  std::vector<ir::Value> inputs{base};
  for (size_t i = 0; i + 1 < view_ops_.size(); ++i) {
    inputs.push_back({ir::make_node(view_ops_[i].op, {inputs.back()}, view_ops_[i].attrs), 0});
  }
  ir::Value upd = std::move(v);
  for (size_t i = view_ops_.size(); i-- > 0;) upd = inverse_view(view_ops_[i], inputs[i], upd);
  view_base_->set_value_locked(std::move(upd));
}

ir::Value TensorImpl::pending_ir() {
  std::unique_lock<std::mutex> l(mu_);
  return pending_ir(l);
}

ir::Value TensorImpl::pending_ir(const std::unique_lock<std::mutex>& held) {
  if (held.mutex() != &mu_ || !held.owns_lock()) {
    throw Error("internal: pending_ir without the lock");
  }
  return state_ == TensorState::IR ? ir_ : ir::Value{};
}

SlotPtr TensorImpl::assign_buffer_if_current(const ir::Value& expected, BufferPtr buffer) {
  std::unique_lock<std::mutex> l(mu_);
  return assign_buffer_if_current(expected, std::move(buffer), l);
}

SlotPtr TensorImpl::assign_buffer_if_current(const ir::Value& expected, BufferPtr buffer,
                                             const std::unique_lock<std::mutex>& held) {
  if (held.mutex() != &mu_ || !held.owns_lock()) {
    throw Error("internal: assign_buffer_if_current without the lock");
  }
  if (state_ != TensorState::IR || ir_.node != expected.node) return nullptr;  // changed meanwhile
  // Keep the IR that backward still needs (a value read of the loss before loss.backward()).
  ir::Value tape = ir_.requires_grad() && !ir_.node->grad_consumed ? ir_ : ir::Value{};
  SlotPtr before = std::move(restore_);
  hold_buffer_locked(std::move(buffer));
  tape_ = std::move(tape);
  return before;
}

void TensorImpl::hold_buffer_locked(BufferPtr b) {
  state_ = TensorState::DeviceData;
  b->owner_tensor_id = id_;
  if (created_at_) b->created_at = created_at_;
  buffer_ = std::move(b);
  data_node_.reset();
  grad_leaf_node_.reset();
  ir_ = {};
  host_.reset();
  tape_ = {};
  restore_.reset();
}

bool TensorImpl::requires_grad_flag() const {
  std::lock_guard<std::mutex> l(mu_);
  return requires_grad_;
}

void TensorImpl::set_requires_grad_flag(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  if (requires_grad_ == on) return;
  requires_grad_ = on;
  data_node_.reset();  // rebuilt with the new flag; parameters are deduplicated by buffer
  grad_leaf_node_.reset();
  view_cache_ = {};
}

std::shared_ptr<TensorImpl> TensorImpl::grad() const {
  std::lock_guard<std::mutex> l(mu_);
  return grad_;
}

void TensorImpl::set_grad(std::shared_ptr<TensorImpl> g) {
  std::lock_guard<std::mutex> l(mu_);
  grad_ = std::move(g);
}

bool TensorImpl::averages_grad() const {
  std::lock_guard<std::mutex> l(mu_);
  return grad_bucket_bytes_ >= 0;
}

int64_t TensorImpl::grad_bucket_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return grad_bucket_bytes_;
}

void TensorImpl::set_averages_grad(bool on, int64_t bucket_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  grad_bucket_bytes_ = on ? std::max<int64_t>(bucket_bytes, 0) : -1;
}

ir::Value TensorImpl::autograd_value() {
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == TensorState::DeviceData && tape_) return tape_;
  return value_locked();
}

void TensorImpl::release_tape() {
  std::lock_guard<std::mutex> l(mu_);
  tape_ = {};
}

BufferPtr TensorImpl::buffer() {
  std::lock_guard<std::mutex> l(mu_);
  return state_ == TensorState::DeviceData ? buffer_ : nullptr;
}

std::shared_ptr<Storage> TensorImpl::host_storage() {
  std::lock_guard<std::mutex> l(mu_);
  return state_ == TensorState::Host ? host_ : nullptr;
}

std::shared_ptr<TensorImpl> TensorImpl::view_base() const {
  std::lock_guard<std::mutex> l(mu_);
  return view_base_;
}

std::shared_ptr<void> TensorImpl::alias_token(std::shared_ptr<void> (*make)()) {
  if (is_view()) return view_base()->alias_token(make);
  std::lock_guard<std::mutex> l(mu_);
  if (!alias_token_) alias_token_ = make();
  return alias_token_;
}

BufferPtr TensorImpl::replay_input(bool* sole_owner) {
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == TensorState::Host) value_locked();  // the upload
  if (state_ != TensorState::DeviceData) return nullptr;
  // Holders we can account for: buffer_ and our data_node_ (when no graph shares that node).
  *sole_owner = (!data_node_ || data_node_.use_count() == 1) &&
                buffer_.use_count() == 1 + (data_node_ ? 1 : 0);
  return buffer_;
}

SlotPtr TensorImpl::replay_assign(BufferPtr b) {
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == TensorState::View) throw Error("internal: a replay output assigned to a view");
  SlotPtr before = restore_;
  if (state_ == TensorState::DeviceData && buffer_) {
    before = buffer_->slot();
  } else if (state_ == TensorState::Host && host_) {
    before = std::make_shared<BufferSlot>();
    before->storage = host_;
  }
  hold_buffer_locked(std::move(b));
  return before;
}

void TensorImpl::set_host_data(std::shared_ptr<Storage> s) {
  std::lock_guard<std::mutex> l(mu_);
  if (state_ == TensorState::View) throw ValueError("set_host_data: the tensor is a view");
  state_ = TensorState::Host;
  host_ = std::move(s);
  restore_.reset();
  buffer_.reset();
  data_node_.reset();
  grad_leaf_node_.reset();
  ir_ = {};
  tape_ = {};
}

}  // namespace lz::internal
