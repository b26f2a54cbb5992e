// One registry of counters and timed metrics, after LTC's metrics.h.
// Counters are atomic int64s created on first use and never destroyed, so a call site may cache
// the pointer (LZ_COUNTER does). Timed metrics keep count, total and the last kMaxSamples samples
// (nanoseconds) for percentiles. Thread-safe; the registry mutex guards only creation and listing.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace lz {

class Counter {
 public:
  explicit Counter(std::string name) : name_(std::move(name)) {}
  void add(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }
  void reset() { value_.store(0, std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::atomic<int64_t> value_{0};
};

struct MetricData {
  int64_t count = 0;
  double total = 0;              // sum of all samples, in the metric's unit (ns for timers)
  std::vector<double> samples;   // the most recent samples, oldest first
};

class TimedMetric {
 public:
  static constexpr size_t kMaxSamples = 1024;
  explicit TimedMetric(std::string name) : name_(std::move(name)) {}
  void add_sample(double v);
  MetricData data() const;
  void reset();
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  mutable std::mutex mu_;  // guards everything below
  int64_t count_ = 0;
  double total_ = 0;
  std::vector<double> ring_;
  size_t next_ = 0;
};

Counter* get_counter(const std::string& name);
TimedMetric* get_metric(const std::string& name);
// 0 when the counter was never created.
int64_t counter_value(const std::string& name);
std::vector<std::string> counter_names();
std::vector<std::string> metric_names();
bool metric_data(const std::string& name, MetricData* out);
void clear_counters();
void clear_metrics();
std::string metrics_report();
std::string short_metrics_report();

// Adds the scope's wall time, in ns, to a timed metric.
class ScopedTimer {
 public:
  explicit ScopedTimer(TimedMetric* m) : m_(m), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    m_->add_sample(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() -
                                                            start_).count());
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  TimedMetric* m_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lz

#define LZ_COUNTER(name, n)                                          \
  do {                                                               \
    static ::lz::Counter* lz_counter_ = ::lz::get_counter(name);     \
    lz_counter_->add(n);                                             \
  } while (0)

#define LZ_CONCAT_INNER(a, b) a##b
#define LZ_CONCAT(a, b) LZ_CONCAT_INNER(a, b)
#define LZ_TIMED(name)                                                          \
  static ::lz::TimedMetric* LZ_CONCAT(lz_metric_, __LINE__) = ::lz::get_metric(name); \
  ::lz::ScopedTimer LZ_CONCAT(lz_timer_, __LINE__)(LZ_CONCAT(lz_metric_, __LINE__))
