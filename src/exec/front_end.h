// What a front end needs beyond the public API (include/lazuli), in one header: the Python
// bindings (python/src/) include this and the public headers, nothing else of src/ (ctest
// layering.bindings_use_the_front_end_header checks it), so the executor, the tensor states and the
// backends can change without touching them. Every type here is public or a leaf of std types
// (the headers included below); no IR node, buffer, storage or backend object crosses it.
//
// Waiting: functions that may block for a whole compile (schedule_read, sync_for_reason,
// WarmProgram::compile) take no Python lock of their own; callers that hold one release it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backend/compile_interrupt.h"  // CompileInterrupted and the hook: std and lazuli/error.h
#include "core/call_site.h"             // call-site and frame providers: std types only
#include "core/debug_write.h"           // debug_write: the LAZULI_DEBUG sink, std types only
#include "core/shape.h"                 // Shape, shape_str, wrap_dim: std and lazuli/dtype.h
#include "exec/cut_reason.h"            // CutReason: an enum
#include "exec/external_input.h"        // ExternalInput: std types only
#include "ir/user_op.h"                 // UserOpScope, enter/exit_user_op: std types only
#include "lazuli/lazuli.h"
#include "ops/subscript.h"   // x[key] with PyTorch's rules: public types only
#include "tensor/handoff.h"  // tensors handed between front ends by ticket: public types only

namespace lz {
class DeviceBuffer;
class CaptureCache;
class WarmProgram;
}  // namespace lz

namespace lz::front_end {

// ---- value reads, waited for in slices (Python honours Ctrl-C while it waits)
// --------------------

// A read of a tensor's value that has been scheduled (the program computing it may still run).
class PendingRead {
 public:
  // True when the value is computed (or was never pending); false after `ms` milliseconds.
  // Never throws. A wait (ms > 0) for a short program that is next in line runs it on this
  // thread (DeviceExecutor::run_here_if_next); so does finish().
  bool wait_for_ms(int ms) const;
  // Waits, raises the computing program's error (once), and counts the transfer.
  void finish() const;
  // After finish(): the first `nbytes` of the value, copied to host memory through the backend.
  void copy_to(void* dst, size_t nbytes) const;
  // After finish(): the value's own memory, for a view that only reads it. ValueError naming
  // `what` when it is not host memory.
  const void* host_memory(const char* what) const;
  // After finish(): the value's own memory, for a view that may write it (nothing derived from
  // these bytes is kept from now on). ValueError naming `what` when it is not host memory.
  void* expose_host_memory(const char* what) const;
  // Keeps the value's memory alive (and never donated) while held.
  std::shared_ptr<const void> keep_alive() const;

 private:
  friend PendingRead schedule_read(const Tensor& t, CutReason reason);
  std::shared_ptr<DeviceBuffer> b_;
};
// Schedules the read (a cut with `reason` when the value is pending); may compile.
PendingRead schedule_read(const Tensor& t, CutReason reason);

// ---- tensors over memory and host data ---------------------------------------------------------

// A tensor in the device-data state over `data` (numel(shape) C-contiguous elements of `dtype`)
// that `owner` keeps alive: no copy. `content_id`: an id lent for these bytes (new_content_id),
// or 0. Checked as from_blob's memory is (frontend::check_memory), named "external memory".
Tensor external_device_data(void* data, DType dtype, const IntList& shape,
                            std::shared_ptr<void> owner, uint64_t content_id = 0);
// Content ids lent with external memory whose every write the lender sees (lz::Storage).
uint64_t new_content_id();
void retire_content_id(uint64_t id);
// The address of a device-data tensor's memory, waiting for its producer, exposed for writing;
// 0 in other states.
uintptr_t device_data_address(const Tensor& t);
// New contents for `t` (its dtype and shape, `nbytes` of them) without recording anything:
// bools are stored as 0/1.
void set_host_data(const Tensor& t, const void* bytes, size_t nbytes);
// A host tensor over memory `owner` keeps alive (numel(shape) C-contiguous, aligned elements of
// `dtype`, as numpy's C-contiguous arrays are): no copy, no check. The front end answers for the
// memory; from_blob is the checked form for users.
Tensor host_memory_tensor(void* data, DType dtype, const IntList& shape,
                          std::shared_ptr<void> owner);

// ---- ops written in the front end --------------------------------------------------------------

// A host index's values checked at the user's line (ops/frontend.h says how).
void check_index_values(const Tensor& index, int64_t size, bool allow_negative, const char* op,
                        std::optional<int64_t> ignore_index);
void bump_counter(const std::string& name, int64_t n = 1);
// LAZULI_DEBUG's level (0: quiet).
int debug_level();
// The token a front end ties to the data of `t`'s base, made by `make` on first request and kept
// as long as the base (the lazy PyTorch device keeps its storage identity there).
std::shared_ptr<void> alias_token(const Tensor& t, std::shared_ptr<void> (*make)());

// ---- syncs, waits, modes
// ---------------------------------------------------------------------------

// A step barrier (lz::sync without waiting) that reports `reason`.
void sync_for_reason(bool reset_scope, CutReason reason);
// The reason with id `id` ("user-sync", "torch-compile"); ValueError for an unknown id.
CutReason cut_reason_from_id(const std::string& id);
// True when every scheduled program has finished; false after `ms` milliseconds. Never throws.
bool wait_all_for_ms(int ms);
// Rethrows (once) the error of a program that failed after its caller stopped waiting.
void raise_pending_async_error();
// Waits for every scheduled program, errors unreported (interpreter exit).
void drain();
// Whether lz::sync waits for its programs (LAZULI_SYNC_WAIT).
bool sync_waits();
int64_t step_count();
void set_eager_mode(bool enabled);
bool eager_mode();
// Replaces the active backend (tests, comparisons); only while nothing is in flight.
void set_backend(const std::string& name);

// ---- compile regions, capture and replay
// -----------------------------------------------------------

void enter_region(const std::string& name, bool full_graph, int max_graphs, int64_t key);
void exit_region();
void check_region_graph();

// lz::capture's cache of traced calls (exec/capture.h), over tensors.
class CaptureFunction {
 public:
  // The traced body: the call's tensor arguments in, its tensor results out; it may set
  // *frontend_data (the front end's own record, handed back on every replay).
  using Body = std::function<std::vector<Tensor>(const std::vector<Tensor>& args,
                                                 std::shared_ptr<void>* frontend_data)>;
  CaptureFunction(std::string name, bool full_graph);
  // Replays a matching record or traces `body`; `key`: the front end's part of the signature.
  std::vector<Tensor> call(const std::vector<Tensor>& args, uint64_t key, const Body& body,
                           std::shared_ptr<void>* frontend_data);
  int64_t traces() const;
  int64_t replays() const;
  std::string last_reason() const;
  std::string name() const;

 private:
  std::shared_ptr<CaptureCache> cache_;
};
bool capture_tracing();
void refuse_replay(std::string reason);
void note_kept_output(const Tensor& t);
void add_replay_guard(std::function<bool()> check, uint64_t identity);

// A program compiled from a recording without running it, replayed with new inputs
// (exec/warm_program.h says the contract).
class WarmProgram {
 public:
  WarmProgram(const std::vector<Tensor>& inputs, std::string name, CutReason reason);
  ~WarmProgram();
  WarmProgram(const WarmProgram&) = delete;
  WarmProgram& operator=(const WarmProgram&) = delete;
  void compile(const std::vector<Tensor>& outputs, const std::vector<std::pair<int, int>>& donate);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  std::vector<Tensor> run_external(const std::vector<ExternalInput>& inputs);
  bool donates_input(size_t i) const;
  std::string hash_hex() const;
  size_t num_constants() const;
  const std::vector<std::pair<DType, Shape>>& input_types() const;

 private:
  std::unique_ptr<lz::WarmProgram> p_;
};

// ---- debugging and tests
// ---------------------------------------------------------------------------

// One execution of the recent-cuts log (lz.debug.recent_cuts).
struct CutInfo {
  std::string reason;  // the reason's id
  std::string graph_hash;
  int64_t nodes = 0, inputs = 0, outputs = 0;
  bool compiled = false;
  std::vector<UserFrame> frames;
  std::string explanation, cause, name;
};
std::vector<CutInfo> recent_cuts();
void clear_recent_cuts();
void clear_recompile_history();
void clear_compile_cache();
// Whether this thread is running a program now (the executor thread, or a reader running a short
// program itself): what its buffers release must not run code that waits for the executor.
bool running_program_here();
// Tests: the executor thread starts no further program until the matching release (a thread
// waiting for a short program may still run it: DeviceExecutor::run_here_if_next).
void hold_executor();
void release_executor();
// The settings tests and notebooks may change after startup (docs/environment.md names them):
// ValueError for another name or an integer out of the setting's range, TypeError for a value of
// the wrong kind.
using Setting = std::variant<int64_t, bool, std::string>;
Setting get_setting(const std::string& name);
void set_setting(const std::string& name, const Setting& value);

}  // namespace lz::front_end
