#include "core/grad_mode.h"

#include "lazuli/autograd.h"

namespace lz {
namespace autograd {
namespace {
thread_local bool t_grad_enabled = true;
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

}  // namespace autograd

bool is_grad_enabled() { return autograd::grad_enabled(); }
void set_grad_enabled(bool enabled) { autograd::set_grad_enabled(enabled); }
NoGradGuard::NoGradGuard() : previous_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
NoGradGuard::~NoGradGuard() { autograd::set_grad_enabled(previous_); }
EnableGradGuard::EnableGradGuard() : previous_(autograd::grad_enabled()) {
  autograd::set_grad_enabled(true);
}
EnableGradGuard::~EnableGradGuard() { autograd::set_grad_enabled(previous_); }

}  // namespace lz
