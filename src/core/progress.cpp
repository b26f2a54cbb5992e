#include "core/progress.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "core/config.h"
#include "core/debug_write.h"

namespace lz {
namespace {

std::string seconds_str(double s) {
  std::ostringstream o;
  o.precision(s < 10 ? 2 : 3);
  o << s << " s";
  return o.str();
}

}  // namespace

Progress::Progress(std::string what, size_t total)
    : what_(std::move(what)),
      total_(total),
      start_(Clock::now()),
      after_ms_(config().progress_after_ms),
      bar_(config().debug_file.empty() && ::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  std::lock_guard<std::mutex> l(mu_);
  if (!reported_) return;
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  const size_t done = done_.load(), worked = worked_.load();
  std::string line = "[lazuli] compiled " + std::to_string(worked) + " " + what_;
  if (done > worked) line += " (" + std::to_string(done - worked) + " more loaded from the cache)";
  if (done < total_) line += ", " + std::to_string(total_ - done) + " not done";
  line += " in " + seconds_str(s);
  if (bar_) {
    // Over the bar, then blanks to the bar's width.
    std::fprintf(stderr, "\r%-72s\n", line.c_str());
    std::fflush(stderr);
  } else {
    debug_write(line + "\n");
  }
}

void Progress::step(Outcome outcome) {
  const size_t ended = ended_.fetch_add(1) + 1;
  if (outcome != Outcome::NotDone) done_.fetch_add(1);
  if (outcome == Outcome::Worked) worked_.fetch_add(1);
  const size_t done = done_.load();
  if (after_ms_ < 0 || worked_.load() == 0) return;
  const auto now = Clock::now();
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
  if (elapsed < after_ms_ || ended >= total_) return;
  std::unique_lock<std::mutex> l(mu_, std::try_to_lock);  // a busy reporter: skip this one
  if (!l.owns_lock()) return;
  if (reported_ && (!bar_ || now - last_draw_ < std::chrono::milliseconds(100))) return;
  last_draw_ = now;
  report_locked(done, std::chrono::duration<double>(now - start_).count());
}

void Progress::report_locked(size_t done, double seconds) {
  if (bar_) {
    constexpr size_t kWidth = 24;
    const size_t filled = total_ ? done * kWidth / total_ : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r[lazuli] compiling %s [%s] %zu/%zu, %s", what_.c_str(), bar.c_str(), done,
                 total_, seconds_str(seconds).c_str());
    std::fflush(stderr);
  } else {
    debug_write("[lazuli] compiling " + std::to_string(total_) + " " + what_ + ": " +
                std::to_string(done) + " done after " + seconds_str(seconds) +
                " (a first compile; later runs load them from the kernel cache)\n");
  }
  reported_ = true;
}

}  // namespace lz
