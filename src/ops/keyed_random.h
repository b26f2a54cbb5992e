// Random draws from an explicit key instead of the device's RNG state: the torch.compile bridge
// passes a fresh key as an input of each run of a program it replays, so each run draws anew
// while the program stays the same (aten/table.h, Call). Counter-based, as lz::rand's draws.
#pragma once
#include "lazuli/tensor.h"

namespace lz::internal {

// U[0, 1) of `shape` and floating `dtype` from `key` (an int64 0-d tensor); TypeError otherwise.
Tensor rand_from_key(const Tensor& key, const IntList& shape, DType dtype);
// The key after `key`, as the device's RNG state advances.
Tensor rng_advance(const Tensor& key);

}  // namespace lz::internal
