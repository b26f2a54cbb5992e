// Progress of long work that runs with Python's GIL released (a first compile of hundreds of
// kernels): silent while it is short, then reported in the debug stream (stderr, or
// LAZULI_DEBUG_FILE). On a terminal, one line redrawn in place as a bar ("[lazuli] compiling
// kernels [######    ] 37/300, 4.1 s"); elsewhere (a log, a file) one line when the work passes
// the threshold and one when it ends. Threshold: LAZULI_PROGRESS_AFTER_MS (default 2000; -1 never).
//
// Thread-safe: step() may be called from any thread (the pool's compiling workers).
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

namespace lz {

class Progress {
 public:
  // `what`: the noun counted ("kernels"); `total`: how many steps the work has.
  Progress(std::string what, size_t total);
  // Ends the report with one line (its time) when anything was reported.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // How one step ended: real work (a kernel compiled), a cheap one (loaded from the cache), or
  // not done (skipped after an interrupt, or failed). Nothing is reported before some real work
  // was done: a warm cache stays silent.
  enum class Outcome { Worked, Cheap, NotDone };
  void step(Outcome outcome);

 private:
  using Clock = std::chrono::steady_clock;
  void report_locked(size_t done, double seconds);

  const std::string what_;
  const size_t total_;
  const Clock::time_point start_;
  const int64_t after_ms_;
  const bool bar_;  // a terminal: redraw one line
  std::atomic<size_t> done_{0};    // Worked or Cheap
  std::atomic<size_t> worked_{0};  // Worked
  std::atomic<size_t> ended_{0};   // every outcome
  std::mutex mu_;  // guards the fields below and the output
  bool reported_ = false;
  Clock::time_point last_draw_{};
};

}  // namespace lz
