#include "core/config.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "lazuli/error.h"

namespace lz {
namespace {

const char* env(const char* name) { return std::getenv(name); }

int64_t env_int(const char* name, int64_t def, int64_t min_value) {
  const char* v = env(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < min_value) {
    throw ValueError(std::string(name) + "='" + v + "' is not an integer >= " +
                     std::to_string(min_value));
  }
  return x;
}

// The usual spellings, in any case, so that `True` (Python's) or `ON` (CMake's) mean what they say.
bool env_bool(const char* name, bool def) {
  const char* v = env(name);
  if (!v) return def;
  std::string s(v);
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  if (s.empty()) return def;
  std::string low = s;
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
  if (low == "1" || low == "true" || low == "yes" || low == "on") return true;
  if (low == "0" || low == "false" || low == "no" || low == "off") return false;
  throw ValueError(std::string(name) + "='" + v +
                   "' is not a boolean (use 1/0, true/false, yes/no or on/off, in any case)");
}

// The home directory of `user` ("" = this process's user: $HOME, else the password database).
std::string home_of(const std::string& user) {
  if (user.empty()) {
    if (const char* h = env("HOME"); h && *h) return h;
  }
  long n = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(n > 0 ? static_cast<size_t>(n) : 16384);
  passwd pw{}, *found = nullptr;
  int rc = user.empty() ? ::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found)
                        : ::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  return rc == 0 && found && found->pw_dir ? found->pw_dir : "";
}

// A shell's tilde expansion of a leading `~` or `~user`, which the environment never does for a
// value set as VAR=~/x in a script's quotes or from Python's os.environ.
std::string expand_user(const char* name, const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  const size_t slash = path.find('/');
  const std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  const std::string home = home_of(user);
  if (home.empty()) {
    throw ValueError(std::string(name) + "='" + path + "': cannot expand " +
                     (user.empty() ? "~ (no HOME and no password entry)" : "~" + user + " (no such user)"));
  }
  return slash == std::string::npos ? home : home + path.substr(slash);
}

Config read_env() {
  Config c;
  if (const char* b = env("LAZULI_BACKEND"); b && *b) {
    c.backend = b;
    if (c.backend != "cpu" && c.backend != "interp") {
      throw ValueError("LAZULI_BACKEND='" + c.backend + "' is not a backend (use cpu or interp)");
    }
  }
  c.compilation_cache_size = env_int("LAZULI_COMPILATION_CACHE_SIZE", 2048, 1);
  c.ir_shape_cache_size = env_int("LAZULI_IR_SHAPE_CACHE_SIZE", 12288, 1);
  if (const char* d = env("LAZULI_CACHE_DIR")) {
    c.cache_dir = expand_user("LAZULI_CACHE_DIR", d);
  } else if (std::string home = home_of(""); !home.empty()) {
    c.cache_dir = home + "/.cache/lazuli";
  }
  c.persistent_cache_read_only = env_bool("LAZULI_PERSISTENT_CACHE_READ_ONLY", false);
  c.persistent_cache_max_bytes = env_int("LAZULI_PERSISTENT_CACHE_MAX_BYTES", 1 << 30, 0);
  c.buffer_cache_bytes = env_int("LAZULI_BUFFER_CACHE_BYTES", -1, -1);
  c.conv_weight_cache_bytes = env_int("LAZULI_CONV_WEIGHT_CACHE_BYTES", 256 << 20, 0);
  c.enable_param_aliasing = env_bool("LAZULI_ENABLE_PARAM_ALIASING", true);
  c.fuse_rows = env_bool("LAZULI_FUSE_ROWS", true);
  c.sync_wait = env_bool("LAZULI_SYNC_WAIT", false);
  c.waiter_run_ms = env_int("LAZULI_WAITER_RUN_MS", 10, 0);
  c.emit_steplog = env_bool("LAZULI_EMIT_STEPLOG", false);
  c.dist_timeout_s = env_int("LAZULI_DIST_TIMEOUT", 600, 0);
  c.dist_check = env_bool("LAZULI_DIST_CHECK", true);
  c.dist_overlap = env_bool("LAZULI_DIST_OVERLAP", true);
  c.debug = static_cast<int>(env_int("LAZULI_DEBUG", 0, 0));
  if (const char* f = env("LAZULI_DEBUG_FILE")) c.debug_file = expand_user("LAZULI_DEBUG_FILE", f);
  c.debug_max_frame = static_cast<int>(env_int("LAZULI_DEBUG_MAX_FRAME", 8, 0));
  c.explain_recompiles = env_bool("LAZULI_EXPLAIN_RECOMPILES", false);
  c.profile_programs = env_bool("LAZULI_PROFILE_PROGRAMS", false);
  c.progress_after_ms = env_int("LAZULI_PROGRESS_AFTER_MS", 2000, -1);
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  c.num_threads = static_cast<int>(env_int("LAZULI_NUM_THREADS", cores > 0 ? cores : 1, 1));
  c.max_pending_nodes = env_int("LAZULI_MAX_PENDING_NODES", 200000, 16);
  if (const char* f = env("LAZULI_SAVE_GRAPHS_FILE")) {
    c.save_graphs_file = expand_user("LAZULI_SAVE_GRAPHS_FILE", f);
  }
  if (const char* f = env("LAZULI_SAVE_GRAPHS_FMT"); f && *f) {
    c.save_graphs_fmt = f;
    if (c.save_graphs_fmt != "text" && c.save_graphs_fmt != "dot") {
      throw ValueError("LAZULI_SAVE_GRAPHS_FMT='" + c.save_graphs_fmt + "' is not a format (use text or dot)");
    }
  }
  return c;
}

Config& storage() {
  static Config c = read_env();
  return c;
}

}  // namespace

const Config& config() { return storage(); }
Config& mutable_config() { return storage(); }
void reload_config() { storage() = read_env(); }

}  // namespace lz
