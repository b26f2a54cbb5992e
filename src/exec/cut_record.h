// What each execution was and why it happened: the cut reason, the graph, and the user's call
// site. The frontend in use (Python, or none for C++) installs a FrameProvider that returns the
// user's frames outside the library; executions ask it for one frame, or for
// LAZULI_DEBUG_MAX_FRAME frames when debugging. The last kKeep records are kept for debug APIs.
#pragma once
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "core/call_site.h"
#include "core/hash.h"
#include "exec/cut_reason.h"

namespace lz {

struct CutRecord {
  CutReason reason;
  Hash128 hash;
  size_t nodes = 0, inputs = 0, outputs = 0;
  bool compiled = false;  // a compile-cache miss
  double compile_ns = 0;
  std::vector<UserFrame> frames;
  std::string explanation;  // why it compiled (a cache miss), in user terms
  std::string cause;        // the explanation's cause id
  std::string name;         // the compiled region's name (lz.compile(name=...)), if any
};

class CutLog {
 public:
  static constexpr size_t kKeep = 64;
  void add(CutRecord r);
  // Oldest first.
  std::vector<CutRecord> recent() const;
  void clear();

 private:
  mutable std::mutex mu_;  // guards records_
  std::deque<CutRecord> records_;  // a replay adds one per call: no shifting of the rest
};

CutLog& cut_log();

}  // namespace lz
