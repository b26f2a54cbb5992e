// The "mpi" engine of process groups (dist/process_group.h): liblazuli_mpi.so, loaded with dlopen
// by init_process_group("mpi"), so only it links the system's MPI. Errors come back as
// std::runtime_error (this library does not link liblazuli; the caller names the op).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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
  // A communicator of its own over the world's ranks: the program's own MPI calls (mpi4py, say)
  // never pair with Lazuli's, and its error handler stays the program's.
  MpiGroup() {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Errors come back as codes (the default aborts every rank), so a failure raises.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string engine() const override { return "mpi"; }

  void all_reduce(void* buf, int64_t count, DType dtype, Reduce op) override {
    MPI_Datatype t = mpi_type(dtype, true);
    in_pieces(buf, count, dtype, [&](char* piece, int n, MPI_Request* req) {
      check(MPI_Iallreduce(MPI_IN_PLACE, piece, n, t, mpi_op(op), comm_, req), "MPI_Iallreduce");
      wait(*req, "all_reduce");
    });
  }
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override {
    if (count > kMaxCount) throw std::runtime_error("all_gather of more than 2**30 elements per rank");
    MPI_Request req;
    check(MPI_Iallgather(in, static_cast<int>(count), mpi_type(dtype, false), out, static_cast<int>(count),
                         mpi_type(dtype, false), comm_, &req),
          "MPI_Iallgather");
    wait(req, "all_gather");
  }
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, Reduce op) override {
    if (count > kMaxCount) throw std::runtime_error("reduce_scatter of more than 2**30 elements per rank");
    MPI_Request req;
    check(MPI_Ireduce_scatter_block(in, out, static_cast<int>(count), mpi_type(dtype, true), mpi_op(op),
                                    comm_, &req),
          "MPI_Ireduce_scatter_block");
    wait(req, "reduce_scatter");
  }
  void broadcast(void* buf, int64_t count, DType dtype, int root) override {
    MPI_Datatype t = mpi_type(dtype, false);
    in_pieces(buf, count, dtype, [&](char* piece, int n, MPI_Request* req) {
      check(MPI_Ibcast(piece, n, t, root, comm_, req), "MPI_Ibcast");
      wait(*req, "broadcast");
    });
  }
  void barrier() override {
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
    wait(req, "barrier");
  }
  std::vector<std::string> exchange(const std::string& record) override {
    std::string all(record.size() * static_cast<size_t>(size_), '\0');
    MPI_Request req;
    check(MPI_Iallgather(record.data(), static_cast<int>(record.size()), MPI_BYTE, all.data(),
                         static_cast<int>(record.size()), MPI_BYTE, comm_, &req),
          "MPI_Iallgather");
    wait(req, "the check that every rank runs the same collectives");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(static_cast<size_t>(r) * record.size(), record.size()));
    return out;
  }
  void set_timeout(double seconds) override { timeout_ = seconds; }

 private:
  // An in-place operation over `count` elements, in pieces MPI's int counts can hold.
  template <class F>
  static void in_pieces(void* buf, int64_t count, DType dtype, F&& op) {
    const size_t esize = dtype_bytes(dtype);
    for (int64_t at = 0; at < count; at += kMaxCount) {
      MPI_Request req;
      op(static_cast<char*>(buf) + static_cast<size_t>(at) * esize, static_cast<int>(std::min(kMaxCount, count - at)), &req);
    }
  }
  // lz::dtype_size's values: this library does not link liblazuli.
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
  // Non-blocking operations waited for here, so a wait is bounded: MPI's blocking calls would
  // wait forever for a rank that never comes. Polls MPI_Test, which is also what moves a
  // non-blocking collective on (Open MPI progresses it only inside MPI calls): without pause for
  // the first half second, as a blocking call spins, then with short sleeps, so a rank waiting
  // for a late one does not hold a core.
  void wait(MPI_Request& req, const char* what) const {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t polls = 1;; ++polls) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      // Open MPI advances a non-blocking collective only inside MPI calls, so the wait polls; it
      // yields now and then to a thread that has work on this core (the program's next steps,
      // while this collective runs beside them on the communication thread).
      if (polls % 64 == 0) std::this_thread::yield();
      if (polls % 1024 != 0) continue;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (timeout_ > 0 && waited > timeout_) {
        throw std::runtime_error(std::string(what) + " did not complete within " + std::to_string(static_cast<int64_t>(timeout_)) +
                                 " s (LAZULI_DIST_TIMEOUT): a rank is elsewhere (running other programs, or "
                                 "a value read the others do not make) or has died");
      }
      if (waited > 0.5) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_ = 0;
};

}  // namespace
}  // namespace lz::dist

static bool g_initialized_here = false;  // MPI_Init_thread was ours: MPI_Finalize at exit is ours too

// Initializes MPI (for any thread: programs run on the device's executor thread) unless the
// program already did, and returns the world group; null with *why on failure.
extern "C" __attribute__((visibility("default"))) lz::dist::ProcessGroup* lazuli_create_mpi_group_abi1(
    std::string* why) {
  static_assert(lz::dist::kProcessGroupAbi == 1, "rename the entry point with the interface's version");
  try {
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        *why = "MPI_Init_thread failed";
        return nullptr;
      }
      g_initialized_here = true;
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      *why = "this MPI cannot be called from the thread that runs programs (it provides thread level " +
             std::to_string(provided) + ", Lazuli needs MPI_THREAD_SERIALIZED; initialize MPI with "
             "MPI_Init_thread, or let Lazuli initialize it)";
      return nullptr;
    }
    return new lz::dist::MpiGroup();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

// At process exit (dist/process_group.cpp, after the queued programs finished): Open MPI's
// launcher reports a rank that exits without MPI_Finalize as failed.
extern "C" __attribute__((visibility("default"))) void lazuli_mpi_shutdown() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_initialized_here && !finalized) MPI_Finalize();
}
