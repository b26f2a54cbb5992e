// Table entries: random ops (aten/table.h): dropout, bernoulli, rand_like.
//
// Lazuli cannot reproduce PyTorch's random stream: its draws come from its own counter-based
// generator (each element a hash of a key and the element's index). So a mask never equals
// eager's; what holds is its distribution, the scaling, and that the backward applies the
// forward's mask (aot_autograd saves native_dropout's mask for the backward). The draws come from
// Call::uniform: a key the front end passes (the torch.compile bridge: an input of the program,
// fresh each run) or the device's RNG.
#include "aten/entries.h"

namespace lz::aten {
namespace {

std::optional<std::string> probability_refused(double p) {
  if (!(p >= 0.0 && p <= 1.0)) return "p=" + Arg(p).describe() + " outside [0, 1]";
  return std::nullopt;
}

std::optional<std::string> dropout_when(const Args& a) {
  if (a[0].tensor_numel() == 0) return "an empty input (eager's mask then has the input's dtype)";
  return probability_refused(a[1].to_double());
}

Arg native_dropout(const Args& a, Call& call) {
  const Tensor& x = a[0].tensor();
  double p = a[1].to_double();
  if (!a[2].is_none() && !a[2].to_bool())
    return std::vector<Arg>{x.clone(), ones(x.shape(), DType::Bool)};
  // Eager's: keep with probability 1 - p, scale by 1 / (1 - p) (0 when p is 1).
  Tensor keep = lt(call.uniform(x.shape(), x.dtype()), 1.0 - p);
  double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  return std::vector<Arg>{mul(mul(x, keep.to(x.dtype())), scale), keep};
}

std::optional<std::string> bernoulli_when(const Args& a) {
  if (!a[2].is_none()) return "an explicit generator";
  return probability_refused(a[1].to_double());
}

Arg bernoulli_p(const Args& a, Call& call) {
  const Tensor& x = a[0].tensor();
  Tensor draw =
      call.uniform(x.shape(), x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
  return lt(draw, a[1].to_double()).to(x.dtype());
}

std::optional<std::string> rand_like_when(const Args& a) {
  if (auto r = dtype_arg_refused(a[1])) return r;
  DType dt = dtype_or(a[1], dtype_of(a[0]));
  if (!is_floating(dt)) return "dtype " + std::string(dtype_name(dt)) + " not supported";
  return std::nullopt;
}

}  // namespace

void add_random(TableBuilder& b) {
  b.add({"aten.native_dropout.default"}, kFloats, native_dropout,
        {.when = dropout_when,
         .note = "(output, bool mask); Lazuli's random stream, not eager's (docs/torch.md)",
         .flags = kRandom});
  b.add({"aten.bernoulli.p"}, kAll, bernoulli_p,
        {.when = bernoulli_when,
         .note = "1 with probability p, in the input's dtype; Lazuli's random stream",
         .flags = kRandom});
  b.add({"aten.rand_like.default"}, kAll,
        [](const Args& a, Call& call) -> Arg {
          const Tensor& x = a[0].tensor();
          return call.uniform(x.shape(), dtype_or(a[1], x.dtype()));
        },
        {.when = rand_like_when, .note = "U[0, 1); Lazuli's random stream", .flags = kRandom});
}

}  // namespace lz::aten
