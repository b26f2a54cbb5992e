// A program compiled from one recording without running it (the warm-up route, DESIGN.md 4),
// then run on new inputs of the same dtypes and shapes with no node made and nothing hashed: how
// a front end replays a graph it traced once (the torch.compile bridge's partitions; the lazy
// device will hold its own). Its parameters are the inputs' buffers and the constants the
// recording uploaded; it holds its executable, so a compile-cache eviction never affects it.
//
// Made before the recording, over stand-in inputs (it notes their buffers, which a stand-in
// updated in place no longer holds), compiled after it. Donated pairs (input, output) compute the
// output into the input's own memory (an in-place update of the caller's tensor: no copy back),
// as a step barrier's donation does; a failed run leaves such an input as it was (backend.h).
//
// Threading: compile and run take the executor lock (exec/graph_executor.h); one WarmProgram is
// not to be used from two threads at once.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "exec/external_input.h"
#include "exec/graph_executor.h"
#include "lazuli/tensor.h"

namespace lz {

class WarmProgram {
 public:
  // Every input must hold device data (ValueError otherwise).
  // `reason` is the cut reason its compile reports (debug output, recent_cuts); `name` keys its
  // recompile explanations (SyncConfig::name).
  WarmProgram(const std::vector<Tensor>& inputs, std::string name,
              CutReason reason = CutReason::CaptureWarmup);

  // Compiles the pending IR of `outputs` (recorded on the stand-in inputs) without running it.
  // donate: (input, output) pairs whose output may be computed into the input's memory (kept
  // only where the program reads the input and the types match). ValueError when compiled
  // already, when nothing is pending, or when an output is not pending IR.
  void compile(const std::vector<Tensor>& outputs,
               const std::vector<std::pair<int, int>>& donate = {});

  // Schedules one run on `inputs` (device data of the stand-ins' dtypes and shapes, ValueError
  // otherwise) and returns the outputs at once, as device-data tensors filled when it finishes.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // run() over external memory, with no tensor and no DeviceBuffer made per input: a front end's
  // replay of a partition (the torch.compile bridge), whose cost per input is most of a small
  // model's step. The caller vouches for each input's byte count and layout; a null or
  // misaligned address is a ValueError. Its caller reads the outputs at once, so a short program
  // runs on the calling thread before this returns (run_compiled's caller_waits).
  std::vector<Tensor> run_external(const std::vector<ExternalInput>& inputs);
  // Whether the program may compute an output into input `i`'s memory (a donated pair): that
  // memory then lives as long as the output, so its owner should hold that input alone.
  bool donates_input(size_t i) const;

  const Hash128& hash() const { return cap_.program.hash; }
  size_t num_constants() const;  // parameters that are the recording's constants
  // The dtype and shape each input must have (the stand-ins').
  const std::vector<std::pair<DType, Shape>>& input_types() const { return input_types_; }

 private:
  std::string name_;
  CutReason reason_;
  ProgramCapture cap_;
  std::vector<int> out_root_;     // output -> root of the program
  std::vector<int> param_input_;  // parameter -> input index, -1 for a constant
  std::vector<std::pair<DType, Shape>> input_types_;
  std::vector<BufferPtr> input_buffers_;        // until compiled
  std::vector<std::pair<int, int>> donations_;  // (parameter, root): computed into the input
  std::vector<bool> donated_input_;             // per input: some output is computed into it

  void check_ready(size_t n_inputs) const;  // compiled, and given one buffer per input
  // One slot per parameter: a constant's own, input_slot(i) for one that is input i.
  std::vector<SlotPtr> param_slots(const std::function<SlotPtr(int)>& input_slot);
  // caller_waits: run_compiled's (the caller reads every output at once).
  std::vector<Tensor> run_params(std::vector<SlotPtr> params, bool caller_waits = false);
};

}  // namespace lz
