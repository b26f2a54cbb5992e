#include "exec/debug_log.h"

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "core/config.h"
#include "core/debug_write.h"
#include "core/metrics.h"
#include "ir/dump.h"

namespace lz {
namespace {

std::mutex g_write_mu;  // guards writes to the graphs file

std::string frames_str(const std::vector<UserFrame>& frames, size_t max) {
  std::ostringstream o;
  for (size_t i = 0; i < frames.size() && i < max; ++i) {
    o << "    " << (i ? "called from " : "at ") << frames[i].file << ":" << frames[i].line << " in "
      << frames[i].function << "\n";
  }
  if (frames.empty()) o << "    at (no user frame: C++ caller or no frame provider)\n";
  return o.str();
}

}  // namespace

void report_execution(const CutRecord& r) {
  const Config& c = config();
  bool block = c.debug >= 2 || (c.debug >= 1 && r.compiled);
  if (!block) {
    if (c.explain_recompiles && r.compiled) {
      std::string where = r.frames.empty() ? std::string("C++")
                                           : r.frames[0].file + ":" + std::to_string(r.frames[0].line);
      debug_write("[lazuli] compile at " + where + ": " + r.explanation + "\n");
    }
    return;
  }
  std::ostringstream o;
  o << "[lazuli] " << (r.compiled ? "compile" : "execution") << (r.name.empty() ? "" : " of '" + r.name + "'")
    << ", cause " << cut_reason_id(r.reason) << ": " << cut_reason_advice(r.reason) << "\n";
  o << "    graph " << r.hash.hex() << ", " << r.nodes << " nodes, " << r.inputs << " inputs, " << r.outputs
    << " outputs";
  if (r.compiled) o << ", compiled in " << r.compile_ns / 1e6 << " ms";
  o << "\n";
  if (r.compiled) o << "    why it compiled: " << r.explanation << "\n";
  o << frames_str(r.frames, static_cast<size_t>(c.debug_max_frame));
  debug_write(o.str());
}

void save_graph(const CutRecord& r, const std::vector<ir::Value>& roots) {
  const Config& c = config();
  if (c.save_graphs_file.empty()) return;
  std::ostringstream o;
  o << "[lazuli graph] cause " << cut_reason_id(r.reason) << (r.name.empty() ? "" : ", region '" + r.name + "'")
    << "\n";
  o << frames_str(r.frames, static_cast<size_t>(c.debug_max_frame));
  o << "root hashes:";
  for (const ir::Value& v : roots) o << " " << v.hash().hex();
  o << "\n" << (c.save_graphs_fmt == "dot" ? ir::dump_dot(roots) : ir::dump_text(roots));
  o << "graph hash: " << r.hash.hex() << "\n\n";
  std::lock_guard<std::mutex> l(g_write_mu);
  std::ofstream f(c.save_graphs_file, std::ios::app);
  f << o.str();
}

void check_step_patterns(int64_t step) {
  if (config().debug < 1) return;
  // Syncs from several threads may call this at once; the pattern state is shared.
  static std::mutex state_mu;
  std::lock_guard<std::mutex> state_lock(state_mu);
  static int64_t compiles_at_10 = -1, reads_at_10 = -1;
  static bool warned_compiles = false, warned_reads = false;
  int64_t compiles = counter_value("UncachedCompile");
  int64_t reads = counter_value("TransferFromDevice");
  if (step == 10) {
    compiles_at_10 = compiles;
    reads_at_10 = reads;
  }
  if (step <= 10 || compiles_at_10 < 0) return;
  int64_t steps = step - 10;
  if (!warned_compiles && steps >= 2 && (compiles - compiles_at_10) * 2 > steps) {
    warned_compiles = true;
    debug_write("[lazuli] warning: " + std::to_string(compiles - compiles_at_10) + " compiles in the " +
                std::to_string(steps) + " steps after warm-up: every step builds a new graph. Set "
                "LAZULI_EXPLAIN_RECOMPILES=1 to see why (a changing input shape, a tensor kept alive "
                "across steps, a baked constant).\n");
  }
  if (!warned_reads && steps >= 2 && (reads - reads_at_10) * 2 > steps) {
    warned_reads = true;
    debug_write("[lazuli] warning: " + std::to_string(reads - reads_at_10) + " value reads in " +
                std::to_string(steps) + " steps: each read runs the graph it needs and waits. Read "
                "less often, or inside lz.add_step_closure so the read reuses the step's execution.\n");
  }
  static bool warned_fallback = false;
  if (!warned_fallback) {
    for (const auto& name : counter_names()) {
      if (name.rfind("fallback::", 0) == 0 && counter_value(name) > 0) {
        warned_fallback = true;
        debug_write("[lazuli] warning: op " + name.substr(10) + " ran on the host (no compiled kernel); "
                    "it costs a copy each time.\n");
        break;
      }
    }
  }
}

}  // namespace lz
