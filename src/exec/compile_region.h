// Compile regions (lz.compile): a function run between two syncs, optionally guarded.
//   full_graph:           any execution inside the region raises UnexpectedExecutionError, before
//                         it runs, naming the cause and the user frame.
//   max_different_graphs: when the region's traced graph differs from the N already seen, raise
//                         TooManyGraphsError before compiling, naming the first node where the new
//                         trace diverges from the closest known one and the line that recorded it.
//   name:                 labels the region's executions in debug output and graph files.
// The active region is per thread; known graphs are kept per region key (the Python function).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "core/call_site.h"
#include "exec/cut_reason.h"
#include "ir/node.h"

namespace lz {

struct RegionState {
  std::string name;
  bool full_graph = false;
  int max_graphs = -1;  // -1: unlimited
  int64_t key = 0;
  // A capture trace (exec/capture.cpp): an execution inside it is noted, not raised (unless
  // full_graph), and makes the trace unreplayable.
  bool capture = false;
  std::string executed;  // the first execution inside a capture trace: cause and user frame
  // Where each op's result node was recorded (only when max_graphs is set).
  std::unordered_map<const ir::Node*, UserFrame> locations;
};

// The innermost active region on this thread, or null.
RegionState* current_region();
void enter_region(std::string name, bool full_graph, int max_graphs, int64_t key);
void exit_region();
// Called before every execution with the user's frames (taken before any lock): throws
// UnexpectedExecutionError inside a full_graph region.
void check_execution_allowed(CutReason reason, const std::vector<UserFrame>& frames);
// Called by the frontend for each op's result while a region records locations.
void note_node_location(const ir::Node* n);
// At the region's end, before its sync: checks the traced graph against max_different_graphs.
void check_region_graph();

}  // namespace lz
