// Capture and replay: a training or inference step traced once per input signature, then replayed
// with new inputs and no re-tracing (Python: lz.capture). See docs/capture.md for the contract:
// what a replay reads (the arguments, and the tensors that existed before the call), what it
// writes (tensors updated in place, tensors the function created and kept, returned tensors), and
// what it never does (run the function's code again). From C++, one check the Python frontend
// makes is yours to keep: do not return a tensor the function also keeps elsewhere (a member, a
// container); replays return a new tensor and would leave the kept one stale. Return a copy.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lazuli/tensor.h"

namespace lz {

class CaptureCache;

class Captured {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>;
  // full_graph: an execution inside fn (a value read) raises UnexpectedExecutionError instead of
  // making fn traced on every call.
  explicit Captured(Fn fn, std::string name = "captured", bool full_graph = false);
  // Replays when two traces of this signature (argument dtypes and shapes, grad mode) agreed and
  // nothing fn depends on has gone; traces fn otherwise. Returned tensors are new on each replay.
  std::vector<Tensor> operator()(const std::vector<Tensor>& args);
  int64_t traces() const;
  int64_t replays() const;
  // Why the last call traced instead of replaying, when it was not simply warming up; "" if none.
  std::string last_reason() const;

 private:
  Fn fn_;
  std::shared_ptr<CaptureCache> cache_;
};

}  // namespace lz
