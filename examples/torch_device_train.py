"""Trains torchvision's resnet18 on the lazy Lazuli device: PyTorch's model, autograd and optimizer,
unchanged, with every step recorded and run as one compiled Lazuli program (docs/torch.md).

    PYTHONPATH=python <torch venv>/bin/python examples/torch_device_train.py [--capture]

The data is scikit-learn's handwritten digits (8x8, bundled with scikit-learn: nothing is
downloaded), scaled to 3x32x32. It prints the loss as it trains, the test accuracy, and what the
runtime did: how many programs it compiled (none after the first steps) and how many ops ran on
the CPU because Lazuli does not lower them (none). With --capture the step is
lazuli.torch.capture'd: traced until two traces agree, then replayed without its Python.
"""
import argparse
import time

import numpy as np
import torch
import torchvision
from sklearn.datasets import load_digits

import lazuli as lz
import lazuli.torch as lzt

BATCH, STEPS = 32, 60


def digits():
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = torch.nn.functional.interpolate(x, size=32, mode="bilinear").repeat(1, 3, 1, 1)
    y = torch.tensor(data.target)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[perm], y[perm]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def main(capture=False):
    dev = lzt.device()  # registers the `lazuli` device (an explicit opt-in)
    torch.manual_seed(0)
    (train_x, train_y), (test_x, test_y) = digits()
    model = torchvision.models.resnet18(num_classes=10).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)  # after the move

    def train_step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if capture:
        train_step = lzt.capture(train_step)  # each call is a step barrier of its own
    start = time.perf_counter()
    for step in range(STEPS):
        i = (step * BATCH) % (len(train_y) - BATCH)
        x, y = train_x[i:i + BATCH].to(dev), train_y[i:i + BATCH].to(dev)
        loss = train_step(x, y)
        lzt.sync()  # the step barrier: forward, backward and update run as one program
        if step == 1:
            warm = lz.debug.counter_value("UncachedCompile")
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step:3d}  loss {loss.item():.3f}")  # a value read: waits for the step
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        predicted = model(test_x.to(dev)).argmax(1).cpu()
    accuracy = float((predicted == test_y).float().mean())
    fallbacks = {n: lz.debug.counter_value(n) for n in lz.debug.counter_names()
                 if n.startswith("fallback::aten.") and lz.debug.counter_value(n)}
    print(f"test accuracy {accuracy:.3f} after {STEPS} steps of {BATCH} ({seconds:.1f} s)")
    print(f"programs compiled: {lz.debug.counter_value('UncachedCompile')} "
          f"({lz.debug.counter_value('UncachedCompile') - warm} after step 1, the eval pass's); "
          f"ops run on the CPU: {fallbacks or 'none'}")
    if capture:
        print(f"captured step: {train_step.capture_stats()}")
    return accuracy


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", action="store_true", help="replay the step (lazuli.torch.capture)")
    main(parser.parse_args().capture)
