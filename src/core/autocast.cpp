#include "lazuli/autocast.h"

#include <string>

#include "lazuli/error.h"

namespace lz {
namespace {
thread_local AutocastState t_autocast;
}  // namespace

AutocastState autocast_state() { return t_autocast; }

void set_autocast_state(AutocastState state) {
  if (state.dtype != DType::BFloat16 && state.dtype != DType::Float16) {
    throw ValueError("autocast: dtype must be bfloat16 or float16, got " + std::string(dtype_name(state.dtype)));
  }
  t_autocast = state;
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : previous_(t_autocast) {
  set_autocast_state({enabled, dtype});
}
AutocastGuard::~AutocastGuard() { t_autocast = previous_; }

}  // namespace lz
