"""PyTorch tensors on a lazy Lazuli device (DESIGN.md 5b): ``lazuli.torch.device()``.

``device()`` loads the device's kernels (``_device.so``, built beside the extension where PyTorch
was installed at build time), names PyTorch's PrivateUse1 backend "lazuli" and registers this
module's ``DeviceModule`` as ``torch.lazuli``. From then on ``t.to("lazuli")``,
``model.to("lazuli")`` and ``torch.randn(..., device="lazuli")`` make tensors whose values are
Lazuli tensors: every op records IR through the ATen table (src/aten/), and ``sync()`` is the one
runtime's step barrier (``lazuli.sync``), over every live tensor, device tensors included.

Registering is explicit and once per process: the device becomes PyTorch's current accelerator
(``torch.accelerator``, DataLoader's pin_memory target), so importing lazuli.torch or using the
torch.compile backend never does it.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import threading

import torch

import lazuli as lz

_LOCK = threading.Lock()
_REGISTERED = False
_REGISTERED_PID = None  # the process that registered the device (not a forked child)
NAME = "lazuli"


def _library_path():
    return os.path.join(os.path.dirname(lz.__file__), "_device.so")


class Event:
    """torch.lazuli.Event: the device runs its programs in order on one executor, so a point in
    its one stream is reached when what was recorded before it has run."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        lz.wait()

    def elapsed_time(self, end_event):
        raise RuntimeError("torch.lazuli.Event: the device does not time its programs by events; "
                           "time a step with lazuli.torch.sync(wait=True) around it")


class Stream:
    """torch.lazuli.Stream: the device has one stream, its executor, whose programs run in the
    order they were cut; PyTorch code that overlaps work on side streams (FSDP2's all-gathers)
    gets that order, and the overlap comes from inside each program."""

    stream_id = 0
    device_index = 0
    device_type = 20  # c10::DeviceType::PrivateUse1, as torch.Stream reports it

    def __init__(self, device=None, priority=0, **kwargs):
        self.priority = priority

    @property
    def device(self):
        return torch.device(NAME, 0)

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def synchronize(self):
        lz.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_STREAM = Stream()


class DeviceModule:
    """torch.lazuli: what PyTorch asks a PrivateUse1 backend's module (torch/random.py,
    torch/amp, torch.accelerator, FSDP2's streams)."""

    Stream = Stream
    Event = Event

    @staticmethod
    def current_stream(device=None):
        return _STREAM

    default_stream = current_stream

    @staticmethod
    def stream(stream):
        """A context making `stream` current: there is one stream."""
        return contextlib.nullcontext(stream)

    @staticmethod
    def set_stream(stream):
        pass

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def set_device(index):
        if int(index) != 0:
            raise RuntimeError(f"lazuli: there is one device, lazuli:0; got lazuli:{index}")

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def _lazy_init():
        pass

    @staticmethod
    def _is_in_bad_fork():
        return False

    _seed = 67280421310721  # torch's default seed, until manual_seed

    @classmethod
    def manual_seed(cls, seed):
        # The seed is a device scalar inside the step graph: reseeding never recompiles.
        cls._seed = int(seed)
        lz.manual_seed(cls._seed)

    manual_seed_all = manual_seed

    @classmethod
    def seed(cls):
        cls.manual_seed(int(torch.randint(0, 2 ** 62, ()).item()))

    seed_all = seed

    @classmethod
    def initial_seed(cls):
        return cls._seed

    @classmethod
    def get_rng_state(cls, device="lazuli"):
        """The last seed (Lazuli's stream is a function of it and of the steps since)."""
        return torch.tensor([cls._seed], dtype=torch.int64).view(torch.uint8)

    @classmethod
    def set_rng_state(cls, state, device="lazuli"):
        cls.manual_seed(int(state.view(torch.int64)[0]))

    @staticmethod
    def device(device):
        """torch.lazuli.device(d): a context for the current device (there is one)."""
        return contextlib.nullcontext()

    @staticmethod
    def synchronize(device=None):
        lz.wait()

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.bfloat16, torch.float16]


def device(index: int = 0) -> torch.device:
    """Registers the ``lazuli`` device (once per process; an explicit opt-in) and returns
    ``torch.device("lazuli:0")``."""
    global _REGISTERED
    if index != 0:
        raise ValueError(f"lazuli: there is one device, lazuli:0; got index {index}")
    with _LOCK:
        if not _REGISTERED:
            _register()
            _REGISTERED = True
    return torch.device(NAME, index)


def _register():
    path = _library_path()
    if not os.path.exists(path):
        raise ImportError(
            "lazuli: the lazy PyTorch device was not built with this installation (no "
            f"{os.path.basename(path)} beside lazuli's extension). It is built where PyTorch is "
            "installed when Lazuli is built: scripts/setup.sh does it; with pip, install PyTorch "
            "first, then `pip install --no-build-isolation .`.")
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", NAME):
        raise RuntimeError(f"lazuli: PyTorch's PrivateUse1 backend is already {current!r}; a process "
                           "can hold one such backend")
    torch.ops.load_library(path)
    if current != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
        torch._register_device_module(NAME, DeviceModule)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    # Views of device tensors are remade by replaying their view ops when autograd needs them
    # (a lazy value has no strided memory for as_strided to address).
    torch._C._set_view_replay_enabled(True)
    _check_autograd_engine()
    global _REGISTERED_PID
    _REGISTERED_PID = os.getpid()
    atexit.register(_drain_autograd_worker)
    # A device op's cut or fallback names the user's line, not torch's module code.
    from ._boundary import torch_frames_are_library
    torch_frames_are_library()
    # torch.distributed's "lazuli" backend: collectives on device tensors are recorded nodes.
    if torch.distributed.is_available():
        from . import _distributed
        _distributed.register()
    # Not set here: torch.__future__.set_swap_module_params_on_conversion, which would keep
    # Parameter objects (and so tied weights) across model.to("lazuli"), is process-wide and
    # makes load_state_dict fail on any parameter something holds a weak reference to (compiled
    # code's guards). As on PyTorch/XLA, model.to("lazuli") makes new Parameters: re-tie shared
    # weights after the move (transformers: model.tie_weights()) and build optimizers after it.


def _device_backward():
    """One small backward on the device, through the autograd engine itself rather than
    ``Tensor.backward``: PyTorch's wrapper (torch/autograd/graph.py) stashes a Python object (a
    contextvars.Context) in the thread-local state every graph task copies, and the engine's device
    thread may drop the task's last reference after the caller has moved on, taking the GIL to do
    it. This one carries no Python object, so finishing it needs no GIL."""
    with torch.inference_mode(False), torch.enable_grad():  # whatever mode the caller is in
        x = torch.zeros((), device=NAME, requires_grad=True)
        y = x * 2
        torch.autograd.Variable._execution_engine.run_backward(
            (y,), (torch.ones_like(y),), False, False, (), True, True)


def _check_autograd_engine():
    """PyTorch's autograd engine sizes its per-device queues once, at the process's first backward
    pass, from the devices registered then: after a CPU backward the device's gradients would hit
    an internal assertion. Found now, with what to do, by one backward on the device."""
    try:
        _device_backward()
    except RuntimeError as e:
        if "device_ready_queues_" not in str(e):
            raise
        raise RuntimeError(
            "lazuli: the lazy device was registered after this process's first backward pass, so "
            "PyTorch's autograd engine has no queue for it and cannot run its gradients. Call "
            "lazuli.torch.device() before any backward (at the start of the program).") from None


def _drain_autograd_worker():
    """At exit (Python's atexit, before the interpreter starts finalizing): the engine's device
    thread may still be dropping the last user backward's graph task, waiting for the GIL to
    release the Python object PyTorch stashed in it. Given the GIL only once the interpreter is
    finalizing, that thread exits through a C++ frame that cannot unwind and the process aborts
    ("terminate called without an active exception"), under load about one exit in ten right
    after a backward. The device thread runs its tasks in order: once a backward queued now has
    run, the earlier task is gone; this one holds no Python object. Not in a forked child: its
    engine has no device thread of its own until a backward starts one."""
    if os.getpid() != _REGISTERED_PID:
        return
    try:
        _device_backward()
    except BaseException:  # noqa: BLE001 - at exit nothing is left to report to
        pass


def tensor_state(t: torch.Tensor) -> str:
    """"device_data" | "ir" | "host" | "view": the state of a device tensor's Lazuli tensor."""
    return torch.ops.lazuli.tensor_state(t)


# The runtime calls for device tensors are Lazuli's own: one runtime, one barrier over every live
# tensor (device tensors and lazuli tensors alike), one set of counters.
def sync(wait: bool = False) -> None:
    """The step barrier over every live device tensor (lazuli.sync)."""
    lz.sync(wait=wait)


wait = lz.wait
add_step_closure = lz.add_step_closure
compile = lz.compile  # noqa: A001 (PyTorch/XLA's and lazuli's name)
eager_mode = lz.eager_mode


class DeviceLoader:
    """Iterates `loader`'s batches as device tensors, PyTorch/XLA's MpDeviceLoader for Lazuli: a
    thread moves the next batches to `device` (collating, copying into Lazuli's memory) while
    the current step's program runs, and each new batch starts with the step barrier
    (`sync()`), so a training loop needs none of its own::

        for x, y in lazuli.torch.DeviceLoader(loader, device):
            loss = step(x, y)

    Tensors anywhere in a batch (tuples, lists, dicts) move; other values pass through.
    `prefetch` batches are moved ahead (the default, 2, hides one batch's preparation)."""

    def __init__(self, loader, device=None, prefetch: int = 2):
        if prefetch < 1:
            raise ValueError(f"DeviceLoader: prefetch must be at least 1, got {prefetch}")
        self.loader = loader
        self.device = torch.device(device) if device is not None else globals()["device"]()
        self.prefetch = prefetch

    def __len__(self):
        return len(self.loader)

    def _move(self, batch):
        return torch.utils._pytree.tree_map(
            lambda t: t.to(self.device) if isinstance(t, torch.Tensor) else t, batch)

    def __iter__(self):
        import queue

        batches: "queue.Queue" = queue.Queue(maxsize=self.prefetch)
        done = object()
        stop = threading.Event()

        def produce():
            try:
                for batch in self.loader:
                    if stop.is_set():
                        return
                    batches.put(self._move(batch))
            except BaseException as e:  # noqa: BLE001 (raised again in the consumer)
                batches.put(e)
            batches.put(done)

        worker = threading.Thread(target=produce, name="lazuli-device-loader", daemon=True)
        worker.start()
        first = True
        try:
            while True:
                item = batches.get()
                if not first:
                    sync()  # the previous step's barrier: its program runs while we go on
                first = False
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while worker.is_alive():  # let the producer finish its put and notice the stop
                try:
                    batches.get_nowait()
                except queue.Empty:
                    worker.join(0.01)
