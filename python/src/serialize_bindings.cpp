// Safetensors files for lz.save / lz.load (python/lazuli/serialization.py, which maps nested
// Python structures onto named tensors): the format and its checks are lz::save / lz::load.
#include "bindings.h"
#include "lazuli/serialize.h"

namespace lzpy {

void bind_serialize(py::module_& m) {
  m.def(
      "_save_safetensors",
      [](const std::vector<std::pair<std::string, lz::Tensor>>& tensors, const std::string& path,
         const std::map<std::string, std::string>& metadata) {
        // The GIL is released while values are computed and bytes written; a compile stopped by
        // Ctrl-C is resumed or raised by resume_after_interrupt.
        resume_after_interrupt([&] {
          py::gil_scoped_release release;
          lz::save(tensors, path, metadata);
        });
      },
      py::arg("tensors"), py::arg("path"), py::arg("metadata"));
  m.def(
      "_load_safetensors",
      [](const std::string& path) {
        lz::LoadedTensors loaded;
        {
          py::gil_scoped_release release;
          loaded = lz::load(path);
        }
        return py::make_tuple(loaded.tensors, loaded.metadata);
      },
      py::arg("path"));
  m.def(
      "_load_safetensors_metadata",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return lz::load_metadata(path);
      },
      py::arg("path"));
}

}  // namespace lzpy
