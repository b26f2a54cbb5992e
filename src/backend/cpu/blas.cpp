// Matrix products as library calls for the cpu backend.
//
// The library was chosen by measurement on this machine kind (bench/RESULTS.md, "BLAS choice"):
// oneDNN's sgemm picks its AVX-512 kernels itself, about 2x OpenBLAS, which the environment pins
// to its AVX2 (Haswell) kernels, and about 5x Debian's BLIS. oneDNN threads with OpenMP: its team
// is limited to LAZULI_NUM_THREADS. Idle OpenMP threads spin briefly before sleeping (libgomp's
// default); MACHINE.md saw that hurt a neighbouring BLAS, so set OMP_WAIT_POLICY=PASSIVE in the
// environment when other threaded libraries share the process (it is read at process start).
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <cstdlib>
#include <string>

#include "backend/interp/kernels.h"
#include "core/config.h"

namespace lz::cpu {
namespace {

// Offset, in elements, of batch `b` of an operand whose batch dims broadcast to `batch`.
int64_t batch_offset(int64_t b, const Shape& batch, const Shape& shape, int64_t matrix) {
  int64_t off = 0, stride = matrix;
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

void configure_threads_once() {
  // Runs on the executor thread, which makes every call: the setting applies to its OpenMP team.
  thread_local bool done = false;
  if (done) return;
  done = true;
  omp_set_num_threads(config().num_threads);
}

}  // namespace

std::string library_id() {
  const dnnl_version_t* v = dnnl_version();
  return "onednn-sgemm-" + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

bool sgemm_2d(const interp::ConstArray& a, bool ta, const interp::ConstArray& b, bool tb,
              interp::MutArray out) {
  // a is [m, k] (stored [k, m] when ta), b is [k, n] (stored [n, k] when tb).
  const Shape& o = *out.shape;
  const int64_t m = o[0], n = o[1];
  const int64_t k = ta ? (*a.shape)[0] : (*a.shape)[1];
  auto* c = static_cast<float*>(out.data);
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return true;
  }
  configure_threads_once();
  const int64_t lda = (*a.shape)[1], ldb = (*b.shape)[1];
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, static_cast<const float*>(a.data), lda,
                    static_cast<const float*>(b.data), ldb, 0.0f, c, n) == dnnl_success;
}

bool library_call(ir::OpKind op, const ir::Attrs& attrs, const std::vector<interp::ConstArray>& in,
                  interp::MutArray out) {
  if (op != ir::OpKind::MatMul || out.dtype != DType::Float32) return false;
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
  configure_threads_once();
  const auto* pa = static_cast<const float*>(in[0].data);
  const auto* pb = static_cast<const float*>(in[1].data);
  for (int64_t i = 0; i < batches; ++i) {
    dnnl_status_t st = dnnl_sgemm('N', 'N', m, n, k, 1.0f, pa + batch_offset(i, batch, a, m * k), k,
                                  pb + batch_offset(i, batch, b, k * n), n, 0.0f, c + i * m * n, n);
    if (st != dnnl_success) return false;  // the reference kernel computes it instead
  }
  return true;
}

}  // namespace lz::cpu
