// Ctrl-C during a compile: the compile stops at the next kernel boundary and KeyboardInterrupt is
// raised (src/backend/compile_interrupt.h has the contract; exec/front_end.h brings it).
//
// The compiling thread may not hold the GIL (a sync releases it), and taking the GIL to ask
// Python about signals could deadlock against a thread that holds it while it waits for the
// executor. So the check needs no GIL: while the Python main thread compiles, a C handler for
// SIGINT is put in front of Python's; it counts the signal and calls Python's handler, so Python
// still sees every signal. When the compile stops, the translator below lets Python run its
// handler (PyErr_CheckSignals), which raises KeyboardInterrupt as usual.
#include <signal.h>

#include <atomic>

#include "bindings.h"

namespace lzpy {
namespace {

unsigned long g_main_thread = 0;  // Python's main thread: the only one that handles signals
std::atomic<uint64_t> g_sigints{0};
struct sigaction g_previous;  // the handler ours chains to (Python's), set before ours is installed
bool g_installed = false;     // ours is installed (main thread only)
uint64_t g_start = 0;         // g_sigints when the compile began (main thread only)

void on_sigint(int sig, siginfo_t* info, void* context) {
  g_sigints.fetch_add(1, std::memory_order_relaxed);
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

bool is_ours(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == &on_sigint;
}

uint64_t begin_compile() {
  // Another thread's compile runs to its end: Python handles the signal in the main thread.
  if (PyThread_get_thread_ident() != g_main_thread) return 0;
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0) return 0;
  if (!is_ours(current)) {
    bool handled = (current.sa_flags & SA_SIGINFO)
                       ? current.sa_sigaction != nullptr
                       : current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
    if (!handled) return 0;  // SIG_DFL ends the process anyway; SIG_IGN means no interrupt
    g_previous = current;
    struct sigaction ours = current;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = &on_sigint;
    if (sigaction(SIGINT, &ours, nullptr) != 0) return 0;
    g_installed = true;
  }
  g_start = g_sigints.load();
  return 1;
}

bool poll_compile(uint64_t) { return g_sigints.load(std::memory_order_relaxed) != g_start; }

void end_compile(uint64_t) {
  struct sigaction current;
  if (g_installed && sigaction(SIGINT, nullptr, &current) == 0 && is_ours(current)) {
    sigaction(SIGINT, &g_previous, nullptr);
  }
  g_installed = false;
}

}  // namespace

void resume_after_interrupt(const std::function<void()>& work) {
  for (;;) {
    try {
      work();
      return;
    } catch (const lz::CompileInterrupted&) {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }
}

void install_compile_interrupt(py::module_&) {
  g_main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  lz::set_compile_interrupt_hook({&begin_compile, &poll_compile, &end_compile});
  // Registered after the module's translator, so it is tried first.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lz::CompileInterrupted& e) {
      // Python's handler runs now (KeyboardInterrupt by default); a handler that does not
      // raise still gets an error: the compile was abandoned.
      if (PyErr_CheckSignals() != 0) return;
      PyErr_SetString(
          py::module_::import("lazuli._C").attr("Error").ptr(),
          (std::string(e.what()) + " by SIGINT (the signal handler did not raise)").c_str());
    }
  });
}

}  // namespace lzpy
