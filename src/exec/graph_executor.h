// The graph executor (DESIGN.md section 4). Every way to materialize values funnels into
// sync_tensors_graph(); its steps are the named functions below, exposed so tests and benchmarks
// can drive them one at a time.
//
// Locking (lock order, outermost first; DESIGN.md section 8):
//   1. the executor mutex (graph_executor.cpp): serializes whole syncs (collect through schedule)
//      and capture replays (lock_executor), so two threads syncing at once produce two programs in
//      a well-defined order;
//   2. tensor locks (TensorImpl::mu_, lazy_tensor.h): a barrier that may donate holds its stored
//      roots' locks, taken in tensor-id order, from collect to the buffer swap; a view's lock is
//      taken before its base's, and a sync never takes a view's lock while holding a root's;
//      (the device's RNG mutex, tensor/device.h, is taken before the RNG state tensor's lock and
//      never by a sync);
//   3. leaf locks, never held while taking one of the above: the post-order traversal mutex
//      (post_order), the live-tensor registry, the caches (compile, shape, kernel), metrics, the
//      leaf registry, the device executor's queue.
// Recording ops takes only tensor locks and leaf locks, never the executor mutex, so recording
// never waits for a compile unless it reads a tensor a donating barrier is replacing. A sync asks
// for the user's Python frames before taking the executor mutex and calls no Python under it, so
// a Python thread waiting for a tensor lock while holding the GIL cannot deadlock with it.
// Execution happens on the DeviceExecutor thread.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "exec/compiled_program.h"
#include "exec/cut_reason.h"
#include "tensor/lazy_tensor.h"

namespace lz {

struct GraphKeyInfo;

// What a sync tells a capture (exec/capture.cpp) or a warm program (exec/warm_program.h) about the
// program it found or compiled.
struct ProgramCapture {
  CompiledProgram program;
  std::vector<BufferPtr> params;                        // parameter buffers, in slot order
  std::vector<internal::TensorImplPtr> roots;           // the roots' tensors, in output order
  std::vector<std::pair<int, int>> donations;           // (parameter, root)
  // Set by the caller before the sync: `key` is then filled with the program's graph key
  // (explain.h), which compares the program with another one up to sizes.
  bool want_key = false;
  std::shared_ptr<const GraphKeyInfo> key;
};

struct SyncConfig {
  bool sync_data = true;  // replace the synced tensors' IR by the new device data
  bool barrier = false;   // a step barrier: buffer donation allowed
  bool wait = false;      // block until the program has run
  // The caller waits for the program at once (a value read): a short one runs on the caller's
  // thread before this returns (run_compiled's caller_waits), as it does with `wait`.
  bool caller_waits = false;
  CutReason reason = CutReason::UserSync;
  ProgramCapture* capture = nullptr;  // when set, filled with the scheduled program
  // The warm-up route (DESIGN.md section 4): find or compile the program and fill `capture`, but
  // schedule nothing; the roots keep their IR. Needs `capture`; never a barrier.
  bool compile_only = false;
  // A front end's name for the program (a torch.compile partition: "graph0.backward.fused_0"):
  // debug output names it, and recompiles are explained against earlier compiles of the same
  // name rather than of the same Python line (a forward and its backward share a line).
  std::string name;
};

// Step 1. The roots of one sync: tensors with pending IR (views too when include_views, as value
// reads need them), deduplicated, in tensor-id order.
// hold_locks (a barrier that may donate; views never included): each root's lock is taken in
// tensor-id order and kept in `held` until its buffer swap, so the use counts find_donations
// reads cannot grow meanwhile (a thread recording `acc * 2` must either be counted or see the
// new buffer).
struct Roots {
  std::vector<internal::TensorImplPtr> tensors;
  std::vector<ir::Value> values;
  std::vector<bool> store;  // false for views: they have no IR of their own to replace
  std::vector<std::unique_lock<std::mutex>> held;  // per root with hold_locks, else empty
};
Roots collect(const std::vector<internal::TensorImplPtr>& tensors, bool include_views,
              bool hold_locks = false);


// Step 2. Iterative post-order from the roots; DeviceData leaves become parameters, deduplicated
// by buffer in first-use order; param_sequence maps each DeviceData node (post-order) to its
// parameter, so f(a, a) and f(a, b) differ. topology lists, node by node in post-order, the
// post-order index of each operand, then the index of each root: dag hashes say what each root
// computes from which kinds of leaves, not which leaf or shared node; without it {a - b, b - a}
// and {a - b, a - b} share one hash (and so one program).
// Locking: a traversal owns the nodes' visit_mark/visit_index scratch under a process-wide
// traversal mutex (a leaf lock: nothing else is locked while holding it).
struct PostOrder {
  std::vector<const ir::Node*> nodes;
  std::vector<long> use_counts;  // shared_ptr use count of each node when visited (donation)
  std::vector<BufferPtr> params;
  std::vector<int> param_sequence;
  std::vector<int32_t> topology;
  std::unordered_map<const ir::Node*, int> param_slot;
};
PostOrder post_order(const std::vector<ir::Value>& roots);

// Step 2b, value reads only (the rule is in DESIGN.md section 4): live tensors, never views, whose
// pending IR is an interior node of the read's graph that reads data (ones or arange are cheaper
// to recompute) join `roots` as stored roots, id order kept, so the program that computes them
// anyway leaves them as device data and no later read or barrier computes them again (a
// sampler's `idx = cat([idx, nxt])` chain); so do live tensors whose own pending graph reads such
// an interior node (siblings: the other gradients of one backward), except updates in place over
// 64 KiB (a tensor owning a buffer some graph reads), which the next barrier computes into that
// buffer. Only tensors someone holds are in the registry, so no dropped temporary is kept; the
// registry is scanned only when some such node is referenced from outside the graph. Returns how
// many joined; the caller then redoes post_order.
size_t add_live_intermediates(Roots& roots, const PostOrder& po);

// What a backend compiles: the post-ordered nodes, parameter slots and roots of one sync.
ir::LoweringGraph lowering_graph(const Roots& roots, const PostOrder& po);

// Step 3b. Buffer donation at a barrier: pairs (parameter index, root index) where the parameter's
// buffer belonged to the root's tensor and nothing but this graph still references it. `po` is
// post_order(roots.values).
std::vector<std::pair<int, int>> find_donations(const Roots& roots, const PostOrder& po);

// Step 3. The graph hash: compile environment, root dag hashes (tensor-id order), parameter
// sequence, topology, donation pairs.
Hash128 graph_hash(const Roots& roots, const PostOrder& po,
                   const std::vector<std::pair<int, int>>& donations);

struct SyncResult {
  Hash128 hash;
  bool ran = false;
  std::vector<internal::TensorImplPtr> tensors;  // the roots, in id order
  std::vector<BufferPtr> outputs;                // their new buffers (placeholders until run)
};
SyncResult sync_tensors_graph(const std::vector<internal::TensorImplPtr>& tensors,
                              const SyncConfig& cfg);

// Replays (exec/capture.cpp, exec/warm_program.h) schedule a program themselves through
// run_compiled, holding the executor lock while they read and replace tensor buffers, so no sync
// interleaves.
std::unique_lock<std::mutex> lock_executor();

// Waits for every scheduled program; rethrows a pending asynchronous error.
void wait_all_executions();
// Rethrows (once) an error of an earlier asynchronous run.
void raise_pending_async_error();

void resize_compile_cache(size_t n);
void clear_compile_cache();
size_t compile_cache_entries();

// Eager mode: every recorded op is synced at once as its own program (cut reason eager-op).
void set_eager_mode(bool enabled);
bool eager_mode();

// Cut for graph-too-large when the nodes recorded since the last barrier pass the limit.
void maybe_cut_large_graph();

}  // namespace lz
