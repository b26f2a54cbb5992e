#include "core/metrics.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

namespace lz {
namespace {

struct Registry {
  std::mutex mu;  // guards the two maps (not the values inside)
  std::map<std::string, std::unique_ptr<Counter>> counters;
  std::map<std::string, std::unique_ptr<TimedMetric>> metrics;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: counters outlive static destructors
  return *r;
}

std::string fmt_ns(double ns) {
  char b[64];
  if (ns < 1e3) std::snprintf(b, sizeof b, "%.0fns", ns);
  else if (ns < 1e6) std::snprintf(b, sizeof b, "%.3fus", ns / 1e3);
  else if (ns < 1e9) std::snprintf(b, sizeof b, "%.3fms", ns / 1e6);
  else std::snprintf(b, sizeof b, "%.3fs", ns / 1e9);
  return b;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string metric_line(const std::string& name, const MetricData& d) {
  std::string s = "Metric: " + name + "\n  TotalSamples: " + std::to_string(d.count) +
                  "\n  Accumulator: " + fmt_ns(d.total);
  if (!d.samples.empty()) {
    s += "\n  Percentiles: 1%=" + fmt_ns(percentile(d.samples, 0.01)) +
         "; 5%=" + fmt_ns(percentile(d.samples, 0.05)) +
         "; 50%=" + fmt_ns(percentile(d.samples, 0.5)) +
         "; 95%=" + fmt_ns(percentile(d.samples, 0.95)) +
         "; 99%=" + fmt_ns(percentile(d.samples, 0.99));
  }
  return s + "\n";
}

}  // namespace

void TimedMetric::add_sample(double v) {
  std::lock_guard<std::mutex> l(mu_);
  ++count_;
  total_ += v;
  if (ring_.size() < kMaxSamples) {
    ring_.push_back(v);
  } else {
    ring_[next_] = v;
    next_ = (next_ + 1) % kMaxSamples;
  }
}

MetricData TimedMetric::data() const {
  std::lock_guard<std::mutex> l(mu_);
  MetricData d;
  d.count = count_;
  d.total = total_;
  d.samples.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) d.samples.push_back(ring_[(next_ + i) % ring_.size()]);
  return d;
}

void TimedMetric::reset() {
  std::lock_guard<std::mutex> l(mu_);
  count_ = 0;
  total_ = 0;
  ring_.clear();
  next_ = 0;
}

Counter* get_counter(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto& slot = r.counters[name];
  if (!slot) slot = std::make_unique<Counter>(name);
  return slot.get();
}

TimedMetric* get_metric(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto& slot = r.metrics[name];
  if (!slot) slot = std::make_unique<TimedMetric>(name);
  return slot.get();
}

int64_t counter_value(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.counters.find(name);
  return it == r.counters.end() ? 0 : it->second->value();
}

std::vector<std::string> counter_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> v;
  for (auto& [k, c] : r.counters) v.push_back(k);
  return v;
}

std::vector<std::string> metric_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> v;
  for (auto& [k, c] : r.metrics) v.push_back(k);
  return v;
}

bool metric_data(const std::string& name, MetricData* out) {
  Registry& r = registry();
  TimedMetric* m = nullptr;
  {
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.metrics.find(name);
    if (it == r.metrics.end()) return false;
    m = it->second.get();
  }
  *out = m->data();
  return true;
}

void clear_counters() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  for (auto& [k, c] : r.counters) c->reset();
}

void clear_metrics() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  for (auto& [k, m] : r.metrics) m->reset();
}

std::string metrics_report() {
  std::string s;
  for (const auto& name : metric_names()) {
    MetricData d;
    if (metric_data(name, &d) && d.count > 0) s += metric_line(name, d);
  }
  for (const auto& name : counter_names()) {
    int64_t v = counter_value(name);
    if (v != 0) s += "Counter: " + name + "\n  Value: " + std::to_string(v) + "\n";
  }
  return s;
}

std::string short_metrics_report() {
  static const char* kCounters[] = {"UncachedCompile", "CachedCompile", "MarkStep",
                                    "TransferToDevice", "TransferFromDevice",
                                    "InputOutputAliasCount"};
  static const char* kMetrics[] = {"CompileTime", "ExecuteTime"};
  std::string s;
  for (const char* m : kMetrics) {
    MetricData d;
    if (metric_data(m, &d) && d.count > 0) s += metric_line(m, d);
  }
  for (const char* c : kCounters) {
    s += "Counter: " + std::string(c) + "\n  Value: " + std::to_string(counter_value(c)) + "\n";
  }
  for (const auto& name : counter_names()) {
    if (name.rfind("fallback::", 0) == 0 && counter_value(name) != 0) {
      s += "Counter: " + name + "\n  Value: " + std::to_string(counter_value(name)) + "\n";
    }
  }
  return s;
}

}  // namespace lz
