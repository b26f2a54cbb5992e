// Where Lazuli's plugin libraries are: beside liblazuli.so (or the Python package's copy of it).
// The code generator (liblazuli_jit.so) and the process groups' engines (liblazuli_mpi.so) are
// loaded with dlopen from there.
#pragma once
#include <string>

namespace lz {

// The path of `file` in the directory of the object holding this library's code; `file` alone
// when that directory cannot be found (dlopen then searches the usual places).
std::string sibling_library_path(const std::string& file);

}  // namespace lz
