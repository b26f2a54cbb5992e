// The memory plan: scratch values placed in one arena by liveness (place_scratch, plan.h), and
// whether a root may be written over a donated parameter (root_may_overwrite).
#include <algorithm>
#include <climits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "lazuli/error.h"
#include "lower/planner.h"

namespace lz::lower {
namespace {

int64_t aligned_size(int64_t nbytes) {
  int64_t size = 0;
  if (nbytes < 0 || __builtin_add_overflow(nbytes, int64_t{63}, &size)) {
    throw OutOfMemoryError("memory plan: a scratch buffer of " + std::to_string(nbytes) +
                           " bytes cannot be allocated");
  }
  return size / 64 * 64;
}

int64_t end_of(int64_t off, int64_t size) {
  int64_t end = 0;
  if (__builtin_add_overflow(off, size, &end)) {
    throw OutOfMemoryError("memory plan: the program's scratch memory exceeds the address space");
  }
  return end;
}

// Largest first, each at the lowest offset no value alive at the same time occupies. Tight, but
// it compares each value with every one placed before it.
std::vector<int64_t> place_largest_first(const std::vector<ScratchInterval>& v, int64_t* total) {
  struct Placed {
    int64_t off, end;
    int def, last;
  };
  std::vector<int> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a].nbytes > v[b].nbytes; });
  std::vector<int64_t> off(v.size(), 0);
  std::vector<Placed> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (int i : order) {
    const int64_t size = aligned_size(v[i].nbytes);
    busy.clear();
    for (const Placed& p : placed) {
      if (p.def <= v[i].last && v[i].def <= p.last) busy.push_back({p.off, p.end});
    }
    std::sort(busy.begin(), busy.end());
    int64_t o = 0;
    for (auto [b, e] : busy) {
      if (end_of(o, size) <= b) break;
      o = std::max(o, e);
    }
    off[i] = o;
    placed.push_back({o, end_of(o, size), v[i].def, v[i].last});
    *total = std::max(*total, end_of(o, size));
  }
  return off;
}

// A sweep over the steps: a value's block is freed after its last use and reused best-fit by
// values defined later (free neighbours merge; the top of the arena grows only when nothing
// fits). O(n log n), for graphs too large for the quadratic placement.
std::vector<int64_t> place_sweep(const std::vector<ScratchInterval>& v, int64_t* total) {
  std::vector<int> order(v.size());
  for (size_t i = 0; i < v.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a].def < v[b].def; });
  std::map<int64_t, int64_t> free_at;                 // offset -> size
  std::set<std::pair<int64_t, int64_t>> free_by_size;  // (size, offset)
  int64_t top = 0;
  auto add_free = [&](int64_t o, int64_t size) {
    auto next = free_at.lower_bound(o);
    if (next != free_at.end() && next->first == o + size) {  // merge with the block after
      size += next->second;
      free_by_size.erase({next->second, next->first});
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {  // merge with the block before
      auto prev = std::prev(next);
      if (prev->first + prev->second == o) {
        o = prev->first;
        size += prev->second;
        free_by_size.erase({prev->second, prev->first});
        free_at.erase(prev);
      }
    }
    if (o + size == top) {  // the top of the arena comes down instead
      top = o;
      return;
    }
    free_at[o] = size;
    free_by_size.insert({size, o});
  };
  using Live = std::pair<int, int>;  // (last step, value)
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  std::vector<int64_t> off(v.size(), 0), size(v.size(), 0);
  for (int i : order) {
    while (!live.empty() && live.top().first < v[i].def) {
      const int j = live.top().second;
      live.pop();
      add_free(off[j], size[j]);
    }
    size[i] = aligned_size(v[i].nbytes);
    auto fit = free_by_size.lower_bound({size[i], INT64_MIN});
    if (fit != free_by_size.end()) {
      const auto [fsize, fo] = *fit;
      free_by_size.erase(fit);
      free_at.erase(fo);
      off[i] = fo;
      if (fsize > size[i]) {
        free_at[fo + size[i]] = fsize - size[i];
        free_by_size.insert({fsize - size[i], fo + size[i]});
      }
    } else {
      off[i] = top;
      top = end_of(top, size[i]);
    }
    *total = std::max(*total, end_of(off[i], size[i]));
    live.push({v[i].last, i});
  }
  return off;
}

}  // namespace

std::vector<int64_t> place_scratch(const std::vector<ScratchInterval>& values, int64_t* arena_bytes,
                                   Placement how) {
  *arena_bytes = 0;
  return how == Placement::LargestFirst ? place_largest_first(values, arena_bytes)
                                        : place_sweep(values, arena_bytes);
}

// Scratch values get arena offsets by liveness (place_scratch).
void Planner::plan_memory() {
  std::vector<int> order;
  std::vector<ScratchInterval> iv;
  for (size_t i = 0; i < plan_.values.size(); ++i) {
    const PlanValue& v = plan_.values[i];
    if (v.home.kind != ValueHome::Scratch) continue;
    order.push_back(static_cast<int>(i));
    iv.push_back({v.nbytes, v.def_step, std::max(v.last_use, v.def_step)});
  }
  const std::vector<int64_t> off =
      place_scratch(iv, &plan_.arena_bytes,
                    iv.size() > kLargestFirstLimit ? Placement::Sweep : Placement::LargestFirst);
  for (size_t k = 0; k < order.size(); ++k) plan_.values[order[k]].home.offset = off[k];
}

// A root written in place may take a donated parameter's storage when its step is the last reader
// of that parameter and reads it element for element (same offset and strides as the output),
// which only an elementwise kernel does.
bool root_may_overwrite(const Plan& plan, int r, int p) {
  if (plan.root_copy[r] || p < 0 || p >= static_cast<int>(plan.param_value.size())) return false;
  const int vi = plan.param_value[p];
  if (vi < 0) return false;  // no step reads it (no value), or read through two nodes
  const PlanValue& out = plan.values[plan.root_value[r]];
  const PlanValue& pv = plan.values[vi];
  const int sid = out.def_step;
  const PlanStep& s = plan.steps[sid];
  if (s.kind != PlanStep::Kernel || plan.kernels[s.kernel].spec.scheme != Scheme::Elementwise) return false;
  // A scatter's output is written twice (its base, then the scatter kernel right after), a cat's
  // or slice_scatter's once per part, by consecutive steps.
  if (sid + 1 < static_cast<int>(plan.steps.size())) {
    const PlanStep& next = plan.steps[sid + 1];
    if (next.kind == PlanStep::Kernel && next.output == plan.root_value[r]) return false;
  }
  if (pv.last_use > sid || pv.nbytes != out.nbytes) return false;
  const KernelSpec& spec = plan.kernels[s.kernel].spec;
  const int rank = spec.rank;
  const int nin = static_cast<int>(spec.inputs.size());
  auto op_args = [&](int x) {
    auto b = s.args.begin() + rank + x * (rank + 1);
    return std::vector<int64_t>(b, b + rank + 1);
  };
  const std::vector<int64_t> oargs = op_args(nin);
  for (int x = 0; x < nin; ++x) {
    if (s.inputs[x] == vi && op_args(x) != oargs) return false;
  }
  return true;
}

}  // namespace lz::lower
