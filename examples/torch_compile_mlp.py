"""A PyTorch MLP trained with torch.compile(backend="lazuli"): the whole step, AdamW included.

Run from the repository root with the pinned torch (scripts/torch-venv.sh installs it and prints
its site-packages; the interpreter is next to it):
  $(bash scripts/torch-venv.sh)/../../../bin/python examples/torch_compile_mlp.py [--steps N]
LAZULI_DEBUG=1 in the environment prints which FX graphs were compiled and what fell back.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")))
import lazuli as lz  # noqa: E402
import lazuli.torch  # noqa: E402,F401  (for backend=lazuli.torch.backend; "lazuli" needs no import)

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
steps = parser.parse_args().steps

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)


def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


# After `pip install ".[torch]"`, backend="lazuli" finds the backend through its entry point;
# from a source tree, pass the callable.
compiled_step = torch.compile(step, backend=lazuli.torch.backend)
c = lz.debug.counter_value

x = torch.randn(256, 64)
y = x[:, :10].argmax(1)  # a learnable rule: the index of the largest of the first 10 features
for i in range(steps):
    loss = compiled_step(x, y)
    if i == 0:
        traces_after_first = c("TorchTrace")
    if i % 10 == 0 or i == steps - 1:
        print(f"step {i:2d}  loss {loss.item():.4f}")

print(f"FX graphs compiled: {c('TorchGraphCompiled')}, Lazuli partitions: {c('TorchPartition')}, "
      f"traces: {c('TorchTrace')} ({traces_after_first} after the first step), "
      f"replays: {c('TorchReplay')}, programs compiled: {c('UncachedCompile')}")
fallbacks = {n[len("fallback::"):]: c(n) for n in lz.debug.counter_names() if n.startswith("fallback::aten.")}
print("ATen nodes run in PyTorch eager (op: runs):", fallbacks or "none")
