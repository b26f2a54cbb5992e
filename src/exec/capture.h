// Capture and replay (DESIGN.md section 5b): a function's step traced once per input signature,
// then replayed with new inputs and no re-tracing.
//
// A trace is an ordinary lazy run of the function between two barriers. At its end the barrier's
// program is recorded with, for each of its parameters, where the next call finds that input, and
// for each of its outputs, which tensor receives it:
//   sources  Arg i (the i-th tensor argument of the call), State (a tensor that existed before the
//            call: a weight, an optimizer moment, the RNG key; read through its current buffer),
//            or Const (data the function uploaded itself, kept by the record).
//   sinks    Arg i (an argument updated in place), State (a tensor updated in place or created by
//            the function and still alive: weights, .grad, optimizer state), or Returned k (a
//            tensor the function returned: a fresh tensor on every replay).
// A replay runs no Python and records no IR: it takes the sources' current buffers, schedules the
// program, and gives the sinks their new buffers (donating a source's buffer to its own tensor
// where nothing else can read it).
//
// When replay is safe (the contract, enforced where it can be):
//   - Two consecutive traces of one signature must give the same record (same program, same
//     tensors, equal constants) before a call is replayed; code that differs on its first call
//     (optimizer state created lazily) is traced until it settles, and code that bakes a changing
//     Python value into the graph is never replayed. A signature that differs from a settled one
//     only in its arguments' sizes settles on its first trace when that trace's record is the
//     settled one up to sizes: the same tensors and uploaded data, and a program whose nodes
//     differ only in sizes, where their own or their operands' sizes changed, and in count
//     constants (explain.h, size_only_difference). The settled signature's two traces showed
//     the function stable; a new size is a new shape of the same program, as the dynamo
//     bridge's new size is a new recording of the same graph.
//   - Anything a replay depends on that Python computes (a learning rate) is refreshed by a replay
//     guard the traced code registered (add_replay_guard); a guard that returns false sends the
//     call back to tracing.
//   - A source or sink tensor that has died, a trace that executed something (a value read inside
//     the function), or an argument view the function writes into makes a call trace again (or,
//     for the last two, never replay); the reason is kept for the user.
//
// Locking: a CaptureCache is not thread-safe (one per function, like the function's own state);
// replays take the executor lock for the span in which they read and replace tensor buffers.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "exec/compiled_program.h"
#include "tensor/lazy_tensor.h"

namespace lz {

struct GraphKeyInfo;

struct CaptureSource {
  enum class Kind : uint8_t { Arg, State, Const } kind = Kind::Const;
  int arg = -1;
  std::weak_ptr<internal::TensorImpl> tensor;  // State
  bool requires_grad = false;                  // State: its flag at the trace (the graph depends on it)
  BufferPtr constant;                          // Const
};

struct CaptureSink {
  enum class Kind : uint8_t { Arg, State, Returned } kind = Kind::State;
  int index = -1;                              // Arg: argument index; Returned: output slot
  bool created_in_trace = false;               // State: made by the function (a .grad, a moment)
  std::weak_ptr<internal::TensorImpl> tensor;  // State
  // A .grad the function created for this leaf: each replay sets a new tensor as the leaf's grad
  // (as the function would), so grads kept from earlier calls keep their values.
  std::weak_ptr<internal::TensorImpl> grad_of;
  bool is_grad = false;  // grad_of is set
  // The leaf had no grad when the traced call started (zero_grad outside the function): a replay
  // needs it to have none again (with one, the function would have accumulated into it).
  bool grad_was_none = false;
};

// One returned tensor: a program root (fresh each replay), an argument, or a tensor that existed
// before the call (returned as is, while it lives).
struct CaptureOutput {
  enum class Kind : uint8_t { Root, Arg, Fixed } kind = Kind::Root;
  int index = -1;
  std::weak_ptr<internal::TensorImpl> fixed;
};

struct ReplayGuard {
  std::function<bool()> check;
  uint64_t identity = 0;  // equal identities: the same guard in two traces
};

struct CaptureRecord {
  // Held here: a compile-cache eviction never loses it. Its origins make a replay's run-time
  // error name what the user called, as the trace's would.
  CompiledProgram program;
  std::vector<CaptureSource> sources;  // per program parameter
  std::vector<CaptureSink> sinks;      // per program root
  std::vector<std::pair<int, int>> donations;  // (parameter, root) pairs donated at the trace
  std::vector<CaptureOutput> outputs;
  std::vector<ReplayGuard> guards;
  std::shared_ptr<void> frontend_data;  // the frontend's own (Python: the output structure)
  // The program's graph key (exec/explain.h): compares it with a trace at other sizes.
  std::shared_ptr<const GraphKeyInfo> key;
};

// "" when two records (two traces of one signature) would replay identically; otherwise the first
// difference, in user terms. across_sizes: the two are traces at different input sizes, and their
// programs need only be the same up to sizes (explain.h, size_only_difference).
std::string capture_difference(const CaptureRecord& a, const CaptureRecord& b,
                               bool across_sizes = false);

// Registers a guard with the trace running on this thread (an error outside a trace).
void add_replay_guard(std::function<bool()> check, uint64_t identity);
// Marks the trace running on this thread as never to be replayed, with the reason (library code
// that knows its Python effect cannot be replayed: an LR scheduler stepped inside the function).
void refuse_replay(std::string reason);
// The frontend saw that a returned tensor is also held elsewhere (Python: by reference count); if
// the function made it, the trace is never replayed (a replay would leave the kept one stale).
void note_kept_output(internal::TensorImplPtr t);
bool capture_tracing();

// Per-function state: the records by signature, and what the last traces said.
class CaptureCache {
 public:
  // The traced body: given the call's tensor arguments (views replaced by copies), runs the
  // function and returns its tensor outputs; may set *frontend_data.
  using Body = std::function<std::vector<internal::TensorImplPtr>(
      const std::vector<internal::TensorImplPtr>& args, std::shared_ptr<void>* frontend_data)>;

  CaptureCache(std::string name, bool full_graph) : name_(std::move(name)), full_graph_(full_graph) {}

  // One call: replays the signature's record when it has a settled one and its guards pass,
  // otherwise traces `body` (and keeps the record). `extra_key` folds in the frontend's part of
  // the signature (non-tensor arguments, structure). *frontend_data: the data of the record that
  // produced the outputs.
  std::vector<internal::TensorImplPtr> call(const std::vector<internal::TensorImplPtr>& args,
                                            uint64_t extra_key, const Body& body,
                                            std::shared_ptr<void>* frontend_data);

  int64_t traces() const { return traces_; }
  int64_t replays() const { return replays_; }
  // Why the last trace could not be replayed, or why the last replay was refused; "" if none.
  const std::string& last_reason() const { return last_reason_; }
  const std::string& name() const { return name_; }

 private:
  struct Entry {
    std::shared_ptr<CaptureRecord> active;   // settled: replayed
    std::shared_ptr<CaptureRecord> pending;  // the last trace, waiting for a matching one
    int mismatches = 0;                      // traces that did not match the one before
    uint64_t family = 0;                     // the signature without the arguments' sizes
    std::list<uint64_t>::iterator recent;
  };
  // The tensors e's settled trace created and kept (a torch .grad, an attribute assigned each
  // call) die when a trace at other sizes creates their successors; when the family's settled
  // record is e's up to sizes, its live tensors take their places, and a replay writes those.
  // True if it took any.
  bool adopt_successors(Entry& e);
  std::shared_ptr<CaptureRecord> settled_record(uint64_t family) const;  // null if none lives
  std::vector<internal::TensorImplPtr> trace(Entry& e, const std::vector<internal::TensorImplPtr>& args,
                                             const Body& body, std::shared_ptr<void>* frontend_data);

  static constexpr size_t kMaxSignatures = 64;  // records kept per function, least recent dropped
  static constexpr size_t kManySignatures = 16;  // warn once: signatures churn

  std::string name_;
  bool full_graph_;
  std::unordered_map<uint64_t, Entry> entries_;
  // Per family (a signature up to the arguments' sizes), the record settled last: a trace at new
  // sizes that matches it up to sizes settles at once (one trace per new size, not two).
  std::unordered_map<uint64_t, std::weak_ptr<CaptureRecord>> settled_;
  std::list<uint64_t> recent_;  // signatures, most recent first
  int64_t traces_ = 0, replays_ = 0;
  std::string last_reason_;
};

}  // namespace lz
