#include "aten/table.h"

#include <algorithm>
#include <unordered_map>

#include "aten/entries.h"
#include "ops/keyed_random.h"

namespace lz::aten {

std::vector<DType> DTypeSet::list() const {
  std::vector<DType> out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (has(static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
  }
  return out;
}

Tensor Call::uniform(const Shape& shape, DType dtype) {
  if (!key_.defined()) return lz::rand(shape, dtype);
  Tensor draws = internal::rand_from_key(key_, shape, dtype);
  key_ = internal::rng_advance(key_);
  return draws;
}

void TableBuilder::add(std::initializer_list<std::string_view> names, DTypeSet dtypes,
                       Lowering lower, EntryOptions options) {
  for (std::string_view name : names) {
    entries_.push_back(
        Entry{std::string(name), dtypes, options.when, lower, options.note, options.flags});
  }
}

const Lowering& TableBuilder::lowering(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return e.lower;
  }
  throw Error("ATen table: no entry " + std::string(name) + " to build on (added later?)");
}

namespace {

struct Table {
  std::vector<Entry> storage;
  std::unordered_map<std::string_view, const Entry*> by_name;
  std::vector<const Entry*> sorted;
};

const Table& table() {
  static const Table t = [] {
    TableBuilder b;
    add_pointwise(b);
    add_reductions(b);
    add_shape(b);
    add_indexing(b);
    add_foreach(b);
    add_nn(b);
    add_random(b);
    add_ordering(b);
    add_complex(b);
    Table t;
    t.storage = b.take();
    for (const Entry& e : t.storage) {
      if (!t.by_name.emplace(e.name, &e).second) {
        throw Error("ATen table: " + e.name + " has two entries");
      }
      t.sorted.push_back(&e);
    }
    std::sort(t.sorted.begin(), t.sorted.end(),
              [](const Entry* a, const Entry* b) { return a->name < b->name; });
    return t;
  }();
  return t;
}

// Calls f on every tensor argument, one level into lists (Tensor[] and Tensor?[]).
template <class F>
void for_each_tensor(const Args& args, F&& f) {
  for (const Arg& a : args) {
    if (a.is_tensor()) {
      f(a);
    } else if (a.is_list()) {
      for (const Arg& item : a.list()) {
        if (item.is_tensor()) f(item);
      }
    }
  }
}

// The tensors of a result: itself, or the items of a tuple/list result.
std::vector<const Arg*> result_items(const Arg& out) {
  std::vector<const Arg*> items;
  if (out.is_list()) {
    for (const Arg& a : out.list()) items.push_back(&a);
  } else {
    items.push_back(&out);
  }
  return items;
}

Args widened(const Args& args) {
  auto widen = [](const Arg& a) -> Arg {
    if (a.is_tensor() && is_reduced_float(a.tensor().dtype())) return a.tensor().to(DType::Float32);
    return a;
  };
  Args up;
  up.reserve(args.size());
  for (const Arg& a : args) {
    if (a.is_list()) {
      std::vector<Arg> items;
      items.reserve(a.list().size());
      for (const Arg& item : a.list()) items.push_back(widen(item));
      up.emplace_back(std::move(items));
    } else {
      up.push_back(widen(a));
    }
  }
  return up;
}

}  // namespace

const Entry* find(std::string_view name) {
  const auto& by_name = table().by_name;
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

const std::vector<const Entry*>& entries() { return table().sorted; }

std::optional<std::string> why_not(const Entry& entry, const Args& args) {
  std::optional<std::string> reason;
  for_each_tensor(args, [&](const Arg& t) {
    if (reason) return;
    if (!t.unsupported().empty()) {
      reason = t.unsupported();
      return;
    }
    std::optional<DType> dt = t.tensor_dtype();
    if (t.is_complex() && !entry.has(kComplex)) {
      reason =
          std::string("dtype ") + Arg::complex_name(dt.value_or(DType::Float32)) + " not supported";
    } else if (!dt) {
      reason = "dtype not supported";
    } else if (!entry.dtypes.has(*dt) &&
               !(is_reduced_float(*dt) && entry.dtypes.has(DType::Float32))) {
      reason = "dtype " + std::string(dtype_name(*dt)) + " not supported";
    }
  });
  if (reason || !entry.when) return reason;
  try {
    return entry.when(args);
  } catch (const std::exception& e) {  // arguments the entry does not know (a newer schema)
    return std::string("unexpected arguments (") + e.what() + ")";
  }
}

bool involves_complex(const Entry& entry, const Args& args) {
  // An entry without kComplex never does: why_not refuses complex tensors for it, and it makes
  // no Arg::complex. The lazy device asks this of every op it lowers.
  if (!entry.has(kComplex)) return false;
  if (entry.has(kComplexOnly)) return true;
  auto complex = [](const Arg& a) { return a.is_complex() || a.complex_dtype().has_value(); };
  for (const Arg& a : args) {
    if (complex(a)) return true;
    if (a.is_list() && std::any_of(a.list().begin(), a.list().end(), complex)) return true;
  }
  return false;
}

std::optional<std::string> why_not(std::string_view name, const Args& args) {
  const Entry* e = find(name);
  if (!e) return "no lowering";
  return why_not(*e, args);
}

Arg lower(const Entry& entry, const Args& args, Call& call,
          const std::vector<std::optional<DType>>* result_dtypes) {
  bool half = false, bfloat = false;
  for_each_tensor(args, [&](const Arg& t) {
    DType dt = t.tensor().dtype();
    half |= dt == DType::Float16;
    bfloat |= dt == DType::BFloat16;
  });
  if ((!half && !bfloat) || entry.has(kView) || entry.has(kCopiedView) || entry.has(kMutates) ||
      (bfloat && entry.has(kBFloat16Native))) {
    return entry.lower(args, call);
  }
  std::vector<std::optional<DType>> found;
  if (!result_dtypes) {
    // The entry on the 16-bit operands gives eager's result dtypes (entries keep eager's dtypes);
    // its recording is dropped. Random draws come from a stand-in key, so the real stream is
    // not advanced.
    Call probe_call(lz::zeros({}, DType::Int64));
    Arg probe = entry.lower(args, entry.has(kRandom) ? probe_call : call);
    for (const Arg* item : result_items(probe)) {
      found.push_back(item->is_tensor() ? std::optional<DType>(item->tensor().dtype())
                                        : std::nullopt);
    }
    result_dtypes = &found;
  }
  Arg out = entry.lower(widened(args), call);
  auto round = [&](const Arg& item, size_t i) -> Arg {
    if (!item.is_tensor() || i >= result_dtypes->size() || !(*result_dtypes)[i]) return item;
    DType want = *(*result_dtypes)[i];
    if (item.tensor().dtype() == DType::Float32 && is_reduced_float(want)) {
      return item.tensor().to(want);
    }
    return item;
  };
  if (!out.is_list()) return round(out, 0);
  std::vector<Arg> items;
  items.reserve(out.list().size());
  for (size_t i = 0; i < out.list().size(); ++i) items.push_back(round(out.list()[i], i));
  return Arg(std::move(items));
}

// PyTorch's core ATen decompositions take aot_autograd's and make_fx's graphs down to the Core
// ATen IR the table is written against (softmax's and layer norm's backward, the optimizers'
// addcmul/addcdiv/lerp, silu, stack, t...). These are PyTorch's decompositions outside the core
// set, each used only while the table has no entry of its own (an entry keeps the op whole:
// fewer nodes, eager's formula).
const std::vector<std::string>& extra_decompositions() {
  // One name per line:
  // clang-format off
  static const std::vector<std::string> names = {
      "aten.std_mean.correction",
      "aten.native_group_norm.default",
      "aten.addmv.default",
      "aten.addbmm.default",
      "aten.hardtanh.default",
      "aten.leaky_relu.default",
      "aten.elu.default",
      "aten.erfc.default",
      "aten.log2.default",
      "aten.log10.default",
      "aten.exp2.default",
      "aten._unsafe_index.Tensor",
      "aten.index_add.default",
      "aten.masked_fill.Scalar",
      "aten.masked_fill.Tensor",
  };
  // clang-format on
  return names;
}

// PyTorch's decomposition of the CPU flash attention returns the attention weights where the op
// returns the logsumexp its backward reads (it is meant for export): wrong for training.
// linalg_vector_norm's entry takes every input eager computes a norm for (its condition refuses
// only what eager raises on), so a norm stays one node instead of abs, pow, sum and pow.
// nll_loss_backward's decomposition fills a zero tensor and scatters -1 into it (a cross
// entropy's gradient: an int64 mask of the logits' size written, then read back); its entry
// compares each class with the target instead, which fuses into the log-softmax backward. Its
// condition, like the norm's, refuses only what eager raises on.
const std::vector<std::string>& kept_whole() {
  static const std::vector<std::string> names = {
      "aten._scaled_dot_product_flash_attention_for_cpu.default",
      "aten.linalg_vector_norm.default",
      "aten.nll_loss_backward.default",
  };
  return names;
}

bool raises_index_error(std::string_view overload) {
  // gather, scatter and index_add raise RuntimeError in eager, as does any other failure.
  static const std::vector<std::string_view> ops = {
      "embedding",          "index_select",       "index",
      "_unsafe_index",      "index_put",          "_unsafe_index_put",
      "index_copy",         "nll_loss_forward",   "nll_loss_backward",
      "nll_loss2d_forward", "nll_loss2d_backward"};
  // "aten.index_select.default" -> "index_select"
  size_t first = overload.find('.');
  if (first == std::string_view::npos) return false;
  std::string_view rest = overload.substr(first + 1);
  std::string_view base = rest.substr(0, rest.find('.'));
  return std::find(ops.begin(), ops.end(), base) != ops.end();
}

}  // namespace lz::aten
