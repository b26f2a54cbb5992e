// The torch glue: what the bindings (_C, which never includes PyTorch's headers) need to read
// torch tensors and make them in C++, handed over as a table of function pointers in a capsule by
// _torch_glue.so (python/glue/), the one small module built against PyTorch's headers for it.
//
// Why a table rather than torch's headers in _C: _C must build and import without PyTorch (the
// core library and its tests keep working without torch), and torch's pybind11 and Lazuli's must
// never meet in one module. Why not _device.so: loading it registers the lazy device's kernels,
// which a torch.compile user never asked for. The torch.compile bridge's replay reads every
// argument's address, dtype, sizes and layout and makes a torch tensor over every output, once
// per partition call: through Python attributes and numpy that was most of the bridge's own cost
// per call (bench/RESULTS.md 28).
//
// Plain C types only: the two sides are separate shared objects built against different headers.
#pragma once

#include <Python.h>

#include <cstdint>

#define LAZULI_TORCH_GLUE_VERSION 1
#define LAZULI_TORCH_GLUE_MAX_DIMS 16

// How a torch tensor crosses into a Lazuli program (python/lazuli/torch/_boundary.py layout_of):
enum LazuliTorchLayout {
  LAZULI_LAYOUT_CONTIGUOUS = 0,  // shared as it is
  LAZULI_LAYOUT_PERMUTED = 1,    // a permutation of a dense block: shared as that block (perm)
  LAZULI_LAYOUT_OTHER = 2,       // anything else (strided, expanded, overlapping): copied
};

struct LazuliTensorFacts {
  void* data;    // the address of element 0
  int64_t ndim;  // at most LAZULI_TORCH_GLUE_MAX_DIMS (else tensor_facts returns -1)
  int64_t sizes[LAZULI_TORCH_GLUE_MAX_DIMS];
  int scalar_type;                           // torch's ScalarType code (part of a signature)
  int lazuli_dtype;                          // lz::DType's code, -1 where Lazuli has no such dtype
  int layout;                                // a LazuliTorchLayout
  int64_t perm[LAZULI_TORCH_GLUE_MAX_DIMS];  // LAZULI_LAYOUT_PERMUTED: t.permute(perm) is dense
};

struct LazuliTorchGlue {
  int version;  // LAZULI_TORCH_GLUE_VERSION
  // 1: `o` is a strided CPU torch tensor and *out holds its facts; 0: `o` is not a torch tensor;
  // -1: it is one a program cannot read in place (another device, sparse, over 16 dims).
  int (*tensor_facts)(PyObject* o, LazuliTensorFacts* out);
  // A new reference to a CPU torch tensor of lz dtype `dtype` and `sizes` over `data` (dense),
  // which calls release(ctx) once torch drops the memory (on any thread, maybe without the GIL);
  // NULL with a Python error set (then release(ctx) has been called).
  PyObject* (*tensor_over)(void* data, int dtype, int64_t ndim, const int64_t* sizes,
                           void (*release)(void*), void* ctx);
  // A new reference to `o`.contiguous() (a torch tensor), for an input of LAZULI_LAYOUT_OTHER;
  // NULL with a Python error set.
  PyObject* (*contiguous)(PyObject* o);
};
