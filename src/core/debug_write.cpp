#include "core/debug_write.h"

#include <cstdio>
#include <fstream>
#include <mutex>

#include "core/config.h"

namespace lz {

void debug_write_at_exit(const std::string& text) {
  const std::string& path = config().debug_file;
  if (path.empty()) {
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
    return;
  }
  std::ofstream f(path, std::ios::app);
  f << text;
}

void debug_write(const std::string& text) {
  static std::mutex mu;  // one writer at a time: lines from several threads stay whole
  std::lock_guard<std::mutex> l(mu);
  debug_write_at_exit(text);
}

}  // namespace lz
