// The "mpi" engine of process groups (dist/process_group.h): liblazuli_mpi.so, loaded with dlopen
// by init_process_group("mpi"), so only it links the system's MPI. Errors come back as
// std::runtime_error (this library does not link liblazuli; the caller names the op).
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "dist/process_group.h"

namespace lz::dist {
namespace {

MPI_Datatype mpi_type(DType t, bool reducing) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool: return MPI_UINT8_T;  // gathered and broadcast as bytes
    case DType::Float16:
    case DType::BFloat16:
      if (!reducing) return MPI_UINT16_T;  // moved as their bits
      break;
  }
  throw std::runtime_error("the mpi engine cannot reduce float16 or bfloat16 (the frontend reduces them in float32)");
}

MPI_Op mpi_op(Reduce r) {
  switch (r) {
    case Reduce::Sum: return MPI_SUM;
    case Reduce::Product: return MPI_PROD;
    case Reduce::Max: return MPI_MAX;
    case Reduce::Min: return MPI_MIN;
  }
  throw std::runtime_error("unknown reduction");
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, static_cast<size_t>(n)));
}

// MPI counts are int: larger buffers go in pieces of at most this many elements.
constexpr int64_t kMaxCount = int64_t{1} << 30;

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes (the default aborts every rank), so a failure raises.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "mpi"; }

  void all_reduce(void* buf, int64_t count, DType dtype, Reduce op) override {
    MPI_Datatype t = mpi_type(dtype, true);
    size_t esize = dtype_bytes(dtype);
    for (int64_t at = 0; at < count; at += kMaxCount) {
      int n = static_cast<int>(std::min(kMaxCount, count - at));
      check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(buf) + at * esize, n, t, mpi_op(op), MPI_COMM_WORLD),
            "MPI_Allreduce");
    }
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    if (count > kMaxCount) throw std::runtime_error("all_gather of more than 2**30 elements per rank");
    check(MPI_Allgather(in, static_cast<int>(count), mpi_type(dtype, false), out, static_cast<int>(count),
                        mpi_type(dtype, false), MPI_COMM_WORLD),
          "MPI_Allgather");
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, Reduce op) override {
    if (count > kMaxCount) throw std::runtime_error("reduce_scatter of more than 2**30 elements per rank");
    check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), mpi_type(dtype, true), mpi_op(op),
                                   MPI_COMM_WORLD),
          "MPI_Reduce_scatter_block");
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    MPI_Datatype t = mpi_type(dtype, false);
    size_t esize = dtype_bytes(dtype);
    for (int64_t at = 0; at < count; at += kMaxCount) {
      int n = static_cast<int>(std::min(kMaxCount, count - at));
      check(MPI_Bcast(static_cast<char*>(buf) + at * esize, n, t, root, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  static size_t dtype_bytes(DType t) {
    switch (t) {
      case DType::Float64:
      case DType::Int64: return 8;
      case DType::Float32:
      case DType::Int32: return 4;
      case DType::Float16:
      case DType::BFloat16: return 2;
      case DType::Bool: return 1;
    }
    return 1;
  }
  int rank_ = 0, size_ = 1;
};

}  // namespace
}  // namespace lz::dist

// Initializes MPI (for any thread: programs run on the device's executor thread) unless the
// program already did, and returns the world group; null with *why on failure.
extern "C" __attribute__((visibility("default"))) lz::dist::ProcessGroup* lazuli_create_mpi_group(std::string* why) {
  try {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        *why = "MPI_Init_thread failed";
        return nullptr;
      }
      if (provided < MPI_THREAD_SERIALIZED) {
        *why = "this MPI cannot be called from the thread that runs programs (it provides thread level " +
               std::to_string(provided) + ", Lazuli needs MPI_THREAD_SERIALIZED)";
        return nullptr;
      }
      // Open MPI's launcher reports a rank that exits without MPI_Finalize as failed.
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    return new lz::dist::MpiGroup();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}
