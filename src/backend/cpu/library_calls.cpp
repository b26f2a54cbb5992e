// Matrix products as library calls for the cpu backend.
//
// The library was chosen by measurement on this machine kind (bench/RESULTS.md, "BLAS choice"):
// oneDNN's sgemm picks its AVX-512 kernels itself, about 2x OpenBLAS, which the environment pins
// to its AVX2 (Haswell) kernels, and about 5x Debian's BLIS.
//
// Threads: oneDNN threads with OpenMP, whose idle threads spin before sleeping; next to the
// runtime pool that made a training step 4x slower (120 ms against 31 ms with the spinning
// turned off). So oneDNN never runs its own team here: each product is cut into row (or column)
// blocks of C that the runtime pool's threads compute with single-threaded sgemm calls, and
// every thread that calls sgemm runs with an OpenMP team of one.
#include "backend/cpu/library_calls.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/interp/kernels.h"
#include "core/config.h"
#include "core/thread_pool.h"

namespace lz::cpu {
namespace {

// C[m, n] = op(A) op(B) (+ the row `bias` on every row, + the dense [m, n] `residual`, where
// given), cut into blocks of rows (or of columns, when m is small) that the runtime pool
// computes, each with a single-threaded sgemm. With addends, each block of C is first filled
// with them and sgemm adds into it (beta = 1), as addmm does: the block is in cache when sgemm
// reads it.
bool gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, const float* bias = nullptr,
          const float* residual = nullptr) {
  std::atomic<bool> ok{true};
  const bool sum = bias != nullptr || residual != nullptr;
  const float beta = sum ? 1.0f : 0.0f;
  auto run = [&](int64_t i0, int64_t i1, bool rows) {
    single_threaded_onednn();
    if (sum) {
      const int64_t j0 = rows ? 0 : i0, j1 = rows ? n : i1;
      for (int64_t r = rows ? i0 : 0; r < (rows ? i1 : m); ++r) {
        float* row = c + r * n;
        if (residual == nullptr) {
          std::copy(bias + j0, bias + j1, row + j0);
        } else if (bias == nullptr) {
          std::copy(residual + r * n + j0, residual + r * n + j1, row + j0);
        } else {
          for (int64_t j = j0; j < j1; ++j) row[j] = residual[r * n + j] + bias[j];
        }
      }
      if (k == 0) return;
    }
    dnnl_status_t st;
    if (rows) {
      st = dnnl_sgemm(ta, tb, i1 - i0, n, k, 1.0f, ta == 'N' ? a + i0 * lda : a + i0, lda, b, ldb,
                      beta, c + i0 * n, n);
    } else {
      st = dnnl_sgemm(ta, tb, m, i1 - i0, k, 1.0f, a, lda, tb == 'N' ? b + i0 : b + i0 * ldb, ldb,
                      beta, c + i0, n);
    }
    if (st != dnnl_success) ok = false;
  };
  const GemmCut cut = gemm_cut(m, n, k);
  runtime_pool().parallel_for(cut.extent, cut.grain, 16,
                              [&](int64_t i0, int64_t i1) { run(i0, i1, cut.rows); });
  return ok;
}

}  // namespace

GemmCut gemm_cut(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMinBlock = 32;
  // Every block of rows packs all of B, every block of columns all of A: a short wide C is cut
  // into columns (34 x 768 in blocks of 17 rows took 2x as long as in blocks of 384 columns).
  const bool rows = m >= n || m >= 128;
  // One row of C costs n * k multiply-adds, one column m * k.
  const int64_t per_unit = std::max<int64_t>(1, (rows ? n : m) * k);
  return {rows, rows ? m : n,
          std::max(kMinBlock, (kMinBlockMultiplyAdds + per_unit - 1) / per_unit)};
}

void single_threaded_onednn() {
  // A read of this thread's setting: cheap, and right again after a KeepOpenmpThreads scope.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // this thread's team: itself
}

KeepOpenmpThreads::KeepOpenmpThreads() : threads_(omp_get_max_threads()) {}

KeepOpenmpThreads::~KeepOpenmpThreads() {
  if (omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
}

int64_t batch_offset(int64_t b, const Shape& batch, const Shape& shape, int64_t matrix_size) {
  int64_t off = 0, stride = matrix_size;
  const int64_t rank = static_cast<int64_t>(shape.size()) - 2;
  const int64_t lead = static_cast<int64_t>(batch.size()) - rank;
  for (int64_t i = static_cast<int64_t>(batch.size()) - 1; i >= 0; --i) {
    int64_t idx = b % batch[i];
    b /= batch[i];
    int64_t d = i - lead;
    if (d < 0) continue;
    if (shape[d] != 1) off += idx * stride;
    stride *= shape[d];
  }
  return off;
}

std::string library_id() {
  const dnnl_version_t* v = dnnl_version();
  return "onednn-sgemm-" + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

bool sgemm_2d(const interp::ConstArray& a, bool ta, const interp::ConstArray& b, bool tb,
              interp::MutArray out, const interp::ConstArray* bias,
              const interp::ConstArray* residual) {
  // a is [m, k] (stored [k, m] when ta), b is [k, n] (stored [n, k] when tb).
  const Shape& o = *out.shape;
  const int64_t m = o[0], n = o[1];
  const int64_t k = ta ? (*a.shape)[0] : (*a.shape)[1];
  auto* c = static_cast<float*>(out.data);
  if (m == 0 || n == 0) return true;
  const auto* row = bias != nullptr ? static_cast<const float*>(bias->data) : nullptr;
  const auto* res = residual != nullptr ? static_cast<const float*>(residual->data) : nullptr;
  if (k == 0 && row == nullptr && res == nullptr) {
    std::fill(c, c + m * n, 0.0f);
    return true;
  }
  const int64_t lda = (*a.shape)[1], ldb = (*b.shape)[1];
  return gemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, static_cast<const float*>(a.data), lda,
              static_cast<const float*>(b.data), ldb, c, row, res);
}

bool library_call(ir::OpKind op, const ir::Attrs& attrs, const std::vector<interp::ConstArray>& in,
                  const std::vector<interp::MutArray>& outs) {
  const interp::MutArray& out = outs[0];
  if (ir::op_info(op).cls == ir::OpClass::Conv) {
    return conv_library_call(op, std::get<ir::ConvAttrs>(attrs), in, out);
  }
  if (ir::op_info(op).cls == ir::OpClass::Pool) {
    return pool_library_call(op, std::get<ir::PoolAttrs>(attrs), in, outs);
  }
  if (op != ir::OpKind::MatMul) return false;
  if (out.dtype == DType::BFloat16) {
    // Where oneDNN has no bf16 matmul for this processor (Debian's oneDNN on an AVX2 machine
    // without AVX-512): the same arithmetic through the float32 library call.
    return dnnl_matmul(in[0], in[1], out) ||
           interp::matmul_through_float32(
               in[0], in[1], out,
               [&](const interp::ConstArray& a, const interp::ConstArray& b, interp::MutArray o) {
                 return library_call(op, attrs, {a, b}, {o});
               });
  }
  if (out.dtype != DType::Float32) return false;
  if (out.shape->size() > 2 && dnnl_matmul(in[0], in[1], out)) return true;
  const Shape& a = *in[0].shape;
  const Shape& b = *in[1].shape;
  const Shape& o = *out.shape;
  const int64_t m = a[a.size() - 2], k = a[a.size() - 1], n = b[b.size() - 1];
  if (m == 0 || n == 0) return true;
  Shape batch(o.begin(), o.end() - 2);
  int64_t batches = numel(batch);
  auto* c = static_cast<float*>(out.data);
  if (k == 0) {
    std::fill(c, c + batches * m * n, 0.0f);
    return true;
  }
  const auto* pa = static_cast<const float*>(in[0].data);
  const auto* pb = static_cast<const float*>(in[1].data);
  for (int64_t i = 0; i < batches; ++i) {
    if (!gemm('N', 'N', m, n, k, pa + batch_offset(i, batch, a, m * k), k,
              pb + batch_offset(i, batch, b, k * n), n, c + i * m * n)) {
      return false;  // the reference kernel computes it instead
    }
  }
  return true;
}

}  // namespace lz::cpu
