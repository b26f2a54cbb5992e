#include "exec/cut_record.h"

#include <atomic>

namespace lz {
void CutLog::add(CutRecord r) {
  std::lock_guard<std::mutex> l(mu_);
  if (records_.size() == kKeep) records_.pop_front();
  records_.push_back(std::move(r));
}

std::vector<CutRecord> CutLog::recent() const {
  std::lock_guard<std::mutex> l(mu_);
  return {records_.begin(), records_.end()};
}

void CutLog::clear() {
  std::lock_guard<std::mutex> l(mu_);
  records_.clear();
}

CutLog& cut_log() {
  static auto* log = new CutLog();
  return *log;
}

}  // namespace lz
