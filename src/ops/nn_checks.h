// Argument checks shared by the lz::nn composites (nn_functional.cpp, nn_loss.cpp), defined in
// nn_functional.cpp.
#pragma once
#include <string>

#include "lazuli/tensor.h"

namespace lz::nn::detail {

// Throws ValueError "op: what is an undefined tensor" for an undefined t.
void check_defined(const char* op, const Tensor& t, const char* what);
// v as %g prints it ("1.5", "2"), as Python prints a number in its messages.
std::string number_str(double v);

}  // namespace lz::nn::detail
