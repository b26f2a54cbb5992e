// Table entries: the _foreach_* ops of the optimizers' multi-tensor (foreach=True) paths, and
// lerp / addcmul / addcdiv (aten/table.h).
//
// PyTorch has no decompositions for the foreach ops, so each entry applies an elementwise entry
// to the lists, element by element: a list argument (Tensor[] or Scalar[]) gives its i-th item,
// any other argument is shared. Formulas follow eager's CPU kernels, so rounding matches: lerp
// takes the branch on |weight| < 0.5, addcmul is self + (value * t1) * t2 and addcdiv
// self + (value * t1) / t2.
#include <cmath>

#include "aten/entries.h"

namespace lz::aten {
namespace {

Tensor lerp(const Tensor& a, const Tensor& end, const Arg& weight) {
  Tensor diff = sub(end, a);
  if (!weight.is_tensor()) {
    double w = weight.to_double();
    if (std::fabs(w) < 0.5) return add(a, mul(diff, w));
    return sub(end, mul(diff, 1.0 - w));
  }
  const Tensor& w = weight.tensor();
  Tensor low = add(a, mul(w, diff));
  Tensor high = sub(end, mul(diff, sub(1.0, w)));
  return where(lt(abs(w), 0.5), low, high);
}

Arg lerp_entry(const Args& a, Call&) { return lerp(a[0].tensor(), a[1].tensor(), a[2]); }

Arg addcmul(const Args& a, Call&) {
  return add(a[0].tensor(), mul(mul(a[1].tensor(), operand(a[3])), a[2].tensor()));
}

Arg addcdiv(const Args& a, Call&) {
  return add(a[0].tensor(), div(mul(a[1].tensor(), operand(a[3])), a[2].tensor()));
}

// A foreach overload applying `element` item by item. The element's arguments are the foreach
// call's (the i-th item of each list), then `defaults` for the element's arguments the foreach
// overload lacks (add's alpha). per_item_scalars: the last argument is a 1-D tensor holding one
// value per item (addcmul.Tensor's scalars).
Lowering foreach (Lowering element, Args defaults = {}, bool per_item_scalars = false) {
  return [element = std::move(element), defaults = std::move(defaults), per_item_scalars](
             const Args& a, Call& call) -> Arg {
    size_t n = 0;
    for (const Arg& x : a) {
      if (x.is_list()) {
        n = x.list().size();
        break;
      }
    }
    std::vector<Arg> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      Args item;
      item.reserve(a.size() + defaults.size());
      for (const Arg& x : a) item.push_back(x.is_list() ? x.list()[i] : x);
      if (per_item_scalars) {
        item.back() = select(item.back().tensor(), 0, static_cast<int64_t>(i));
      }
      item.insert(item.end(), defaults.begin(), defaults.end());
      out.push_back(element(item, call));
    }
    return Arg(std::move(out));
  };
}

}  // namespace

void add_foreach(TableBuilder& b) {
  b.add({"aten.lerp.Scalar", "aten.lerp.Tensor"}, kFloats, lerp_entry,
        {.note = "eager's two-branch formula"});
  b.add({"aten.addcmul.default"}, kFloats, addcmul);
  b.add({"aten.addcdiv.default"}, kFloats, addcdiv);

  // Lowering of each elementwise entry, taken from the groups added before this one.
  const Lowering add_ = b.lowering("aten.add.Tensor"), sub_ = b.lowering("aten.sub.Tensor");
  const Args alpha{Arg(1)};  // the alpha of the overloads that have none
  b.add({"aten._foreach_add.List", "aten._foreach_add.Tensor"}, kFloats, foreach (add_));
  b.add({"aten._foreach_add.Scalar", "aten._foreach_add.ScalarList"}, kFloats,
        foreach (add_, alpha));
  b.add({"aten._foreach_sub.List"}, kFloats, foreach (sub_));
  b.add({"aten._foreach_sub.Scalar", "aten._foreach_sub.ScalarList"}, kFloats,
        foreach (sub_, alpha));
  for (const char* name : {"mul", "div"}) {
    Lowering f = foreach (b.lowering(std::string("aten.") + name + ".Tensor"));
    std::string p = std::string("aten._foreach_") + name;
    b.add({p + ".Scalar", p + ".List", p + ".ScalarList", p + ".Tensor"}, kFloats, f);
  }
  b.add({"aten._foreach_pow.List", "aten._foreach_pow.Scalar", "aten._foreach_pow.ScalarList",
         "aten._foreach_pow.ScalarAndTensor"},
        kFloats, foreach (b.lowering("aten.pow.Tensor_Tensor")), {.note = "float exponents"});
  b.add({"aten._foreach_maximum.Scalar", "aten._foreach_maximum.List",
         "aten._foreach_maximum.ScalarList"},
        kFloats, foreach (b.lowering("aten.maximum.default")));
  b.add({"aten._foreach_clamp_min.Scalar", "aten._foreach_clamp_min.List",
         "aten._foreach_clamp_min.ScalarList"},
        kFloats, foreach (b.lowering("aten.clamp_min.default")));
  b.add({"aten._foreach_lerp.List", "aten._foreach_lerp.Scalar", "aten._foreach_lerp.ScalarList"},
        kFloats, foreach (lerp_entry));
  b.add({"aten._foreach_addcmul.Scalar", "aten._foreach_addcmul.ScalarList"}, kFloats,
        foreach (addcmul));
  b.add({"aten._foreach_addcmul.Tensor"}, kFloats, foreach (addcmul, {}, true));
  b.add({"aten._foreach_addcdiv.Scalar", "aten._foreach_addcdiv.ScalarList"}, kFloats,
        foreach (addcdiv));
  b.add({"aten._foreach_addcdiv.Tensor"}, kFloats, foreach (addcdiv, {}, true));
  b.add({"aten._foreach_copy.default"}, kFloats, foreach (b.lowering("aten.copy.default")));
  for (const char* name : {"neg", "sqrt", "reciprocal", "abs", "exp", "sign"}) {
    b.add({std::string("aten._foreach_") + name + ".default"}, kFloats,
          foreach (b.lowering(std::string("aten.") + name + ".default")));
  }
}

}  // namespace lz::aten
