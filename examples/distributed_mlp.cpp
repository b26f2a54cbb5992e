// Data-parallel training from C++ (docs/distributed.md): run with `mpirun -n 2 distributed_mlp`.
// Each rank trains the same MLP on its share of every batch; lz::distributed::average_gradients
// makes backward average each gradient over the ranks inside the step's program (what
// lazuli.nn.parallel.DistributedDataParallel does in Python). At the end every rank compares its
// parameters with a one-process run over the whole batches and exits non-zero if they differ.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <lazuli/lazuli.h>

namespace {

constexpr int64_t kFeatures = 16, kClasses = 4, kBatch = 32, kSteps = 8;

std::vector<lz::Tensor> train(lz::nn::MLP& model, const std::vector<float>& x, const std::vector<int64_t>& y,
                              int64_t begin, int64_t rows) {
  std::vector<lz::Tensor> params = model.parameters();
  for (int64_t step = 0; step < kSteps; ++step) {
    const int64_t at = step * kBatch + begin;
    lz::Tensor xb = lz::from_data(&x[at * kFeatures], lz::kFloat32, {rows, kFeatures});
    lz::Tensor yb = lz::from_data(&y[at], lz::kInt64, {rows});
    lz::nn::zero_grad(params);
    lz::backward(lz::nn::cross_entropy(model.forward(xb), yb));
    lz::nn::sgd_step(params, 0.1);
    lz::sync();
  }
  return params;
}

}  // namespace

int main() {
  lz::distributed::init_process_group("mpi");
  const int rank = lz::distributed::get_rank(), world = lz::distributed::get_world_size();
  if (kBatch % world != 0) {
    std::fprintf(stderr, "run with a number of ranks that divides %lld\n", static_cast<long long>(kBatch));
    return 2;
  }
  std::mt19937 gen(0);  // the same data on every rank
  std::normal_distribution<float> normal;
  std::vector<float> x(kSteps * kBatch * kFeatures);
  std::vector<int64_t> y(kSteps * kBatch);
  for (float& v : x) v = normal(gen);
  for (int64_t& v : y) v = static_cast<int64_t>(gen() % kClasses);

  // Each rank initializes differently; rank 0's parameters are broadcast to all.
  lz::manual_seed(100 + static_cast<uint64_t>(rank));
  lz::nn::MLP model({kFeatures, 32, kClasses});
  {
    lz::NoGradGuard no_grad;
    for (lz::Tensor& p : model.parameters()) {
      lz::distributed::broadcast(p, 0);
      lz::distributed::average_gradients(p);
    }
  }
  const int64_t share = kBatch / world;
  std::vector<lz::Tensor> got = train(model, x, y, rank * share, share);

  lz::manual_seed(100);  // rank 0's initialization, trained in this process on whole batches
  lz::nn::MLP single({kFeatures, 32, kClasses});
  std::vector<lz::Tensor> want = train(single, x, y, 0, kBatch);
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<float> a = got[i].to_vector<float>(), b = want[i].to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) diff = std::max(diff, static_cast<double>(std::fabs(a[j] - b[j])));
  }
  std::printf("rank %d of %d: %lld steps; largest parameter difference from one process over the whole "
              "batches: %.2g\n", rank, world, static_cast<long long>(kSteps), diff);
  lz::distributed::barrier();
  return diff < 1e-5 ? 0 : 1;
}
