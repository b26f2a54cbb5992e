"""Lazuli: a lazy tensor runtime. ``import lazuli as lz``.

Ops record a graph; ``lz.sync()`` (the step barrier) compiles it once and runs it; reading a
value (``item``, ``numpy``, ``print``) runs what it needs. See docs/getting-started.md.
"""
import os as _os

from . import _C
from ._C import (  # noqa: F401  (the public names of API.md)
    Tensor, Error, ExecutionError, OutOfMemoryError,
    from_numpy, zeros, ones, full, zeros_like, ones_like, full_like, arange, eye, rand, randn,
    randint, manual_seed, constant,
    where, clamp,
    sum, mean, prod, amax, amin, max, min, argmax, argmin, var, std, logsumexp, all, any,
    sort, argsort, msort, topk,
    matmul, reshape, flatten, squeeze, unsqueeze, transpose, permute, broadcast_to, cat, concat,
    stack, split, chunk, index_select, gather, scatter_add, result_type,
    sync, sync_tensors, wait, add_step_closure, device_count, backend,
)
# The elementwise functions (exp, ..., add, ..., bitwise_xor, neg, pow, logical_not): one list in
# C++, include/lazuli/elementwise.def, names them for every front door.
globals().update({_name: getattr(_C, _name) for _name in _C._elementwise_names})
from ._tensor import tensor  # noqa: F401,E402
from ._C import index_put, index_put_  # noqa: F401
from ._runtime import compile, eager, eager_mode, UnexpectedExecutionError, TooManyGraphsError  # noqa: F401
from ._capture import capture  # noqa: F401
from . import debug  # noqa: F401
from . import return_types  # noqa: F401
from .serialization import save, load  # noqa: F401  (also pickle/deepcopy of tensors)

# Raised from the extension, but a public name of the package: tracebacks and repr say
# lazuli.ExecutionError (lazuli._C.ExecutionError is the same class).
ExecutionError.__module__ = "lazuli"

dtype = _C.dtype
_dtype_names = {int(v): k for k, v in dtype.__members__.items()}
dtype.__repr__ = dtype.__str__ = lambda self: f"lazuli.{_dtype_names[int(self)]}"
float32 = _C.dtype.float32
float64 = _C.dtype.float64
float16 = _C.dtype.float16
bfloat16 = _C.dtype.bfloat16
int32 = _C.dtype.int32
int64 = _C.dtype.int64
bool = _C.dtype.bool  # noqa: A001  (PyTorch's spelling: lz.bool)
float = float32  # noqa: A001
double = float64
half = float16
long = int64

__version__ = _C.__version__  # CMakeLists.txt's project(VERSION), the one place it is written

# Programs still running at exit finish before the interpreter and the libraries they use go away.
import atexit as _atexit  # noqa: E402
_atexit.register(_C._drain)

# Frames inside this package are the library's; the first frame outside is the user's call site.
_C._set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

# Autograd, nn and optim.
from .autograd import no_grad, enable_grad, is_grad_enabled, set_grad_enabled  # noqa: F401,E402
from ._C import detach  # noqa: F401,E402
from . import nn, optim  # noqa: F401,E402
from . import distributed  # noqa: F401,E402
from . import amp  # noqa: F401,E402  (autocast)
from .amp import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: F401,E402

# Composite ops (src/ops/composite*.cpp) and lz.linalg.
from ._C import tril, triu, masked_fill, flip, roll, multinomial, norm, clip  # noqa: F401,E402
from . import linalg  # noqa: F401,E402
from ._C import cumsum, cumprod  # noqa: F401,E402  (scans)
