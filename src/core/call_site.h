// The user's call site: the frames of user code (outside the library) that led to an op or an
// execution. The frontend in use installs a FrameProvider (Python's walks its interpreter frames,
// skipping the lazuli package); with none installed (plain C++), call sites are empty.
#pragma once
#include <memory>
#include <string>
#include <vector>

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
// "file:line" of the innermost user frame, interned (one allocation per distinct line), or null.
using CallSite = std::shared_ptr<const std::string>;
using CallSiteProvider = CallSite (*)();
void set_call_site_provider(CallSiteProvider p);
CallSite user_call_site();
// True when debugging settings ask for per-tensor creation sites (they cost a frame walk).
bool record_creation_sites();

}  // namespace lz
