// Shared pieces of the op frontend: turning tensors and numbers into IR values, recording nodes
// into new tensors, and type promotion. Every public op in src/ops/*.cpp is built from these.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "exec/cut_reason.h"
#include "ir/node.h"
#include "lazuli/ops.h"
#include "tensor/lazy_tensor.h"

namespace lz::frontend {

// The tensor's current IR value (throws ValueError for an undefined tensor).
ir::Value value_of(const Tensor& t, const char* op);
// A new tensor in the IR state holding `v`; checks the pending-graph size limit.
Tensor wrap(ir::Value v);
// An index tensor still on the host has known values: they are checked at the op's line (an
// IndexError naming `op`), as PyTorch checks them; other index tensors are checked when the
// program runs. Values must be in [0, size), or [-size, size) with allow_negative, or equal to
// `ignore` (a loss's ignore_index).
void check_index_values(const Tensor& index, int64_t size, bool allow_negative, const char* op,
                        std::optional<int64_t> ignore = std::nullopt);
ir::Value node(ir::OpKind op, std::vector<ir::Value> operands, ir::Attrs attrs = {});
// Every output of a multi-output node (sort, max_pool); node() is its output 0. Both compute
// float16/bfloat16 operands in float32 and round the results (frontend.cpp).
std::vector<ir::Value> node_outputs(ir::OpKind op, std::vector<ir::Value> operands,
                                    ir::Attrs attrs = {});
ir::Value unary(ir::OpKind op, ir::Value x);

// A number as an IR value of `dtype`: 0 and 1 are baked constants, any other value is a fresh
// device scalar (a parameter), so changing it never changes the graph hash.
ir::Value scalar_value(const Scalar& s, DType dtype);
// Throws ValueError naming `op` when `s` does not convert to `dtype` without overflow (nan or
// inf into an integer, 2**40 into int32, 1e300 into float32), as PyTorch's fill and full do.
void check_fill_value(const char* op, const Scalar& s, DType dtype);
ir::Value cast(ir::Value v, DType dtype);
// Autocast (lazuli/autocast.h) for composites: a float32 bias becomes the region's dtype (linear's
// and conv's result keeps it); a loss's 16-bit input becomes float32. Unchanged outside a region.
Tensor autocast_bias(const Tensor& bias);
Tensor autocast_float32(const Tensor& t);
// Value of an operand converted to `dtype`.
ir::Value operand_value(const Operand& o, DType dtype, const char* op);
// Broadcasts v to `shape` (Reshape to add leading 1s, then Expand), or returns v when equal.
ir::Value broadcast_to(ir::Value v, const Shape& shape);

// The buffer holding t's value now; runs a program (a value read) if needed, and waits.
BufferPtr read_buffer(const Tensor& t);
// The two halves of read_buffer, for callers that wait in slices (Python honours Ctrl-C):
// schedule_read returns the buffer (maybe a placeholder); finish_read waits for it, raises its
// execution's error (once), and counts the transfer.
BufferPtr schedule_read(const Tensor& t, CutReason reason);
void finish_read(const BufferPtr& b);
// The bytes of a read buffer (finish_read done), copied to the host through the backend.
std::vector<uint8_t> host_bytes(const BufferPtr& b);
// A new storage on the active backend's device holding `nbytes` of host memory `src`.
std::shared_ptr<Storage> upload(const void* src, size_t nbytes);
// Bool bytes as kernels read them, 0 or 1 (any nonzero byte is true): `n` bytes of `src` into
// `dst` (they may be the same).
void bools_as_0_1(uint8_t* dst, const uint8_t* src, size_t n);
// The checks of memory a tensor is made over without a copy (from_blob, a front end's external
// memory): the shape (a negative dim, a size no tensor can have), then a null pointer for a
// non-empty shape, or one not aligned for `dtype`. ValueError (OutOfMemoryError for the size)
// naming `op`; returns the byte count.
size_t check_memory(const char* op, const void* data, DType dtype, const IntList& shape);

// "sum(float32[2, 3])": one tensor argument, for error messages.
std::string desc(const char* op, const Tensor& x);
// "add(float32[2, 3], int64[3])" for error messages.
std::string describe(const char* op, const std::vector<Operand>& operands);
// [] for numbers; throws ValueError naming `op` for an undefined tensor.
const Shape& operand_shape(const Operand& o, const char* op);
// Wraps all reduction dims (empty = every dim), sorted and deduplicated.
// Errors name the op, the input's dtype and shape.
std::vector<int64_t> reduce_dims(const IntList& dims, const Tensor& x, const char* op);

}  // namespace lz::frontend
