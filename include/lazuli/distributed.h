// Collectives across processes (API.md "Distributed"), named as PyTorch's torch.distributed
// names them. A collective is recorded into the step graph like any op and runs, inside the
// step's program, on the engine of the default process group (MPI: start the program with
// `mpirun -n N`). Every rank must record the same ops in the same order, as with any collective
// engine; the group's size enters the program's hash.
#pragma once
#include <string>

#include "lazuli/tensor.h"

namespace lz::distributed {

// AVG is a SUM and a division by the world size (float tensors only).
enum class ReduceOp { SUM, AVG, PRODUCT, MAX, MIN };

// Starts the default process group on `backend` ("mpi"). Throws lz::Error when it is already
// started or the engine cannot start (the message says what to install).
void init_process_group(const std::string& backend = "mpi");
bool is_initialized();
// Throw lz::Error when no group is started.
int get_rank();
int get_world_size();
std::string get_backend();
// Ends the default group (programs recorded for it then raise when they run).
void destroy_process_group();

// In place, as torch.distributed's: the tensor's value becomes the result when the step runs.
// Reductions take float and integer tensors (float16/bfloat16 are reduced in float32).
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::SUM);
void broadcast(Tensor& t, int src);
// Every rank's `t`, concatenated along dim 0 in rank order ([world * n, ...]).
Tensor all_gather(const Tensor& t);
// Dim 0 split into world-size blocks; rank r gets the reduction of every rank's block r.
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::SUM);
// Waits for this process's pending programs, then for every rank to arrive.
void barrier();
// Ends every rank's process now (MPI_Abort), with exit status `code`: what a rank that cannot go
// on calls so the others do not wait for it. An uncaught C++ exception in a rank of a group of
// more than one does this too (lazuli.distributed does it for an uncaught Python exception).
[[noreturn]] void abort(int code = 1);

// DistributedDataParallel's mechanism: every gradient that backward() accumulates into `param`
// is first all-reduced (averaged) over the default group, inside the step graph. backward()
// reduces such gradients in buckets: in the order it produces them, one all_reduce over the
// concatenation of gradients of one dtype until they reach `bucket_cap_bytes` (0: one all_reduce
// per parameter). Throws lz::Error when no group is started, ValueError for a tensor that is not a
// leaf requiring grad or a negative cap.
inline constexpr int64_t kDefaultBucketCapBytes = int64_t{4} << 20;
void average_gradients(const Tensor& param, int64_t bucket_cap_bytes = kDefaultBucketCapBytes);

}  // namespace lz::distributed
