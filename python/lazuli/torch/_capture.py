"""lazuli.torch.capture: capture and replay of a step over PyTorch tensors on the lazy device.

The capture core is the native one (src/exec/capture.cpp, docs/capture.md): a step is traced as
ordinary lazy code until two traces give the same program, then later calls replay that program on
their new arguments with none of the step's Python: no module, no autograd, no optimizer code, no
ATen op recorded. The core tracks Lazuli tensors by identity, and a device tensor shares its
Lazuli tensor with every torch tensor over it (parameters, ``.grad``, optimizer state), so what a
replay reads and writes is what the traced step read and wrote.

This file hands tensors across (a device tensor's Lazuli tensor to the core and back, by ticket:
src/tensor/handoff.h) and accounts for the PyTorch state a replay would not see:

- torch's grad mode and autocast state are part of the call's signature;
- the ``training`` flag of every module the step called, and each stepped optimizer's
  hyper-parameters (``lr``, ``betas``, ``weight_decay``...) and its parameters' ``requires_grad``,
  are checked before each replay: a change (``model.eval()``, a scheduler's new ``lr``, a frozen
  layer) makes the call trace again (the program stays cached: a changing ``lr`` is device data).
"""
from __future__ import annotations

import functools
import warnings
import weakref

import torch
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_pre_hook

from .. import _C
from . import _device
from .._capture import (_add_stats, _flatten, _kept_elsewhere, _SignatureKeys, _unflatten,
                        _warn_if_traced)

_GUARD_IDENTITY = 0x6C617A756C69  # one torch-state guard per trace ("lazuli")


def _check_on_device(tensors, label, what, hint):
    for i, t in enumerate(tensors):
        if t.device.type != "lazuli":
            raise TypeError(f"lazuli.torch.capture '{label}': {what} {i} is on {t.device.type}, "
                            f"not the lazuli device: {hint}")


def _to_core(tensors):
    """The Lazuli tensors of device tensors, for the capture core."""
    return _C._take_tensors(torch.ops.lazuli._put(tensors))


def _to_torch(tensors):
    """Device tensors over the core's Lazuli tensors."""
    return torch.ops.lazuli._take(_C._put_tensors(tensors))


class _TorchState:
    """While a step is traced: the modules it calls and the optimizers it steps (PyTorch's global
    hooks, held only for the trace), so a replay can check that their Python state is unchanged."""

    def __init__(self):
        self.modules = {}     # id -> (weakref, training)
        self.optimizers = {}  # id -> (weakref, snapshot)

    def __enter__(self):
        self._handles = [
            register_module_forward_pre_hook(self._module_called),
            register_optimizer_step_pre_hook(self._optimizer_stepped),
        ]
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        return False

    def _module_called(self, module, args):
        if id(module) not in self.modules:
            self.modules[id(module)] = (weakref.ref(module), module.training)

    def _optimizer_stepped(self, opt, args, kwargs):
        if id(opt) not in self.optimizers:
            self.optimizers[id(opt)] = (weakref.ref(opt), _optimizer_snapshot(opt))

    def register_guard(self, refusals):
        """Adds the replay guard over what was seen (nothing seen: none). A refusal appends its
        reason to `refusals` (the call's warning names it)."""
        if not self.modules and not self.optimizers:
            return
        modules = list(self.modules.values())
        optimizers = list(self.optimizers.values())

        def unchanged():
            for ref, training in modules:
                m = ref()
                if m is None or m.training != training:
                    refusals.append(f"module {type(m).__name__ if m is not None else '(gone)'}'s "
                                    f"training flag changed (train()/eval()); traced again")
                    return False
            for ref, snap in optimizers:
                opt = ref()
                if opt is None or _optimizer_snapshot(opt) != snap:
                    refusals.append(f"{type(opt).__name__ if opt is not None else 'an optimizer'}'s "
                                    "hyper-parameters or parameters' requires_grad changed (a "
                                    "scheduler's lr?); traced again, with no compile")
                    return False
            return True

        _C._capture_add_guard(unchanged, _GUARD_IDENTITY)


def _optimizer_snapshot(opt):
    """What of an optimizer's Python state its traced step baked in: each group's hyper-parameters
    (tensors by identity: their values are read by a replay) and its parameters' requires_grad."""
    snap = []
    for group in opt.param_groups:
        for k, v in group.items():
            if k == "params":
                snap.append(tuple(p.requires_grad for p in v))
            else:
                snap.append((k, id(v) if isinstance(v, torch.Tensor) else v))
    return snap


def capture(fn=None, *, full_graph=False, name=None):
    """Decorator: capture and replay of a step over device tensors (``lz.capture`` for PyTorch
    programs; docs/torch.md, "Captured steps", and docs/capture.md for the contract).

    ``fn`` is traced until two calls with the same signature trace the same program; later calls
    replay it on their new arguments without running ``fn``'s Python. Tensor arguments must be on
    the lazuli device. Put ``opt.zero_grad()`` inside ``fn``: a ``.grad`` set to None outside would
    leave nothing for a replay to write (such a call is traced again, with a warning). A replay
    writes the gradients into the same ``.grad`` tensors each step (as ``zero_grad(set_to_none=
    False)`` would); returned tensors are new on every call and carry no autograd history.
    ``fn.capture_stats()`` gives the counts of traces and replays.
    """
    def wrap(f):
        label = name or getattr(f, "__name__", "captured")
        cache = _C._CaptureCache(label, bool(full_graph))
        keys = _SignatureKeys(label)
        warned = set()
        refusals = []  # reasons this function's torch-state guards gave, newest last

        def body_for(spec, originals):
            def body(targs):
                args = _to_torch(targs)
                for i, t in enumerate(originals):
                    if t.requires_grad:
                        # Its .grad must land on the caller's tensor: pass it, and never replay.
                        args[i] = t
                        _C._capture_refuse(f"tensor argument {i} requires grad (an input gradient)")
                args, kwargs = _unflatten(spec, iter(args))
                with _TorchState() as state:
                    out = f(*args, **kwargs)
                state.register_guard(refusals)
                del args, kwargs
                out_tensors = []
                out_spec = _flatten(out, out_tensors, torch.Tensor)
                del out
                _check_on_device(out_tensors, label, "returned tensor",
                                 "a captured step returns device tensors (read values after the call)")
                # Here only out_tensors holds each occurrence (`out` is gone).
                for k in _to_core(_kept_elsewhere(out_tensors, 1)):
                    _C._capture_note_kept(k)
                return _to_core(out_tensors), out_spec
            return body

        @functools.wraps(f)
        def inner(*args, **kwargs):
            if not _device._REGISTERED:
                _device.device()  # a captured step is a device program: the device is asked for
            tensors = []
            structure = _flatten((args, kwargs), tensors, torch.Tensor)
            # What the core's signature cannot see: torch's modes and which arguments need grad.
            spec = (structure, torch.is_grad_enabled(),
                    torch.is_autocast_enabled("lazuli") and torch.get_autocast_dtype("lazuli"),
                    tuple(t.requires_grad for t in tensors))
            _check_on_device(tensors, label, "tensor argument", "move it first (.to('lazuli'))")
            core_args = _to_core(tensors)
            traces, refused = cache.traces, len(refusals)
            outs, out_spec = cache.call(core_args, keys.of(spec), body_for(structure, tensors))
            if len(refusals) > refused:  # PyTorch state changed: say which, not the core's words
                if refusals[-1] not in warned:
                    warned.add(refusals[-1])
                    warnings.warn(f"lazuli.torch.capture '{label}': not replayed: {refusals[-1]}",
                                  RuntimeWarning, stacklevel=2)
                warned.add(cache.last_reason)  # the core's generic words for the same refusal
                del refusals[:-1]
            else:
                _warn_if_traced(cache, traces, "lazuli.torch.capture", label, warned)
            results = _to_torch(outs)
            # A returned argument is the caller's own tensor object.
            ids = [t._id for t in core_args]
            for i, o in enumerate(outs):
                if o._id in ids:
                    results[i] = tensors[ids.index(o._id)]
            return _unflatten(out_spec, iter(results))

        _add_stats(inner, cache, label)
        return inner

    return wrap(fn) if fn is not None else wrap
