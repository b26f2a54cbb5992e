#include "exec/graph_executor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/config.h"
#include "core/lru_cache.h"
#include "core/metrics.h"
#include "exec/compile_region.h"
#include "exec/cut_record.h"
#include "exec/debug_log.h"
#include "exec/explain.h"
#include "exec/device_executor.h"
#include "lazuli/error.h"
#include "tensor/device.h"


namespace lz {
namespace {

std::mutex& executor_mutex() {
  static std::mutex m;
  return m;
}

using CompileCache = LruCache<Hash128, Executable, Hash128Hasher>;
CompileCache& compile_cache() {
  static auto* c = new CompileCache(static_cast<size_t>(config().compilation_cache_size));
  return *c;
}

}  // namespace

Roots collect(const std::vector<internal::TensorImplPtr>& tensors, bool include_views,
              bool hold_locks) {
  std::vector<internal::TensorImplPtr> sorted = tensors;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a->id() < b->id(); });
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  Roots r;
  for (auto& t : sorted) {
    if (hold_locks) {
      // Views are skipped unlocked: a thread writing through a view holds it, then its base.
      if (t->is_view()) continue;
      std::unique_lock<std::mutex> l = t->lock_state();
      ir::Value v = t->pending_ir(l);
      if (!v) continue;
      r.tensors.push_back(t);
      r.values.push_back(std::move(v));
      r.store.push_back(true);
      r.held.push_back(std::move(l));
      continue;
    }
    if (ir::Value v = t->pending_ir()) {
      r.tensors.push_back(t);
      r.values.push_back(std::move(v));
      r.store.push_back(true);
    } else if (include_views && t->state() == internal::TensorState::View) {
      ir::Value vv = t->value();
      if (vv.node->op == ir::OpKind::DeviceData) continue;  // nothing to compute
      r.tensors.push_back(t);
      r.values.push_back(std::move(vv));
      r.store.push_back(false);
    }
  }
  return r;
}

namespace {
// How many references each node gets from its users inside the graph (post-order index ->
// count), read off the topology, which lists each node's operand indices node by node.
std::vector<long> operand_refs(const PostOrder& po) {
  std::vector<long> refs(po.nodes.size(), 0);
  size_t n_operands = 0;
  for (const ir::Node* n : po.nodes) n_operands += n->operands.size();
  for (size_t t = 0; t < n_operands; ++t) refs[po.topology[t]]++;
  return refs;
}
}  // namespace

size_t add_live_intermediates(Roots& roots, const PostOrder& po) {
  // Candidates: interior nodes with more references than the graph accounts for (a tensor's ir_
  // is one), roots aside. Without candidates no live tensor holds one, and the registry is not
  // scanned (a read in a loop with thousands of live parameters stays cheap).
  const std::vector<long> graph_refs = operand_refs(po);
  std::unordered_set<const ir::Node*> root_nodes;
  for (const ir::Value& v : roots.values) root_nodes.insert(v.node.get());
  // A value that reads no data (ones, arange, a constant expanded) is cheaper to recompute, and
  // to fuse into its consumers, than to store; a leaf would only be copied.
  std::vector<bool> reads_data(po.nodes.size(), false);
  std::unordered_set<const ir::Node*> interior;
  for (size_t i = 0, t = 0; i < po.nodes.size(); ++i) {
    const ir::Node* n = po.nodes[i];
    bool reads = n->op == ir::OpKind::DeviceData;
    for (size_t k = 0; k < n->operands.size(); ++k) reads = reads || reads_data[po.topology[t + k]];
    t += n->operands.size();
    reads_data[i] = reads;
    if (!reads || n->op == ir::OpKind::DeviceData || root_nodes.count(n)) continue;
    if (po.use_counts[i] > graph_refs[i]) interior.insert(n);
  }
  if (interior.empty()) return 0;
  std::unordered_set<const internal::TensorImpl*> already;
  for (const auto& t : roots.tensors) already.insert(t.get());
  // Siblings: a live tensor outside the graph whose own pending graph reads one of its interior
  // nodes (one parameter's gradient while another's is read). The next barrier computes it
  // anyway, and then the shared part again; computed here, the shared part is computed once
  // (reading resnet18's 62 gradients one by one: one program instead of 62).
  // An update in place (an optimizer's `p -= lr * g`, a momentum buffer) over 64 KiB is no
  // sibling: its old buffer, still read, is the tensor's own (owner_tensor_id), which the next
  // barrier donates to the new value, and a read must not cost it a second copy (a read never
  // donates). Such tensors are those owning a buffer that this graph or a sibling's reads.
  std::unordered_set<const ir::Node*> in_graph(po.nodes.begin(), po.nodes.end());
  std::unordered_set<int64_t> owners;
  for (const BufferPtr& b : po.params) owners.insert(b->owner_tensor_id);
  std::unordered_map<const ir::Node*, bool> reaches;  // memo over the walks below
  auto reaches_interior = [&](const ir::Node* start) {
    std::vector<std::pair<const ir::Node*, size_t>> stack{{start, 0}};
    while (!stack.empty()) {
      auto& [n, k] = stack.back();
      if (k == 0) {
        if (reaches.count(n)) {
          stack.pop_back();
          continue;
        }
        if (n->op == ir::OpKind::DeviceData && n->data) owners.insert(n->data->owner_tensor_id);
        if (in_graph.count(n) || n->op == ir::OpKind::DeviceData) {
          reaches[n] = interior.count(n) > 0;
          stack.pop_back();
          continue;
        }
        reaches[n] = false;  // provisional: the graph is a DAG, so no walk meets it again unset
      }
      if (k < n->operands.size()) {
        const ir::Node* op = n->operands[k++].node.get();
        if (!reaches.count(op)) stack.push_back({op, 0});
        continue;
      }
      bool any = false;
      for (const ir::Value& o : n->operands) any = any || reaches[o.node.get()];
      reaches[n] = any;
      stack.pop_back();
    }
    return reaches[start];
  };
  struct Found {
    internal::TensorImplPtr tensor;
    ir::Value value;
    bool sibling;
  };
  std::vector<Found> found;
  for (auto& t : internal::default_device().registry.snapshot()) {  // id order
    if (t->is_view() || already.count(t.get())) continue;
    ir::Value v = t->pending_ir();
    if (!v) continue;
    const ir::Node* n = v.node.get();
    const bool inner = interior.count(n) > 0;
    if (!inner && (in_graph.count(n) || !reaches_interior(n))) continue;
    found.push_back({std::move(t), std::move(v), !inner});
  }
  // Every walk is done, so `owners` is complete: drop the siblings updated in place, except small
  // ones (batch norm's running statistics), whose second copy costs nothing while what they read
  // (the batch's means: most of the forward) would be computed again at the barrier.
  constexpr int64_t kSmallInPlaceBytes = 64 << 10;
  Roots extra;
  for (Found& f : found) {
    const int64_t bytes =
        numel(f.value.shape()) * static_cast<int64_t>(dtype_size(f.value.dtype()));
    if (f.sibling && bytes > kSmallInPlaceBytes && owners.count(f.tensor->id())) continue;
    extra.tensors.push_back(std::move(f.tensor));
    extra.values.push_back(std::move(f.value));
  }
  if (extra.tensors.empty()) return 0;
  // Merge by tensor id: graph_hash and find_donations rely on id order.
  Roots merged;
  const size_t n = roots.tensors.size() + extra.tensors.size();
  merged.tensors.reserve(n);
  merged.values.reserve(n);
  merged.store.reserve(n);
  size_t i = 0, j = 0;
  while (i < roots.tensors.size() || j < extra.tensors.size()) {
    bool take_root = j == extra.tensors.size() ||
                     (i < roots.tensors.size() && roots.tensors[i]->id() < extra.tensors[j]->id());
    if (take_root) {
      merged.tensors.push_back(std::move(roots.tensors[i]));
      merged.values.push_back(std::move(roots.values[i]));
      merged.store.push_back(roots.store[i]);
      ++i;
    } else {
      merged.tensors.push_back(std::move(extra.tensors[j]));
      merged.values.push_back(std::move(extra.values[j]));
      merged.store.push_back(true);
      ++j;
    }
  }
  merged.held = std::move(roots.held);  // empty: reads hold no locks
  roots = std::move(merged);
  LZ_COUNTER("ValueReadMaterialized", static_cast<int64_t>(extra.tensors.size()));
  return extra.tensors.size();
}

namespace {

int64_t collective_sequence(const ir::Node* n) {
  return std::get<ir::CollectiveAttrs>(n->attrs).sequence;
}

}  // namespace

PostOrder post_order(const std::vector<ir::Value>& roots) {
  // Visited nodes carry this traversal's epoch; one traversal at a time owns the marks (syncs
  // hold the executor mutex, but dumps, graph_hash() and compile regions traverse without it).
  static std::mutex traversal_mu;  // guards epoch and every node's visit_mark and visit_index
  static uint64_t epoch = 0;
  std::lock_guard<std::mutex> traversal(traversal_mu);
  // Depth first from `leading` (collectives, in recording order), then from the roots in order.
  // `collectives`, when given, receives each collective met, with the pointer it was reached by.
  auto traverse = [&roots](const std::vector<const ir::NodePtr*>& leading,
                           std::vector<const ir::NodePtr*>* collectives) {
    PostOrder po;
    const uint64_t mark = ++epoch;
    auto visit = [mark](const ir::Node* n) {
      if (n->visit_mark == mark) return false;
      n->visit_mark = mark;
      return true;
    };
    std::unordered_map<const DeviceBuffer*, int> buffer_param;
    struct Frame {
      const ir::NodePtr* node;
      size_t next;
    };
    std::vector<Frame> stack;
    auto from = [&](const ir::NodePtr* start) {
      if (!visit(start->get())) return;
      stack.push_back({start, 0});
      while (!stack.empty()) {
        Frame& f = stack.back();
        const ir::Node* n = f.node->get();
        if (f.next < n->operands.size()) {
          const ir::NodePtr& child = n->operands[f.next++].node;
          if (visit(child.get())) stack.push_back({&child, 0});
          continue;
        }
        for (const ir::Value& v : n->operands) po.topology.push_back(v.node->visit_index);
        n->visit_index = static_cast<int32_t>(po.nodes.size());
        po.nodes.push_back(n);
        po.use_counts.push_back(f.node->use_count());
        if (n->op == ir::OpKind::DeviceData) {
          auto [it, fresh] =
              buffer_param.emplace(n->data.get(), static_cast<int>(po.params.size()));
          if (fresh) po.params.push_back(n->data);
          po.param_slot[n] = it->second;
          po.param_sequence.push_back(it->second);
        } else if (collectives && ir::op_info(n->op).cls == ir::OpClass::Collective) {
          collectives->push_back(f.node);
        }
        stack.pop_back();
      }
    };
    for (const ir::NodePtr* start : leading) from(start);
    for (const ir::Value& root : roots) from(&root.node);
    for (const ir::Value& root : roots) po.topology.push_back(root.node->visit_index);
    return po;
  };
  std::vector<const ir::NodePtr*> collectives;
  PostOrder po = traverse({}, &collectives);
  // Collectives run in program order, and every rank must run them in one order: the order they
  // were recorded in, not the order the roots happen to reach them (a rank may hold a tensor the
  // others do not). Traversing from them first, in that order, places each after what it needs
  // and before the next one.
  auto by_sequence = [](const ir::NodePtr* a, const ir::NodePtr* b) {
    return collective_sequence(a->get()) < collective_sequence(b->get());
  };
  if (!std::is_sorted(collectives.begin(), collectives.end(), by_sequence)) {
    std::stable_sort(collectives.begin(), collectives.end(), by_sequence);
    po = traverse(collectives, nullptr);
  }
  return po;
}

namespace {
// The stored root whose tensor has this id, or -1. collect() sorts roots by tensor id.
int stored_root_of(const Roots& roots, int64_t id) {
  if (id == 0) return -1;
  auto it = std::lower_bound(roots.tensors.begin(), roots.tensors.end(), id,
                             [](const internal::TensorImplPtr& t, int64_t v) { return t->id() < v; });
  if (it == roots.tensors.end() || (*it)->id() != id) return -1;
  int r = static_cast<int>(it - roots.tensors.begin());
  return roots.store[r] ? r : -1;
}
}  // namespace

std::vector<std::pair<int, int>> find_donations(const Roots& roots, const PostOrder& po) {
  // Cheap pre-check: only a parameter whose buffer belonged to a tensor synced here can be
  // donated; most syncs (inputs still held by their tensors) stop here.
  bool any_candidate = false;
  for (const BufferPtr& b : po.params) {
    if ((any_candidate = stored_root_of(roots, b->owner_tensor_id) >= 0)) break;
  }
  if (!any_candidate) return {};
  // A node referenced from outside this graph (by a tensor we do not sync, a saved value, a view's
  // cache) will be computed again later, so the buffers under it must keep their contents.
  std::vector<long> graph_refs = operand_refs(po);
  const size_t root_at = po.topology.size() - roots.values.size();  // the roots' indices follow
  for (size_t i = 0; i < roots.values.size(); ++i) {
    // Roots.values holds one reference; a stored root's tensor holds another, dropped at schedule.
    graph_refs[po.topology[root_at + i]] += roots.store[i] ? 2 : 1;
  }
  std::unordered_set<const ir::Node*> needed_later;
  for (size_t i = po.nodes.size(); i-- > 0;) {
    const ir::Node* n = po.nodes[i];
    bool ext = po.use_counts[i] > graph_refs[i] || needed_later.count(n);
    if (!ext) continue;
    needed_later.insert(n);
    for (const ir::Value& v : n->operands) needed_later.insert(v.node.get());
  }
  std::vector<int> leaf_refs(po.params.size(), 0);
  std::vector<bool> blocked(po.params.size(), false);
  for (const auto& [node, slot] : po.param_slot) {
    leaf_refs[slot]++;
    if (needed_later.count(node)) blocked[slot] = true;
  }
  std::vector<std::pair<int, int>> out;
  std::vector<bool> output_taken(roots.values.size(), false);
  for (size_t p = 0; p < po.params.size(); ++p) {
    const BufferPtr& b = po.params[p];
    // Held only by this graph's DeviceData nodes and po.params: no live tensor reads it later.
    if (blocked[p] || b.use_count() != leaf_refs[p] + 1) continue;
    int r = stored_root_of(roots, b->owner_tensor_id);
    if (r < 0 || output_taken[r]) continue;
    const ir::Value& v = roots.values[r];
    if (v.dtype() != b->dtype() || numel(v.shape()) != numel(b->shape())) continue;
    out.emplace_back(static_cast<int>(p), r);
    output_taken[r] = true;
  }
  return out;
}

ir::LoweringGraph lowering_graph(const Roots& roots, const PostOrder& po) {
  ir::LoweringGraph g;
  g.post_order = po.nodes;
  g.param_slot = po.param_slot;
  g.num_params = static_cast<int>(po.params.size());
  g.roots = roots.values;
  return g;
}

Hash128 graph_hash(const Roots& roots, const PostOrder& po,
                   const std::vector<std::pair<int, int>>& donations) {
  Hasher h;
  h.add(active_backend().compile_env_hash());
  h.add<uint64_t>(roots.values.size());
  for (const ir::Value& v : roots.values) {
    h.add(v.hash());
    h.add(v.index);
  }
  h.add<uint64_t>(po.param_sequence.size());
  for (int p : po.param_sequence) h.add(p);
  h.add<uint64_t>(po.topology.size());
  if (!po.topology.empty()) h.add_bytes(po.topology.data(), po.topology.size() * sizeof(int32_t));
  std::vector<std::pair<int, int>> d = donations;
  std::sort(d.begin(), d.end());
  h.add<uint64_t>(d.size());
  for (auto& [p, r] : d) h.add(p).add(r);
  return h.digest();
}

namespace {

std::shared_ptr<Executable> lookup_or_compile(const Hash128& hash, const Roots& roots,
                                              const PostOrder& po, CutRecord& record) {
  CompileCache& cache = compile_cache();
  if (auto exe = cache.get(hash)) {
    LZ_COUNTER("CachedCompile", 1);
    return exe;
  }
  LZ_COUNTER("UncachedCompile", 1);
  record.compiled = true;
  std::shared_ptr<Executable> exe;
  {
    static TimedMetric* compile_time = get_metric("CompileTime");
    auto start = std::chrono::steady_clock::now();
    exe = active_backend().compile(lowering_graph(roots, po));
    record.compile_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    compile_time->add_sample(record.compile_ns);
  }
  if (size_t evicted = cache.add(hash, exe)) LZ_COUNTER("CompileCacheEviction", static_cast<int64_t>(evicted));
  return exe;
}

// A read of values (item, numpy, a bool mask's shape): it runs now, stores what it computed, and
// never donates.
bool is_value_read(const SyncConfig& cfg) {
  return cfg.sync_data && !cfg.barrier &&
         (cfg.reason == CutReason::ValueRead || cfg.reason == CutReason::DataDependentShape);
}

// Nodes run per op kind (ExecutedNode::<op>) and in all (ExecutedNodes), so tests and users can
// see recomputation through counters. Parameters are not counted: they run nothing.
void count_executed_nodes(const PostOrder& po) {
  constexpr size_t kOps = static_cast<size_t>(ir::OpKind::kNumOps);
  static std::atomic<Counter*> counters[kOps] = {};
  int64_t per_op[kOps] = {};
  for (const ir::Node* n : po.nodes) per_op[static_cast<size_t>(n->op)]++;
  int64_t total = 0;
  for (size_t k = 0; k < kOps; ++k) {
    if (!per_op[k] || k == static_cast<size_t>(ir::OpKind::DeviceData)) continue;
    Counter* c = counters[k].load(std::memory_order_acquire);
    if (!c) {
      c = get_counter("ExecutedNode::" + std::string(ir::op_name(static_cast<ir::OpKind>(k))));
      counters[k].store(c, std::memory_order_release);
    }
    c->add(per_op[k]);
    total += per_op[k];
  }
  LZ_COUNTER("ExecutedNodes", total);
}

// The program's collectives in post order (the order the plan runs them), as every rank must
// record them: "all_reduce float32[16, 5] reduce=0 ...; ..." (empty: none).
std::string describe_collectives(const std::vector<const ir::Node*>& nodes) {
  std::string out;
  for (const ir::Node* n : nodes) {
    if (ir::op_info(n->op).cls != ir::OpClass::Collective) continue;
    const ir::Value& x = n->operands[0];
    const auto& a = n->attr<ir::CollectiveAttrs>();
    if (!out.empty()) out += "; ";
    out += std::string(ir::op_name(n->op)) + " " + std::string(dtype_name(x.dtype())) + shape_str(x.shape());
    if (n->op == ir::OpKind::AllReduce || n->op == ir::OpKind::ReduceScatter) {
      static const char* const kReduce[] = {"sum", "product", "max", "min"};
      out += std::string(" ") + kReduce[a.reduce & 3];
    }
    if (n->op == ir::OpKind::Broadcast) out += " from rank " + std::to_string(a.root);
  }
  return out;
}

}  // namespace

SyncResult sync_tensors_graph(const std::vector<internal::TensorImplPtr>& tensors,
                              const SyncConfig& cfg) {
  SyncResult res;
  std::shared_ptr<Execution> exec;
  bool run_here = false;  // the run was left to this thread (ScheduledRun::run_here)
  RegionState* region = current_region();
  // The user's call site, asked before taking the executor lock (the provider may run Python).
  std::vector<UserFrame> frames = user_frames(config().debug > 0 ? config().debug_max_frame : 1);
  {
    std::lock_guard<std::mutex> l(executor_mutex());
    // Reads may ask for views (computed, not stored); barriers never sync views. A barrier that
    // may donate holds its roots' locks until their buffer swap (collect, graph_executor.h).
    const bool may_donate = cfg.barrier && !cfg.compile_only && config().enable_param_aliasing;
    Roots roots = collect(tensors, /*include_views=*/!cfg.barrier, /*hold_locks=*/may_donate);
    if (roots.values.empty()) {
      if (cfg.wait) wait_all_executions();
      return res;
    }
    check_execution_allowed(cfg.reason, frames);  // a full_graph region raises before anything runs
    PostOrder po = post_order(roots.values);
    if (is_value_read(cfg) && add_live_intermediates(roots, po) > 0) {
      po = post_order(roots.values);
    }
    std::vector<std::pair<int, int>> donations;
    if (may_donate) donations = find_donations(roots, po);
    res.hash = graph_hash(roots, po, donations);
    CutRecord record;
    if (region) record.name = region->name;
    if (!cfg.name.empty()) record.name = cfg.name;
    record.reason = cfg.reason;
    record.hash = res.hash;
    record.nodes = po.nodes.size();
    record.inputs = po.params.size();
    record.outputs = roots.values.size();
    record.frames = std::move(frames);
    // The user's line the cut was made at ("train.py:41"; empty when no frame is known).
    const std::string line =
        record.frames.empty() ? std::string()
                              : record.frames[0].file + ":" + std::to_string(record.frames[0].line);
    // A program holding collectives carries them and where it was cut, for the ranks' check
    // before it runs (compiled_program.h).
    std::string collectives = describe_collectives(po.nodes), cut_site;
    if (!collectives.empty())
      cut_site = line.empty() ? std::string(cut_reason_id(cfg.reason)) : line;
    std::shared_ptr<Executable> exe = lookup_or_compile(res.hash, roots, po, record);
    const bool want_key = cfg.capture && cfg.capture->want_key;
    std::shared_ptr<const GraphKeyInfo> key;
    if (record.compiled || want_key) {
      std::string site = !cfg.name.empty() ? program_key(cfg.name) : line;
      GraphKeyInfo k = describe_graph_key(site, res.hash, roots, po, donations, is_value_read(cfg));
      if (want_key) key = std::make_shared<const GraphKeyInfo>(k);
      if (record.compiled) {
        Explanation e = explain_and_remember(std::move(k));
        record.explanation = std::move(e.text);
        record.cause = std::move(e.cause);
      }
    }
    // The program profile's name for it: the region's or program's name, else the user's line,
    // else the cut's reason.
    std::string label = !record.name.empty() ? record.name
                        : line.empty()       ? std::string(cut_reason_id(cfg.reason))
                                             : line;
    report_execution(record);
    save_graph(record, roots.values);
    if (cfg.reason == CutReason::EagerOp) {
      LZ_COUNTER("EagerOpExecute", 1);
      if (record.compiled) LZ_COUNTER("EagerOpCompile", 1);
    }
    cut_log().add(std::move(record));
    count_executed_nodes(po);
    if (!donations.empty()) LZ_COUNTER("InputOutputAliasCount", static_cast<int64_t>(donations.size()));

    auto facts = std::make_shared<ProgramFacts>();
    facts->root_types.reserve(roots.values.size());
    for (const ir::Value& v : roots.values) facts->root_types.emplace_back(v.dtype(), v.shape());
    for (size_t i = 0; i < po.nodes.size(); ++i) {
      if (po.nodes[i]->origin) {
        facts->origins.emplace_back(static_cast<int>(i), po.nodes[i]->origin);
      }
    }
    facts->collectives = std::move(collectives);
    facts->site = std::move(cut_site);
    facts->label = std::move(label);
    CompiledProgram program{res.hash, exe, std::move(facts)};
    if (cfg.capture) {
      *cfg.capture =
          ProgramCapture{program, po.params, roots.tensors, donations, want_key, std::move(key)};
    }
    if (cfg.compile_only) {
      res.tensors = roots.tensors;
      return res;
    }
    // Each stored root takes its placeholder now (if its IR is still what this sync computes);
    // what it held before comes back if the program fails to compute it.
    auto bind = [&](const std::vector<BufferPtr>& outputs) {
      std::vector<SlotPtr> restore;
      if (!cfg.sync_data) return restore;
      restore.resize(roots.values.size());
      for (size_t i = 0; i < roots.values.size(); ++i) {
        if (!roots.store[i]) continue;
        restore[i] = roots.held.empty()
                         ? roots.tensors[i]->assign_buffer_if_current(roots.values[i], outputs[i])
                         : roots.tensors[i]->assign_buffer_if_current(roots.values[i], outputs[i],
                                                                      roots.held[i]);
      }
      return restore;
    };
    ScheduledRun run = run_compiled(program, po.params, std::move(donations), bind,
                                    cfg.caller_waits || cfg.wait || config().sync_wait);
    roots.held.clear();  // recording on these tensors may go on
    run_here = run.run_here;
    exec = std::move(run.exec);
    res.outputs = std::move(run.outputs);
    res.ran = true;
    res.tensors = roots.tensors;
    internal::default_device().nodes_at_last_cut.store(ir::nodes_created(), std::memory_order_relaxed);
  }
  // Outside the executor lock: recording on other threads goes on while this one runs it.
  if (run_here) device_executor().run_here_or_wake(exec.get());
  if (cfg.wait || config().sync_wait) {
    try {
      exec->wait();
    } catch (...) {
      device_executor().forget_error_of(exec.get());  // raised here: once is the contract
      throw;
    }
  }
  return res;
}

std::unique_lock<std::mutex> lock_executor() { return std::unique_lock<std::mutex>(executor_mutex()); }

void wait_all_executions() {
  device_executor().wait_all();
  raise_pending_async_error();
}

void raise_pending_async_error() {
  if (std::exception_ptr e = device_executor().take_error()) std::rethrow_exception(e);
}

void resize_compile_cache(size_t n) { compile_cache().resize(n); }
size_t compile_cache_entries() { return compile_cache().size(); }
void clear_compile_cache() { compile_cache().clear(); }

namespace {
std::atomic<bool> g_eager{false};
}
void set_eager_mode(bool enabled) { g_eager.store(enabled); }
bool eager_mode() { return g_eager.load(std::memory_order_relaxed); }

void maybe_cut_large_graph() {
  auto& dev = internal::default_device();
  int64_t pending = ir::nodes_created() - dev.nodes_at_last_cut.load(std::memory_order_relaxed);
  const int64_t limit = config().max_pending_nodes;
  if (pending <= limit) return;
  std::vector<internal::TensorImplPtr> live = dev.registry.snapshot();
  // What counts is what live tensors still reach: the nodes of tensors already dropped (a loop
  // that records c = a + b and never reads c) cost nothing at a cut, and cutting would run
  // nothing anyone reads. When the live graph is within the limit, count again from its size;
  // the next look comes after at least an eighth of the limit more nodes, so a live graph just
  // under the limit is not walked again at every op (it may pass the limit by that much).
  int64_t reachable = 0;
  {  // the roots' extra references end here, before a cut counts uses for donation
    Roots roots = collect(live, /*include_views=*/true);
    if (!roots.values.empty()) reachable = static_cast<int64_t>(post_order(roots.values).nodes.size());
  }
  if (reachable <= limit) {
    const int64_t counted = std::min(reachable, limit - std::max<int64_t>(limit / 8, 1));
    dev.nodes_at_last_cut.store(ir::nodes_created() - counted, std::memory_order_relaxed);
    return;
  }
  LZ_COUNTER("GraphTooLargeCut", 1);
  SyncConfig cfg;
  cfg.barrier = true;
  cfg.reason = CutReason::GraphTooLarge;
  sync_tensors_graph(live, cfg);
  // Even if nothing was pending (dead nodes), start counting again from here.
  dev.nodes_at_last_cut.store(ir::nodes_created(), std::memory_order_relaxed);
}

}  // namespace lz
