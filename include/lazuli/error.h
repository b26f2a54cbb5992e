// Exceptions thrown by Lazuli. User mistakes throw ValueError / TypeError / IndexError (mapped to
// the Python exceptions of the same name); a tensor too large to allocate throws OutOfMemoryError
// (Python: lz.OutOfMemoryError, both an lz.Error and a MemoryError); everything else is an Error.
// All derive from Error, a std::runtime_error. Nothing in the library aborts on user input.
#pragma once
#include <stdexcept>
#include <string>

namespace lz {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Wrong shapes, dims or argument values.
class ValueError : public Error {
 public:
  using Error::Error;
};
// Wrong dtypes or argument kinds.
class TypeError : public Error {
 public:
  using Error::Error;
};
// Out-of-range indices known when the op is recorded.
class IndexError : public Error {
 public:
  using Error::Error;
};
// A program failed while running (possibly asynchronously); raised at the next wait or sync.
class ExecutionError : public Error {
 public:
  using Error::Error;
};

// A tensor that cannot be allocated. Raised by the op that records it when its element or byte
// count does not fit in int64 (such a tensor can never exist), else by the wait point of the
// program that failed to allocate it (instead of an ExecutionError); the runtime stays usable.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// Something was about to execute inside a compile(full_graph=True) region.
class UnexpectedExecutionError : public Error {
 public:
  using Error::Error;
};
// A compile(max_different_graphs=N) region traced one graph too many.
class TooManyGraphsError : public Error {
 public:
  using Error::Error;
};

}  // namespace lz
