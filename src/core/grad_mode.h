// Grad mode: a thread-local switch (default on). With it off, new IR nodes never require grad,
// so optimizer updates and evaluation record no autograd information (lz::NoGradGuard).
#pragma once

namespace lz::autograd {

bool grad_enabled();
void set_grad_enabled(bool enabled);

}  // namespace lz::autograd
