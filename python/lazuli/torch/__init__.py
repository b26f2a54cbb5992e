"""Lazuli for PyTorch programs (needs PyTorch 2: ``pip install ".[torch]"``); docs/torch.md.

- ``torch.compile(model, backend="lazuli")``: the dynamo backend, found through the
  ``torch_dynamo_backends`` entry point without importing lazuli; also ``lazuli.torch.backend``.
- ``to_lazuli(t)`` / ``to_torch(t)``: CPU tensors across the boundary without copies.
- ``supported_ops()``: the ATen overloads the lowering table (C++, src/aten/) handles, with their conditions.
- ``device()``: PyTorch tensors on the lazy Lazuli device (``model.to("lazuli")``), an explicit
  opt-in; ``sync()``, ``wait()``, ``add_step_closure()``, ``tensor_state()``, ``compile()``,
  ``eager_mode()``, ``capture()`` (trace once, replay without re-tracing), ``DeviceLoader`` for
  them.
"""
from ._aten import supported_ops  # noqa: F401
from ._boundary import to_lazuli, to_torch  # noqa: F401
from ._bridge import backend  # noqa: F401
from ._capture import capture  # noqa: F401
from ._device import (DeviceLoader, add_step_closure, compile, device,  # noqa: F401,A004
                      eager_mode, sync, tensor_state, wait)

__all__ = ["backend", "to_lazuli", "to_torch", "supported_ops", "device", "sync", "wait",
           "add_step_closure", "tensor_state", "compile", "eager_mode", "capture", "DeviceLoader"]
