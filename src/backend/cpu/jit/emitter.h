// The kernel emitter: one KernelSpec as an LLVM function (IRBuilder). Its parts: codegen.cpp
// (the function and its arguments, kernel_spec.h's layout), emit_expr.cpp (the expression at one
// point: conversions, math calls, the random generator, loads and index checks) and
// emit_loops.cpp (each scheme's loop nest, the folds, the report of a failed check). Internal to
// liblazuli_jit.so.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/libm.h"
#include "ir/rng.h"
#include "lower/kernel_spec.h"

namespace lz::cpu::jit {

using ir::OpKind;
using lower::KernelSpec;
using lower::KExpr;
using lower::KRowOut;
using lower::Scheme;
using lower::StrideClass;

// The C math library functions of op_table.def's LZ_LIBM rows (ir::libm_fn); codegen.cpp lets
// the vectorizer map them to libmvec's AVX2 ('d') and AVX-512 ('e') variants.
inline const ir::LibmFn& libm(OpKind op) { return *ir::libm_fn(op); }

inline bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }

class Emitter {
 public:
  // f16c: the host converts float16 in hardware (vcvtph2ps / vcvtps2ph).
  Emitter(llvm::LLVMContext& ctx, llvm::Module& m, const KernelSpec& spec, bool f16c)
      : ctx_(ctx), m_(m), b_(ctx), spec_(spec), f16c_(f16c) {}

  void emit(const std::string& name);

 private:
  // ---- types and conversions ----
  // float16 and bfloat16 are i16 in memory and in registers: only a conversion (convert(), so a
  // Cast, a constant or an iota of that dtype) looks at the bits. Nothing else computes on them:
  // the frontend records arithmetic on 16-bit floats in float32 (ops/frontend.cpp), and
  // lower/fusion.cpp sends the rest to the reference kernel, which refuses it.
  llvm::Type* reg_type(DType t);
  llvm::Type* mem_type(DType t) { return t == DType::Bool ? b_.getInt8Ty() : reg_type(t); }
  unsigned align_of(DType t);

  // Scalar argument k (a double's bits after the operand views), converted as the reference
  // converts a constant's value.
  llvm::Value* scalar_arg(int k, DType t) { return convert(scalars_[k], DType::Float64, t); }

  llvm::Value* constant(DType t, double v);

  llvm::Value* i32c(uint32_t v) { return b_.getInt32(v); }

  // A 16-bit float's bits (i16) widened to float32, exactly as core/reduced_float.h.
  llvm::Value* widen(llvm::Value* h, DType from);

  // A float32 narrowed to a 16-bit float's bits (i16), exactly as core/reduced_float.h: round to
  // nearest even, a NaN stays a NaN (quieted, sign kept), overflow becomes an infinity. Integer
  // ops and selects (one float multiply and roundeven for float16 subnormals), so it vectorizes
  // and needs no libcall; float16 with F16C is vcvtps2ph in the current rounding mode, which
  // gives reduced_float.h's bits for every float32 (checked exhaustively on the development
  // machine; the tests compare every 16-bit pattern and the rounding cases with the reference).
  llvm::Value* narrow(llvm::Value* f, DType to);

  // The reference backend's conversion rules (interp/kernels_impl.h convert()): to bool is
  // "!= 0" (NaN is true); a float outside an integer type's range becomes its minimum. A 16-bit
  // float converts through float32 (interp cast_reduced): widened exactly, or converted to
  // float32 first and rounded once from there (so float64 -> float16 rounds twice, as there).
  llvm::Value* convert(llvm::Value* v, DType from, DType to);

  // ---- math ----
  llvm::Value* call_math(const ir::LibmFn& f, DType t, llvm::Value* x, llvm::Value* y = nullptr);
  // exp(x) with the libm call kept off the arguments whose result is exactly 0 or +inf: libmvec's
  // vector exp takes its scalar path for a whole lane outside about +-87.3 (float32), 15-20x
  // slower, and masked attention scores (-3.4e38) put half of a softmax's lanes there.
  // `tiny_is_zero`: the caller adds the result to 1, so a denormal result may be 0 (sigmoid).
  llvm::Value* exp(DType t, llvm::Value* x, bool tiny_is_zero = false);
  // log(x) with the libm call kept off zeros (-inf), which send libmvec's log to its slow path.
  llvm::Value* log(DType t, llvm::Value* x);
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x);
  llvm::Value* fconst(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
  llvm::Value* is_nan(llvm::Value* x) { return b_.CreateFCmpUNO(x, x); }

  // NaN-propagating maximum / minimum, as the reference.
  // As the reference: (c > a ? c : a) for the maximum, so max(0, -0) is 0 and max(-0, 0) is -0.
  llvm::Value* fmax_nan(llvm::Value* a, llvm::Value* c, bool max);

  llvm::Value* unary(const KExpr& e, llvm::Value* x, DType in);

  llvm::Value* binary(const KExpr& e, llvm::Value* x, llvm::Value* y, DType in);

  // ---- the counter-based generator (ir/rng.h states it; these are its exact steps) ----
  llvm::Value* mix64(llvm::Value* z);
  llvm::Value* splitmix64(llvm::Value* x) {
    return mix64(b_.CreateAdd(x, b_.getInt64(ir::rng::kGolden)));
  }
  // rng_bits(k, i) = mix(mix(splitmix64(k) ^ (i * G))); splitmix64(k) is loop invariant (hoisted).
  llvm::Value* rng_bits(llvm::Value* key, llvm::Value* i);
  // 53 random bits in [0, 1): (bits >> 11) * 2^-53, exact in double.
  llvm::Value* uniform_double(llvm::Value* bits);
  // Value i (the point's row-major position in the op's output) of a draw with `key`.
  llvm::Value* random_value(const KExpr& e, llvm::Value* key, llvm::Value* i);

  // ---- the expression at one point ----
  const std::vector<int32_t>& dyn_of(int x) const;

  // Operand x's position: its affine part plus its dynamic terms (checked index * stride).
  llvm::Value* position(int x, llvm::Value* affine, const std::vector<llvm::Value*>& v);

  static bool is_stage(OpKind op);

  // pos[x]: element offset of operand x at the current point (affine part). Evaluates the
  // expressions up to `upto` (default: all) and returns that one's value. Sets vals_ (every
  // expression's value, for the output's dynamic terms), and with checks point_bad_ (some check
  // failed here), check_ok_ and check_raw_. A RowFused stage reads its row's value (stage_).
  // `only` (when given): evaluate just the expressions it marks (the rest stay null).
  llvm::Value* expression(const std::vector<llvm::Value*>& pos, int upto = -1,
                          const std::vector<bool>* only = nullptr);

  // ---- loops ----
  // for (i = lo; i < hi; ++i) carried = body(i, carried); returns the carried values at exit.
  // `interleave` false: the vectorizer keeps one vector per carried value (loop metadata), for a
  // fold whose body calls a math function (calls_math): every vector live across the call is
  // spilled and reloaded around it, and four interleaved accumulators made a row sum of exp
  // take 1.5x the time of the exp alone (bench/RESULTS.md 33).
  std::vector<llvm::Value*> loop(llvm::Value* lo, llvm::Value* hi, std::vector<llvm::Value*> init,
                                 const std::function<std::vector<llvm::Value*>(
                                     llvm::Value*, const std::vector<llvm::Value*>&)>& body,
                                 bool interleave = true);
  // Whether computing expression `expr` at a point calls a math library function (a libm row
  // of op_table.def, or an op whose code calls one: sigmoid's exp, gelu's erf); stages it reads
  // are the row's values, not computed there.
  bool calls_math(int expr) const;

  int nops() const { return static_cast<int>(ptrs_.size()); }  // inputs, the output, the key
  int out_op() const { return nin_; }

  // Offsets of every operand at step j of the innermost loop from `base`.
  std::vector<llvm::Value*> inner_pos(const std::vector<llvm::Value*>& base, llvm::Value* j);

  // base[x] += (multi-index of linear `lin` over dims [lo, hi)) . strides[x]
  void add_decomposed(std::vector<llvm::Value*>& base, llvm::Value* lin, int lo, int hi);

  llvm::Value* store_out(llvm::Value* pos, llvm::Value* v);
  llvm::Value* load_out(llvm::Value* pos);

  // The identity of reduction `op` in dtype t.
  llvm::Value* reduce_init(OpKind op, DType t);

  // acc (+) v with reduction `op` in dtype t; `reassoc` lets the vectorizer split the fold.
  llvm::Value* combine(OpKind op, DType t, llvm::Value* acc, llvm::Value* v, bool reassoc);
  llvm::Value* set_fmf(llvm::Value* v, llvm::FastMathFlags fmf);

  // Nested loops over dims [d, hi) adding each dim's index * stride to the bases; `inner` runs
  // at the innermost level with the complete bases.
  using Carried = std::vector<llvm::Value*>;
  Carried nest(int d, int hi, std::vector<llvm::Value*> base, Carried carried,
               const std::function<Carried(const std::vector<llvm::Value*>&, const Carried&)>& inner);

  // ---- index checks ----
  bool checked() const { return spec_.nchecks > 0; }
  int key_op() const { return nin_ + 1; }
  // A loop's carried values with the failure flag (i8, or-reduced: the loop still vectorizes)
  // appended when the kernel has checks.
  Carried with_flag(Carried c);
  // `next` plus the flag carried in `prev` updated with the last expression()'s checks.
  Carried flagged(Carried next, const Carried& prev);
  llvm::BasicBlock* block(const char* name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }

  // if (flag) body();
  void if_set(llvm::Value* flag, const std::function<void()>& body);

  // The cold path after a segment (or output) where a check failed: `walk` visits its points
  // again; the failing point with the smallest key is reported with its first failing check and
  // that check's index value (kernel_spec.h), so the runtime can name the first bad index.
  using Visit = std::function<void(const std::vector<llvm::Value*>&)>;
  void report_failure(const std::function<void(const Visit&)>& walk);

  // ---- loops ----
  // Float32 sums accumulate in double: a column reduction in a tile of kColTile outputs, a row
  // reduction in float32 over blocks of kRowBlock elements of the innermost dim (vectorized, split
  // across lanes), each block's sum added to a double. The order depends only on the shape.
  static constexpr int64_t kColTile = 2048;
  static constexpr int64_t kRowBlock = 1024;
  bool sum_in_double() const;
  llvm::Value* min64(llvm::Value* a, llvm::Value* c);

  // Elementwise, ColReduce and Scatter: row segments of the innermost dim over [begin, end).
  void emit_segments(llvm::Value* begin, llvm::Value* end);

  // scatter_add's update, as the reference's add_values: or for bool, wrapping for integers.
  llvm::Value* scatter_add(llvm::Value* acc, llvm::Value* v);

  // A float32 column sum: the segment's outputs in tiles of kColTile, each summed over the
  // reduced nest in a double per output (in the reduced dims' order), then rounded once.
  template <class Rewalk>
  void emit_col_tiles(const std::vector<llvm::Value*>& base, llvm::Value* n, const Rewalk& rewalk);

  // Expression `expr` folded with `op` in dtype t over the row of the current output (dims
  // [nout, rank) from `base`): its value, then with checks the failure flag. The fold runs in
  // registers, reassociated (vectorized); a float32 sum adds float32 blocks of kRowBlock into a
  // double, rounded once at the end.
  Carried row_fold(const std::vector<llvm::Value*>& base, OpKind op, DType t, int expr);

  // A float max/min over the row. A compare-and-select fold does not vectorize (LLVM 14 needs
  // no-NaNs for floating min/max reductions), so the fast fold runs on integers: each value's
  // bits mapped to an integer of the same order (negative values' magnitude bits flipped), an
  // integer max/min, and an or of "is NaN". The reference's answer differs from that one only
  // when a NaN is present (the first NaN wins) or the result is a zero (the first zero of the
  // row wins, -0 or +0): those rows fold again in order, the reference's way (a cold path).
  // `interleave`: as row_fold decided for `expr` (loop()).
  Carried float_extreme_fold(const std::vector<llvm::Value*>& base, OpKind op, DType t, int expr,
                             bool interleave);

  // The output's row base for output (row) `o` of [begin, end).
  std::vector<llvm::Value*> row_base(llvm::Value* o);

  // RowReduce: one output per iteration of [begin, end); the reduced dims fold in registers.
  void emit_row_reduce(llvm::Value* begin, llvm::Value* end);

  // RowFused: per row of [begin, end), each stage folded over the row in expression order, then
  // each row output stored once, then the last expression stored at each point of the row (the
  // row is still in cache).
  void emit_row_fused(llvm::Value* begin, llvm::Value* end);

  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  const KernelSpec& spec_;
  bool f16c_ = false;
  llvm::Function* fn_ = nullptr;
  llvm::MDNode* out_scope_ = nullptr;
  std::vector<llvm::Value*> sizes_, offs_, ptrs_, scalars_;
  std::vector<std::vector<llvm::Value*>> strides_;
  int nin_ = 0;
  std::vector<llvm::Value*> bounds_;                    // per check
  std::vector<std::vector<llvm::Value*>> dyn_strides_;  // per input, then the output
  llvm::Value* sink_ = nullptr;
  llvm::Value *key_slot_ = nullptr, *check_slot_ = nullptr, *value_slot_ = nullptr;
  llvm::Value* tile_ = nullptr;  // ColReduce float32 sums: the double accumulators
  // Set by expression(): every expression's value, and the checks at that point.
  std::vector<llvm::Value*> vals_, check_ok_, check_raw_;
  std::vector<llvm::Value*> stage_;  // RowFused: each stage's value for the current row
  // RowFused row outputs (KernelSpec::row_outs): offset, strides and pointer of each.
  std::vector<llvm::Value*> row_offs_, row_ptrs_;
  std::vector<std::vector<llvm::Value*>> row_strides_;
  llvm::Value* point_bad_ = nullptr;
};

}  // namespace lz::cpu::jit
