// The cpu backend: a synced graph becomes a plan (lower/plan.h build_plan, for cpu_target()) whose
// kernels are compiled by LLVM (kernel_cache.cpp), and running it walks the steps on the runtime
// thread pool.
#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/collective.h"
#include "backend/cpu/cpu_target.h"
#include "backend/cpu/kernel_cache.h"
#include "backend/cpu/library_calls.h"
#include "backend/interp/kernels.h"
#include "core/config.h"
#include "core/debug_write.h"
#include "core/metrics.h"
#include "core/thread_pool.h"
#include "lazuli/error.h"
#include "lower/plan.h"

namespace lz::cpu {

using lower::IndexCheck;
using lower::Plan;
using lower::PlanKernel;
using lower::PlanStep;
using lower::PlanValue;
using lower::ValueHome;

namespace {

// A kernel launch's error sink (kernel_abi.h): keeps the failure with the smallest key, so the
// error names the first bad index in the kernel's row-major order, whatever the threads did.
struct IndexFailure : KernelErrorSink {
  std::mutex mu;  // guards the fields below (threads of one launch report concurrently)
  bool hit = false;
  int64_t key = INT64_MAX, check = 0, value = 0;

  IndexFailure() { report = &record; }
  static void record(KernelErrorSink* self, int64_t key, int64_t check, int64_t value) {
    auto* f = static_cast<IndexFailure*>(self);
    std::lock_guard<std::mutex> l(f->mu);
    if (f->hit && key >= f->key) return;
    f->hit = true;
    f->key = key;
    f->check = check;
    f->value = value;
  }
};

// The collectives of one program run run here, one at a time in program order, while the
// program's later steps run on the calling thread: a gradient's all-reduce overlaps the rest of
// the backward (the post-order places each collective right after what it needs:
// exec/graph_executor.cpp). Joined when destroyed, after every call submitted has returned.
class CommThread {
 public:
  CommThread() : thread_([this] { loop(); }) {}
  ~CommThread() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Queues `call`; returns its ticket (1, 2, ...).
  size_t submit(std::function<void()> call) {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(call));
    errors_.emplace_back();
    cv_.notify_all();
    return errors_.size();
  }
  // Waits until the call of `ticket` (and every one before it) has returned; what it threw.
  std::exception_ptr wait(size_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_ >= ticket; });
    return errors_[ticket - 1];
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> call = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      std::exception_ptr error;
      try {
        call();
      } catch (...) {
        error = std::current_exception();
      }
      l.lock();
      errors_[done_++] = error;
      cv_.notify_all();
    }
  }

  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::exception_ptr> errors_;  // per ticket
  size_t done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class CpuProgram final : public Executable {
 public:
  CpuProgram(Plan plan, std::vector<std::shared_ptr<LoadedKernel>> kernels)
      : plan_(std::move(plan)), kernels_(std::move(kernels)) {
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const PlanStep& s = plan_.steps[i];
      counters_.push_back(s.counter.empty() ? nullptr : get_counter(s.counter));
      // A fallback, or a kernel with index checks, can fail on the data; a collective when its
      // engine fails.
      if (s.kind == PlanStep::Fallback || !s.checks.empty() ||
          (s.kind == PlanStep::Library && ir::op_info(s.op).cls == ir::OpClass::Collective)) {
        last_fallible_ = static_cast<int>(i);
      }
      splits_ = splits_ || may_split(s);
    }
  }

  void run(const std::vector<const Storage*>& params,
           const std::vector<Storage*>& outputs) const override {
    KeepOpenmpThreads keep_openmp;  // this thread may be the user's (a waiter that runs it)
    std::shared_ptr<Storage> arena;
    if (plan_.arena_bytes > 0) arena = std::make_shared<Storage>(static_cast<size_t>(plan_.arena_bytes));
    std::vector<void*> ptr(plan_.values.size(), nullptr);
    for (size_t v = 0; v < plan_.values.size(); ++v) {
      const ValueHome& h = plan_.values[v].home;
      switch (h.kind) {
        case ValueHome::Param: ptr[v] = params[h.index]->data(); break;
        case ValueHome::Output: ptr[v] = outputs[h.index]->data(); break;
        case ValueHome::Scratch: ptr[v] = arena ? static_cast<char*>(arena->data()) + h.offset : nullptr; break;
      }
    }
    // A root whose output storage is a donated parameter's is written there only where the plan
    // proved it safe, and only after every step that can fail (fallbacks, checked kernels) has
    // run: a failed
    // program leaves donated parameters intact (backend.h). Otherwise it is computed aside and
    // copied at the end.
    std::vector<std::shared_ptr<Storage>> spills;
    std::vector<bool> copy = plan_.root_copy;
    // One map from storage to parameter: a scan of the parameters per root is quadratic when
    // thousands of tensors sync at once.
    std::unordered_map<const void*, int> param_of;
    param_of.reserve(params.size());
    for (size_t p = params.size(); p-- > 0;) param_of[params[p]->data()] = static_cast<int>(p);
    std::vector<bool> donated(outputs.size(), false);
    std::vector<uint8_t> into_param(plan_.values.size(), 0);  // value written into a donated param
    std::vector<uint8_t> param_written(params.size(), 0);  // a donated param (an output's storage)
    for (size_t r = 0; r < outputs.size(); ++r) {
      auto it = param_of.find(outputs[r]->data());
      if (it == param_of.end()) continue;
      donated[r] = true;
      param_written[it->second] = 1;
      if (copy[r]) continue;
      int v = plan_.root_value[r];
      into_param[v] = 1;
      if (plan_.values[v].def_step <= last_fallible_ ||
          !lower::root_may_overwrite(plan_, static_cast<int>(r), it->second)) {
        into_param[v] = 0;
        spills.push_back(std::make_shared<Storage>(static_cast<size_t>(plan_.values[v].nbytes)));
        ptr[v] = spills.back()->data();
        copy[r] = true;
      }
    }
    // Per value: its parameter's Storage where this program does not write it, for library
    // calls that keep what they derive from its bytes (conv_weights.h). Lazuli's own storages
    // never share memory, so an output over a parameter's memory is that parameter's storage.
    std::vector<const Storage*> stable(plan_.values.size(), nullptr);
    for (size_t v = 0; v < plan_.values.size(); ++v) {
      const ValueHome& h = plan_.values[v].home;
      if (h.kind == ValueHome::Param && !param_written[h.index]) stable[v] = params[h.index];
    }
    // A failed step fails everything computed from it; the rest still runs (backend.h).
    std::vector<uint8_t> failed(plan_.values.size(), 0);
    std::exception_ptr first_error;
    int failed_node = -1;
    std::vector<void*> ptrs;
    // Collectives running on the communication thread (declared after every buffer they write,
    // so it is joined before any is freed): each with the buffer it writes.
    struct Pending {
      size_t ticket;
      const char* begin;
      const char* end;
      int value;
      int node;
    };
    std::vector<Pending> pending;
    std::optional<CommThread> comm;
    const bool overlap = config().dist_overlap;  // once per run: one mode for all its collectives
    // Waits for the pending collectives up to `upto` (an index into `pending`), in order; a
    // failed one fails its value as a failed step does.
    auto settle = [&](size_t upto) {
      for (size_t k = 0; k < upto; ++k) {
        if (std::exception_ptr e = comm->wait(pending[k].ticket)) {
          failed[pending[k].value] = 1;
          if (!first_error) {
            first_error = e;
            failed_node = pending[k].node;
          }
        }
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(upto));
    };
    // Before step `s`: the collectives whose buffer it reads or writes have finished.
    auto settle_for = [&](const PlanStep& s) {
      size_t upto = 0;
      auto touch = [&](int v) {
        if (v < 0 || !ptr[v]) return;
        const char* b = static_cast<const char*>(ptr[v]);
        const char* e = b + plan_.values[v].nbytes;
        for (size_t k = upto; k < pending.size(); ++k) {
          if (b < pending[k].end && pending[k].begin < e) upto = k + 1;
        }
      };
      for (int v : s.inputs) touch(v);
      touch(s.output);
      for (int v : s.more_outputs) touch(v);
      // The group's calls are made one at a time, in program order (a collective that runs here
      // waits for the queued ones); a donated parameter is written only once every collective
      // that could still fail has finished (backend.h).
      bool all = s.kind == PlanStep::Library && ir::op_info(s.op).cls == ir::OpClass::Collective &&
                 s.op != ir::OpKind::AllReduce && s.op != ir::OpKind::Broadcast;  // run here
      all = all || into_param[s.output];
      for (int v : s.more_outputs) all = all || into_param[v];
      if (all) upto = pending.size();
      if (upto) settle(upto);
    };
    StepTimes* times = step_times();
    if (times) times->ns.assign(plan_.steps.size() + 1, 0);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      StepClock clock(times, i);
      const PlanStep& s = plan_.steps[i];
      auto for_each_output = [&s](auto&& f) {
        f(s.output);
        for (int v : s.more_outputs) f(v);
      };
      if (!pending.empty()) settle_for(s);
      for_each_output([&](int out) {
        if (!first_error || !into_param[out]) return;
        // A donated parameter stays intact once anything failed: the value goes aside, for the
        // steps that read it (its root is restored: backend.h).
        spills.push_back(std::make_shared<Storage>(static_cast<size_t>(plan_.values[out].nbytes)));
        ptr[out] = spills.back()->data();
        into_param[out] = 0;
      });
      // A Scatter kernel also reads its output (its base, written by the step before).
      bool input_failed = failed[s.output] != 0;
      for (int v : s.inputs) input_failed |= v >= 0 && failed[v];
      if (input_failed) {
        for_each_output([&](int out) { failed[out] = 1; });
        continue;
      }
      int node = s.node;
      try {
        if (s.kind == PlanStep::Library && ir::op_info(s.op).cls == ir::OpClass::Collective) {
          const PlanValue& in = plan_.values[s.inputs[0]];
          const PlanValue& out = plan_.values[s.output];
          std::function<void()> call =
              start_collective(s.op, std::get<ir::CollectiveAttrs>(s.attrs),
                               {in.dtype, &s.in_shapes[0], ptr[s.inputs[0]], stable[s.inputs[0]]},
                               {out.dtype, &out.shape, ptr[s.output]});
          if (call && !overlap) {
            call();
            continue;
          }
          if (call) {
            if (!comm) comm.emplace();
            const char* b = static_cast<const char*>(ptr[s.output]);
            pending.push_back({comm->submit(std::move(call)), b, b + out.nbytes, s.output, s.node});
            continue;
          }
        }
        run_step(s, i, ptr, stable, ptrs, &node);
      } catch (...) {
        if (!first_error) {
          first_error = std::current_exception();
          failed_node = node;
        }
        for_each_output([&](int out) { failed[out] = 1; });
      }
    }
    if (!pending.empty()) settle(pending.size());
    std::vector<RootCopy> copies;
    std::vector<bool> root_failed(outputs.size(), false);
    for (size_t r = 0; r < outputs.size(); ++r) {
      root_failed[r] = failed[plan_.root_value[r]] != 0 || (first_error && donated[r]);
      if (root_failed[r] || !copy[r]) continue;
      const PlanValue& v = plan_.values[plan_.root_value[r]];
      copies.push_back({outputs[r]->data(), ptr[plan_.root_value[r]], static_cast<size_t>(v.nbytes)});
    }
    {
      StepClock clock(times, plan_.steps.size());
      run_root_copies(copies);
    }
    if (first_error) throw PartialRunFailure(std::move(root_failed), first_error, failed_node);
  }

  const Plan& plan() const { return plan_; }

  // Whether running step `s` may cut it into chunks for the pool (parallel_for's rule, with the
  // chunking run_step and sgemm's blocks use); other products and library calls (convolutions,
  // pooling) are assumed to, collectives never do.
  static bool may_split(const PlanStep& s) {
    if (runtime_pool().num_threads() < 2) return false;
    if (s.kind == PlanStep::Kernel) {
      return s.range >= 2 * std::max<int64_t>(cpu_launch_of(s.launch).grain, 1);
    }
    if (s.kind == PlanStep::Library && ir::op_info(s.op).cls == ir::OpClass::Collective) {
      return false;  // the engine's call, on this thread or the communication thread
    }
    if (s.kind == PlanStep::MatMul && s.in_shapes.size() >= 2 && s.in_shapes[0].size() == 2 &&
        s.in_shapes[1].size() == 2 && s.in_dtypes[0] == DType::Float32) {
      const int64_t m = s.in_shapes[0][s.trans[0] ? 1 : 0], k = s.in_shapes[0][s.trans[0] ? 0 : 1];
      const int64_t n = s.in_shapes[1][s.trans[1] ? 0 : 1];
      const GemmCut cut = gemm_cut(m, n, k);
      return cut.extent >= 2 * std::max<int64_t>(cut.grain, 1);
    }
    return s.kind != PlanStep::Fallback;
  }

  // A run that will split a step across the pool wakes its sleeping workers now: after the
  // Python between two programs (a training step's forward and backward) they sleep, and a
  // worker woken by the first split job arrives tens of microseconds late (bench/RESULTS.md 32).
  void about_to_run() const override {
    if (splits_) runtime_pool().wake();
  }

  std::vector<StepLabel> step_labels() const override {
    std::vector<StepLabel> out;
    for (lower::StepWords& w : lower::describe_steps(plan_))
      out.push_back({w.kind, std::move(w.what)});
    return out;
  }

  // One step: a kernel launch on the pool, a matrix product, or a reference kernel. A reference
  // kernel or a kernel with index checks may throw on bad data (an index out of range); *node
  // is then the failing node.
  void run_step(const PlanStep& s, size_t i, const std::vector<void*>& ptr,
                const std::vector<const Storage*>& stable, std::vector<void*>& ptrs,
                int* node) const {
    if (s.kind == PlanStep::Kernel) {
      if (s.range == 0) return;
      ptrs.clear();
      for (int v : s.inputs) ptrs.push_back(v < 0 ? nullptr : ptr[v]);
      ptrs.push_back(ptr[s.output]);
      IndexFailure failure;
      if (!s.checks.empty()) ptrs.push_back(&failure);
      for (int v : s.more_outputs) ptrs.push_back(ptr[v]);  // a row kernel's row outputs
      // One reference captured: the std::function holds it inline (no allocation per launch).
      struct Launch {
        KernelFn fn;
        void* const* pp;
        const int64_t* args;
      } launch{kernels_[s.kernel]->fn, ptrs.data(), s.args.data()};
      // A kernel from the disk cache marks its first call, so a crash inside it is not repeated.
      KernelTrial* trial = kernels_[s.kernel]->trial.get();
      if (trial && !trial->pending()) trial = nullptr;
      if (trial) trial->begin();
      const CpuLaunch cut = cpu_launch_of(s.launch);
      runtime_pool().parallel_for(s.range, cut.grain, cut.align, [&launch](int64_t b, int64_t e) {
        launch.fn(b, e, launch.pp, launch.args);
      });
      if (trial) trial->end();
      if (failure.hit) {
        // The reference kernel's message (interp/kernels_movement.cpp check_indices).
        const IndexCheck& c = s.checks[static_cast<size_t>(failure.check)];
        *node = c.node;
        throw IndexError(std::string(ir::op_name(c.op)) + ": index " +
                         std::to_string(failure.value) + " is out of range for dim " +
                         std::to_string(c.dim) + " of size " + std::to_string(c.size));
      }
      return;
    }
    std::vector<interp::ConstArray> in;
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      in.push_back({s.in_dtypes[j], &s.in_shapes[j], ptr[s.inputs[j]], stable[s.inputs[j]]});
    }
    const PlanValue& ov = plan_.values[s.output];
    // A product computing a sum (rule 7b) writes the sum's value, a reshape of the product.
    const bool sum = s.bias || s.residual;
    interp::MutArray out{ov.dtype, sum ? &s.product : &ov.shape, ptr[s.output]};
    if (s.kind == PlanStep::MatMul && (s.trans[0] || s.trans[1] || sum)) {
      // Only float32 2-D products fold transposes and add a bias row or a residual
      // (lower/fusion.cpp rules 7 and 7b, the cpu target's matmul_transpose_dtype and
      // matmul_bias), and sgemm takes them all.
      const interp::ConstArray* bias = s.bias ? &in[2] : nullptr;
      const interp::ConstArray* residual = s.residual ? &in[s.bias ? 3 : 2] : nullptr;
      if (!sgemm_2d(in[0], s.trans[0], in[1], s.trans[1], out, bias, residual)) {
        throw Error("cpu backend: sgemm failed");
      }
      return;
    }
    std::vector<interp::MutArray> outs{out};
    for (int v : s.more_outputs) {
      outs.push_back({plan_.values[v].dtype, &plan_.values[v].shape, ptr[v]});
    }
    if ((s.kind == PlanStep::MatMul || s.kind == PlanStep::Library) &&
        library_call(s.op, s.attrs, in, outs)) {
      return;
    }
    if (counters_[i]) counters_[i]->add();
    interp::run_kernel(s.op, s.attrs, in, outs);
  }

 private:
  Plan plan_;
  std::vector<std::shared_ptr<LoadedKernel>> kernels_;
  std::vector<Counter*> counters_;
  int last_fallible_ = -1;  // the last step that can throw on bad data (a fallback)
  bool splits_ = false;     // some step may split across the pool (may_split)
};

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Hash128 compile_env() const override {
    // Kernels carry their own keys (codegen environment included); a program's hash needs only
    // what changes planning: the planner's version and the matrix-product library.
    Hasher h;
    h.add_str("cpu-plan-v6");
    h.add_str(library_id());
    h.add(config().fuse_rows);
    return h.digest();
  }

  std::shared_ptr<Executable> compile(const ir::LoweringGraph& g) override {
    const bool explain = config().debug >= 3;
    Plan plan = lower::build_plan(g, cpu_target(), explain);
    if (explain) {
      debug_write("[lazuli] fusion plan (LAZULI_DEBUG=3)\n" + lower::describe_plan(plan));
    }
    auto kernels = obtain_kernels(plan.kernels);
    return std::make_shared<CpuProgram>(std::move(plan), std::move(kernels));
  }

  std::string describe(const ir::LoweringGraph& g, bool llvm_ir) override {
    Plan plan = lower::build_plan(g, cpu_target(), /*explain=*/true);
    std::string out = lower::describe_plan(plan);
    if (llvm_ir) {
      for (const PlanKernel& k : plan.kernels) {
        out += "; LLVM IR of " + k.name + " (before optimization)\n" + kernel_llvm_ir(k);
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace lz::cpu
