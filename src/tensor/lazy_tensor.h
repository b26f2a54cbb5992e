// LazyTensor: the shared data behind a user's Tensor handle, in one of four states
// (DESIGN.md section 2):
//   device data  a DeviceBuffer (maybe a placeholder an in-flight execution fills)
//   ir           an IR value nobody has computed yet
//   host         a host copy of the user's data, uploaded the first time a graph uses it
//   view         a chain of view ops over a base tensor (never itself a view); in-place updates
//                write through to the base
//
// Locking (the whole order is in exec/graph_executor.h):
// - `mu_` guards the state fields of one TensorImpl. id_, device_, created_at_, dtype_, shape_,
//   and a view's view_base_, view_ops_ and view_strides_ are written before the tensor is registered and never
//   after, so they are read without it.
// - A view locks itself, then its base; nothing locks in the other order. A donating barrier
//   holds several non-view tensors' locks at once, taken in id order, under the executor mutex;
//   nobody else holds two non-view tensors' locks.
// - While holding a tensor's lock, code may take only leaf locks (the registry's, when dropping
//   the last reference to another tensor; the shape cache's, the leaf registry's, metrics'),
//   never the executor mutex.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "core/buffer.h"
#include "ir/node.h"
#include "tensor/view_layout.h"

namespace lz::internal {

enum class TensorState { DeviceData, IR, Host, View };
const char* tensor_state_name(TensorState s);

// One link of a view chain: an IR movement op applied to a value of `in_shape`.
struct ViewOp {
  ir::OpKind op;  // Slice, Permute, Reshape or Expand
  ir::Attrs attrs;
  Shape in_shape;
};

class Device;

class TensorImpl : public std::enable_shared_from_this<TensorImpl> {
 public:
  // Every constructor registers the tensor with the device's live-tensor registry via create().
  static std::shared_ptr<TensorImpl> from_value(ir::Value v);
  static std::shared_ptr<TensorImpl> from_buffer(BufferPtr b);
  static std::shared_ptr<TensorImpl> from_host(DType dtype, Shape shape, std::shared_ptr<Storage> s);
  static std::shared_ptr<TensorImpl> make_view(const std::shared_ptr<TensorImpl>& of, ViewOp op,
                                               DType dtype, Shape out_shape);
  ~TensorImpl();

  int64_t id() const { return id_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  TensorState state() const;
  // "file:line" of the user code that created it; "" unless debugging records creation sites.
  const std::shared_ptr<const std::string>& created_at() const { return created_at_; }

  // The IR value of this tensor now: wraps device data in a (cached) DeviceData leaf, uploads a
  // host tensor, or applies a view chain to the base's current value.
  ir::Value value();
  // In-place update: the tensor (or, through a view, its base) takes a new IR value.
  void set_value(ir::Value v);

  // Executor side. Pending IR of a non-view tensor, or an empty value.
  ir::Value pending_ir();
  // After scheduling: replace the IR `expected` (if still current) by device data. Returns the
  // slot of the data the tensor held before that IR (null if none, or if the IR changed): a
  // program that fails to compute `buffer` gives the tensor that value back (run_program).
  SlotPtr assign_buffer_if_current(const ir::Value& expected, BufferPtr buffer);
  // A barrier that may donate keeps each stored root locked from collect to its buffer swap
  // (exec/graph_executor.cpp), so no thread takes a new reference to the root's IR between the
  // use counts donation reads and the swap. These take that held lock as proof.
  std::unique_lock<std::mutex> lock_state() const { return std::unique_lock<std::mutex>(mu_); }
  ir::Value pending_ir(const std::unique_lock<std::mutex>& held);
  SlotPtr assign_buffer_if_current(const ir::Value& expected, BufferPtr buffer,
                                   const std::unique_lock<std::mutex>& held);
  // Fixed at creation (a view stays a view), so it is read without the lock.
  bool is_view() const { return view_base_ != nullptr; }
  // The device buffer of a tensor in the device-data state, or null.
  BufferPtr buffer();
  // The host copy of a tensor in the host state (values known without running anything), or null.
  std::shared_ptr<Storage> host_storage();

  // The base a view reads and writes through; null for a tensor that is not a view.
  std::shared_ptr<TensorImpl> view_base() const;
  // An opaque token a front end ties to this tensor's data, made by `make` on first request and
  // kept as long as this tensor; a view answers with its base's. The lazy PyTorch device keeps
  // there the storage torch sees, one per base, so a tensor and its views alias and nothing
  // else does.
  std::shared_ptr<void> alias_token(std::shared_ptr<void> (*make)());
  // The strides PyTorch would give this tensor (tensor/view_layout.h): row-major for a tensor of
  // its own; a view's follow its chain. Fixed at creation.
  Strides strides() const { return is_view() ? view_strides_ : contiguous_strides(shape_); }
  bool is_contiguous() const { return !is_view() || is_contiguous_layout(shape_, view_strides_); }

  // Capture replay (exec/capture.cpp). The buffer a replay reads: a host tensor is uploaded
  // first; null unless the tensor then holds device data. *sole_owner: nothing but this tensor
  // can read the buffer later (no pending graph, view cache or other tensor), so a replay may
  // donate it to this tensor's new value.
  BufferPtr replay_input(bool* sole_owner);
  // A replay's output becomes this tensor's value, whatever its state was (never a view). Returns
  // the slot of the data it held before (as assign_buffer_if_current).
  SlotPtr replay_assign(BufferPtr b);
  // New contents from the host, same dtype and shape; the tensor object stays, so a captured
  // program reading it sees the new value. Graphs recorded before keep the old value.
  void set_host_data(std::shared_ptr<Storage> s);

  // Autograd (src/autograd). The leaf flag set by requires_grad_(); a leaf's value() is a node that
  // requires grad (its DeviceData leaf, or a GradLeaf identity over pending IR), registered with
  // the leaf registry so backward can find this tensor's grad.
  bool requires_grad_flag() const;
  void set_requires_grad_flag(bool on);
  std::shared_ptr<TensorImpl> grad() const;
  void set_grad(std::shared_ptr<TensorImpl> g);
  // A leaf whose gradient is averaged over the default process group before it accumulates
  // (lz::distributed::average_gradients, DistributedDataParallel), in buckets of about
  // grad_bucket_bytes() with other such leaves (0: its own all_reduce).
  bool averages_grad() const;
  int64_t grad_bucket_bytes() const;
  void set_averages_grad(bool on, int64_t bucket_bytes = 0);
  // The IR backward starts from: value(), or, for a tensor a value read materialized while its IR
  // required grad, that IR (the "tape", kept until a backward consumes it).
  ir::Value autograd_value();
  void release_tape();

  // Live-tensor registry links (guarded by the registry's mutex).
  TensorImpl* reg_prev = nullptr;
  TensorImpl* reg_next = nullptr;

 private:
  struct Key {};  // lets create() use make_shared (one allocation) with a private constructor

 public:
  TensorImpl(Key, DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {}

 private:
  // Builds a tensor, lets init(tensor) fill its state fields, then registers it (assigning id_).
  template <typename Init>
  static std::shared_ptr<TensorImpl> create(DType dtype, Shape shape, Init init);
  ir::Value view_value_locked();
  ir::Value value_locked();
  void set_value_locked(ir::Value v);
  // Device-data state holding `b` (owned by this tensor); every other state field cleared.
  void hold_buffer_locked(BufferPtr b);

  int64_t id_ = 0;
  Device* device_ = nullptr;
  std::shared_ptr<const std::string> created_at_;  // interned
  const DType dtype_;
  const Shape shape_;

  mutable std::mutex mu_;  // guards everything below (see the locking notes at the top)
  TensorState state_ = TensorState::IR;
  BufferPtr buffer_;             // DeviceData
  ir::NodePtr data_node_;        // DeviceData: the one leaf for buffer_ ("asking twice returns the same node")
  ir::Value ir_;                 // IR
  std::shared_ptr<Storage> host_;  // Host
  std::shared_ptr<TensorImpl> view_base_;  // View
  std::vector<ViewOp> view_ops_;           // View, applied base-first
  Strides view_strides_;                   // View: its strides over the base (fixed at creation)
  ir::NodePtr view_cache_base_;            // View: base node the cached value was built from
  ir::Value view_cache_;
  bool requires_grad_ = false;             // leaf flag (autograd)
  std::shared_ptr<TensorImpl> grad_;       // accumulated gradient of a leaf
  int64_t grad_bucket_bytes_ = -1;         // all-reduce gradient contributions (a leaf); -1: no
  ir::NodePtr grad_leaf_node_;             // IR state leaf: the GradLeaf over ir_ ("asked twice, same node")
  ir::Value tape_;                         // DeviceData reached from requires-grad IR: that IR
  // IR: the data held before the pending IR (its buffer's slot, or a slot over the host copy),
  // kept so a failed program can restore it. A slot, not the DeviceBuffer: donation decisions
  // count DeviceBuffer references only.
  SlotPtr restore_;
  std::shared_ptr<void> alias_token_;  // alias_token(), not a view's

  friend class Device;
};

using TensorImplPtr = std::shared_ptr<TensorImpl>;

}  // namespace lz::internal
