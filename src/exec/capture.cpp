#include "exec/capture.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "backend/backend.h"
#include "core/config.h"
#include "core/grad_mode.h"
#include "core/metrics.h"
#include "exec/capture_replay.h"
#include "exec/compile_region.h"
#include "exec/cut_record.h"
#include "exec/debug_log.h"
#include "exec/device_executor.h"
#include "exec/explain.h"
#include "exec/graph_executor.h"
#include "exec/step.h"
#include "lazuli/capture.h"
#include "lazuli/error.h"
#include "tensor/device.h"

namespace lz {

using internal::TensorImpl;
using internal::TensorImplPtr;
using internal::TensorState;

namespace {

struct TraceState {
  std::vector<ReplayGuard> guards;
  std::string refused;  // set by refuse_replay()
  std::vector<TensorImplPtr> kept;  // note_kept_output()
};
thread_local TraceState* t_trace = nullptr;

// The first index j <= i with v[j] == v[i]: one tensor passed as several arguments.
size_t first_alias(const std::vector<TensorImplPtr>& v, size_t i) {
  return static_cast<size_t>(std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) - v.begin());
}

// The tensor part of a call's signature: dtype, shape and view-ness of each argument, which
// arguments are the same tensor, and the identity of an argument that requires grad (its .grad is
// one of the record's sinks). Grad mode too: it changes what the body records. *family: the same
// without the sizes (ranks kept).
uint64_t signature(const std::vector<TensorImplPtr>& args, uint64_t extra_key, uint64_t* family) {
  Hasher h, sizes;
  h.add(extra_key).add(autograd::grad_enabled()).add<uint64_t>(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorImplPtr& t = args[i];
    if (!t) throw ValueError("capture: argument " + std::to_string(i) + " is an undefined tensor");
    h.add(t->dtype()).add<uint64_t>(t->shape().size());
    for (int64_t d : t->shape()) sizes.add(d);
    h.add(t->state() == TensorState::View);
    h.add<uint64_t>(first_alias(args, i));
    if (t->requires_grad_flag()) h.add(t->id());
  }
  Hash128 without_sizes = h.digest();
  *family = without_sizes.lo;
  return Hasher().add(without_sizes).add(sizes.digest()).digest().lo;
}

bool same_tensor(const std::weak_ptr<TensorImpl>& a, const std::weak_ptr<TensorImpl>& b) {
  TensorImplPtr x = a.lock(), y = b.lock();
  return x && x == y;
}

bool same_bytes(const BufferPtr& a, const BufferPtr& b) {
  if (a == b) return true;
  if (a->dtype() != b->dtype() || a->shape() != b->shape()) return false;
  return active_backend().equal(*a->wait(), *b->wait(), a->nbytes());
}

// Leaves the capture region and the trace state however the trace ends.
struct TraceScope {
  TraceState state;
  TraceScope(const std::string& name, bool full_graph) {
    enter_region(name, full_graph, -1, 0);
    current_region()->capture = true;
    t_trace = &state;
  }
  ~TraceScope() {
    t_trace = nullptr;
    exit_region();
  }
};

// A tensor alive when a trace starts: a parameter of the trace's program whose buffer it owns is
// read from it on every replay.
struct StartTensor {
  std::weak_ptr<TensorImpl> tensor;
  bool had_grad = false;
};

}  // namespace

namespace capture_detail {

// Computes these tensors' pending values before a call (cut reason compile-region-start).
void sync_before_call(const std::vector<TensorImplPtr>& tensors) {
  if (tensors.empty()) return;
  SyncConfig cfg;
  cfg.barrier = true;
  cfg.reason = CutReason::CompileRegionStart;
  sync_tensors_graph(tensors, cfg);
}

// View arguments become copies (a replay reads whole buffers); returns which were replaced.
// Pending arguments are synced with them, so every argument holds device data afterwards.
std::vector<bool> materialize_args(std::vector<TensorImplPtr>& args) {
  std::vector<bool> copied(args.size(), false);
  std::vector<TensorImplPtr> to_sync;
  for (size_t i = 0; i < args.size(); ++i) {
    TensorState s = args[i]->state();
    if (s == TensorState::View) {
      bool was = autograd::grad_enabled();
      autograd::set_grad_enabled(false);  // an argument is an input: no tape through the copy
      ir::Value v = args[i]->value();
      autograd::set_grad_enabled(was);
      args[i] = TensorImpl::from_value(std::move(v));
      copied[i] = true;
      to_sync.push_back(args[i]);
    } else if (s == TensorState::IR) {
      to_sync.push_back(args[i]);
    }
  }
  sync_before_call(to_sync);
  return copied;
}

}  // namespace capture_detail

using capture_detail::materialize_args;
using capture_detail::replay;
using capture_detail::sync_before_call;

bool capture_tracing() { return t_trace != nullptr; }

void note_kept_output(TensorImplPtr t) {
  if (!t_trace) throw Error("note_kept_output: no captured function is being traced on this thread");
  t_trace->kept.push_back(std::move(t));
}

void refuse_replay(std::string reason) {
  if (!t_trace) throw Error("refuse_replay: no captured function is being traced on this thread");
  if (t_trace->refused.empty()) t_trace->refused = std::move(reason);
}

void add_replay_guard(std::function<bool()> check, uint64_t identity) {
  if (!t_trace) throw Error("add_replay_guard: no captured function is being traced on this thread");
  for (const ReplayGuard& g : t_trace->guards) {
    if (g.identity == identity) return;  // one optimizer stepping twice: one guard
  }
  t_trace->guards.push_back({std::move(check), identity});
}

std::string capture_difference(const CaptureRecord& a, const CaptureRecord& b, bool across_sizes) {
  if (across_sizes) {
    if (!a.key || !b.key) return "a program has no graph key";
    std::string d = size_only_difference(*b.key, *a.key);
    if (!d.empty()) return "the programs at the two sizes differ beyond their sizes: " + d;
  } else if (a.program.hash != b.program.hash) {
    return "the traced programs differ (a Python number or branch that changes between calls is "
           "baked into the graph: pass it as a tensor argument)";
  }
  if (a.sources.size() != b.sources.size() || a.sinks.size() != b.sinks.size() || a.donations != b.donations) {
    return "the programs read or write different tensors";
  }
  for (size_t i = 0; i < a.sources.size(); ++i) {
    const CaptureSource &x = a.sources[i], &y = b.sources[i];
    if (x.kind != y.kind) return "input " + std::to_string(i) + " comes from a different place";
    switch (x.kind) {
      case CaptureSource::Kind::Arg:
        if (x.arg != y.arg) return "input " + std::to_string(i) + " is a different argument";
        break;
      case CaptureSource::Kind::State:
        if (!same_tensor(x.tensor, y.tensor)) return "input " + std::to_string(i) + " is read from a different tensor";
        if (x.requires_grad != y.requires_grad) return "a tensor the function reads changed requires_grad";
        break;
      case CaptureSource::Kind::Const:
        if (!same_bytes(x.constant, y.constant)) {
          return "data the function uploads itself (input " + std::to_string(i) + ", " +
                 std::string(dtype_name(x.constant->dtype())) + shape_str(x.constant->shape()) +
                 ") changes between calls: pass it as an argument";
        }
        break;
    }
  }
  for (size_t i = 0; i < a.sinks.size(); ++i) {
    const CaptureSink &x = a.sinks[i], &y = b.sinks[i];
    bool same = x.kind == y.kind && x.index == y.index && x.created_in_trace == y.created_in_trace;
    // A tensor the function creates is a new object in every trace; one it updates is the same.
    if (same && x.kind == CaptureSink::Kind::State && !x.created_in_trace) same = same_tensor(x.tensor, y.tensor);
    if (same && (x.is_grad != y.is_grad || x.grad_was_none != y.grad_was_none ||
                 (x.is_grad && !same_tensor(x.grad_of, y.grad_of)))) {
      same = false;
    }
    if (!same) return "output " + std::to_string(i) + " goes to a different tensor";
  }
  if (a.outputs.size() != b.outputs.size()) return "the function returns a different number of tensors";
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const CaptureOutput &x = a.outputs[i], &y = b.outputs[i];
    if (x.kind != y.kind || x.index != y.index ||
        (x.kind == CaptureOutput::Kind::Fixed && !same_tensor(x.fixed, y.fixed))) {
      return "returned tensor " + std::to_string(i) + " is a different one";
    }
  }
  if (a.guards.size() != b.guards.size()) return "the traced code registered different replay guards";
  for (size_t i = 0; i < a.guards.size(); ++i) {
    if (a.guards[i].identity != b.guards[i].identity) return "the traced code registered different replay guards";
  }
  return "";
}

namespace {

// Builds the record of one finished trace, or returns the reason it cannot be replayed.
std::shared_ptr<CaptureRecord> make_record(ProgramCapture& pc, const std::vector<TensorImplPtr>& args,
                                           const std::vector<TensorImplPtr>& user_args,
                                           const std::vector<bool>& copied,
                                           const std::vector<const DeviceBuffer*>& arg_buffers,
                                           const std::unordered_map<int64_t, StartTensor>& start,
                                           const std::vector<TensorImplPtr>& outs, std::string* why) {
  auto rec = std::make_shared<CaptureRecord>();
  rec->program = pc.program;
  rec->donations = pc.donations;
  std::unordered_set<int64_t> state_read;
  for (const BufferPtr& b : pc.params) {
    CaptureSource s;
    for (size_t i = 0; i < args.size() && s.arg < 0; ++i) {
      if (arg_buffers[i] == b.get()) s.arg = static_cast<int>(i);
    }
    if (s.arg >= 0) {
      s.kind = CaptureSource::Kind::Arg;
    } else if (auto it = start.find(b->owner_tensor_id); it != start.end()) {
      // A tensor from before the call: its buffer then, or contents it was given during the trace
      // (an optimizer refreshing a hyper-parameter); a replay reads whatever it holds at the call.
      s.kind = CaptureSource::Kind::State;
      s.tensor = it->second.tensor;
      if (s.tensor.expired()) {
        *why = "the function reads a tensor that it then drops (state reassigned rather than updated "
               "in place?); a replay could not find it again";
        return nullptr;
      }
      if (!state_read.insert(b->owner_tensor_id).second) {
        *why = "the function reads two different values of one tensor that existed before the call";
        return nullptr;
      }
      TensorImplPtr t = s.tensor.lock();
      s.requires_grad = t->requires_grad_flag();
      for (size_t i = 0; i < user_args.size(); ++i) {
        if (user_args[i] == t) {
          *why = "argument " + std::to_string(i) + " is also reached through a global (or another "
                 "object) inside the function; a replay with another argument would mix them up";
          return nullptr;
        }
      }
    } else {
      s.kind = CaptureSource::Kind::Const;
      s.constant = b;
    }
    rec->sources.push_back(std::move(s));
  }
  for (auto& [p, r] : pc.donations) {
    if (rec->sources[p].kind == CaptureSource::Kind::Const) {
      *why = "the function updates in place a tensor it made from host data";
      return nullptr;
    }
  }
  // Returned tensors the function made are fresh on every replay; the rest are sinks kept in place.
  std::unordered_map<const TensorImpl*, int> root_of;
  for (size_t r = 0; r < pc.roots.size(); ++r) root_of[pc.roots[r].get()] = static_cast<int>(r);
  // The .grad tensors the function created, by tensor: their leaves (one pass over the start).
  struct GradOf {
    std::weak_ptr<TensorImpl> leaf;
    bool was_none;
  };
  std::unordered_map<const TensorImpl*, GradOf> grad_leaf_of;
  for (const auto& [id, st] : start) {
    TensorImplPtr leaf = st.tensor.lock();
    if (!leaf) continue;
    TensorImplPtr g = leaf->grad();
    if (g && !start.count(g->id()) && root_of.count(g.get())) grad_leaf_of[g.get()] = {leaf, !st.had_grad};
  }
  std::unordered_set<const TensorImpl*> returned;
  for (const TensorImplPtr& o : outs) {
    CaptureOutput out;
    int arg = -1;
    for (size_t i = 0; i < args.size() && arg < 0; ++i) {
      if (args[i] == o) arg = static_cast<int>(i);
    }
    auto root = root_of.find(o.get());
    if (arg >= 0) {
      out.kind = CaptureOutput::Kind::Arg;
      out.index = arg;
    } else if (root != root_of.end() && !start.count(o->id())) {
      out.kind = CaptureOutput::Kind::Root;
      out.index = root->second;
      returned.insert(o.get());
    } else {
      out.kind = CaptureOutput::Kind::Fixed;
      out.fixed = o;
    }
    rec->outputs.push_back(std::move(out));
  }
  for (size_t r = 0; r < pc.roots.size(); ++r) {
    const TensorImplPtr& t = pc.roots[r];
    CaptureSink s;
    for (size_t i = 0; i < args.size() && s.index < 0; ++i) {
      if (args[i] == t) s.index = static_cast<int>(i);
    }
    if (s.index >= 0) {
      if (copied[s.index]) {
        *why = "the function writes into argument " + std::to_string(s.index) +
               ", a view; pass a tensor of its own (.contiguous()) to have it replayed";
        return nullptr;
      }
      s.kind = CaptureSink::Kind::Arg;
    } else if (auto g = grad_leaf_of.find(t.get()); g != grad_leaf_of.end()) {
      // A .grad the function made (returned too, perhaps): a new tensor on the leaf each replay.
      s.kind = CaptureSink::Kind::State;
      s.created_in_trace = true;
      s.grad_of = g->second.leaf;
      s.is_grad = true;
      s.grad_was_none = g->second.was_none;
    } else if (returned.count(t.get())) {
      s.kind = CaptureSink::Kind::Returned;
      s.index = static_cast<int>(r);
    } else {
      s.kind = CaptureSink::Kind::State;
      s.created_in_trace = !start.count(t->id());
      s.tensor = t;
      for (size_t i = 0; i < user_args.size(); ++i) {
        if (user_args[i] == t && args[i] != t) {
          *why = "argument " + std::to_string(i) + " is also written through a global (or another "
                 "object) inside the function; a replay with another argument would mix them up";
          return nullptr;
        }
      }
    }
    rec->sinks.push_back(std::move(s));
  }
  return rec;
}

}  // namespace

std::vector<TensorImplPtr> CaptureCache::trace(Entry& e, const std::vector<TensorImplPtr>& user_args,
                                               const Body& body, std::shared_ptr<void>* frontend_data) {
  ++traces_;
  LZ_COUNTER("CaptureTrace", 1);
  // Pending work first (as in lz.compile), so the trace's barrier holds only the function's work.
  step_barrier(false, true, CutReason::CompileRegionStart);
  std::vector<TensorImplPtr> args = user_args;
  std::vector<bool> copied = materialize_args(args);
  // The function gets copies of its arguments (except those that require grad: their .grad must
  // reach the caller's tensor, and they are keyed by identity). A read through an argument is
  // then told apart from a read of the same tensor through a global, and the trace's program can
  // donate nothing the caller's tensor still holds.
  for (size_t i = 0; i < args.size(); ++i) {
    size_t first = first_alias(user_args, i);
    if (first != i) {
      args[i] = args[first];
    } else if (!copied[i] && !args[i]->requires_grad_flag()) {
      bool sole;
      BufferPtr b = args[i]->replay_input(&sole);
      BufferPtr copy;
      try {
        const std::shared_ptr<Storage>& src = b->wait();
        std::shared_ptr<Storage> st = active_backend().allocate(b->nbytes());
        active_backend().copy(*src, *st, b->nbytes());
        copy = std::make_shared<DeviceBuffer>(b->dtype(), b->shape(), std::move(st));
      } catch (...) {
        // Raised here, at the call: not again at the next sync (as a value read does).
        if (b->producer()) device_executor().forget_error_of(b->producer().get());
        throw;
      }
      args[i] = TensorImpl::from_buffer(std::move(copy));
    }
  }
  std::vector<const DeviceBuffer*> arg_buffers(args.size());
  std::vector<BufferPtr> arg_buffer_refs(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    bool sole;
    arg_buffer_refs[i] = args[i]->replay_input(&sole);
    arg_buffers[i] = arg_buffer_refs[i].get();
  }
  // arg_buffer_refs lives to the end of the trace: the buffers are compared by address, which a
  // buffer freed mid-trace (an argument overwritten by fill_) could otherwise hand to a new one.
  std::unordered_map<int64_t, StartTensor> start;
  {
    // Weak references only: the snapshot must not change the use counts donation reads.
    std::vector<TensorImplPtr> live = internal::default_device().registry.snapshot();
    for (const TensorImplPtr& t : live) start.emplace(t->id(), StartTensor{t, t->grad() != nullptr});
  }

  std::vector<TensorImplPtr> outs;
  ProgramCapture pc;
  pc.want_key = true;
  std::string executed, refused;
  std::vector<ReplayGuard> guards;
  {
    TraceScope scope(name_, full_graph_);
    outs = body(args, frontend_data);
    for (TensorImplPtr& o : outs) {
      if (!o) throw ValueError("capture '" + name_ + "': the function returned an undefined tensor");
      // A returned view becomes a tensor of its own, so every replay can return a new one.
      if (o->state() == TensorState::View) o = TensorImpl::from_value(o->value());
    }
    step_barrier(false, true, CutReason::CompileRegionEnd, &pc);
    // A replayed result has no autograd history; a traced one drops its own, so a backward
    // outside the function fails the same way on every call.
    for (const TensorImplPtr& o : outs) {
      if (!start.count(o->id())) o->release_tape();
    }
    executed = current_region()->executed;
    guards = std::move(scope.state.guards);
    refused = std::move(scope.state.refused);
    for (const TensorImplPtr& k : scope.state.kept) {
      if (refused.empty() && !start.count(k->id())) {
        refused = "the function returns a tensor it also keeps (an attribute, a list): a replay would "
                  "return a new tensor and leave the kept one stale; return or keep a copy (clone())";
      }
    }
  }
  // Arguments the function wrote into: the caller's tensors take the new values.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == user_args[i] || first_alias(user_args, i) != i) continue;
    if (args[i]->requires_grad_flag()) {
      // x.requires_grad_() inside (an input gradient): the caller's tensor gets the flag and the
      // grad; its identity then matters, so such a function is not replayed.
      if (refused.empty()) refused = "the function sets requires_grad on argument " + std::to_string(i);
      if (!copied[i]) {
        user_args[i]->set_requires_grad_flag(true);
        user_args[i]->set_grad(args[i]->grad());
      }
    }
    BufferPtr now = args[i]->buffer();
    if (now && now.get() == arg_buffers[i]) continue;  // not written
    if (copied[i]) {
      user_args[i]->set_value(args[i]->value());  // through the view, into its base
    } else if (now) {
      user_args[i]->replay_assign(now);
    }
  }

  std::string why;
  std::shared_ptr<CaptureRecord> rec;
  if (!executed.empty()) {
    why = "it executed something inside the function (" + executed +
          "); a replay runs no Python, so such a function is traced on every call";
  } else if (!refused.empty()) {
    why = refused;
  } else if (!pc.program.exe) {
    why = "the function recorded no work";
  } else {
    rec = make_record(pc, args, user_args, copied, arg_buffers, start, outs, &why);
  }
  if (rec) {
    // A returned tensor someone holds a view of would go stale: replays return a new tensor.
    std::unordered_set<const TensorImpl*> returned_roots;
    for (const CaptureOutput& o : rec->outputs) {
      if (o.kind == CaptureOutput::Kind::Root && !rec->sinks[o.index].is_grad) {
        returned_roots.insert(pc.roots[o.index].get());
      }
    }
    if (!returned_roots.empty()) {
      for (const TensorImplPtr& t : internal::default_device().registry.snapshot()) {
        TensorImplPtr base = t->state() == TensorState::View ? t->view_base() : nullptr;
        if (base && returned_roots.count(base.get())) {
          rec.reset();
          why = "the function returns a tensor it also keeps a view of; return or keep a copy";
          break;
        }
      }
    }
  }
  if (rec) {
    rec->guards = std::move(guards);
    rec->frontend_data = *frontend_data;
    rec->key = std::move(pc.key);
    std::string diff = e.pending ? capture_difference(*e.pending, *rec) : "no earlier trace";
    // Only a signature's first trace: one whose traces already disagreed shows a changing value.
    if (!e.pending && e.mismatches == 0) {
      // New sizes of a function settled at other sizes: one trace that matches it suffices.
      std::shared_ptr<CaptureRecord> other = settled_record(e.family);
      if (other && capture_difference(*other, *rec, true).empty()) {
        diff.clear();
        LZ_COUNTER("CaptureSettledAtNewSizes", 1);
      }
    }
    if (diff.empty()) {
      e.active = std::move(rec);  // two traces agree: later calls replay
      e.pending.reset();
      e.mismatches = 0;
      settled_[e.family] = e.active;
    } else {
      // The first calls may differ (state created on the first step); later differences are news.
      if (++e.mismatches > 2) last_reason_ = "consecutive traces differ: " + diff;
      e.pending = std::move(rec);
    }
  } else {
    LZ_COUNTER("CaptureUnreplayable", 1);
    e.pending.reset();
    last_reason_ = std::move(why);
  }
  // The caller sees its own argument objects, not the copies made for views.
  for (TensorImplPtr& o : outs) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (o == args[i]) o = user_args[i];
    }
  }
  return outs;
}

std::shared_ptr<CaptureRecord> CaptureCache::settled_record(uint64_t family) const {
  auto it = settled_.find(family);
  return it != settled_.end() ? it->second.lock() : nullptr;
}

bool CaptureCache::adopt_successors(Entry& e) {
  CaptureRecord& rec = *e.active;
  auto orphaned = [](const CaptureSink& s) {
    return s.kind == CaptureSink::Kind::State && s.created_in_trace && !s.is_grad &&
           s.tensor.expired();
  };
  if (std::none_of(rec.sinks.begin(), rec.sinks.end(), orphaned)) return false;
  std::shared_ptr<CaptureRecord> other = settled_record(e.family);
  if (!other || other == e.active || !capture_difference(*other, rec, true).empty()) return false;
  // Each successor alive and of the type this record's program writes there (its root's), or
  // none is taken: the replay is refused and the call traced.
  std::vector<TensorImplPtr> successor(rec.sinks.size());
  for (size_t i = 0; i < rec.sinks.size(); ++i) {
    if (!orphaned(rec.sinks[i])) continue;
    successor[i] = other->sinks[i].tensor.lock();
    const auto& root = rec.key->roots[i];
    if (!successor[i] || successor[i]->dtype() != root.dtype || successor[i]->shape() != root.shape)
      return false;
  }
  for (size_t i = 0; i < rec.sinks.size(); ++i) {
    if (successor[i]) rec.sinks[i].tensor = successor[i];
  }
  LZ_COUNTER("CaptureSinksAdopted", 1);
  return true;
}

std::vector<TensorImplPtr> CaptureCache::call(const std::vector<TensorImplPtr>& args, uint64_t extra_key,
                                              const Body& body, std::shared_ptr<void>* frontend_data) {
  if (capture_tracing()) throw Error("capture '" + name_ + "': a captured function called while another is traced");
  uint64_t family = 0;
  uint64_t sig = signature(args, extra_key, &family);
  auto found = entries_.find(sig);
  if (found == entries_.end()) {
    if (entries_.size() >= kMaxSignatures) {
      entries_.erase(recent_.back());
      recent_.pop_back();
      // The families whose records all went with their entries.
      for (auto it = settled_.begin(); it != settled_.end();) {
        it = it->second.expired() ? settled_.erase(it) : std::next(it);
      }
      LZ_COUNTER("CaptureSignatureEvicted", 1);
      last_reason_ = "more than " + std::to_string(kMaxSignatures) +
                     " signatures (a Python argument, shape or requires-grad argument that changes "
                     "on every call?); the least recent was dropped";
    }
    if (entries_.size() == kManySignatures) {
      last_reason_ = std::to_string(kManySignatures) + " different signatures so far: a Python "
                     "argument, a shape or an argument that requires grad changes from call to call, "
                     "and each new one is traced";
    }
    recent_.push_front(sig);
    found = entries_.emplace(sig, Entry{}).first;
    found->second.recent = recent_.begin();
    found->second.family = family;
  } else {
    recent_.splice(recent_.begin(), recent_, found->second.recent);
  }
  Entry& e = found->second;
  if (e.active && !eager_mode()) {
    std::vector<TensorImplPtr> outs;
    std::string why;
    // A replay refused for a dead tensor (replay checks those before it does anything) may go
    // on with its successors: looked for only then, not on every call.
    if (replay(*e.active, name_, args, &outs, &why) ||
        (adopt_successors(e) && replay(*e.active, name_, args, &outs, &why))) {
      ++replays_;
      last_reason_.clear();
      *frontend_data = e.active->frontend_data;
      for (size_t i = 0; i < outs.size(); ++i) {
        if (e.active->outputs[i].kind == CaptureOutput::Kind::Arg) outs[i] = args[e.active->outputs[i].index];
      }
      return outs;
    }
    // Traced again; if the new trace matches, replays resume at the next call.
    LZ_COUNTER("CaptureReplayRefused", 1);
    last_reason_ = std::move(why);
    e.pending = std::move(e.active);
  }
  return trace(e, args, body, frontend_data);
}

Captured::Captured(Fn fn, std::string name, bool full_graph)
    : fn_(std::move(fn)), cache_(std::make_shared<CaptureCache>(std::move(name), full_graph)) {}

std::vector<Tensor> Captured::operator()(const std::vector<Tensor>& args) {
  std::vector<TensorImplPtr> impls;
  impls.reserve(args.size());
  for (const Tensor& t : args) impls.push_back(t.impl());
  std::shared_ptr<void> unused;
  auto outs = cache_->call(impls, 0, [this](const std::vector<TensorImplPtr>& a, std::shared_ptr<void>*) {
    std::vector<Tensor> in;
    in.reserve(a.size());
    for (const TensorImplPtr& t : a) in.emplace_back(t);
    std::vector<TensorImplPtr> out;
    for (const Tensor& t : fn_(in)) out.push_back(t.impl());
    return out;
  }, &unused);
  std::vector<Tensor> res;
  res.reserve(outs.size());
  for (TensorImplPtr& t : outs) res.emplace_back(std::move(t));
  return res;
}

int64_t Captured::traces() const { return cache_->traces(); }
int64_t Captured::replays() const { return cache_->replays(); }
std::string Captured::last_reason() const { return cache_->last_reason(); }

}  // namespace lz
