#include "exec/program_profile.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/debug_write.h"
#include "lazuli/debug.h"
#include "lazuli/error.h"

namespace lz {
namespace profile {
namespace {

struct StepEntry {
  StepLabel label;
  int64_t ns = 0;
  int64_t runs = 0;
};

struct ProgramEntry {
  std::string label;
  int64_t runs = 0;
  int64_t ns = 0;
  std::vector<StepEntry> steps;  // empty: the backend times whole runs only
};

struct Registry {
  std::mutex mu;  // guards programs and order
  std::unordered_map<Hash128, ProgramEntry, Hash128Hasher> programs;
  std::vector<Hash128> order;  // first-run order, for a stable listing
};

// Leaked: the report at exit (LAZULI_PROFILE_PROGRAMS) reads it after static destructors may
// have run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<bool>& switch_() {
  static std::atomic<bool> on{config().profile_programs};
  return on;
}

void report_at_exit() { debug_write_at_exit(debug::program_profile_report()); }

// The report of LAZULI_PROFILE_PROGRAMS is written at exit (registered at the first record, after
// the executor's own exit handler: it runs first, and drains the runs in flight).
void register_report_at_exit() {
  static std::once_flag once;
  if (!config().profile_programs) return;
  std::call_once(once, [] { std::atexit(report_at_exit); });
}

std::string ms(int64_t ns) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(ns >= 100'000'000 ? 1 : 3) << static_cast<double>(ns) / 1e6;
  return os.str();
}

std::string percent(int64_t part, int64_t whole) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1)
     << (whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0) << "%";
  return os.str();
}

std::string us_per_run(int64_t ns, int64_t runs) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1)
     << (runs > 0 ? static_cast<double>(ns) / 1e3 / static_cast<double>(runs) : 0.0);
  return os.str();
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

bool enabled() { return switch_().load(std::memory_order_relaxed); }

void set_enabled(bool on) { switch_().store(on, std::memory_order_relaxed); }

void record_run(const Hash128& hash, const std::string& label, const Executable& exe,
                int64_t total_ns, const StepTimes& steps) {
  register_report_at_exit();
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto [it, fresh] = r.programs.try_emplace(hash);
  ProgramEntry& e = it->second;
  if (fresh) {
    r.order.push_back(hash);
    e.label = label;
    for (StepLabel& s : exe.step_labels()) e.steps.push_back({std::move(s), 0, 0});
  }
  e.runs += 1;
  e.ns += total_ns;
  if (steps.ns.size() != e.steps.size()) return;
  for (size_t i = 0; i < steps.ns.size(); ++i) {
    e.steps[i].ns += steps.ns[i];
    e.steps[i].runs += 1;
  }
}

}  // namespace profile

namespace debug {

void profile_programs(bool enabled) { profile::set_enabled(enabled); }

bool profiling_programs() { return profile::enabled(); }

std::vector<ProfileRow> program_profile() {
  profile::Registry& r = profile::registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<ProfileRow> out;
  for (const Hash128& h : r.order) {
    const profile::ProgramEntry& e = r.programs.at(h);
    const std::string hex = h.hex();
    out.push_back({hex, e.label, -1, "program", "the whole run", e.runs, e.ns});
    for (size_t i = 0; i < e.steps.size(); ++i) {
      const profile::StepEntry& s = e.steps[i];
      out.push_back({hex, e.label, static_cast<int>(i), s.label.kind, s.label.what, s.runs, s.ns});
    }
  }
  return out;
}

std::string program_profile_report(int top) {
  using profile::ms, profile::pad, profile::percent, profile::us_per_run;
  if (top < 0)
    throw ValueError("program_profile_report: top must be >= 0, got " + std::to_string(top));
  std::vector<ProfileRow> rows = program_profile();
  std::vector<const ProfileRow*> programs, steps;
  int64_t total = 0, runs = 0, in_steps = 0;
  std::map<std::string, int64_t> by_kind;
  for (const ProfileRow& row : rows) {
    if (row.step < 0) {
      programs.push_back(&row);
      total += row.total_ns;
      runs += row.runs;
    } else {
      steps.push_back(&row);
      by_kind[row.kind] += row.total_ns;
      in_steps += row.total_ns;
    }
  }
  std::ostringstream os;
  os << "[lazuli] program profile: " << programs.size() << " program(s), " << runs << " run(s), "
     << ms(total) << " ms in programs\n";
  if (programs.empty()) {
    os << "  nothing ran while profiling was on (debug.profile_programs(), "
          "LAZULI_PROFILE_PROGRAMS=1)\n";
    return os.str();
  }
  if (!steps.empty()) {
    std::vector<std::pair<std::string, int64_t>> kinds(by_kind.begin(), by_kind.end());
    // What the timed steps leave out of the runs they belong to: buffers set up, outputs bound,
    // collectives waited for at the end (and whole runs of backends that name no steps).
    kinds.emplace_back("outside steps", total - in_steps);
    std::stable_sort(kinds.begin(), kinds.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    os << "  by kind:";
    for (size_t i = 0; i < kinds.size(); ++i) {
      os << (i ? ", " : " ") << kinds[i].first << " " << ms(kinds[i].second) << " ms ("
         << percent(kinds[i].second, total) << ")";
    }
    os << "\n";
  }
  auto by_time = [](const ProfileRow* a, const ProfileRow* b) { return a->total_ns > b->total_ns; };
  std::stable_sort(programs.begin(), programs.end(), by_time);
  std::stable_sort(steps.begin(), steps.end(), by_time);
  const std::string head = "        ms       %    runs    us/run  ";
  os << "  programs, by time:\n" << head << "program\n";
  const size_t shown = std::min(programs.size(), static_cast<size_t>(std::max(top, 1)));
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& p = *programs[i];
    os << "  " << pad(ms(p.total_ns), 8) << pad(percent(p.total_ns, total), 8)
       << pad(std::to_string(p.runs), 8) << pad(us_per_run(p.total_ns, p.runs), 10) << "  "
       << p.program.substr(0, 12) << " " << (p.label.empty() ? "(unnamed)" : p.label) << "\n";
  }
  if (programs.size() > shown) os << "  ... " << programs.size() - shown << " more program(s)\n";
  if (!steps.empty() && top > 0) {
    os << "  steps, by time (program #step: what it computes):\n" << head << "step\n";
    for (size_t i = 0; i < std::min(steps.size(), static_cast<size_t>(top)); ++i) {
      const ProfileRow& s = *steps[i];
      os << "  " << pad(ms(s.total_ns), 8) << pad(percent(s.total_ns, total), 8)
         << pad(std::to_string(s.runs), 8) << pad(us_per_run(s.total_ns, s.runs), 10) << "  "
         << s.program.substr(0, 12) << " #" << s.step << ": " << s.what << "\n";
    }
  }
  return os.str();
}

void clear_program_profile() {
  profile::Registry& r = profile::registry();
  std::lock_guard<std::mutex> l(r.mu);
  r.programs.clear();
  r.order.clear();
}

}  // namespace debug
}  // namespace lz
