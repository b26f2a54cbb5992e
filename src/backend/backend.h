// The backend interface (DESIGN.md section 5). The executor hands a backend an ir::LoweringGraph
// (ir/lowering_graph.h: the post-ordered nodes of one sync, with parameter slots and roots); the
// backend returns an Executable that no longer references any node or buffer, so a cached program
// keeps no tensor memory alive. Executables run on the device's executor thread, or on a thread
// that waits for a short one (exec/device_executor.h run_here_if_next).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/hash.h"
#include "ir/lowering_graph.h"
#include "ir/node.h"

namespace lz {

// The message of an exception held by pointer ("unknown error" for a non-std exception).
std::string error_text(const std::exception_ptr& e);

// Thrown by Executable::run when a step failed (an index out of range, ...): every root computed
// from it failed with it, the others hold their values. `error` is the first step's error.
class PartialRunFailure : public std::exception {
 public:
  PartialRunFailure(std::vector<bool> root_failed, std::exception_ptr error, int failed_node);
  const char* what() const noexcept override { return what_.c_str(); }
  std::vector<bool> root_failed;
  std::exception_ptr error;
  int failed_node;  // post-order index (ir::LoweringGraph) of the node that failed; -1 unknown

 private:
  std::string what_;
};

// One step of a program as the program profile names it: `kind` is "kernel", "matmul",
// "library", "fallback" or "copies" (the copies that end a run); `what` is the step in words
// (ops, dtypes and shapes).
struct StepLabel {
  std::string kind;
  std::string what;
};

// Per-step wall times of one run, for the program profile: while step_times() is set on a
// thread, an Executable's run() on that thread that has step_labels() resizes `ns` to their
// number and stores each step's time in nanoseconds (steps a failure skipped stay 0).
struct StepTimes {
  std::vector<int64_t> ns;
};
// This thread's sink (null: nothing timed, the default). Set only around one run() by the
// executor (exec/compiled_program.cpp).
StepTimes*& step_times();

// Adds the wall time from its construction to its destruction to times->ns[slot]; nothing, not
// even a clock read, when `times` is null. One per step of a run, whatever way the step ends.
class StepClock {
 public:
  StepClock(StepTimes* times, size_t slot) : times_(times), slot_(slot) {
    if (times_) start_ = std::chrono::steady_clock::now();
  }
  ~StepClock() {
    if (!times_) return;
    times_->ns[slot_] += std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - start_)
                             .count();
  }
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;

 private:
  StepTimes* times_;
  size_t slot_;
  std::chrono::steady_clock::time_point start_;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // params[i]: storage of parameter i. outputs[j]: storage for root j, allocated by the caller
  // with the root's size; it may be a donated parameter's storage, so an implementation must not
  // write an output before it has finished reading every parameter.
  // Failure contract (a failed program must not destroy state, DESIGN.md section 7): a step that
  // throws fails its value and everything computed from it, and run() ends by throwing
  // PartialRunFailure. Then no output whose storage is a parameter's (donated) has been written:
  // such roots are reported failed, and the parameter keeps its contents; other roots the failure
  // did not reach hold their values. Any other exception is thrown before any output is written.
  virtual void run(const std::vector<const Storage*>& params,
                   const std::vector<Storage*>& outputs) const = 0;

  // How long its last successful run took, in nanoseconds (-1: none yet). Kept by whoever runs
  // it (exec/compiled_program.cpp), which lets a short program run on the thread waiting for it.
  mutable std::atomic<int64_t> last_run_ns{-1};

  // The program profile (debug::profile_programs, exec/program_profile.h): what each step of a
  // run is, in words, one entry per slot of StepTimes::ns. Empty: the backend times whole runs
  // only.
  virtual std::vector<StepLabel> step_labels() const { return {}; }

  // Called when a run of it is scheduled, before the inputs are bound and the run is handed to
  // the thread that runs it: the backend may get ready for it meanwhile (the cpu backend wakes
  // its pool's sleeping workers, so the run's first parallel step finds them awake).
  virtual void about_to_run() const {}
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The backend's part of the compile environment: every setting of it that changes generated
  // code (compile_env_hash() adds the rest).
  virtual Hash128 compile_env() const = 0;
  virtual std::shared_ptr<Executable> compile(const ir::LoweringGraph& graph) = 0;
  // What compile() would make of `graph`, in words, for dumps (debug::dump_kernels): builds
  // nothing into a cache and runs nothing. `detail` adds the lowest-level form the backend has
  // (the cpu backend: each kernel's LLVM IR).
  virtual std::string describe(const ir::LoweringGraph& graph, bool detail) = 0;
  virtual std::shared_ptr<Storage> allocate(size_t nbytes) { return std::make_shared<Storage>(nbytes); }

  // Memory transfers: every host read or write of tensor memory outside a backend goes through
  // these (value reads, host data becoming a tensor, the executor's copies), so a backend whose
  // memory is not the host's implements them and nothing above it changes. The defaults are for
  // host memory. Each refuses a Storage on another device with ValueError naming both devices.
  virtual DeviceId device() const { return DeviceId::host(); }
  // A new Storage on this backend's device holding `nbytes` from host memory `src`.
  virtual std::shared_ptr<Storage> upload(const void* src, size_t nbytes);
  // Copies the first `nbytes` of `src` (on this device) to host memory `dst`.
  virtual void download(const Storage& src, void* dst, size_t nbytes);
  // Copies the first `nbytes` of `src` to `dst`, both on this device, and renews dst's content id
  // (core/buffer.h): an override must too.
  virtual void copy(const Storage& src, Storage& dst, size_t nbytes);
  // Whether the first `nbytes` of `a` and `b` (both on this device) are equal byte for byte.
  virtual bool equal(const Storage& a, const Storage& b, size_t nbytes);
  // Throws ValueError unless `s` lives on this backend's device; `what` names the operation.
  void check_device(const Storage& s, const char* what) const;

  // The compile environment, whole: name, compile_env() and the library's version and build
  // revision; the first ingredient of every graph hash. Computed once per backend object.
  const Hash128& compile_env_hash();

 private:
  std::once_flag env_once_;
  Hash128 env_hash_;
};

// The copies that end a program: roots whose value lives elsewhere (a parameter, a repeated root)
// copied into their output storage. Every source is read before any destination that overlaps
// another copy's source is written, so two tensors swapped through donated buffers keep both
// values.
struct RootCopy {
  void* dst;
  const void* src;
  size_t nbytes;
};
void run_root_copies(const std::vector<RootCopy>& copies);

// "lazuli-<version>-<build revision>": enters every graph hash and every kernel key, so an upgrade
// never reuses what another version compiled.
const std::string& library_identity();

// The backend named by LAZULI_BACKEND, created on first use.
Backend& active_backend();
// Tests switch backends; only call while nothing is in flight.
void set_active_backend(const std::string& name);
// A backend by name ("cpu", "interp"), made on first use and kept, whichever is active: for
// dumps that name the backend they describe. Raises ValueError for an unknown name.
Backend& backend_named(const std::string& name);
// The backend LAZULI_BACKEND selects when it is unset: the one whose plans dumps show
// (debug::dump_kernels), whichever runs programs.
const char* default_backend_name();

}  // namespace lz
