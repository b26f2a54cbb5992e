// Code generation: a KernelSpec becomes LLVM IR (IRBuilder; the emitter, emitter.h), optimized for
// this CPU at O2 and emitted as a relocatable object, which ORC's LLJIT links into the process.
// This file: the kernel function and its arguments, the pass pipeline, the object, the JIT.
//
// Lessons that shaped the code generator (measured on this machine):
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

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/jit/emitter.h"
#include "backend/cpu/jit_api.h"

namespace lz::cpu::jit {

void Emitter::emit(const std::string& name) {
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
  // folds in one (lower/fusion.cpp gives those to the reference kernel).
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
  // Row outputs: offset and strides after everything else; pointers after the output and sink.
  for (size_t k = 0; k < spec_.row_outs.size(); ++k) {
    row_offs_.push_back(arg(next++));
    std::vector<llvm::Value*> st;
    for (int d = 0; d < rank; ++d) st.push_back(arg(next++));
    row_strides_.push_back(st);
    const int slot = nin_ + 1 + (spec_.nchecks > 0 ? 1 : 0) + static_cast<int>(k);
    llvm::Value* p = b_.CreateLoad(b_.getInt8PtrTy(),
                                   b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), ptrs, slot));
    row_ptrs_.push_back(b_.CreatePointerCast(p, mem_type(spec_.row_outs[k].dtype)->getPointerTo()));
  }
  if (!spec_.row_outs.empty() && spec_.scheme != Scheme::RowFused) {
    throw std::runtime_error("codegen: row outputs outside a row kernel");
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

namespace {

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

// glibc's vector math functions the vectorizer may call, for the vector widths the host runs:
// the AVX2 variants ('d': 8 floats, 4 doubles) where it has AVX2, the AVX-512 ones ('e': 16
// floats, 8 doubles) only where it has AVX-512F. Offered a 16-lane variant on an AVX2 host, LLVM
// calls it for a loop it vectorizes 16 wide (float16 data does): an illegal instruction there.
std::vector<llvm::VecDesc> libmvec_table(bool avx2, bool avx512) {
  static std::vector<std::string>* names = new std::vector<std::string>();  // VecDesc holds refs
  std::vector<llvm::VecDesc> out;
  if (names->empty()) {
    for (const ir::LibmFn& fn : ir::libm_fns()) {
      const ir::LibmFn* f = &fn;
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
  const bool wanted[4] = {avx2, avx512, avx2, avx512};
  for (size_t i = 0; i < names->size(); i += 2) {
    if (!wanted[(i / 2) % 4]) continue;
    out.push_back({(*names)[i], (*names)[i + 1],
                   llvm::ElementCount::getFixed(vf[(i / 2) % 4])});
  }
  return out;
}

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
  static const std::vector<llvm::VecDesc> table = [&] {
    const llvm::StringRef features = tm->getTargetFeatureString();
    return libmvec_table(features.contains("+avx2"), features.contains("+avx512f"));
  }();
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
}  // namespace lz::cpu::jit

extern "C" __attribute__((visibility("default"))) lz::cpu::JitCompiler* lazuli_create_jit_compiler(std::string* error) {
  try {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return new lz::cpu::jit::LlvmJit();
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}
