// The kernel emitter's loop nests (emitter.h): each scheme's loops over its range (kernel_spec.h),
// the reductions' folds and their accumulation order, and the cold path that reports the first
// failed index check.
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "backend/cpu/jit/emitter.h"

namespace lz::cpu::jit {

std::vector<llvm::Value*> Emitter::loop(
    llvm::Value* lo, llvm::Value* hi, std::vector<llvm::Value*> init,
    const std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>&
        body,
    bool interleave) {
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
  llvm::BranchInst* back = b_.CreateBr(header);
  if (!interleave) {
    llvm::Metadata* count[] = {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                               llvm::ConstantAsMetadata::get(b_.getInt32(1))};
    llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, {});
    llvm::Metadata* ops[] = {self.get(), llvm::MDNode::get(ctx_, count)};
    llvm::MDNode* md = llvm::MDNode::get(ctx_, ops);
    md->replaceOperandWith(0, md);
    back->setMetadata(llvm::LLVMContext::MD_loop, md);
  }
  i->addIncoming(inext, latch);
  for (size_t k = 0; k < phis.size(); ++k) phis[k]->addIncoming(next[k], latch);
  b_.SetInsertPoint(exit);
  return carried;
}

std::vector<llvm::Value*> Emitter::inner_pos(const std::vector<llvm::Value*>& base,
                                             llvm::Value* j) {
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

void Emitter::add_decomposed(std::vector<llvm::Value*>& base, llvm::Value* lin, int lo, int hi) {
  llvm::Value* rem = lin;
  for (int d = hi - 1; d >= lo; --d) {
    llvm::Value* idx = d == lo ? rem : b_.CreateSRem(rem, sizes_[d]);
    if (d != lo) rem = b_.CreateSDiv(rem, sizes_[d]);
    for (int x = 0; x < nops(); ++x) base[x] = b_.CreateAdd(base[x], b_.CreateMul(idx, strides_[x][d]));
  }
}

llvm::Value* Emitter::store_out(llvm::Value* pos, llvm::Value* v) {
  DType t = spec_.out_dtype;
  if (t == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
  llvm::Value* p = b_.CreateInBoundsGEP(mem_type(t), ptrs_[out_op()], pos);
  llvm::StoreInst* s = b_.CreateAlignedStore(v, p, llvm::MaybeAlign(align_of(t)));
  s->setMetadata(llvm::LLVMContext::MD_alias_scope, out_scope_);
  return s;
}

llvm::Value* Emitter::load_out(llvm::Value* pos) {
  DType t = spec_.out_dtype;
  llvm::Value* p = b_.CreateInBoundsGEP(mem_type(t), ptrs_[out_op()], pos);
  llvm::LoadInst* l = b_.CreateAlignedLoad(mem_type(t), p, llvm::MaybeAlign(align_of(t)));
  l->setMetadata(llvm::LLVMContext::MD_alias_scope, out_scope_);
  return l;
}

llvm::Value* Emitter::reduce_init(OpKind op, DType t) {
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

llvm::Value* Emitter::combine(OpKind op, DType t, llvm::Value* acc, llvm::Value* v, bool reassoc) {
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
    // Floats as the reference's max_values/min_values: a NaN accumulator stays (the first NaN
    // wins), a NaN or a strictly better value replaces it (the first of equals stays).
    case OpKind::ReduceMax:
      if (!f) return b_.CreateSelect(b_.CreateICmpSGT(v, acc), v, acc);
      return b_.CreateSelect(
          b_.CreateAnd(b_.CreateNot(is_nan(acc)), b_.CreateOr(b_.CreateFCmpOGT(v, acc), is_nan(v))),
          v, acc);
    case OpKind::ReduceMin:
      if (!f) return b_.CreateSelect(b_.CreateICmpSLT(v, acc), v, acc);
      return b_.CreateSelect(
          b_.CreateAnd(b_.CreateNot(is_nan(acc)), b_.CreateOr(b_.CreateFCmpOLT(v, acc), is_nan(v))),
          v, acc);
    default: break;
  }
  throw std::runtime_error("codegen: unsupported reduction");
}

llvm::Value* Emitter::set_fmf(llvm::Value* v, llvm::FastMathFlags fmf) {
  if (auto* i = llvm::dyn_cast<llvm::Instruction>(v)) i->setFastMathFlags(fmf);
  return v;
}

Emitter::Carried Emitter::nest(
    int d, int hi, std::vector<llvm::Value*> base, Carried carried,
    const std::function<Carried(const std::vector<llvm::Value*>&, const Carried&)>& inner) {
  if (d == hi) return inner(base, carried);
  return loop(b_.getInt64(0), sizes_[d], carried, [&](llvm::Value* r, const Carried& c) {
    std::vector<llvm::Value*> nb(base.size());
    for (int x = 0; x < nops(); ++x) nb[x] = b_.CreateAdd(base[x], b_.CreateMul(r, strides_[x][d]));
    return nest(d + 1, hi, nb, c, inner);
  });
}

Emitter::Carried Emitter::with_flag(Carried c) {
  if (checked()) c.push_back(b_.getInt8(0));
  return c;
}

Emitter::Carried Emitter::flagged(Carried next, const Carried& prev) {
  if (checked())
    next.push_back(b_.CreateOr(prev.back(), b_.CreateZExt(point_bad_, b_.getInt8Ty())));
  return next;
}

void Emitter::if_set(llvm::Value* flag, const std::function<void()>& body) {
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

void Emitter::report_failure(const std::function<void(const Visit&)>& walk) {
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

bool Emitter::sum_in_double() const {
  return spec_.reduce_op == OpKind::ReduceSum && spec_.out_dtype == DType::Float32 &&
         (spec_.scheme == Scheme::RowReduce || spec_.scheme == Scheme::ColReduce);
}

llvm::Value* Emitter::min64(llvm::Value* a, llvm::Value* c) {
  return b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
}

void Emitter::emit_segments(llvm::Value* begin, llvm::Value* end) {
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

llvm::Value* Emitter::scatter_add(llvm::Value* acc, llvm::Value* v) {
  if (spec_.out_dtype == DType::Bool) return b_.CreateOr(acc, v);
  return is_float(spec_.out_dtype) ? b_.CreateFAdd(acc, v) : b_.CreateAdd(acc, v);
}

template <class Rewalk>
void Emitter::emit_col_tiles(const std::vector<llvm::Value*>& base, llvm::Value* n,
                             const Rewalk& rewalk) {
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

bool Emitter::calls_math(int expr) const {
  // Expression `expr` and its operands, down to the loads and to the stages (a stage is a row's
  // value: folded before, not computed per point).
  std::vector<int> todo{expr};
  std::vector<bool> seen(spec_.exprs.size(), false);
  while (!todo.empty()) {
    const int i = todo.back();
    todo.pop_back();
    if (i < 0 || i >= static_cast<int>(spec_.exprs.size()) || seen[i]) continue;
    seen[i] = true;
    const KExpr& e = spec_.exprs[i];
    if (ir::calls_libm(e.op)) return true;
    if (i != expr && is_stage(e.op)) continue;
    todo.insert(todo.end(), {e.a, e.b, e.c});
  }
  return false;
}

Emitter::Carried Emitter::row_fold(const std::vector<llvm::Value*>& base, OpKind op, DType t,
                                   int expr) {
  const int rank = spec_.rank, nout = spec_.nout();
  llvm::Value* inner = sizes_[rank - 1];
  const bool interleave = !calls_math(expr);
  // acc (+) expression over [lo, hi) of the innermost dim.
  auto fold = [&](const std::vector<llvm::Value*>& rb, llvm::Value* lo, llvm::Value* hi,
                  const Carried& c) {
    return loop(
        lo, hi, c,
        [&](llvm::Value* j, const Carried& cc) {
          std::vector<llvm::Value*> pos = inner_pos(rb, j);
          return flagged({combine(op, t, cc[0], expression(pos, expr), true)}, cc);
        },
        interleave);
  };
  if ((op == OpKind::ReduceMax || op == OpKind::ReduceMin) && is_float(t)) {
    return float_extreme_fold(base, op, t, expr, interleave);
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

Emitter::Carried Emitter::float_extreme_fold(const std::vector<llvm::Value*>& base, OpKind op,
                                             DType t, int expr, bool interleave) {
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
  Carried fast = nest(nout, rank - 1, base, with_flag({init_key, b_.getInt8(0)}),
                      [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
                        return loop(
                            b_.getInt64(0), sizes_[rank - 1], c,
                            [&](llvm::Value* j, const Carried& cc) {
                              llvm::Value* v = expression(inner_pos(rb, j), expr);
                              llvm::Value* k = key(b_.CreateBitCast(v, it));
                              llvm::Value* better =
                                  is_max ? b_.CreateICmpSGT(k, cc[0]) : b_.CreateICmpSLT(k, cc[0]);
                              llvm::Value* nan =
                                  b_.CreateOr(cc[1], b_.CreateZExt(is_nan(v), b_.getInt8Ty()));
                              return flagged({b_.CreateSelect(better, k, cc[0]), nan}, cc);
                            },
                            interleave);
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
  // In order, with the reference's combining rule (combine()).
  Carried exact = nest(
      nout, rank - 1, base, with_flag({reduce_init(op, t)}),
      [&](const std::vector<llvm::Value*>& rb, const Carried& c) {
        return loop(b_.getInt64(0), sizes_[rank - 1], c, [&](llvm::Value* j, const Carried& cc) {
          return flagged({combine(op, t, cc[0], expression(inner_pos(rb, j), expr), false)}, cc);
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

std::vector<llvm::Value*> Emitter::row_base(llvm::Value* o) {
  std::vector<llvm::Value*> base(offs_.begin(), offs_.end());
  if (spec_.nout() > 0) add_decomposed(base, o, 0, spec_.nout());
  return base;
}

void Emitter::emit_row_reduce(llvm::Value* begin, llvm::Value* end) {
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

void Emitter::emit_row_fused(llvm::Value* begin, llvm::Value* end) {
  const int rank = spec_.rank, nout = spec_.nout();
  loop(begin, end, {}, [&](llvm::Value* o, const Carried&) {
    const std::vector<llvm::Value*> base = row_base(o);
    stage_.assign(spec_.exprs.size(), nullptr);
    for (size_t i = 0; i < spec_.exprs.size(); ++i) {
      const KExpr& e = spec_.exprs[i];
      if (is_stage(e.op)) stage_[i] = row_fold(base, e.op, e.dtype, e.a)[0];
    }
    for (size_t k = 0; k < spec_.row_outs.size(); ++k) {
      // Its position: the row index o over dims [0, nout), as row_base decomposes it.
      llvm::Value* at = row_offs_[k];
      llvm::Value* rem = o;
      for (int d = nout - 1; d >= 0; --d) {
        llvm::Value* idx = d == 0 ? rem : b_.CreateSRem(rem, sizes_[d]);
        if (d != 0) rem = b_.CreateSDiv(rem, sizes_[d]);
        at = b_.CreateAdd(at, b_.CreateMul(idx, row_strides_[k][d]));
      }
      const KRowOut& r = spec_.row_outs[k];
      // Per row: what it reads of the expressions, down to the stages (folded above), constants
      // and scalar inputs the planner read through a broadcast (every stride 0: read at the
      // row's base, which is their offset); no point of the row (a row may be empty).
      std::vector<bool> needed(spec_.exprs.size(), false);
      needed[r.expr] = true;
      for (int i = r.expr; i >= 0; --i) {
        const KExpr& e = spec_.exprs[i];
        if (!needed[i] || is_stage(e.op)) continue;
        if (e.op == OpKind::Iota || e.op == OpKind::RngUniform || e.op == OpKind::RngNormal ||
            e.op == OpKind::Gather) {
          throw std::runtime_error("codegen: a row output reads a point of the row");
        }
        for (int32_t j : {e.a, e.b, e.c}) {
          if (j >= 0) needed[j] = true;
        }
      }
      llvm::Value* v = expression(base, r.expr, &needed);
      if (r.dtype == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
      llvm::Value* p = b_.CreateInBoundsGEP(mem_type(r.dtype), row_ptrs_[k], at);
      llvm::StoreInst* st = b_.CreateAlignedStore(v, p, llvm::MaybeAlign(align_of(r.dtype)));
      st->setMetadata(llvm::LLVMContext::MD_alias_scope, out_scope_);
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

}  // namespace lz::cpu::jit
