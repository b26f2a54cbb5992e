"""Train a small convolutional network on the handwritten digits that ship with scikit-learn
(8x8 images, 10 classes, no download), with Lazuli's own nn, autograd and optim.

    /usr/bin/python3 examples/train_digits_cnn.py [--epochs N] [--seed S] [--capture]

Two conv-batchnorm-relu-maxpool blocks (1x8x8 -> 16x4x4 -> 32x2x2) and a linear classifier,
SGD with momentum. As in examples/train_digits.py (the MLP), each training step (forward,
backward, the optimizer update and batch norm's running statistics) is one graph that the step
barrier compiles once and replays after; the convolutions run as oneDNN calls inside the
program. The line "steady state" counts what the steps after the first epoch compiled: nothing.
Evaluation switches batch norm to its running statistics (model.eval()). Deterministic under a
fixed seed. Needs python3-sklearn (Debian).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                 "python")))
import lazuli as lz  # noqa: E402
from lazuli import nn  # noqa: E402

try:
    from sklearn.datasets import load_digits
except ImportError as e:  # pragma: no cover
    sys.exit(f"train_digits_cnn: {e.name} is missing; install python3-sklearn "
             f"(scripts/setup.sh does)")


def load(seed, test_fraction=0.2):
    """The digits as (N, 1, 8, 8) float32 images in [0, 1]; the same split as train_digits.py."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def block(c_in, c_out):
    # No conv bias: the batch norm right after it subtracts the mean, so a bias would do nothing.
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.MaxPool2d(2)]


def make_model(width):
    return nn.Sequential(*block(1, width), *block(width, 2 * width), nn.Flatten(),
                         nn.Linear(2 * width * 2 * 2, 10))


def compile_counters():
    d = lz.debug
    return d.counter_value("UncachedCompile"), d.counter_value("KernelCompile")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--width", type=int, default=16, help="channels of the first block")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--capture", action="store_true", help="replay the step with lz.capture")
    args = ap.parse_args()

    lz.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load(args.seed)
    model = make_model(args.width)
    opt = lz.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    lz.sync_tensors(list(model.state_dict().values()))  # materialize the initial weights

    def train_step(xb, yb):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    if args.capture:
        train_step = lz.capture(train_step)  # each call ends with its own barrier

    bs = args.batch_size
    steps_per_epoch = len(x_train) // bs  # full batches only: one shape, one compiled program
    rng = np.random.default_rng(args.seed)
    losses = []
    start = time.perf_counter()
    after_first_epoch = None
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        for i in range(steps_per_epoch):
            idx = order[i * bs:(i + 1) * bs]
            loss = train_step(lz.from_numpy(x_train[idx]), lz.from_numpy(y_train[idx]))
            if not args.capture:
                lz.sync()
        # Read after the barrier, which computed it: waits, runs nothing more.
        losses.append(loss.item())
        print(f"epoch {epoch + 1}: loss {losses[-1]:.4f}")
        if epoch == 0:
            after_first_epoch = compile_counters()
    lz.sync(wait=True)
    train_time = time.perf_counter() - start
    end = compile_counters()

    model.eval()  # batch norm normalizes with its running statistics from here on
    with lz.no_grad():
        pred = model(lz.from_numpy(x_test)).argmax(1).numpy()
    accuracy = float((pred == y_test).mean())
    print(f"test accuracy: {accuracy * 100:.2f}% ({len(y_test)} images), "
          f"train time {train_time:.1f} s, final loss {losses[-1]:.4f}")
    if after_first_epoch is not None:
        print(f"first epoch: {after_first_epoch[0]} programs compiled, {after_first_epoch[1]} "
              f"kernels compiled; steady state (epochs 2-{args.epochs}): "
              f"{end[0] - after_first_epoch[0]} programs compiled, "
              f"{end[1] - after_first_epoch[1]} kernels compiled")
    d = lz.debug
    compile_time = (d.metric_data("CompileTime") or (0, 0.0, []))[1] / 1e9
    execute_time = (d.metric_data("ExecuteTime") or (0, 0.0, []))[1] / 1e9
    print(f"metrics: compiles {d.counter_value('UncachedCompile')}, cached compiles "
          f"{d.counter_value('CachedCompile')}, compile time {compile_time * 1e3:.1f} ms, execute "
          f"time {execute_time:.2f} s")
    if args.capture:
        st = train_step.capture_stats()
        print(f"capture: {st['traces']} traced steps, {st['replays']} replayed")
    return accuracy


if __name__ == "__main__":
    main()
