// The ATen lowering table (DESIGN.md 5b): the one place an ATen op is taught to Lazuli. Each entry
// maps ATen overloads ("aten.addmm.default", spelled as torch prints an OpOverload) to a function
// over Lazuli's C++ API, with the conditions under which it applies: the dtypes its tensor
// arguments may have and, where needed, a check of the other arguments that returns a short
// reason when it does not apply. It includes no torch header: front ends convert their values
// to the neutral form of aten/arg.h. Both PyTorch front ends use it and nothing else:
//   - the torch.compile bridge asks why_not() of every node before tracing (so a node that does
//     not lower is known up front, never found by trial), then lower() while tracing;
//   - the lazy PyTorch device looks each op up, checks it and lowers it as the program runs.
//
// An entry's lowering takes the overload's arguments in schema order with the schema's defaults
// filled in, records Lazuli ops only (no value reads) and returns the overload's result: a
// tensor, a number (sym_size), None (a gradient convolution_backward's mask left out), or a
// list of those for a tuple or list return. Its result must have eager PyTorch's dtype and shape
// for every input the conditions accept (the bridge checks this against the FX graph).
//
// Adding an ATen op: one entry in the group file it belongs to (aten/entries_*.cpp), one test
// row in the group's tests/cpp/aten_<group>_test.cpp. The table is built once, on first use, and
// then only read: lookups need no lock.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aten/arg.h"

namespace lz::aten {

// A set of dtypes, one bit per lz::DType.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> ts) {
    for (DType t : ts) bits_ |= bit(t);
  }
  constexpr bool has(DType t) const { return (bits_ & bit(t)) != 0; }
  constexpr DTypeSet operator|(DTypeSet o) const { return DTypeSet(bits_ | o.bits_); }
  std::vector<DType> list() const;

 private:
  constexpr explicit DTypeSet(uint32_t b) : bits_(b) {}
  static constexpr uint32_t bit(DType t) { return 1u << static_cast<int>(t); }
  uint32_t bits_ = 0;
};

// The dtypes an entry was written and checked for. float16 and bfloat16 are computed in float32
// (lower() says how), so an entry that takes float32 takes them too.
inline constexpr DTypeSet kFloats{DType::Float32, DType::Float64};
inline constexpr DTypeSet kInts{DType::Int32, DType::Int64};
inline constexpr DTypeSet kNumbers = kFloats | kInts;
inline constexpr DTypeSet kAll = kNumbers | DTypeSet{DType::Bool};

// What one call of the table draws its random numbers from. With a key (an int64 0-d tensor:
// the torch.compile bridge passes a fresh one as an input of each run of a program), the first
// draw uses the key itself and each further one the key advanced once more, inside the program;
// without, the device's RNG (lz::rand), as the lazy device does.
class Call {
 public:
  Call() = default;
  explicit Call(Tensor key) : key_(std::move(key)) {}
  Tensor uniform(const Shape& shape, DType dtype);

 private:
  Tensor key_;
};

using Lowering = std::function<Arg(const Args&, Call&)>;
using Condition = std::function<std::optional<std::string>(const Args&)>;

// Properties of an entry that front ends and lower() act on.
enum EntryFlag : uint32_t {
  kRandom = 1u << 0,          // draws random numbers (Call::uniform)
  kView = 1u << 1,            // an ATen view (its result aliases its input): keeps 16-bit operands
  kMutates = 1u << 2,         // updates an argument in place (copy_): keeps 16-bit operands
  kBFloat16Native = 1u << 3,  // bfloat16 operands computed as eager does (oneDNN's bf16 products)
  kCopiedView = 1u << 4,      // an ATen view lowered as a copy where Lazuli has no view for it:
                              // a front end whose tensors alias refuses writes into the result
  kComplex = 1u << 5,         // takes complex tensors (Arg::complex) and complex dtype arguments
  kComplexOnly = 1u << 6,     // every call takes or makes complex values (view_as_real/complex,
                              // the FFTs): a front end without complex values leaves them alone
};

struct Entry {
  std::string name;  // "aten.add.Tensor"
  DTypeSet dtypes;
  Condition when;  // empty: no condition beyond the dtypes
  Lowering lower;
  std::string note;  // the conditions in words, for supported_ops() and docs/torch-support.md
  uint32_t flags = 0;
  bool has(EntryFlag f) const { return (flags & f) != 0; }
};

// The entry for an overload, or null.
const Entry* find(std::string_view name);
// Every entry, sorted by name.
const std::vector<const Entry*>& entries();

// None when `entry` applies to these arguments (live tensors or metas), else why not in a few
// words: "dtype int16 not supported", "alpha on bool operands". A condition that cannot read
// its arguments (a schema newer than the entry) says so instead of throwing.
std::optional<std::string> why_not(const Entry& entry, const Args& args);
// The same by name; "no lowering" when the table has no entry.
std::optional<std::string> why_not(std::string_view name, const Args& args);

// Whether applying `entry` to `args` takes or makes complex values: an entry flagged kComplex
// given a complex tensor or dtype argument, or one flagged kComplexOnly. A front end that cannot
// hold a complex value (the lazy device) leaves such a call to PyTorch; one that can (the bridge,
// inside a partition) passes them between entries as Arg::complex.
bool involves_complex(const Entry& entry, const Args& args);

// Records `entry` applied to `args` (live tensors), as eager PyTorch computes the op: a computing
// op whose operands include float16/bfloat16 tensors reads them as float32, computes in float32
// and rounds each 16-bit result once, however many Lazuli ops it records (Lazuli's own ops round
// after each one). Views, in-place updates and bfloat16 products keep their operands.
// `result_dtypes`, when known (the bridge reads them from the FX graph), are the dtypes eager
// gives each tensor result; otherwise they are found by recording the entry once on the 16-bit
// operands themselves (that recording is dropped, never run). Throws what the entry throws
// (argument errors of Lazuli's ops), recording nothing that outlives the call.
Arg lower(const Entry& entry, const Args& args, Call& call,
          const std::vector<std::optional<DType>>* result_dtypes = nullptr);

// Overloads a front end should decompose with PyTorch's own decompositions, beyond the core ATen
// set, each only while the table has no entry for it; and core decompositions the table keeps
// whole (it lowers them itself, correctly where the decomposition is not).
const std::vector<std::string>& extra_decompositions();
const std::vector<std::string>& kept_whole();

// Whether eager PyTorch raises IndexError (not RuntimeError) where `overload` meets an index out
// of range (embedding, index_select, x[i], a loss's target...): the error class a front end
// gives a run-time failure that Lazuli's message says is "out of range". `overload` is the op
// the user's code called, which may have no entry (nll_loss_forward decomposes into a gather).
bool raises_index_error(std::string_view overload);

}  // namespace lz::aten
