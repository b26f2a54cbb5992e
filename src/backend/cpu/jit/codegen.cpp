// Code generation: a KernelSpec becomes LLVM IR (IRBuilder), optimized for this CPU at O2 and
// emitted as a relocatable object, which ORC's LLJIT links into the process.
//
// Lessons that shaped this file (issue 3, measured on this machine):
// - The pass pipeline is given the TargetMachine; without it nothing vectorizes.
// - Reductions fold with `reassoc` fast-math flags on the combining op only, so the vectorizer
//   may split the accumulator across lanes; every other float op keeps IEEE semantics.
// - Transcendental functions are calls to libm's scalar functions, declared pure, and the
//   vectorizer maps them onto glibc's libmvec variants (AVX2 and AVX-512, <= 4 ulp) through
//   TargetLibraryInfo. LLVM 14's own libmvec table lacks tanh and erf, so the table is ours.
// - One LLVMContext per compile and one TargetMachine per compiling thread; one resource
//   tracker per kernel so unloaded code is freed.
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <unordered_map>

#include "backend/cpu/jit_api.h"
#include "core/reduced_float.h"

namespace lz::cpu {
namespace {

using ir::OpKind;
using lower::KernelSpec;
using lower::KExpr;
using lower::Scheme;
using lower::StrideClass;

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

template <class T>
T take(llvm::Expected<T> v, const char* what) {
  if (!v) throw std::runtime_error(std::string(what) + ": " + to_string(v.takeError()));
  return std::move(*v);
}

// libm functions and their libmvec variants: AVX2 ('d') and AVX-512 ('e') for float and double.
struct MathFn {
  const char* f32;
  const char* f64;
  int arity;
};

const MathFn kExp{"expf", "exp", 1}, kLog{"logf", "log", 1}, kLog1p{"log1pf", "log1p", 1},
    kExpm1{"expm1f", "expm1", 1}, kSin{"sinf", "sin", 1}, kCos{"cosf", "cos", 1},
    kTanh{"tanhf", "tanh", 1}, kErf{"erff", "erf", 1}, kPow{"powf", "pow", 2};

std::vector<llvm::VecDesc> libmvec_table() {
  static std::vector<std::string>* names = new std::vector<std::string>();  // VecDesc holds refs
  std::vector<llvm::VecDesc> out;
  if (names->empty()) {
    for (const MathFn* f : {&kExp, &kLog, &kLog1p, &kExpm1, &kSin, &kCos, &kTanh, &kErf, &kPow}) {
      std::string v = f->arity == 2 ? "vv_" : "v_";
      names->push_back(f->f32);
      names->push_back("_ZGVdN8" + v + f->f32);
      names->push_back(f->f32);
      names->push_back("_ZGVeN16" + v + f->f32);
      names->push_back(f->f64);
      names->push_back("_ZGVdN4" + v + f->f64);
      names->push_back(f->f64);
      names->push_back("_ZGVeN8" + v + f->f64);
    }
  }
  const unsigned vf[4] = {8, 16, 4, 8};
  for (size_t i = 0; i < names->size(); i += 2) {
    out.push_back({(*names)[i], (*names)[i + 1],
                   llvm::ElementCount::getFixed(vf[(i / 2) % 4])});
  }
  return out;
}

bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }

class Emitter {
 public:
  // f16c: the host converts float16 in hardware (vcvtph2ps / vcvtps2ph).
  Emitter(llvm::LLVMContext& ctx, llvm::Module& m, const KernelSpec& spec, bool f16c)
      : ctx_(ctx), m_(m), b_(ctx), spec_(spec), f16c_(f16c) {}

  void emit(const std::string& name) {
    auto* i64 = b_.getInt64Ty();
    auto* i8pp = b_.getInt8PtrTy()->getPointerTo();
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, i8pp, i64->getPointerTo()}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addParamAttr(2, llvm::Attribute::NoAlias);
    fn_->addParamAttr(3, llvm::Attribute::NoAlias);
    fn_->addParamAttr(2, llvm::Attribute::ReadOnly);
    fn_->addParamAttr(3, llvm::Attribute::ReadOnly);
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    llvm::Value* begin = fn_->getArg(0);
    llvm::Value* end = fn_->getArg(1);
    llvm::Value* ptrs = fn_->getArg(2);
    llvm::Value* args = fn_->getArg(3);
    // A 16-bit float is only loaded, converted and stored (reg_type): no reduction or scatter_add
    // folds in one (fusion.cpp gives those to the reference kernel).
    if (is_reduced_float(spec_.out_dtype) &&
        (spec_.scheme == Scheme::RowReduce || spec_.scheme == Scheme::ColReduce ||
         (spec_.scheme == Scheme::Scatter && spec_.reduce_op != OpKind::IndexCopy))) {
      throw std::runtime_error("codegen: no reduction folds in float16/bfloat16");
    }

    llvm::MDBuilder mdb(ctx_);
    llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("lz");
    llvm::MDNode* scope = mdb.createAnonymousAliasScope(domain, "out");
    out_scope_ = llvm::MDNode::get(ctx_, {scope});

    const int rank = spec_.rank;
    auto arg = [&](int i) {
      return b_.CreateLoad(i64, b_.CreateConstInBoundsGEP1_64(i64, args, i));
    };
    for (int d = 0; d < rank; ++d) sizes_.push_back(arg(d));
    nin_ = static_cast<int>(spec_.inputs.size());
    // Inputs, the output, then the key (with checks): offset and strides each (kernel_spec.h).
    const int nops = nin_ + 1 + (spec_.nchecks > 0 ? 1 : 0);
    for (int x = 0; x < nops; ++x) {
      int base = rank + x * (rank + 1);
      offs_.push_back(arg(base));
      std::vector<llvm::Value*> st;
      for (int d = 0; d < rank; ++d) st.push_back(arg(base + 1 + d));
      strides_.push_back(st);
      bool index = x > nin_ || (x < nin_ && spec_.inputs[x].is_index);
      DType dt = x < nin_ ? spec_.inputs[x].dtype : spec_.out_dtype;
      if (index) {
        ptrs_.push_back(nullptr);
      } else {
        llvm::Value* p = b_.CreateLoad(b_.getInt8PtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), ptrs, x));
        ptrs_.push_back(b_.CreatePointerCast(p, mem_type(dt)->getPointerTo()));
      }
    }
    int next = rank + nops * (rank + 1);
    for (int k = 0; k < spec_.nscalars; ++k) {
      scalars_.push_back(b_.CreateBitCast(arg(next++), b_.getDoubleTy()));
    }
    for (int k = 0; k < spec_.nchecks; ++k) bounds_.push_back(arg(next++));
    dyn_strides_.resize(nin_ + 1);
    for (int x = 0; x <= nin_; ++x) {
      for (size_t t = 0; t < dyn_of(x).size(); ++t) dyn_strides_[x].push_back(arg(next++));
    }
    if (spec_.nchecks > 0) {
      sink_ = b_.CreateLoad(b_.getInt8PtrTy(),
                            b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), ptrs, nin_ + 1));
      // The rescan's state (cold path): the smallest failing key so far, its check and value.
      for (llvm::Value** slot : {&key_slot_, &check_slot_, &value_slot_})
        *slot = b_.CreateAlloca(i64);
    }
    if (spec_.scheme == Scheme::ColReduce && sum_in_double()) {
      tile_ = b_.CreateAlloca(b_.getDoubleTy(), b_.getInt64(kColTile));
    }
    for (const KExpr& e : spec_.exprs) {
      if (is_stage(e.op) && (spec_.scheme != Scheme::RowFused || is_reduced_float(e.dtype)))
        throw std::runtime_error("codegen: a reduction stage outside a float32/64 row kernel");
    }
    if (spec_.scheme == Scheme::RowReduce) {
      emit_row_reduce(begin, end);
    } else if (spec_.scheme == Scheme::RowFused) {
      emit_row_fused(begin, end);
    } else {
      emit_segments(begin, end);
    }
    b_.CreateRetVoid();
  }

 private:
  // ---- types and conversions ----
  // float16 and bfloat16 are i16 in memory and in registers: only a conversion (convert(), so a
  // Cast, a constant or an iota of that dtype) looks at the bits. Nothing else computes on them:
  // the frontend records arithmetic on 16-bit floats in float32 (ops/frontend.cpp), and
  // fusion.cpp sends the rest to the reference kernel, which refuses it.
  llvm::Type* reg_type(DType t) {
    switch (t) {
      case DType::Bool: return b_.getInt1Ty();
      case DType::Int32: return b_.getInt32Ty();
      case DType::Int64: return b_.getInt64Ty();
      case DType::Float32: return b_.getFloatTy();
      case DType::Float64: return b_.getDoubleTy();
      case DType::Float16:
      case DType::BFloat16: return b_.getInt16Ty();
    }
    throw std::runtime_error("codegen: unknown dtype");
  }
  llvm::Type* mem_type(DType t) { return t == DType::Bool ? b_.getInt8Ty() : reg_type(t); }
  unsigned align_of(DType t) {
    return static_cast<unsigned>(m_.getDataLayout().getTypeAllocSize(mem_type(t)));
  }

  // Scalar argument k (a double's bits after the operand views), converted as the reference
  // converts a constant's value.
  llvm::Value* scalar_arg(int k, DType t) { return convert(scalars_[k], DType::Float64, t); }

  llvm::Value* constant(DType t, double v) {
    switch (t) {
      case DType::Bool: return b_.getInt1(v != 0);
      case DType::Int32: return b_.getInt32(static_cast<uint32_t>(static_cast<int32_t>(v)));
      case DType::Int64: return b_.getInt64(static_cast<uint64_t>(static_cast<int64_t>(v)));
      case DType::Float32: return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(v));
      case DType::Float64: return llvm::ConstantFP::get(b_.getDoubleTy(), v);
      case DType::Float16:
      case DType::BFloat16: return b_.getInt16(to_reduced(t, static_cast<float>(v)));
    }
    throw std::runtime_error("codegen: unknown dtype");
  }

  llvm::Value* i32c(uint32_t v) { return b_.getInt32(v); }

  // A 16-bit float's bits (i16) widened to float32, exactly as core/reduced_float.h.
  llvm::Value* widen(llvm::Value* h, DType from) {
    llvm::Value* x = b_.CreateZExt(h, b_.getInt32Ty());
    if (from == DType::BFloat16) return b_.CreateBitCast(b_.CreateShl(x, 16), b_.getFloatTy());
    // float16: a subnormal is its mantissa times 2^-24 (exact in float32); an infinity or NaN
    // keeps its payload (a signaling NaN stays signaling, unlike vcvtph2ps, which quiets it);
    // a normal number rebiases its exponent (15 -> 127).
    llvm::Value* sign = b_.CreateShl(b_.CreateAnd(x, i32c(0x8000)), 16);
    llvm::Value* mag = b_.CreateAnd(x, i32c(0x7fff));
    llvm::Value* shifted = b_.CreateShl(mag, 13);
    llvm::Value* special = b_.CreateOr(shifted, i32c(0x70000000u));  // exponent 31 -> 255
    if (f16c_) {  // vcvtph2ps, with NaNs rebuilt so that a signaling one stays signaling
      llvm::Value* hw = b_.CreateFPExt(b_.CreateBitCast(h, b_.getHalfTy()), b_.getFloatTy());
      llvm::Value* nan = b_.CreateBitCast(b_.CreateOr(special, sign), b_.getFloatTy());
      return b_.CreateSelect(b_.CreateICmpUGT(mag, i32c(0x7c00)), nan, hw);
    }
    llvm::Value* normal = b_.CreateAdd(shifted, i32c(112u << 23));
    llvm::Value* sub = b_.CreateBitCast(
        b_.CreateFMul(b_.CreateSIToFP(mag, b_.getFloatTy()),
                      llvm::ConstantFP::get(b_.getFloatTy(), 1.0 / 16777216.0)),
        b_.getInt32Ty());
    llvm::Value* bits = b_.CreateSelect(
        b_.CreateICmpULT(mag, i32c(0x0400)), sub,
        b_.CreateSelect(b_.CreateICmpUGE(mag, i32c(0x7c00)), special, normal));
    return b_.CreateBitCast(b_.CreateOr(bits, sign), b_.getFloatTy());
  }

  // A float32 narrowed to a 16-bit float's bits (i16), exactly as core/reduced_float.h: round to
  // nearest even, a NaN stays a NaN (quieted, sign kept), overflow becomes an infinity. Integer
  // ops and selects (one float multiply and roundeven for float16 subnormals), so it vectorizes
  // and needs no libcall; float16 with F16C is vcvtps2ph in the current rounding mode, which
  // gives reduced_float.h's bits for every float32 (checked exhaustively on the development
  // machine; the tests compare every 16-bit pattern and the rounding cases with the reference).
  llvm::Value* narrow(llvm::Value* f, DType to) {
    if (to == DType::Float16 && f16c_) {
      return b_.CreateBitCast(b_.CreateFPTrunc(f, b_.getHalfTy()), b_.getInt16Ty());
    }
    auto* i32 = b_.getInt32Ty();
    llvm::Value* x = b_.CreateBitCast(f, i32);
    llvm::Value* mag = b_.CreateAnd(x, i32c(0x7fffffffu));
    llvm::Value* nan = b_.CreateICmpUGT(mag, i32c(0x7f800000u));
    if (to == DType::BFloat16) {
      llvm::Value* quiet = b_.CreateOr(b_.CreateLShr(x, 16), i32c(0x0040));
      // Adding 0x7fff plus the kept part's lowest bit rounds half to even (no NaN gets here, so
      // the sum does not wrap).
      llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(x, 16), i32c(1));
      llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(x, b_.CreateAdd(odd, i32c(0x7fff))), 16);
      return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), b_.getInt16Ty());
    }
    llvm::Value* sign = b_.CreateAnd(b_.CreateLShr(x, 16), i32c(0x8000));
    llvm::Value* quiet = b_.CreateOr(b_.CreateAnd(b_.CreateLShr(mag, 13), i32c(0x3ff)), i32c(0x7e00));
    // Normal: rebias the exponent (127 -> 15), round 13 bits off to nearest even.
    llvm::Value* t = b_.CreateSub(mag, i32c(112u << 23));
    llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(t, 13), i32c(1));
    llvm::Value* normal = b_.CreateLShr(b_.CreateAdd(t, b_.CreateAdd(odd, i32c(0xfff))), 13);
    // Subnormal or zero: a multiple of 2^-24; scaling by 2^24 is exact, roundeven rounds half to
    // even as the reference's nearbyint does in the default rounding mode.
    llvm::Value* units = b_.CreateFPToSI(
        intrinsic(llvm::Intrinsic::roundeven,
                  b_.CreateFMul(b_.CreateBitCast(mag, b_.getFloatTy()),
                                llvm::ConstantFP::get(b_.getFloatTy(), 16777216.0))),
        i32);
    llvm::Value* bits = b_.CreateSelect(
        nan, quiet,
        b_.CreateSelect(b_.CreateICmpUGE(mag, i32c(0x477ff000u)), i32c(0x7c00),
                        b_.CreateSelect(b_.CreateICmpUGE(mag, i32c(0x38800000u)), normal, units)));
    return b_.CreateTrunc(b_.CreateOr(bits, sign), b_.getInt16Ty());
  }

  // The reference backend's conversion rules (interp/kernels_impl.h convert()): to bool is
  // "!= 0" (NaN is true); a float outside an integer type's range becomes its minimum. A 16-bit
  // float converts through float32 (interp cast_reduced): widened exactly, or converted to
  // float32 first and rounded once from there (so float64 -> float16 rounds twice, as there).
  llvm::Value* convert(llvm::Value* v, DType from, DType to) {
    if (from == to) return v;
    if (is_reduced_float(from)) return convert(widen(v, from), DType::Float32, to);
    if (is_reduced_float(to)) return narrow(convert(v, from, DType::Float32), to);
    llvm::Type* t = reg_type(to);
    if (to == DType::Bool) {
      return is_float(from) ? b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0))
                            : b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (from == DType::Bool) return is_float(to) ? b_.CreateUIToFP(v, t) : b_.CreateZExt(v, t);
    if (is_float(from) && is_float(to)) {
      return to == DType::Float64 ? b_.CreateFPExt(v, t) : b_.CreateFPTrunc(v, t);
    }
    if (is_float(to)) return b_.CreateSIToFP(v, t);
    if (!is_float(from)) return b_.CreateSExtOrTrunc(v, t);
    // float -> integer, range-checked: !(x >= -limit && x < limit) gives the minimum.
    double limit = to == DType::Int32 ? 2147483648.0 : 9223372036854775808.0;
    llvm::Value* lo = llvm::ConstantFP::get(v->getType(), -limit);
    llvm::Value* hi = llvm::ConstantFP::get(v->getType(), limit);
    llvm::Value* ok = b_.CreateAnd(b_.CreateFCmpOGE(v, lo), b_.CreateFCmpOLT(v, hi));
    llvm::Value* min = to == DType::Int32 ? b_.getInt32(0x80000000u) : b_.getInt64(1ull << 63);
    return b_.CreateSelect(ok, b_.CreateFPToSI(v, t), min);
  }

  // ---- math ----
  llvm::Value* call_math(const MathFn& f, DType t, llvm::Value* x, llvm::Value* y = nullptr) {
    llvm::Type* ty = reg_type(t);
    std::vector<llvm::Type*> params(f.arity, ty);
    auto callee = m_.getOrInsertFunction(t == DType::Float32 ? f.f32 : f.f64,
                                         llvm::FunctionType::get(ty, params, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
      fn->setDoesNotAccessMemory();
      fn->setDoesNotThrow();
      fn->addFnAttr(llvm::Attribute::WillReturn);
    }
    llvm::CallInst* c = y ? b_.CreateCall(callee, {x, y}) : b_.CreateCall(callee, {x});
    c->setDoesNotAccessMemory();
    c->setDoesNotThrow();
    return c;
  }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
    return b_.CreateUnaryIntrinsic(id, x);
  }
  llvm::Value* fconst(llvm::Value* like, double v) { return llvm::ConstantFP::get(like->getType(), v); }
  llvm::Value* is_nan(llvm::Value* x) { return b_.CreateFCmpUNO(x, x); }

  // NaN-propagating maximum / minimum, as the reference.
  // As the reference: (c > a ? c : a) for the maximum, so max(0, -0) is 0 and max(-0, 0) is -0.
  llvm::Value* fmax_nan(llvm::Value* a, llvm::Value* c, bool max) {
    llvm::Value* gt = max ? b_.CreateFCmpOGT(c, a) : b_.CreateFCmpOLT(c, a);
    llvm::Value* pick = b_.CreateSelect(gt, c, a);
    return b_.CreateSelect(is_nan(a), a, b_.CreateSelect(is_nan(c), c, pick));
  }

  llvm::Value* unary(const KExpr& e, llvm::Value* x, DType in) {
    const bool f = is_float(e.dtype);
    switch (e.op) {
      case OpKind::GradLeaf:
      case OpKind::StopGradient: return x;
      case OpKind::Cast: return convert(x, in, e.dtype);
      case OpKind::Neg: return f ? b_.CreateFNeg(x) : b_.CreateNeg(x);
      case OpKind::Abs:
        if (f) return intrinsic(llvm::Intrinsic::fabs, x);
        return b_.CreateSelect(b_.CreateICmpSLT(x, llvm::ConstantInt::get(x->getType(), 0)), b_.CreateNeg(x), x);
      case OpKind::Exp: return call_math(kExp, e.dtype, x);
      case OpKind::Log: return call_math(kLog, e.dtype, x);
      case OpKind::Log1p: return call_math(kLog1p, e.dtype, x);
      case OpKind::Expm1: return call_math(kExpm1, e.dtype, x);
      case OpKind::Sin: return call_math(kSin, e.dtype, x);
      case OpKind::Cos: return call_math(kCos, e.dtype, x);
      case OpKind::Tanh: return call_math(kTanh, e.dtype, x);
      case OpKind::Erf: return call_math(kErf, e.dtype, x);
      case OpKind::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
      case OpKind::Rsqrt: return b_.CreateFDiv(fconst(x, 1), intrinsic(llvm::Intrinsic::sqrt, x));
      case OpKind::Reciprocal: return b_.CreateFDiv(fconst(x, 1), x);
      case OpKind::Sigmoid:
        return b_.CreateFDiv(fconst(x, 1), b_.CreateFAdd(fconst(x, 1), call_math(kExp, e.dtype, b_.CreateFNeg(x))));
      case OpKind::Gelu: {
        llvm::Value* s = b_.CreateFDiv(x, fconst(x, std::sqrt(2.0)));
        llvm::Value* h = b_.CreateFMul(x, fconst(x, 0.5));
        return b_.CreateFMul(h, b_.CreateFAdd(fconst(x, 1), call_math(kErf, e.dtype, s)));
      }
      case OpKind::Relu:
        if (f) {
          llvm::Value* keep = b_.CreateOr(is_nan(x), b_.CreateFCmpOGT(x, fconst(x, 0)));
          return b_.CreateSelect(keep, x, fconst(x, 0));
        }
        return b_.CreateSelect(b_.CreateICmpSGT(x, llvm::ConstantInt::get(x->getType(), 0)), x,
                               llvm::ConstantInt::get(x->getType(), 0));
      case OpKind::Floor: return f ? intrinsic(llvm::Intrinsic::floor, x) : x;
      case OpKind::Ceil: return f ? intrinsic(llvm::Intrinsic::ceil, x) : x;
      case OpKind::Round: return f ? intrinsic(llvm::Intrinsic::roundeven, x) : x;
      case OpKind::Sign: {
        if (e.dtype == DType::Bool) return x;
        llvm::Value* pos = f ? b_.CreateFCmpOLT(fconst(x, 0), x)
                             : b_.CreateICmpSLT(llvm::ConstantInt::get(x->getType(), 0), x);
        llvm::Value* neg = f ? b_.CreateFCmpOLT(x, fconst(x, 0))
                             : b_.CreateICmpSLT(x, llvm::ConstantInt::get(x->getType(), 0));
        llvm::Value* d = b_.CreateSub(b_.CreateZExt(pos, b_.getInt32Ty()), b_.CreateZExt(neg, b_.getInt32Ty()));
        return convert(d, DType::Int32, e.dtype);
      }
      case OpKind::BitwiseNot: return b_.CreateNot(x);
      case OpKind::RngAdvance: return splitmix64(b_.CreateXor(x, b_.getInt64(kAdvanceSalt)));
      default: break;
    }
    throw std::runtime_error("codegen: unsupported unary op " + std::to_string(static_cast<int>(e.op)));
  }

  llvm::Value* binary(const KExpr& e, llvm::Value* x, llvm::Value* y, DType in) {
    const bool f = is_float(in);
    const bool sgn = in != DType::Bool;
    switch (e.op) {
      case OpKind::Add: return f ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y);
      case OpKind::Sub: return f ? b_.CreateFSub(x, y) : b_.CreateSub(x, y);
      case OpKind::Mul: return f ? b_.CreateFMul(x, y) : b_.CreateMul(x, y);
      case OpKind::Div: return b_.CreateFDiv(x, y);
      case OpKind::Pow: return call_math(kPow, e.dtype, x, y);
      case OpKind::Maximum:
        if (f) return fmax_nan(x, y, true);
        return b_.CreateSelect(sgn ? b_.CreateICmpSGT(y, x) : b_.CreateICmpUGT(y, x), y, x);
      case OpKind::Minimum:
        if (f) return fmax_nan(x, y, false);
        return b_.CreateSelect(sgn ? b_.CreateICmpSLT(y, x) : b_.CreateICmpULT(y, x), y, x);
      case OpKind::BitwiseAnd: return b_.CreateAnd(x, y);
      case OpKind::BitwiseOr: return b_.CreateOr(x, y);
      case OpKind::BitwiseXor: return b_.CreateXor(x, y);
      case OpKind::Eq: return f ? b_.CreateFCmpOEQ(x, y) : b_.CreateICmpEQ(x, y);
      case OpKind::Ne: return f ? b_.CreateFCmpUNE(x, y) : b_.CreateICmpNE(x, y);
      case OpKind::Lt: return f ? b_.CreateFCmpOLT(x, y) : sgn ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
      case OpKind::Le: return f ? b_.CreateFCmpOLE(x, y) : sgn ? b_.CreateICmpSLE(x, y) : b_.CreateICmpULE(x, y);
      case OpKind::Gt: return f ? b_.CreateFCmpOGT(x, y) : sgn ? b_.CreateICmpSGT(x, y) : b_.CreateICmpUGT(x, y);
      case OpKind::Ge: return f ? b_.CreateFCmpOGE(x, y) : sgn ? b_.CreateICmpSGE(x, y) : b_.CreateICmpUGE(x, y);
      default: break;
    }
    throw std::runtime_error("codegen: unsupported binary op " + std::to_string(static_cast<int>(e.op)));
  }

  // ---- the counter-based generator (interp/kernels.h states it; these are its exact steps) ----
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  static constexpr uint64_t kAdvanceSalt = 0x5851F42D4C957F2Dull;
  llvm::Value* mix64(llvm::Value* z) {
    z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, 30)), b_.getInt64(0xBF58476D1CE4E5B9ull));
    z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, 27)), b_.getInt64(0x94D049BB133111EBull));
    return b_.CreateXor(z, b_.CreateLShr(z, 31));
  }
  llvm::Value* splitmix64(llvm::Value* x) { return mix64(b_.CreateAdd(x, b_.getInt64(kGolden))); }
  // rng_bits(k, i) = mix(mix(splitmix64(k) ^ (i * G))); splitmix64(k) is loop invariant (hoisted).
  llvm::Value* rng_bits(llvm::Value* key, llvm::Value* i) {
    return mix64(mix64(b_.CreateXor(splitmix64(key), b_.CreateMul(i, b_.getInt64(kGolden)))));
  }
  // 53 random bits in [0, 1): (bits >> 11) * 2^-53, exact in double.
  llvm::Value* uniform_double(llvm::Value* bits) {
    return b_.CreateFMul(b_.CreateSIToFP(b_.CreateLShr(bits, 11), b_.getDoubleTy()),
                         llvm::ConstantFP::get(b_.getDoubleTy(), 0x1p-53));
  }
  // Value i (the point's row-major position in the op's output) of a draw with `key`.
  llvm::Value* random_value(const KExpr& e, llvm::Value* key, llvm::Value* i) {
    if (e.op == OpKind::RngUniform) {
      llvm::Value* bits = rng_bits(key, i);
      if (e.dtype == DType::Float32) {  // 24 bits, computed in float as the reference does
        return b_.CreateFMul(b_.CreateSIToFP(b_.CreateLShr(bits, 40), b_.getFloatTy()),
                             llvm::ConstantFP::get(b_.getFloatTy(), 0x1p-24));
      }
      return convert(uniform_double(bits), DType::Float64, e.dtype);
    }
    // Box-Muller's cosine branch in double, from counters 2i and 2i + 1. log and cos are glibc's
    // scalar functions, as the reference calls them: the call is marked nobuiltin, so the
    // vectorizer cannot swap in libmvec's variants (up to 4 ulp apart) and the draw stays bit
    // for bit the reference's (the loop then runs scalar).
    llvm::Value* i2 = b_.CreateShl(i, 1);
    llvm::Value* one = llvm::ConstantFP::get(b_.getDoubleTy(), 1.0);
    llvm::Value* u1 = b_.CreateFSub(one, uniform_double(rng_bits(key, i2)));
    llvm::Value* u2 = uniform_double(rng_bits(key, b_.CreateOr(i2, b_.getInt64(1))));
    auto libm = [&](const MathFn& f, llvm::Value* x) {
      auto* c = llvm::cast<llvm::CallInst>(call_math(f, DType::Float64, x));
      c->addFnAttr(llvm::Attribute::NoBuiltin);
      return c;
    };
    llvm::Value* r = intrinsic(llvm::Intrinsic::sqrt,
                               b_.CreateFMul(llvm::ConstantFP::get(b_.getDoubleTy(), -2.0),
                                             libm(kLog, u1)));
    llvm::Value* two_pi = llvm::ConstantFP::get(b_.getDoubleTy(), 2.0 * std::numbers::pi);
    llvm::Value* a = b_.CreateFMul(two_pi, u2);
    return convert(b_.CreateFMul(r, libm(kCos, a)), DType::Float64, e.dtype);
  }

  // ---- the expression at one point ----
  const std::vector<int32_t>& dyn_of(int x) const {
    return x < nin_ ? spec_.inputs[x].dyn : spec_.out_dyn;
  }

  // Operand x's position: its affine part plus its dynamic terms (checked index * stride).
  llvm::Value* position(int x, llvm::Value* affine, const std::vector<llvm::Value*>& v) {
    const std::vector<int32_t>& dyn = dyn_of(x);
    for (size_t t = 0; t < dyn.size(); ++t) {
      affine = b_.CreateAdd(affine, b_.CreateMul(v[dyn[t]], dyn_strides_[x][t]));
    }
    return affine;
  }

  static bool is_stage(OpKind op) {
    return op == OpKind::ReduceSum || op == OpKind::ReduceProd || op == OpKind::ReduceMax ||
           op == OpKind::ReduceMin;
  }

  // pos[x]: element offset of operand x at the current point (affine part). Evaluates the
  // expressions up to `upto` (default: all) and returns that one's value. Sets vals_ (every
  // expression's value, for the output's dynamic terms), and with checks point_bad_ (some check
  // failed here), check_ok_ and check_raw_. A RowFused stage reads its row's value (stage_).
  llvm::Value* expression(const std::vector<llvm::Value*>& pos, int upto = -1) {
    std::vector<llvm::Value*>& v = vals_;
    v.assign(spec_.exprs.size(), nullptr);
    check_ok_.assign(spec_.nchecks, nullptr);
    check_raw_.assign(spec_.nchecks, nullptr);
    point_bad_ = b_.getFalse();
    const size_t n = upto < 0 ? spec_.exprs.size() : static_cast<size_t>(upto) + 1;
    for (size_t i = 0; i < n; ++i) {
      const KExpr& e = spec_.exprs[i];
      auto dt = [&](int32_t j) { return spec_.exprs[j].dtype; };
      if (is_stage(e.op)) {
        if (i >= stage_.size() || !stage_[i]) throw std::runtime_error("codegen: stage read before its fold");
        v[i] = stage_[i];
        continue;
      }
      switch (e.op) {
        case OpKind::Gather: {
          // In range: 0 <= raw < bound, one unsigned compare. Out of range reads index 0.
          llvm::Value* raw = convert(v[e.a], dt(e.a), DType::Int64);
          llvm::Value* ok = b_.CreateICmpULT(raw, bounds_[e.input]);
          check_ok_[e.input] = ok;
          check_raw_[e.input] = raw;
          point_bad_ = b_.CreateOr(point_bad_, b_.CreateNot(ok));
          v[i] = b_.CreateSelect(ok, raw, b_.getInt64(0));
          break;
        }
        case OpKind::DeviceData: {
          DType t = spec_.inputs[e.input].dtype;
          llvm::Value* p =
              b_.CreateInBoundsGEP(mem_type(t), ptrs_[e.input], position(e.input, pos[e.input], v));
          llvm::LoadInst* l = b_.CreateAlignedLoad(mem_type(t), p, llvm::MaybeAlign(align_of(t)));
          l->setMetadata(llvm::LLVMContext::MD_noalias, out_scope_);
          v[i] = t == DType::Bool ? b_.CreateICmpNE(l, b_.getInt8(0)) : static_cast<llvm::Value*>(l);
          v[i] = convert(v[i], t, e.dtype);
          break;
        }
        case OpKind::Iota:
          v[i] = convert(position(e.input, pos[e.input], v), DType::Int64, e.dtype);
          break;
        case OpKind::Constant: v[i] = scalar_arg(e.input, e.dtype); break;
        case OpKind::RngUniform:
        case OpKind::RngNormal:
          v[i] = random_value(e, v[e.a], position(e.input, pos[e.input], v));
          break;
        case OpKind::Where: v[i] = b_.CreateSelect(v[e.a], v[e.b], v[e.c]); break;
        default:
          if (e.b < 0) {
            v[i] = unary(e, v[e.a], dt(e.a));
          } else {
            v[i] = binary(e, v[e.a], v[e.b], dt(e.a));
          }
      }
    }
    return v[n - 1];
  }

  // ---- loops ----
  // for (i = lo; i < hi; ++i) carried = body(i, carried); returns the carried values at exit.
  std::vector<llvm::Value*> loop(llvm::Value* lo, llvm::Value* hi, std::vector<llvm::Value*> init,
                                 const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* bodybb = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
    i->addIncoming(lo, pre);
    std::vector<llvm::PHINode*> phis;
    std::vector<llvm::Value*> carried;
    for (llvm::Value* v : init) {
      llvm::PHINode* p = b_.CreatePHI(v->getType(), 2);
      p->addIncoming(v, pre);
      phis.push_back(p);
      carried.push_back(p);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(i, hi), bodybb, exit);
    b_.SetInsertPoint(bodybb);
    std::vector<llvm::Value*> next = body(i, carried);
    llvm::Value* inext = b_.CreateAdd(i, b_.getInt64(1), "", true, true);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    b_.CreateBr(header);
    i->addIncoming(inext, latch);
    for (size_t k = 0; k < phis.size(); ++k) phis[k]->addIncoming(next[k], latch);
    b_.SetInsertPoint(exit);
    return carried;
  }

  int nops() const { return static_cast<int>(ptrs_.size()); }  // inputs, the output, the key
  int out_op() const { return nin_; }

  // Offsets of every operand at step j of the innermost loop from `base`.
  std::vector<llvm::Value*> inner_pos(const std::vector<llvm::Value*>& base, llvm::Value* j) {
    std::vector<llvm::Value*> pos(base.size());
    for (int x = 0; x < nops(); ++x) {
      switch (spec_.inner[x]) {
        case StrideClass::Zero: pos[x] = base[x]; break;
        case StrideClass::One: pos[x] = b_.CreateAdd(base[x], j); break;
        case StrideClass::Other: pos[x] = b_.CreateAdd(base[x], b_.CreateMul(j, strides_[x][spec_.rank - 1])); break;
      }
    }
    return pos;
  }

  // base[x] += (multi-index of linear `lin` over dims [lo, hi)) . strides[x]
  void add_decomposed(std::vector<llvm::Value*>& base, llvm::Value* lin, int lo, int hi) {
    llvm::Value* rem = lin;
    for (int d = hi - 1; d >= lo; --d) {
      llvm::Value* idx = d == lo ? rem : b_.CreateSRem(rem, sizes_[d]);
      if (d != lo) rem = b_.CreateSDiv(rem, sizes_[d]);
      for (int x = 0; x < nops(); ++x) base[x] = b_.CreateAdd(base[x], b_.CreateMul(idx, strides_[x][d]));
    }
  }

  llvm::Value* store_out(llvm::Value* pos, llvm::Value* v) {
    DType t = spec_.out_dtype;
    if (t == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
    llvm::Value* p = b_.CreateInBoundsGEP(mem_type(t), ptrs_[out_op()], pos);
    llvm::StoreInst* s = b_.CreateAlignedStore(v, p, llvm::MaybeAlign(align_of(t)));
    s->setMetadata(llvm::LLVMContext::MD_alias_scope, out_scope_);
    return s;
  }
  llvm::Value* load_out(llvm::Value* pos) {
    DType t = spec_.out_dtype;
    llvm::Value* p = b_.CreateInBoundsGEP(mem_type(t), ptrs_[out_op()], pos);
    llvm::LoadInst* l = b_.CreateAlignedLoad(mem_type(t), p, llvm::MaybeAlign(align_of(t)));
    l->setMetadata(llvm::LLVMContext::MD_alias_scope, out_scope_);
    return l;
  }

  // The identity of reduction `op` in dtype t.
  llvm::Value* reduce_init(OpKind op, DType t) {
    const double inf = std::numeric_limits<double>::infinity();
    if (t == DType::Bool) {  // any (max: or from false), all (min: and from true)
      if (op == OpKind::ReduceMax) return b_.getInt1(false);
      if (op == OpKind::ReduceMin) return b_.getInt1(true);
      throw std::runtime_error("codegen: unsupported bool reduction");
    }
    switch (op) {
      case OpKind::ReduceSum: return constant(t, 0);
      case OpKind::ReduceProd: return constant(t, 1);
      case OpKind::ReduceMax:
        if (is_float(t)) return constant(t, -inf);
        return t == DType::Int32 ? b_.getInt32(0x80000000u) : b_.getInt64(1ull << 63);
      case OpKind::ReduceMin:
        if (is_float(t)) return constant(t, inf);
        return t == DType::Int32 ? b_.getInt32(0x7fffffffu) : b_.getInt64(~(1ull << 63));
      default: break;
    }
    throw std::runtime_error("codegen: unsupported reduction");
  }

  // acc (+) v with reduction `op` in dtype t; `reassoc` lets the vectorizer split the fold.
  llvm::Value* combine(OpKind op, DType t, llvm::Value* acc, llvm::Value* v, bool reassoc) {
    const bool f = is_float(t);
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc(reassoc);
    if (t == DType::Bool) {
      return op == OpKind::ReduceMax ? b_.CreateOr(acc, v) : b_.CreateAnd(acc, v);
    }
    switch (op) {
      case OpKind::ReduceSum:
        if (!f) return b_.CreateAdd(acc, v);
        return set_fmf(b_.CreateFAdd(acc, v), fmf);
      case OpKind::ReduceProd:
        if (!f) return b_.CreateMul(acc, v);
        return set_fmf(b_.CreateFMul(acc, v), fmf);
      case OpKind::ReduceMax:
        if (!f) return b_.CreateSelect(b_.CreateICmpSGT(v, acc), v, acc);
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpOGT(v, acc), is_nan(v)), v, acc);
      case OpKind::ReduceMin:
        if (!f) return b_.CreateSelect(b_.CreateICmpSLT(v, acc), v, acc);
        return b_.CreateSelect(b_.CreateOr(b_.CreateFCmpOLT(v, acc), is_nan(v)), v, acc);
      default: break;
    }
    throw std::runtime_error("codegen: unsupported reduction");
  }
  llvm::Value* set_fmf(llvm::Value* v, llvm::FastMathFlags fmf) {
    if (auto* i = llvm::dyn_cast<llvm::Instruction>(v)) i->setFastMathFlags(fmf);
    return v;
  }

  // Nested loops over dims [d, hi) adding each dim's index * stride to the bases; `inner` runs
  // at the innermost level with the complete bases.
  using Carried = std::vector<llvm::Value*>;
  Carried nest(int d, int hi, std::vector<llvm::Value*> base, Carried carried,
               const std::function<Carried(const std::vector<llvm::Value*>&, const Carried&)>& inner) {
    if (d == hi) return inner(base, carried);
    return loop(b_.getInt64(0), sizes_[d], carried, [&](llvm::Value* r, const Carried& c) {
      std::vector<llvm::Value*> nb(base.size());
      for (int x = 0; x < nops(); ++x) nb[x] = b_.CreateAdd(base[x], b_.CreateMul(r, strides_[x][d]));
      return nest(d + 1, hi, nb, c, inner);
    });
  }

  // ---- index checks ----
  bool checked() const { return spec_.nchecks > 0; }
  int key_op() const { return nin_ + 1; }
  // A loop's carried values with the failure flag (i8, or-reduced: the loop still vectorizes)
  // appended when the kernel has checks.
  Carried with_flag(Carried c) {
    if (checked()) c.push_back(b_.getInt8(0));
    return c;
  }
  // `next` plus the flag carried in `prev` updated with the last expression()'s checks.
  Carried flagged(Carried next, const Carried& prev) {
    if (checked())
      next.push_back(b_.CreateOr(prev.back(), b_.CreateZExt(point_bad_, b_.getInt8Ty())));
    return next;
  }
  llvm::BasicBlock* block(const char* name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }

  // if (flag) body();
  void if_set(llvm::Value* flag, const std::function<void()>& body) {
    auto* then = block("failed");
    auto* cont = block("cont");
    llvm::MDBuilder mdb(ctx_);
    b_.CreateCondBr(b_.CreateICmpNE(flag, b_.getInt8(0)), then, cont,
                    mdb.createBranchWeights(1, 1 << 20));
    b_.SetInsertPoint(then);
    body();
    b_.CreateBr(cont);
    b_.SetInsertPoint(cont);
  }

  // The cold path after a segment (or output) where a check failed: `walk` visits its points
  // again; the failing point with the smallest key is reported with its first failing check and
  // that check's index value (kernel_spec.h), so the runtime can name the first bad index.
  using Visit = std::function<void(const std::vector<llvm::Value*>&)>;
  void report_failure(const std::function<void(const Visit&)>& walk) {
    auto* i64 = b_.getInt64Ty();
    b_.CreateStore(b_.getInt64(std::numeric_limits<int64_t>::max()), key_slot_);
    walk([&](const std::vector<llvm::Value*>& pos) {
      expression(pos);
      auto* hit = block("bad");
      auto* update = block("smaller");
      auto* next = block("next");
      b_.CreateCondBr(point_bad_, hit, next);
      b_.SetInsertPoint(hit);
      llvm::Value* check = b_.getInt64(0);
      llvm::Value* value = check_raw_[0];
      for (int k = spec_.nchecks - 1; k >= 0; --k) {  // the first failing check wins
        llvm::Value* bad = b_.CreateNot(check_ok_[k]);
        check = b_.CreateSelect(bad, b_.getInt64(k), check);
        value = b_.CreateSelect(bad, check_raw_[k], value);
      }
      llvm::Value* key = pos[key_op()];
      b_.CreateCondBr(b_.CreateICmpSLT(key, b_.CreateLoad(i64, key_slot_)), update, next);
      b_.SetInsertPoint(update);
      b_.CreateStore(key, key_slot_);
      b_.CreateStore(check, check_slot_);
      b_.CreateStore(value, value_slot_);
      b_.CreateBr(next);
      b_.SetInsertPoint(next);
    });
    llvm::Value* key = b_.CreateLoad(i64, key_slot_);
    auto* call = block("report");
    auto* done = block("reported");
    b_.CreateCondBr(b_.CreateICmpNE(key, b_.getInt64(std::numeric_limits<int64_t>::max())), call,
                    done);
    b_.SetInsertPoint(call);
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt8PtrTy(), i64, i64, i64}, false);
    llvm::Value* fp = b_.CreateLoad(
        fty->getPointerTo(), b_.CreatePointerCast(sink_, fty->getPointerTo()->getPointerTo()));
    b_.CreateCall(fty, fp,
                  {sink_, key, b_.CreateLoad(i64, check_slot_), b_.CreateLoad(i64, value_slot_)});
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // ---- loops ----
  // Float32 sums accumulate in double: a column reduction in a tile of kColTile outputs, a row
  // reduction in float32 over blocks of kRowBlock elements of the innermost dim (vectorized, split
  // across lanes), each block's sum added to a double. The order depends only on the shape.
  static constexpr int64_t kColTile = 2048;
  static constexpr int64_t kRowBlock = 1024;
  bool sum_in_double() const {
    return spec_.reduce_op == OpKind::ReduceSum && spec_.out_dtype == DType::Float32 &&
           (spec_.scheme == Scheme::RowReduce || spec_.scheme == Scheme::ColReduce);
  }
  llvm::Value* min64(llvm::Value* a, llvm::Value* c) {
    return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
  }

  // Elementwise, ColReduce and Scatter: row segments of the innermost dim over [begin, end).
  void emit_segments(llvm::Value* begin, llvm::Value* end) {
    const int rank = spec_.rank, nred = spec_.nred;
    llvm::Value* inner_size = sizes_[rank - 1];
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "seg", fn_);
    auto* bodybb = llvm::BasicBlock::Create(ctx_, "segbody", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "segexit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
    i->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, end), bodybb, exit);
    b_.SetInsertPoint(bodybb);
    llvm::Value* row = b_.CreateSDiv(i, inner_size);
    llvm::Value* col = b_.CreateSub(i, b_.CreateMul(row, inner_size));
    llvm::Value* n = b_.CreateSub(inner_size, col);
    llvm::Value* left = b_.CreateSub(end, i);
    n = b_.CreateSelect(b_.CreateICmpSLT(left, n), left, n);
    std::vector<llvm::Value*> base(nops());
    for (int x = 0; x < nops(); ++x) base[x] = b_.CreateAdd(offs_[x], b_.CreateMul(col, strides_[x][rank - 1]));
    if (rank - 1 > nred) add_decomposed(base, row, nred, rank - 1);
    // The points of [0, m) from `b` over the reduced nest, for the failure report.
    auto rewalk = [&](const std::vector<llvm::Value*>& b, llvm::Value* m, int lo_dim) {
      report_failure([&](const Visit& visit) {
        nest(0, lo_dim, b, {}, [&](const std::vector<llvm::Value*>& rb, const Carried&) {
          loop(b_.getInt64(0), m, {}, [&](llvm::Value* j, const Carried&) {
            visit(inner_pos(rb, j));
            return Carried{};
          });
          return Carried{};
        });
      });
    };
    if (spec_.scheme == Scheme::Elementwise) {
      Carried f = loop(b_.getInt64(0), n, with_flag({}), [&](llvm::Value* j, const Carried& c) {
        std::vector<llvm::Value*> pos = inner_pos(base, j);
        store_out(pos[out_op()], expression(pos));
        return flagged({}, c);
      });
      if (checked()) if_set(f.back(), [&] { rewalk(base, n, 0); });
    } else if (sum_in_double()) {
      emit_col_tiles(base, n, rewalk);
    } else {
      const bool scatter = spec_.scheme == Scheme::Scatter;
      if (!scatter) {
        llvm::Value* init = reduce_init(spec_.reduce_op, spec_.out_dtype);
        loop(b_.getInt64(0), n, {}, [&](llvm::Value* j, const Carried&) {
          store_out(inner_pos(base, j)[out_op()], init);
          return Carried{};
        });
      }
      Carried f = nest(
          0, nred, base, with_flag({}), [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
            return loop(b_.getInt64(0), n, c, [&](llvm::Value* j, const Carried& cc) {
              std::vector<llvm::Value*> pos = inner_pos(rb, j);
              llvm::Value* v = expression(pos);
              llvm::Value* at = scatter ? position(out_op(), pos[out_op()], vals_) : pos[out_op()];
              if (scatter && spec_.reduce_op == OpKind::IndexCopy) {
                store_out(at, v);
              } else {
                llvm::Value* acc = load_out(at);
                if (spec_.out_dtype == DType::Bool) acc = b_.CreateICmpNE(acc, b_.getInt8(0));
                store_out(at, scatter ? scatter_add(acc, v)
                                      : combine(spec_.reduce_op, spec_.out_dtype, acc, v, false));
              }
              return flagged({}, cc);
            });
          });
      if (checked()) if_set(f.back(), [&] { rewalk(base, n, nred); });
    }
    llvm::Value* inext = b_.CreateAdd(i, n);
    i->addIncoming(inext, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  // scatter_add's update, as the reference's add_values: or for bool, wrapping for integers.
  llvm::Value* scatter_add(llvm::Value* acc, llvm::Value* v) {
    if (spec_.out_dtype == DType::Bool) return b_.CreateOr(acc, v);
    return is_float(spec_.out_dtype) ? b_.CreateFAdd(acc, v) : b_.CreateAdd(acc, v);
  }

  // A float32 column sum: the segment's outputs in tiles of kColTile, each summed over the
  // reduced nest in a double per output (in the reduced dims' order), then rounded once.
  template <class Rewalk>
  void emit_col_tiles(const std::vector<llvm::Value*>& base, llvm::Value* n, const Rewalk& rewalk) {
    auto* f64 = b_.getDoubleTy();
    llvm::Value* tile = b_.getInt64(kColTile);
    llvm::Value* ntiles = b_.CreateSDiv(b_.CreateAdd(n, b_.getInt64(kColTile - 1)), tile);
    loop(b_.getInt64(0), ntiles, {}, [&](llvm::Value* t, const Carried&) {
      llvm::Value* t0 = b_.CreateMul(t, tile);
      llvm::Value* m = min64(tile, b_.CreateSub(n, t0));
      std::vector<llvm::Value*> tb = inner_pos(base, t0);
      auto slot = [&](llvm::Value* j) { return b_.CreateInBoundsGEP(f64, tile_, j); };
      loop(b_.getInt64(0), m, {}, [&](llvm::Value* j, const Carried&) {
        b_.CreateStore(llvm::ConstantFP::get(f64, 0.0), slot(j));
        return Carried{};
      });
      Carried f = nest(0, spec_.nred, tb, with_flag({}),
                       [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
                         return loop(b_.getInt64(0), m, c, [&](llvm::Value* j, const Carried& cc) {
                           llvm::Value* v = convert(expression(inner_pos(rb, j)), DType::Float32,
                                                    DType::Float64);
                           llvm::Value* p = slot(j);
                           b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64, p), v), p);
                           return flagged({}, cc);
                         });
                       });
      loop(b_.getInt64(0), m, {}, [&](llvm::Value* j, const Carried&) {
        store_out(inner_pos(tb, j)[out_op()],
                  b_.CreateFPTrunc(b_.CreateLoad(f64, slot(j)), b_.getFloatTy()));
        return Carried{};
      });
      if (checked()) if_set(f.back(), [&] { rewalk(tb, m, spec_.nred); });
      return Carried{};
    });
  }

  // Expression `expr` folded with `op` in dtype t over the row of the current output (dims
  // [nout, rank) from `base`): its value, then with checks the failure flag. The fold runs in
  // registers, reassociated (vectorized); a float32 sum adds float32 blocks of kRowBlock into a
  // double, rounded once at the end.
  Carried row_fold(const std::vector<llvm::Value*>& base, OpKind op, DType t, int expr) {
    const int rank = spec_.rank, nout = spec_.nout();
    llvm::Value* inner = sizes_[rank - 1];
    // acc (+) expression over [lo, hi) of the innermost dim.
    auto fold = [&](const std::vector<llvm::Value*>& rb, llvm::Value* lo, llvm::Value* hi,
                    const Carried& c) {
      return loop(lo, hi, c, [&](llvm::Value* j, const Carried& cc) {
        std::vector<llvm::Value*> pos = inner_pos(rb, j);
        return flagged({combine(op, t, cc[0], expression(pos, expr), true)}, cc);
      });
    };
    if ((op == OpKind::ReduceMax || op == OpKind::ReduceMin) && is_float(t)) {
      return float_extreme_fold(base, op, t, expr);
    }
    if (op != OpKind::ReduceSum || t != DType::Float32) {
      return nest(nout, rank - 1, base, with_flag({reduce_init(op, t)}),
                  [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
                    return fold(rb, b_.getInt64(0), inner, c);
                  });
    }
    llvm::Value* blk = b_.getInt64(kRowBlock);
    llvm::Value* nblocks = b_.CreateSDiv(b_.CreateAdd(inner, b_.getInt64(kRowBlock - 1)), blk);
    Carried acc =
        nest(nout, rank - 1, base, with_flag({llvm::ConstantFP::get(b_.getDoubleTy(), 0.0)}),
             [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
               return loop(b_.getInt64(0), nblocks, c, [&](llvm::Value* k, const Carried& cc) {
                 llvm::Value* lo = b_.CreateMul(k, blk);
                 Carried init{constant(DType::Float32, 0)};
                 if (checked()) init.push_back(cc.back());
                 Carried part = fold(rb, lo, min64(b_.CreateAdd(lo, blk), inner), init);
                 Carried next{b_.CreateFAdd(cc[0], b_.CreateFPExt(part[0], b_.getDoubleTy()))};
                 if (checked()) next.push_back(part.back());
                 return next;
               });
             });
    acc[0] = b_.CreateFPTrunc(acc[0], b_.getFloatTy());
    return acc;
  }

  // A float max/min over the row. A compare-and-select fold does not vectorize (LLVM 14 needs
  // no-NaNs for floating min/max reductions), so the fast fold runs on integers: each value's
  // bits mapped to an integer of the same order (negative values' magnitude bits flipped), an
  // integer max/min, and an or of "is NaN". The reference's answer differs from that one only
  // when a NaN is present (the first NaN wins) or the result is a zero (the first zero of the
  // row wins, -0 or +0): those rows fold again in order, the reference's way (a cold path).
  Carried float_extreme_fold(const std::vector<llvm::Value*>& base, OpKind op, DType t, int expr) {
    const int rank = spec_.rank, nout = spec_.nout();
    const bool is_max = op == OpKind::ReduceMax;
    llvm::Type* ft = reg_type(t);
    const unsigned bits = t == DType::Float32 ? 32 : 64;
    llvm::IntegerType* it = b_.getIntNTy(bits);
    // key(x) = bits ^ ((bits >>s (w-1)) >>u 1): an involution, monotonic over the non-NaNs.
    auto key = [&](llvm::Value* i) {
      return b_.CreateXor(i, b_.CreateLShr(b_.CreateAShr(i, bits - 1), 1));
    };
    llvm::Value* init_key = key(b_.CreateBitCast(reduce_init(op, t), it));
    Carried fast = nest(
        nout, rank - 1, base, with_flag({init_key, b_.getInt8(0)}),
        [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
          return loop(b_.getInt64(0), sizes_[rank - 1], c, [&](llvm::Value* j, const Carried& cc) {
            llvm::Value* v = expression(inner_pos(rb, j), expr);
            llvm::Value* k = key(b_.CreateBitCast(v, it));
            llvm::Value* better = is_max ? b_.CreateICmpSGT(k, cc[0]) : b_.CreateICmpSLT(k, cc[0]);
            llvm::Value* nan = b_.CreateOr(cc[1], b_.CreateZExt(is_nan(v), b_.getInt8Ty()));
            return flagged({b_.CreateSelect(better, k, cc[0]), nan}, cc);
          });
        });
    llvm::Value* value = b_.CreateBitCast(key(fast[0]), ft);
    llvm::Value* redo = b_.CreateOr(b_.CreateICmpNE(fast[1], b_.getInt8(0)),
                                    b_.CreateFCmpOEQ(value, llvm::ConstantFP::get(ft, 0.0)));
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* cold = block("exact_extreme");
    auto* join = block("extreme");
    llvm::MDBuilder mdb(ctx_);
    b_.CreateCondBr(redo, cold, join, mdb.createBranchWeights(1, 1 << 10));
    b_.SetInsertPoint(cold);
    // In order: a NaN accumulator stays; a NaN or a strictly better value replaces it.
    Carried exact = nest(
        nout, rank - 1, base, with_flag({reduce_init(op, t)}),
        [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
          return loop(b_.getInt64(0), sizes_[rank - 1], c, [&](llvm::Value* j, const Carried& cc) {
            llvm::Value* v = expression(inner_pos(rb, j), expr);
            llvm::Value* better = is_max ? b_.CreateFCmpOGT(v, cc[0]) : b_.CreateFCmpOLT(v, cc[0]);
            llvm::Value* take = b_.CreateAnd(b_.CreateNot(is_nan(cc[0])), b_.CreateOr(is_nan(v), better));
            return flagged({b_.CreateSelect(take, v, cc[0])}, cc);
          });
        });
    llvm::BasicBlock* cold_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* out = b_.CreatePHI(ft, 2);
    out->addIncoming(value, from);
    out->addIncoming(exact[0], cold_end);
    Carried res{out};
    if (checked()) res.push_back(fast.back());
    return res;
  }

  // The output's row base for output (row) `o` of [begin, end).
  std::vector<llvm::Value*> row_base(llvm::Value* o) {
    std::vector<llvm::Value*> base(offs_.begin(), offs_.end());
    if (spec_.nout() > 0) add_decomposed(base, o, 0, spec_.nout());
    return base;
  }

  // RowReduce: one output per iteration of [begin, end); the reduced dims fold in registers.
  void emit_row_reduce(llvm::Value* begin, llvm::Value* end) {
    const int rank = spec_.rank, nout = spec_.nout();
    llvm::Value* inner = sizes_[rank - 1];
    loop(begin, end, {}, [&](llvm::Value* o, const Carried&) {
      const std::vector<llvm::Value*> base = row_base(o);
      Carried acc = row_fold(base, spec_.reduce_op, spec_.out_dtype,
                             static_cast<int>(spec_.exprs.size()) - 1);
      store_out(base[out_op()], acc[0]);
      if (checked()) {
        if_set(acc.back(), [&] {
          report_failure([&](const Visit& visit) {
            nest(nout, rank - 1, base, {},
                 [&](const std::vector<llvm::Value*>& rb, const Carried&) {
                   loop(b_.getInt64(0), inner, {}, [&](llvm::Value* j, const Carried&) {
                     visit(inner_pos(rb, j));
                     return Carried{};
                   });
                   return Carried{};
                 });
          });
        });
      }
      return Carried{};
    });
  }

  // RowFused: per row of [begin, end), each stage folded over the row in expression order, then
  // the last expression stored at each point of the row (the row is still in cache).
  void emit_row_fused(llvm::Value* begin, llvm::Value* end) {
    const int rank = spec_.rank, nout = spec_.nout();
    loop(begin, end, {}, [&](llvm::Value* o, const Carried&) {
      const std::vector<llvm::Value*> base = row_base(o);
      stage_.assign(spec_.exprs.size(), nullptr);
      for (size_t i = 0; i < spec_.exprs.size(); ++i) {
        const KExpr& e = spec_.exprs[i];
        if (is_stage(e.op)) stage_[i] = row_fold(base, e.op, e.dtype, e.a)[0];
      }
      nest(nout, rank - 1, base, {}, [&](const std::vector<llvm::Value*>& rb, const Carried&) {
        loop(b_.getInt64(0), sizes_[rank - 1], {}, [&](llvm::Value* j, const Carried&) {
          std::vector<llvm::Value*> pos = inner_pos(rb, j);
          store_out(pos[out_op()], expression(pos));
          return Carried{};
        });
        return Carried{};
      });
      return Carried{};
    });
  }

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
  llvm::Value* point_bad_ = nullptr;
};

std::unique_ptr<llvm::TargetMachine> host_machine() {
  auto jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "detect host");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Default);  // O2: as fast as O3 here, and quicker
  // Large code model: every symbol and section reference is an absolute 64-bit relocation, which
  // elf_loader.cpp applies without LLVM when a kernel comes from the disk cache.
  jtmb.setRelocationModel(llvm::Reloc::Static);
  jtmb.setCodeModel(llvm::CodeModel::Large);
  return take(jtmb.createTargetMachine(), "create target machine");
}

// Whether float16 conversions may use F16C: the host has it, and LAZULI_JIT_NO_F16C (a test hook:
// the integer path is what hosts without F16C run) is unset or 0. Both paths give the same bits,
// so kernels compiled either way may share a disk cache.
bool has_f16c(const llvm::TargetMachine& tm) {
  const char* off = std::getenv("LAZULI_JIT_NO_F16C");
  if (off && *off && std::string(off) != "0") return false;
  return llvm::StringRef(tm.getTargetFeatureString()).contains("+f16c");
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(tm, pto);
  llvm::TargetLibraryInfoImpl tlii(llvm::Triple(m.getTargetTriple()));
  static const std::vector<llvm::VecDesc> table = libmvec_table();
  tlii.addVectorizableFunctions(table);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  mpm.run(m, mam);
}

class LlvmJit final : public JitCompiler {
 public:
  LlvmJit() = default;

  std::string compile(const KernelSpec& spec, const std::string& name, std::string* llvm_ir) override {
    thread_local std::unique_ptr<llvm::TargetMachine> tm;
    if (!tm) tm = host_machine();
    llvm::LLVMContext ctx;
    auto m = std::make_unique<llvm::Module>(name, ctx);
    m->setDataLayout(tm->createDataLayout());
    m->setTargetTriple(tm->getTargetTriple().str());
    auto print = [&] {
      if (!llvm_ir) return;
      llvm_ir->clear();
      llvm::raw_string_ostream os(*llvm_ir);
      m->print(os, nullptr);
    };
    try {
      Emitter(ctx, *m, spec, has_f16c(*tm)).emit(name);
    } catch (...) {
      print();  // the IR emitted so far, for the bug report
      throw;
    }
    print();
    std::string err;
    llvm::raw_string_ostream es(err);
    if (llvm::verifyModule(*m, &es)) throw std::runtime_error("invalid IR: " + es.str());
    optimize(*m, tm.get());
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile)) {
      throw std::runtime_error("the target cannot emit object files");
    }
    pm.run(*m);
    return std::string(buf.data(), buf.size());
  }

  // The runtime links kernels itself (elf_loader.cpp); LLJIT is the fallback, made on first use.
  llvm::orc::LLJIT& jit() {
    std::lock_guard<std::mutex> l(jit_mu_);
    if (!jit_) {
      jit_ = take(llvm::orc::LLJITBuilder().create(), "create LLJIT");
      char prefix = jit_->getDataLayout().getGlobalPrefix();
      auto& lib = jit_->getMainJITDylib();
      lib.addGenerator(take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix), "process symbols"));
      // glibc's vector math library: the vectorizer's calls land there (see libmvec_table).
      lib.addGenerator(take(llvm::orc::DynamicLibrarySearchGenerator::Load("libmvec.so.1", prefix), "load libmvec.so.1"));
    }
    return *jit_;
  }

  void* load(const std::string& object, const std::string& name) override {
    llvm::orc::LLJIT& jit_ = jit();
    auto rt = jit_.getMainJITDylib().createResourceTracker();
    auto mb = llvm::MemoryBuffer::getMemBufferCopy(object, name);
    if (auto e = jit_.addObjectFile(rt, std::move(mb))) throw std::runtime_error("link: " + to_string(std::move(e)));
    auto sym = jit_.lookup(name);
    if (!sym) {
      std::string msg = to_string(sym.takeError());
      llvm::cantFail(rt->remove());
      throw std::runtime_error("lookup " + name + ": " + msg);
    }
    std::lock_guard<std::mutex> l(mu_);
    trackers_[name] = rt;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(sym->getAddress()));
  }

  void unload(const std::string& name) override {
    llvm::orc::ResourceTrackerSP rt;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = trackers_.find(name);
      if (it == trackers_.end()) return;
      rt = it->second;
      trackers_.erase(it);
    }
    llvm::consumeError(rt->remove());
  }

 private:
  std::mutex jit_mu_;  // guards jit_ creation
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::mutex mu_;  // guards trackers_
  std::unordered_map<std::string, llvm::orc::ResourceTrackerSP> trackers_;
};

}  // namespace
}  // namespace lz::cpu

extern "C" __attribute__((visibility("default"))) lz::cpu::JitCompiler* lazuli_create_jit_compiler(std::string* error) {
  try {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return new lz::cpu::LlvmJit();
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}
