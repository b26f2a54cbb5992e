// Matrix products as oneDNN matmul primitives, for the cpu backend: every bfloat16 product, and
// float32 products with a batch (2-D float32 products go to sgemm, library_calls.cpp, which also
// takes transposed operands).
//
// bfloat16: oneDNN multiplies with the CPU's bf16 dot-product instructions (AVX512_BF16 here) or
// emulates them, sums in float32 and rounds each result to bf16 once: PyTorch's own CPU path.
// The operands are dense row-major [..., m, k] and [..., k, n] with broadcast batch dims (the
// plan materializes them so); the output is dense [..., m, n].
//
// Threads: as library_calls.cpp, oneDNN never runs its own OpenMP team. When each operand has the
// whole batch or a single matrix, the batch is cut into one contiguous range per thread, each range
// one primitive over its stack (attention's per-head products: one call per thread instead of one
// per head); a stack of less than kMinBlockMultiplyAdds per thread is one primitive. Otherwise
// tasks of one batch entry and a block of rows run on the runtime pool. Either way a product
// needs at most two primitive shapes, cached per thread.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "backend/cpu/library_calls.h"
#include "core/thread_pool.h"

namespace lz::cpu {
namespace {

using dnnl::memory;

struct ThreadState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // Keyed by dtype and geometry; null where oneDNN has no implementation.
  std::unordered_map<std::string, std::shared_ptr<dnnl::matmul>> cache;
};

ThreadState& thread_state() {
  single_threaded_onednn();
  thread_local ThreadState s;
  return s;
}

// A stack of `batch` row-major rows x cols matrices (batch 1: one matrix, broadcast over the
// other operand's batch).
memory::desc matrices(memory::data_type dt, int64_t batch, int64_t rows, int64_t cols) {
  return memory::desc({batch, rows, cols}, dt, memory::format_tag::abc);
}

// The product of a [ba, m, k] and b [bb, k, n] stacks into [max(ba, bb), m, n].
struct Geometry {
  int64_t ba, bb, m, k, n;
  int64_t batch() const { return std::max(ba, bb); }
};

std::shared_ptr<dnnl::matmul> primitive_for(ThreadState& ts, memory::data_type dt, const Geometry& g) {
  std::string key = std::to_string(static_cast<int>(dt));
  for (int64_t v : {g.ba, g.bb, g.m, g.k, g.n}) key += "," + std::to_string(v);
  auto it = ts.cache.find(key);
  if (it != ts.cache.end()) return it->second;
  if (ts.cache.size() > 256) ts.cache.clear();
  std::shared_ptr<dnnl::matmul> p;
  try {
    dnnl::matmul::desc d(matrices(dt, g.ba, g.m, g.k), matrices(dt, g.bb, g.k, g.n),
                         matrices(dt, g.batch(), g.m, g.n));
    p = std::make_shared<dnnl::matmul>(dnnl::matmul::primitive_desc(d, ts.engine));
  } catch (const dnnl::error&) {
    p = nullptr;  // the reference kernel computes it instead
  }
  ts.cache[key] = p;
  return p;
}

bool run(ThreadState& ts, memory::data_type dt, const Geometry& g, const void* a, const void* b,
         void* c) {
  std::shared_ptr<dnnl::matmul> p = primitive_for(ts, dt, g);
  if (!p) return false;
  p->execute(ts.stream,
             {{DNNL_ARG_SRC, memory(matrices(dt, g.ba, g.m, g.k), ts.engine, const_cast<void*>(a))},
              {DNNL_ARG_WEIGHTS, memory(matrices(dt, g.bb, g.k, g.n), ts.engine, const_cast<void*>(b))},
              {DNNL_ARG_DST, memory(matrices(dt, g.batch(), g.m, g.n), ts.engine, c)}});
  ts.stream.wait();
  return true;
}

}  // namespace

bool dnnl_matmul(const interp::ConstArray& a, const interp::ConstArray& b, interp::MutArray out) {
  if (out.dtype != DType::BFloat16 && out.dtype != DType::Float32) return false;
  const memory::data_type dt =
      out.dtype == DType::BFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  const int64_t esize = static_cast<int64_t>(dtype_size(out.dtype));
  const Shape& sa = *a.shape;
  const Shape& sb = *b.shape;
  const Shape& so = *out.shape;
  const int64_t m = sa[sa.size() - 2], k = sa[sa.size() - 1], n = sb[sb.size() - 1];
  const Shape batch(so.begin(), so.end() - 2);
  const int64_t batches = numel(batch);
  auto* c = static_cast<char*>(out.data);
  if (m == 0 || n == 0 || batches == 0) return true;
  if (k == 0) {
    std::memset(c, 0, static_cast<size_t>(batches * m * n * esize));  // +0 in both dtypes
    return true;
  }
  const auto* pa = static_cast<const char*>(a.data);
  const auto* pb = static_cast<const char*>(b.data);
  const int64_t threads = runtime_pool().num_threads();
  const int64_t na = numel(Shape(sa.begin(), sa.end() - 2)), nb = numel(Shape(sb.begin(), sb.end() - 2));
  std::atomic<bool> ok{true};
  // Each operand either has the whole batch or one matrix (shared by every entry): the batch is
  // cut into one contiguous range per thread, each one primitive over its stack of products.
  // A stack too small to be worth two blocks (attention's products in a tiny model) is one
  // primitive on this thread; otherwise each thread's range has at least kMinBlockMultiplyAdds.
  const int64_t per_entry = std::max<int64_t>(1, m * n * k);
  const bool small = batches * per_entry < 2 * kMinBlockMultiplyAdds;
  const int64_t grain = small ? batches
                              : std::max((batches + threads - 1) / threads,
                                         (kMinBlockMultiplyAdds + per_entry - 1) / per_entry);
  if ((batches >= threads || small) && (na == batches || na == 1) && (nb == batches || nb == 1)) {
    runtime_pool().parallel_for(batches, grain, 1, [&](int64_t b0, int64_t b1) {
      Geometry g{na == 1 ? 1 : b1 - b0, nb == 1 ? 1 : b1 - b0, m, k, n};
      const char* da = pa + (na == 1 ? 0 : b0 * m * k * esize);
      const char* db = pb + (nb == 1 ? 0 : b0 * k * n * esize);
      if (!run(thread_state(), dt, g, da, db, c + b0 * m * n * esize)) ok = false;
    });
    return ok;
  }
  // Otherwise tasks of one batch entry and a block of rows (at least kMinRows of them), so few
  // large products still use every thread.
  constexpr int64_t kMinRows = 64;
  const int64_t per_batch = std::max<int64_t>(1, (threads + batches - 1) / batches);
  const int64_t rows = std::min(m, std::max(kMinRows, (m + per_batch - 1) / per_batch));
  const int64_t blocks = (m + rows - 1) / rows;
  runtime_pool().parallel_for(batches * blocks, 1, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1 && ok; ++t) {
      const int64_t bi = t / blocks, r0 = (t % blocks) * rows, r = std::min(rows, m - r0);
      const char* da = pa + (batch_offset(bi, batch, sa, m * k) + r0 * k) * esize;
      const char* db = pb + batch_offset(bi, batch, sb, k * n) * esize;
      if (!run(thread_state(), dt, Geometry{1, 1, r, k, n}, da, db, c + (bi * m * n + r0 * n) * esize)) {
        ok = false;
      }
    }
  });
  return ok;
}

}  // namespace lz::cpu
