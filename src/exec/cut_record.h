// What each execution was and why it happened: the cut reason, the graph, and the user's call
// site. The frontend in use (Python, or none for C++) installs a FrameProvider that returns the
// user's frames outside the library; executions ask it for one frame, or for
// LAZULI_DEBUG_MAX_FRAME frames when debugging. The last kKeep records are kept for debug APIs.
#pragma once
#include <mutex>
#include <string>
#include <vector>

#include "core/hash.h"
#include "exec/cut_reason.h"

namespace lz {

struct UserFrame {
  std::string file;
  int line = 0;
  std::string function;
};

// Must be cheap for max_frames == 1. Called with no lock of ours held.
using FrameProvider = std::vector<UserFrame> (*)(int max_frames);
void set_frame_provider(FrameProvider p);
std::vector<UserFrame> user_frames(int max_frames);

struct CutRecord {
  CutReason reason;
  Hash128 hash;
  size_t nodes = 0, inputs = 0, outputs = 0;
  bool compiled = false;  // a compile-cache miss
  double compile_ns = 0;
  std::vector<UserFrame> frames;
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
  std::vector<CutRecord> records_;
};

CutLog& cut_log();

}  // namespace lz
