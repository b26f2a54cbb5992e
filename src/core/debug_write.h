// The one place Lazuli's diagnostics are written: LAZULI_DEBUG_FILE if set (appended), else
// stderr. Thread-safe; every layer (backend warnings, step log, explanations) writes through it
// so a user who redirects diagnostics gets all of them.
#pragma once
#include <string>

namespace lz {

void debug_write(const std::string& text);
// The same without its lock, for an exit handler (the lock, a function's static, may already be
// destroyed then, and no other thread writes any more).
void debug_write_at_exit(const std::string& text);

}  // namespace lz
