// The first program to read: record a few ops, look at the pending graph, sync, read values,
// and see what the runtime did.
#include <iostream>

#include "lazuli/lazuli.h"

int main() {
  lz::Tensor x = lz::tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  lz::Tensor w = lz::ones({3, 2});
  lz::Tensor b = lz::full({2}, 0.5f);

  // Nothing runs yet: these record IR.
  lz::Tensor y = lz::relu(lz::matmul(x, w) + b);
  lz::Tensor s = y.sum();
  std::cout << "state of y before sync: " << lz::debug::tensor_state(y) << "\n\n";
  std::cout << "pending graph:\n" << lz::debug::dump_graph({y, s}) << "\n";

  lz::sync(/*wait=*/true);  // the step barrier: one program for y and s
  std::cout << "state of y after sync: " << lz::debug::tensor_state(y) << "\n";
  std::cout << "y = " << y.to_string() << "\n";
  std::cout << "sum = " << s.item<float>() << "\n\n";

  // A second step with new data of the same shape hits the compile cache.
  for (int step = 0; step < 3; ++step) {
    x += 1.0f;
    y = lz::relu(lz::matmul(x, w) + b);
    s = y.sum();
    lz::sync();
  }
  std::cout << "after 3 more steps: sum = " << s.item<float>() << "\n\n";
  std::cout << "metrics:\n" << lz::debug::short_metrics_report();
  return 0;
}
