#include "core/config.h"

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <thread>

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

bool env_bool(const char* name, bool def) {
  const char* v = env(name);
  if (!v || !*v) return def;
  std::string s(v);
  std::string l;
  for (char ch : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  throw ValueError(std::string(name) + "='" + s +
                   "' is not a boolean (use 1/0, true/false, yes/no or on/off, in any case)");
}

// "~" and "~/..." name the home directory, as a shell would have expanded them.
std::string expand_home(std::string path) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  const char* home = env("HOME");
  return home ? std::string(home) + path.substr(1) : path;
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
    c.cache_dir = expand_home(d);
  } else if (const char* home = env("HOME")) {
    c.cache_dir = std::string(home) + "/.cache/lazuli";
  }
  c.persistent_cache_read_only = env_bool("LAZULI_PERSISTENT_CACHE_READ_ONLY", false);
  c.persistent_cache_max_bytes = env_int("LAZULI_PERSISTENT_CACHE_MAX_BYTES", 1 << 30, 0);
  c.enable_param_aliasing = env_bool("LAZULI_ENABLE_PARAM_ALIASING", true);
  c.sync_wait = env_bool("LAZULI_SYNC_WAIT", false);
  c.emit_steplog = env_bool("LAZULI_EMIT_STEPLOG", false);
  c.debug = static_cast<int>(env_int("LAZULI_DEBUG", 0, 0));
  if (const char* f = env("LAZULI_DEBUG_FILE")) c.debug_file = f;
  c.debug_max_frame = static_cast<int>(env_int("LAZULI_DEBUG_MAX_FRAME", 8, 0));
  c.explain_recompiles = env_bool("LAZULI_EXPLAIN_RECOMPILES", false);
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  c.num_threads = static_cast<int>(env_int("LAZULI_NUM_THREADS", cores > 0 ? cores : 1, 1));
  c.max_pending_nodes = env_int("LAZULI_MAX_PENDING_NODES", 200000, 16);
  if (const char* f = env("LAZULI_SAVE_GRAPHS_FILE")) c.save_graphs_file = f;
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
