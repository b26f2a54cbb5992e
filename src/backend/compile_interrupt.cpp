// The compile interruption hook (compile_interrupt.h).
#include "backend/compile_interrupt.h"

#include <mutex>

namespace lz {
namespace {
std::mutex g_hook_mu;  // guards g_hook
CompileInterruptHook g_hook;
}  // namespace

void set_compile_interrupt_hook(const CompileInterruptHook& hook) {
  std::lock_guard<std::mutex> g(g_hook_mu);
  g_hook = hook;
}

CompileInterruptScope::CompileInterruptScope() {
  {
    std::lock_guard<std::mutex> g(g_hook_mu);
    hook_ = g_hook;
  }
  if (hook_.begin) token_ = hook_.begin();
}

CompileInterruptScope::~CompileInterruptScope() {
  if (token_ && hook_.end) hook_.end(token_);
}

bool CompileInterruptScope::poll() const { return token_ && hook_.poll && hook_.poll(token_); }

}  // namespace lz
