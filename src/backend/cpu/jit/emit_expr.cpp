// The kernel emitter's values at one point (emitter.h): dtype conversions exactly as the
// reference converts, math calls, the counter-based random generator, and the expression DAG
// with its loads and index checks.
#include <llvm/IR/IRBuilder.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/jit/emitter.h"
#include "core/reduced_float.h"

namespace lz::cpu::jit {

llvm::Type* Emitter::reg_type(DType t) {
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

unsigned Emitter::align_of(DType t) {
  return static_cast<unsigned>(m_.getDataLayout().getTypeAllocSize(mem_type(t)));
}

llvm::Value* Emitter::constant(DType t, double v) {
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

llvm::Value* Emitter::widen(llvm::Value* h, DType from) {
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

llvm::Value* Emitter::narrow(llvm::Value* f, DType to) {
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

llvm::Value* Emitter::convert(llvm::Value* v, DType from, DType to) {
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

llvm::Value* Emitter::call_math(const ir::LibmFn& f, DType t, llvm::Value* x, llvm::Value* y) {
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

llvm::Value* Emitter::exp(DType t, llvm::Value* x, bool tiny_is_zero) {
  // Below lo the result rounds to +0 (float32: e^-104 < 2^-150, half the least denormal;
  // float64: e^-746 < 2^-1075); above hi it overflows to +inf (e^89 > FLT_MAX, e^710 > DBL_MAX).
  // Those lanes call exp(0) and take their result by a select, so every result is the call's own
  // (NaN included: it fails both compares). Lanes between the limits and libmvec's fast range
  // (denormal results, e^87.4 to e^89) still call it: exact, slow, rare. With tiny_is_zero the
  // denormal results are 0 too (1 + a denormal is 1 in both dtypes).
  const bool f32 = t == DType::Float32;
  const double lo = tiny_is_zero ? (f32 ? -88.0 : -709.0) : (f32 ? -104.0 : -746.0);
  llvm::Value* under = b_.CreateFCmpOLT(x, fconst(x, lo));
  llvm::Value* over = b_.CreateFCmpOGT(x, fconst(x, f32 ? 89.0 : 710.0));
  llvm::Value* arg = b_.CreateSelect(b_.CreateOr(under, over), fconst(x, 0), x);
  llvm::Value* y = call_math(libm(OpKind::Exp), t, arg);
  y = b_.CreateSelect(under, fconst(x, 0), y);
  return b_.CreateSelect(over, fconst(x, std::numeric_limits<double>::infinity()), y);
}

llvm::Value* Emitter::log(DType t, llvm::Value* x) {
  // log(±0) is -inf: those lanes call log(1) and take -inf by a select. libmvec's vector log
  // leaves its fast path for every lane of a vector holding a zero (a saturated probability in a
  // binary cross-entropy, a masked entry's log), and that path was 10x slower (bench/RESULTS.md
  // 28). Other special inputs (negative, denormal, inf, NaN) still call it: exact, rare.
  llvm::Value* zero = b_.CreateFCmpOEQ(x, fconst(x, 0));
  llvm::Value* y = call_math(libm(OpKind::Log), t, b_.CreateSelect(zero, fconst(x, 1), x));
  return b_.CreateSelect(zero, fconst(x, -std::numeric_limits<double>::infinity()), y);
}

llvm::Value* Emitter::intrinsic(llvm::Intrinsic::ID id, llvm::Value* x) {
  return b_.CreateUnaryIntrinsic(id, x);
}

llvm::Value* Emitter::fmax_nan(llvm::Value* a, llvm::Value* c, bool max) {
  llvm::Value* gt = max ? b_.CreateFCmpOGT(c, a) : b_.CreateFCmpOLT(c, a);
  llvm::Value* pick = b_.CreateSelect(gt, c, a);
  return b_.CreateSelect(is_nan(a), a, b_.CreateSelect(is_nan(c), c, pick));
}

llvm::Value* Emitter::unary(const KExpr& e, llvm::Value* x, DType in) {
  const bool f = is_float(e.dtype);
  if (e.op == OpKind::Exp) return exp(e.dtype, x);
  if (e.op == OpKind::Log) return log(e.dtype, x);
  if (const ir::LibmFn* fn = ir::libm_fn(e.op)) return call_math(*fn, e.dtype, x);
  switch (e.op) {
    case OpKind::GradLeaf:
    case OpKind::StopGradient: return x;
    case OpKind::Cast: return convert(x, in, e.dtype);
    case OpKind::Neg: return f ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    case OpKind::Abs:
      if (f) return intrinsic(llvm::Intrinsic::fabs, x);
      return b_.CreateSelect(b_.CreateICmpSLT(x, llvm::ConstantInt::get(x->getType(), 0)), b_.CreateNeg(x), x);
    case OpKind::Sqrt: return intrinsic(llvm::Intrinsic::sqrt, x);
    case OpKind::Rsqrt: return b_.CreateFDiv(fconst(x, 1), intrinsic(llvm::Intrinsic::sqrt, x));
    case OpKind::Reciprocal: return b_.CreateFDiv(fconst(x, 1), x);
    case OpKind::Sigmoid:
      return b_.CreateFDiv(fconst(x, 1),
                           b_.CreateFAdd(fconst(x, 1), exp(e.dtype, b_.CreateFNeg(x), true)));
    case OpKind::Gelu: {
      llvm::Value* s = b_.CreateFDiv(x, fconst(x, std::sqrt(2.0)));
      llvm::Value* h = b_.CreateFMul(x, fconst(x, 0.5));
      return b_.CreateFMul(h, b_.CreateFAdd(fconst(x, 1), call_math(libm(OpKind::Erf), e.dtype, s)));
    }
    case OpKind::Relu:
      // Only values below zero become zero (NaN and -0.0 stay), as torch.relu does.
      if (f) return b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(x, 0)), fconst(x, 0), x);
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
    case OpKind::RngAdvance:
      return splitmix64(b_.CreateXor(x, b_.getInt64(ir::rng::kAdvanceSalt)));
    default: break;
  }
  throw std::runtime_error("codegen: unsupported unary op " + std::to_string(static_cast<int>(e.op)));
}

llvm::Value* Emitter::binary(const KExpr& e, llvm::Value* x, llvm::Value* y, DType in) {
  if (const ir::LibmFn* fn = ir::libm_fn(e.op)) return call_math(*fn, e.dtype, x, y);
  const bool f = is_float(in);
  const bool sgn = in != DType::Bool;
  switch (e.op) {
    case OpKind::Add: return f ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y);
    case OpKind::Sub: return f ? b_.CreateFSub(x, y) : b_.CreateSub(x, y);
    case OpKind::Mul: return f ? b_.CreateFMul(x, y) : b_.CreateMul(x, y);
    case OpKind::Div: return b_.CreateFDiv(x, y);
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

llvm::Value* Emitter::mix64(llvm::Value* z) {
  using namespace ir::rng;  // NOLINT(build/namespaces): the generator's constants
  z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, kShift1)), b_.getInt64(kMix1));
  z = b_.CreateMul(b_.CreateXor(z, b_.CreateLShr(z, kShift2)), b_.getInt64(kMix2));
  return b_.CreateXor(z, b_.CreateLShr(z, kShift3));
}

llvm::Value* Emitter::rng_bits(llvm::Value* key, llvm::Value* i) {
  return mix64(
      mix64(b_.CreateXor(splitmix64(key), b_.CreateMul(i, b_.getInt64(ir::rng::kGolden)))));
}

llvm::Value* Emitter::uniform_double(llvm::Value* bits) {
  return b_.CreateFMul(b_.CreateSIToFP(b_.CreateLShr(bits, 11), b_.getDoubleTy()),
                       llvm::ConstantFP::get(b_.getDoubleTy(), 0x1p-53));
}

llvm::Value* Emitter::random_value(const KExpr& e, llvm::Value* key, llvm::Value* i) {
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
  auto scalar_libm = [&](OpKind op, llvm::Value* x) {
    auto* c = llvm::cast<llvm::CallInst>(call_math(libm(op), DType::Float64, x));
    c->addFnAttr(llvm::Attribute::NoBuiltin);
    return c;
  };
  llvm::Value* r = intrinsic(llvm::Intrinsic::sqrt,
                             b_.CreateFMul(llvm::ConstantFP::get(b_.getDoubleTy(), -2.0),
                                           scalar_libm(OpKind::Log, u1)));
  llvm::Value* two_pi = llvm::ConstantFP::get(b_.getDoubleTy(), 2.0 * std::numbers::pi);
  llvm::Value* a = b_.CreateFMul(two_pi, u2);
  return convert(b_.CreateFMul(r, scalar_libm(OpKind::Cos, a)), DType::Float64, e.dtype);
}

const std::vector<int32_t>& Emitter::dyn_of(int x) const {
  return x < nin_ ? spec_.inputs[x].dyn : spec_.out_dyn;
}

llvm::Value* Emitter::position(int x, llvm::Value* affine, const std::vector<llvm::Value*>& v) {
  const std::vector<int32_t>& dyn = dyn_of(x);
  for (size_t t = 0; t < dyn.size(); ++t) {
    affine = b_.CreateAdd(affine, b_.CreateMul(v[dyn[t]], dyn_strides_[x][t]));
  }
  return affine;
}

bool Emitter::is_stage(OpKind op) {
  return op == OpKind::ReduceSum || op == OpKind::ReduceProd || op == OpKind::ReduceMax ||
         op == OpKind::ReduceMin;
}

llvm::Value* Emitter::expression(const std::vector<llvm::Value*>& pos, int upto,
                                 const std::vector<bool>* only) {
  std::vector<llvm::Value*>& v = vals_;
  v.assign(spec_.exprs.size(), nullptr);
  check_ok_.assign(spec_.nchecks, nullptr);
  check_raw_.assign(spec_.nchecks, nullptr);
  point_bad_ = b_.getFalse();
  const size_t n = upto < 0 ? spec_.exprs.size() : static_cast<size_t>(upto) + 1;
  for (size_t i = 0; i < n; ++i) {
    if (only && !(*only)[i]) continue;
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

}  // namespace lz::cpu::jit
