// Runtime calls (API.md "Runtime"): the step barrier, explicit syncs, waiting, step closures.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "lazuli/tensor.h"

namespace lz {

// The step barrier: syncs every live tensor with pending IR (views excluded), may donate buffers,
// then runs the step closures. Returns once the program is scheduled, unless `wait`.
// Rethrows (once) the error of an earlier asynchronous run, as an ExecutionError.
void sync(bool wait = false, bool reset_scope = true);
// Sync only these tensors (a barrier: donation allowed).
void sync_tensors(const std::vector<Tensor>& tensors, bool wait = false);
// Blocks until every scheduled program has finished; rethrows a pending asynchronous error.
void wait();
// Runs fn after the next step barrier.
void add_step_closure(std::function<void()> fn);
int device_count();
// "cpu" or "interp".
std::string backend();

}  // namespace lz
