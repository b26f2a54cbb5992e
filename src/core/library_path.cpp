#include "core/library_path.h"

#include <dlfcn.h>

namespace lz {

std::string sibling_library_path(const std::string& file) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&sibling_library_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + file;
  }
  return file;
}

}  // namespace lz
