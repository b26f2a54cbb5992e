// A program outside Lazuli's source tree, built against an installed Lazuli (find_package or
// pkg-config) or a checkout (add_subdirectory, FetchContent). Its one kernel is compiled by the
// cpu backend, whose first compile dlopens liblazuli_jit.so from liblazuli.so's directory: the
// run proves the library found its code generator, and prints where both were loaded from.
#include <lazuli/lazuli.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

// The path the dynamic loader mapped `name` (or a versioned `name`.x.y.z) from, read from
// /proc/self/maps.
std::string loaded_from(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t path = line.find('/');
    if (path == std::string::npos) continue;
    const std::string file = line.substr(line.rfind('/') + 1);
    if (file == name || file.rfind(name + ".", 0) == 0) return line.substr(path);
  }
  return "(not loaded)";
}

int main() {
  lz::Tensor x = lz::tensor<float>({1, -2, 3, -4}, {2, 2});
  lz::Tensor y = lz::relu(x * 2.0f + 1.0f);  // recorded, then compiled into one fused kernel
  std::vector<float> got = y.to_vector<float>();
  if (got != std::vector<float>{3, 0, 7, 0}) {
    std::cerr << "wrong values: " << y.to_string() << "\n";
    return 1;
  }
  if (lz::backend() != "cpu" || lz::debug::counter_value("KernelCompile") == 0) {
    std::cerr << "no kernel was compiled (backend " << lz::backend() << ")\n";
    return 1;
  }
  std::cout << "liblazuli.so: " << loaded_from("liblazuli.so") << "\n"
            << "liblazuli_jit.so: " << loaded_from("liblazuli_jit.so") << "\n"
            << "consumer ok: " << y.to_string() << "\n";
  return 0;
}
