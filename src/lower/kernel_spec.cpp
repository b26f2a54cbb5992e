// KernelSpec::structure(): the hash a compiled kernel is keyed by (kernel_spec.h says what it
// covers: everything code generation reads, nothing a shape changes).
#include <cstring>

#include "lower/kernel_spec.h"

namespace lz::lower {

Hash128 KernelSpec::structure() const {
  Hasher h;
  h.add_str("lz-kernel-v2");
  h.add(static_cast<uint8_t>(scheme));
  h.add(rank);
  h.add(nred);
  h.add(reduce_op);
  h.add(out_dtype);
  h.add(nscalars);
  h.add<uint64_t>(exprs.size());
  for (const KExpr& e : exprs) {
    h.add(e.op).add(e.dtype).add(e.a).add(e.b).add(e.c).add(e.input);
    uint64_t bits;
    std::memcpy(&bits, &e.scalar, sizeof(bits));
    h.add(bits);
  }
  h.add<uint64_t>(inputs.size());
  for (const KInput& in : inputs) {
    h.add(in.dtype).add(in.is_index).add<uint64_t>(in.dyn.size());
    for (int32_t e : in.dyn) h.add(e);
  }
  h.add<uint64_t>(inner.size());
  for (StrideClass c : inner) h.add(c);
  h.add<uint64_t>(out_dyn.size());
  for (int32_t e : out_dyn) h.add(e);
  h.add(nchecks);
  if (!row_outs.empty()) {  // only then: the kernels without keep their names (and disk caches)
    h.add<uint64_t>(row_outs.size());
    for (const KRowOut& r : row_outs) h.add(r.expr).add(r.dtype);
  }
  return h.digest();
}

}  // namespace lz::lower
