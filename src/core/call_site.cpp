#include "core/call_site.h"

#include <atomic>

#include "core/config.h"

namespace lz {
namespace {
std::atomic<FrameProvider> g_provider{nullptr};
}

void set_frame_provider(FrameProvider p) { g_provider.store(p); }

std::vector<UserFrame> user_frames(int max_frames) {
  FrameProvider p = g_provider.load();
  if (!p || max_frames <= 0) return {};
  return p(max_frames);
}

namespace {
std::atomic<CallSiteProvider> g_site_provider{nullptr};
}

void set_call_site_provider(CallSiteProvider p) { g_site_provider.store(p); }

CallSite user_call_site() {
  if (CallSiteProvider p = g_site_provider.load()) return p();
  std::vector<UserFrame> f = user_frames(1);
  if (f.empty()) return nullptr;
  return std::make_shared<const std::string>(f[0].file + ":" + std::to_string(f[0].line));
}

bool record_creation_sites() {
  const Config& c = config();
  return (c.debug > 0 || c.explain_recompiles) && g_provider.load() != nullptr;
}

}  // namespace lz
