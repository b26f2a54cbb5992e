// What LAZULI_DEBUG, LAZULI_EXPLAIN_RECOMPILES and LAZULI_SAVE_GRAPHS_FILE print. Output goes through
// core/debug_write.h: stderr, or appended to LAZULI_DEBUG_FILE; blocks never interleave.
#pragma once
#include <string>
#include <vector>

#include "core/debug_write.h"
#include "exec/cut_record.h"
#include "ir/node.h"

namespace lz {

// LAZULI_DEBUG=1: a block for every compile; 2: for every execution. With only
// LAZULI_EXPLAIN_RECOMPILES, one line per compile-cache miss.
void report_execution(const CutRecord& r);
// LAZULI_SAVE_GRAPHS_FILE: the reason, frames, root hashes, the graph and its hash.
void save_graph(const CutRecord& r, const std::vector<ir::Value>& roots);
// LAZULI_DEBUG: after each step barrier, warn once about patterns that cost time every step.
void check_step_patterns(int64_t step);

}  // namespace lz
