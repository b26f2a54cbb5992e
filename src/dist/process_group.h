// Process groups: the processes (ranks) that run one program together, and the existing engine
// that moves their data. Collective nodes (ir op class Collective: all_reduce, all_gather,
// reduce_scatter, broadcast) are recorded into the step graph like any op and run through the
// group when the program runs (backend/collective.cpp); every rank must run the same programs in
// the same order, as with any collective engine.
//
// Engines are never written here: "mpi" is a plugin (liblazuli_mpi.so, src/dist/mpi/) over the
// system's MPI, loaded with dlopen at init_process_group, so the library builds and runs where MPI
// is absent. Other engines (torch.distributed's process group for PyTorch programs) implement the
// same interface.
//
// Thread safety: init and destroy take a lock; a group's operations are called from one thread
// at a time (programs of one device run in order on its executor thread), and MPI is initialized
// for any thread.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lazuli/dtype.h"

namespace lz::dist {

// The reductions engines implement (ir::CollectiveAttrs::Reduce has the same values). An average
// is a sum and a division, recorded by the frontend.
enum class Reduce : int64_t { Sum = 0, Product = 1, Max = 2, Min = 3 };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string engine() const = 0;  // "mpi"
  // Buffers are dense, of `count` elements of `dtype` (float16/bfloat16 only in gathers and
  // broadcasts: the frontend reduces them in float32). Each throws a std::exception when the
  // engine fails (backend/collective.cpp names the op); the group is then unusable.
  // In place: every rank's `buf` becomes the reduction over the ranks.
  virtual void all_reduce(void* buf, int64_t count, DType dtype, Reduce op) = 0;
  // `out` (size() * count) holds every rank's `in` (count), in rank order.
  virtual void all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  // `in` holds size() blocks of `count`; rank r's `out` is the reduction of every rank's block r.
  virtual void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, Reduce op) = 0;
  // In place: every rank's `buf` becomes rank `root`'s.
  virtual void broadcast(void* buf, int64_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  // Every rank's `record`, in rank order; every rank passes one of the same length.
  virtual std::vector<std::string> exchange(const std::string& record) = 0;
  // Bounds every wait of the operations above: past `seconds` they throw (a rank is elsewhere
  // or dead; the group is then unusable). 0: wait forever.
  virtual void set_timeout(double seconds) = 0;
  // Ends every rank's process at once (MPI_Abort): a rank that fails outside the others'
  // collectives would otherwise leave them waiting.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The version of this interface an engine plugin was built against; its entry point carries it
// in its name (lazuli_create_mpi_group_abi<N>), so a plugin of another version is refused, not
// called through a different vtable.
inline constexpr int kProcessGroupAbi = 1;

// Before a program that holds collectives runs: checks, with one small exchange, that every rank
// is about to run the same collectives (`summary`: their ops, dtypes, shapes and attributes, in
// order; `site`: where this rank's program was cut, for the message). Throws lz::Error on every
// rank, listing each rank's summary and site, when they differ: the collectives would otherwise
// hang or mix data of different ops.
void check_same_collectives(ProcessGroup& group, const std::string& summary, const std::string& site);

// Starts the world group on `engine` ("mpi"; the ranks come from the launcher: mpirun, or
// torchrun's environment through MPI's own). Throws lz::Error when the world is already started,
// the engine is unknown, or it cannot start (its library missing: the message says what to
// install).
void init_world(const std::string& engine);
// The world group, or null before init_world (and after destroy_world).
std::shared_ptr<ProcessGroup> world();
// The world group; throws lz::Error naming `op` when none is started.
std::shared_ptr<ProcessGroup> require_world(const char* op);
// Ends the world group (MPI stays initialized until the process exits: MPI cannot restart).
void destroy_world();
// Run at process exit before the engine shuts down (MPI_Finalize): the frontend waits there for
// the programs still queued, which may hold collectives.
void set_before_shutdown(void (*fn)());
// Installs `group` as the world (tests; engines written outside the library).
void set_world(std::shared_ptr<ProcessGroup> group);

}  // namespace lz::dist
