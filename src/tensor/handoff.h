// Handing tensors between two front ends of one process by number: the Python module (_C, built
// with Lazuli's pybind11) and the PyTorch device (_device.so, reached through torch's dispatcher)
// share the runtime (liblazuli.so) but no Python type, so lazuli.torch.capture passes the Lazuli
// tensors of device tensors to the capture core, and its results back, as a ticket: put() keeps
// the tensors under a new number, take() returns them once and forgets the number.
//
// A ticket that is unknown (never issued, or already taken) raises ValueError, never touches
// memory: a number from Python is not trusted as an address. Tickets are taken at once by the
// code that asked for them; one left behind (an exception between put and take) holds its
// tensors until release_all_tickets() or the end of the process.
#pragma once
#include <cstdint>
#include <vector>

#include "lazuli/tensor.h"

namespace lz::internal {

uint64_t put_tensors(std::vector<Tensor> tensors);
std::vector<Tensor> take_tensors(uint64_t ticket);
// Drops every outstanding ticket (tests; a front end recovering from an error).
void release_all_tickets();

}  // namespace lz::internal
