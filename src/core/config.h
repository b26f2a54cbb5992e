// Every LAZULI_* environment variable is read here, once, into one Config. The library's other
// getenvs: the system's TMPDIR (kernel_cache.cpp, where a failed kernel's IR is saved), and the
// test hook LAZULI_JIT_NO_F16C in the code generator's own library (jit/codegen.cpp), which links
// nothing of the core. Tests may change fields through mutable_config() (then call the hook of
// the component that caches the value, e.g. CompileCache::resize).
// docs/environment.md documents each field; keep the two in step.
#pragma once
#include <cstdint>
#include <string>

namespace lz {

struct Config {
  std::string backend = "cpu";              // LAZULI_BACKEND: cpu | interp
  int64_t compilation_cache_size = 2048;    // LAZULI_COMPILATION_CACHE_SIZE
  int64_t ir_shape_cache_size = 12288;      // LAZULI_IR_SHAPE_CACHE_SIZE
  std::string cache_dir;                    // LAZULI_CACHE_DIR (default ~/.cache/lazuli; "" = off)
  bool persistent_cache_read_only = false;  // LAZULI_PERSISTENT_CACHE_READ_ONLY
  int64_t persistent_cache_max_bytes = 1 << 30;  // LAZULI_PERSISTENT_CACHE_MAX_BYTES
  int64_t buffer_cache_bytes = -1;          // LAZULI_BUFFER_CACHE_BYTES (-1: a quarter of the RAM)
  int64_t conv_weight_cache_bytes = 256 << 20;  // LAZULI_CONV_WEIGHT_CACHE_BYTES
  bool enable_param_aliasing = true;        // LAZULI_ENABLE_PARAM_ALIASING
  bool fuse_rows = true;                    // LAZULI_FUSE_ROWS
  bool sync_wait = false;                   // LAZULI_SYNC_WAIT
  int64_t waiter_run_ms = 10;  // LAZULI_WAITER_RUN_MS: shorter programs may run on their waiter
  bool emit_steplog = false;                // LAZULI_EMIT_STEPLOG
  int debug = 0;                            // LAZULI_DEBUG: 0, 1, 2
  std::string debug_file;                   // LAZULI_DEBUG_FILE ("" = stderr)
  int debug_max_frame = 8;                  // LAZULI_DEBUG_MAX_FRAME
  bool explain_recompiles = false;          // LAZULI_EXPLAIN_RECOMPILES
  bool profile_programs = false;            // LAZULI_PROFILE_PROGRAMS: time runs and steps
  int64_t progress_after_ms = 2000;         // LAZULI_PROGRESS_AFTER_MS (-1: never report)
  int num_threads = 0;                      // LAZULI_NUM_THREADS (0 = number of cores)
  int64_t max_pending_nodes = 200000;       // LAZULI_MAX_PENDING_NODES: graph-too-large cut
  std::string save_graphs_file;             // LAZULI_SAVE_GRAPHS_FILE ("" = off)
  std::string save_graphs_fmt = "text";     // LAZULI_SAVE_GRAPHS_FMT: text | dot
  int64_t dist_timeout_s = 600;             // LAZULI_DIST_TIMEOUT: bound on a collective's wait (0: none)
  bool dist_check = true;                   // LAZULI_DIST_CHECK: ranks agree on a program's collectives
  bool dist_overlap = true;  // LAZULI_DIST_OVERLAP: all_reduce beside later steps (cpu)
};

// Reads the environment on first use. Throws ValueError for a malformed value, naming the variable.
const Config& config();
Config& mutable_config();
// Re-reads the environment (tests use it after setenv).
void reload_config();

}  // namespace lz
