// Scans: cumsum and cumprod, one primitive each (CumSum, CumProd with ScanAttrs). As PyTorch's:
// bool and integer inputs give int64 unless a dtype is asked for, and `dtype` casts the input
// before the scan (so the running value has that type).
#include "ops/frontend.h"

namespace lz {
namespace {

Tensor scan(const char* name, ir::OpKind op, const Tensor& x, int64_t dim,
            std::optional<DType> dtype) {
  ir::Value v = frontend::value_of(x, name);
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), name);
  DType out = dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : DType::Int64);
  if (out == DType::Bool) {
    throw TypeError(frontend::desc(name, x) + ": dtype bool is not supported for a scan");
  }
  return frontend::wrap(frontend::node(op, {frontend::cast(v, out)}, ir::ScanAttrs{d, false}));
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan("cumsum", ir::OpKind::CumSum, x, dim, dtype);
}

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan("cumprod", ir::OpKind::CumProd, x, dim, dtype);
}

}  // namespace lz
