"""The workloads and candidates of bench/torch_bench.py: each candidate turns a workload into a
`step()` callable plus a `finish()` that waits for its results, so one timing loop serves all.

Imported by the workers in both environments: the project's torch venv (eager, inductor, lazuli)
and the torch-xla venv (xla_lazy, xla_openxla), so nothing here imports lazuli or torch_xla at
module level.
"""
import sys

import torch

# name -> (kind, description). Sizes are fixed here so every candidate runs the same thing.
WORKLOADS = {
    "resnet18": "torchvision resnet18, random weights, eval, inference, batch 8, 3x112x112",
    "resnet18-b1": "torchvision resnet18, random weights, eval, inference, batch 1, 3x112x112",
    "resnet18-train": "torchvision resnet18, random weights, train mode (batch norm statistics), "
                      "training step (cross entropy, backward, SGD lr 0.01 momentum 0.9), batch 8, 3x112x112",
    "mobilenet_v3_small": "torchvision mobilenet_v3_small, random weights, eval, inference, batch 8, 3x112x112",
    "gpt2": "transformers GPT2LMHeadModel, GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=8192), "
            "training step (LM loss, backward, AdamW lr 1e-4), batch 4, sequence 128",
    "gpt2-small": "transformers GPT2LMHeadModel, GPT2Config() default sizes (12 layers, 768, vocab 50257), "
                  "training step (LM loss, backward, AdamW lr 1e-4), batch 4, sequence 128",
    "mlp": "MLP 784-1024-1024-10, ReLU, cross entropy, SGD lr 0.01, training step, batch 256",
    "mlp-small": "MLP 64-64-10, ReLU, cross entropy, SGD lr 0.01, training step, batch 32",
}
BATCH = {"resnet18": 8, "resnet18-b1": 1, "resnet18-train": 8, "mobilenet_v3_small": 8, "gpt2": 4, "gpt2-small": 4, "mlp": 256, "mlp-small": 32}
IMAGE = 112
SEQ = 128

# Workloads that run under torch.no_grad (the rest are training steps).
INFERENCE = {"resnet18", "resnet18-b1", "mobilenet_v3_small"}

TORCH_CANDIDATES = ["eager", "inductor", "lazuli"]
XLA_CANDIDATES = ["xla_lazy", "xla_openxla"]


def _import_transformers():
    """transformers imports scipy when it finds one; the project's torch venv sees Debian's scipy
    1.10 (system site packages), which fails against that venv's numpy 2. GPT-2 needs no scipy:
    hide a broken one, as if it were not installed."""
    try:
        import scipy.optimize  # noqa: F401
    except ImportError:
        for name in [m for m in sys.modules if m == "scipy" or m.startswith("scipy.")]:
            del sys.modules[name]
        sys.modules["scipy"] = None  # importlib.util.find_spec("scipy") now says: not installed
    import transformers
    return transformers


def _gpt2_config(workload):
    GPT2Config = _import_transformers().GPT2Config
    if workload == "gpt2-small":
        return GPT2Config()
    return GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=8192, n_positions=SEQ)


def build_model(workload):
    """The model with random weights from seed 0 (nothing can be downloaded here)."""
    torch.manual_seed(0)
    if workload.startswith("resnet18"):
        import torchvision
        model = torchvision.models.resnet18(weights=None)
        return model.train() if workload == "resnet18-train" else model.eval()
    if workload == "mobilenet_v3_small":
        import torchvision
        return torchvision.models.mobilenet_v3_small(weights=None).eval()
    if workload.startswith("gpt2"):
        return _import_transformers().GPT2LMHeadModel(_gpt2_config(workload)).train()
    sizes = [784, 1024, 1024, 10] if workload == "mlp" else [64, 64, 10]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).train()


def make_inputs(workload, batch):
    g = torch.Generator().manual_seed(1)
    if workload == "resnet18-train":
        return (torch.randn(batch, 3, IMAGE, IMAGE, generator=g),
                torch.randint(0, 1000, (batch,), generator=g))
    if workload in INFERENCE:
        return (torch.randn(batch, 3, IMAGE, IMAGE, generator=g),)
    if workload.startswith("gpt2"):
        ids = torch.randint(0, _gpt2_config(workload).vocab_size, (batch, SEQ), generator=g)
        return (ids,)
    width = 784 if workload == "mlp" else 64
    return (torch.randn(batch, width, generator=g), torch.randint(0, 10, (batch,), generator=g))


def _step_fn(workload, model, capturable=False):
    """The function a candidate runs (and torch.compile compiles): inference, or a whole training
    step with the optimizer inside. `capturable`: AdamW counts its steps in a device tensor (the
    same numbers; a captured step must not depend on a CPU counter)."""
    if workload in INFERENCE:
        def infer(x):
            return model(x)
        return infer
    if workload.startswith("gpt2"):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=capturable)

        def gpt2_step(ids):
            opt.zero_grad(set_to_none=True)
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            return loss
        return gpt2_step
    # A classifier's training step: the MLPs, and resnet18 with momentum (batch norm in train mode).
    momentum = 0.9 if workload == "resnet18-train" else 0.0
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    loss_fn = torch.nn.CrossEntropyLoss()

    def classifier_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return classifier_step


class Candidate:
    """One candidate on one workload: `call(batch)` runs one step on that batch size's inputs and
    returns when its results are computed."""

    def __init__(self, name, workload):
        self.name, self.workload = name, workload
        self.inference = workload in INFERENCE
        self._inputs = {}
        model = build_model(workload)
        if name.startswith("xla"):
            import torch_xla
            import torch_xla.core.xla_model as xm
            self.device = torch_xla.device()
            model = model.to(self.device)

            def barrier():
                xm.mark_step()
                xm.wait_device_ops()
        elif name in ("lazuli_device", "lazuli_device_captured"):
            # The lazy Lazuli device: every step traced (its ops recorded), then one program; or
            # captured (lazuli.torch.capture): traced until two traces agree, then replayed.
            import lazuli
            import lazuli.torch
            self.device = lazuli.torch.device()
            model = model.to(self.device)
            if hasattr(model, "tie_weights"):  # new Parameters after the move: re-tie
                model.tie_weights()

            def barrier():
                lazuli.torch.sync()
                lazuli.wait()
        else:
            self.device = None
            barrier = None
        self._barrier = barrier
        fn = _step_fn(workload, model, capturable=name == "lazuli_device_captured")
        if name in ("eager", "xla_lazy", "lazuli_device"):
            self.fn = fn
        elif name == "lazuli_device_captured":
            import lazuli.torch
            self.fn = lazuli.torch.capture(fn)
        elif name == "inductor":
            self.fn = torch.compile(fn, backend="inductor")
        elif name == "lazuli":
            import lazuli.torch
            self.fn = torch.compile(fn, backend=lazuli.torch.backend)
        elif name == "lazuli_keep":
            # The keep_weight_layouts option: convolution weights' blocked copies kept across
            # calls while the parameters' torch versions are unchanged (docs/torch.md).
            import lazuli.torch
            self.fn = torch.compile(fn, backend=lazuli.torch.backend,
                                    options={"keep_weight_layouts": True})
        elif name == "xla_openxla":
            # openxla: aot_autograd over XLA tensors (training); openxla_eval is inference only.
            self.fn = torch.compile(fn, backend="openxla")
        else:
            raise ValueError(f"unknown candidate {name}")

    def inputs(self, batch):
        if batch not in self._inputs:
            ins = make_inputs(self.workload, batch)
            if self.device is not None:
                ins = tuple(t.to(self.device) for t in ins)
                self._barrier()
            self._inputs[batch] = ins
        return self._inputs[batch]

    def call(self, batch):
        ins = self.inputs(batch)
        if self.inference:
            with torch.no_grad():
                out = self.fn(*ins)
        else:
            out = self.fn(*ins)
        self.finish()
        return out

    def finish(self):
        if self.device is not None:
            # A lazy device computes at the step barrier; openxla's compiled graphs run
            # asynchronously too: each ends the step with a barrier and a wait.
            self._barrier()
        elif self.name.startswith("lazuli"):
            import lazuli
            lazuli.wait()
