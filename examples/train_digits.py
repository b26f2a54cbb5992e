"""Train an MLP classifier on the handwritten digits that ship with scikit-learn (8x8 images,
10 classes, no download), with Lazuli's autograd, nn and optim.

    /usr/bin/python3 examples/train_digits.py [--epochs N] [--optimizer sgd|adam] [--seed S] [--capture]

Each training step records forward, backward and the optimizer update into one graph; the step
barrier (lz.sync) compiles it once and replays it on every later step. The loss is read inside a
step closure (after the barrier, so reading it never forces an extra execution) and shown every
few steps. With --capture the step is an lz.capture function: once two traces agree, each step
replays the compiled program without running the Python (docs/capture.md); the results are the
same. Deterministic under a fixed seed. Needs python3-sklearn and python3-tqdm (Debian).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")))
import lazuli as lz  # noqa: E402
from lazuli import nn  # noqa: E402

try:
    from sklearn.datasets import load_digits
    from tqdm import tqdm
except ImportError as e:  # pragma: no cover
    sys.exit(f"train_digits: {e.name} is missing; install python3-sklearn and python3-tqdm "
             f"(scripts/setup.sh does)")


def load(seed, test_fraction=0.2):
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixel values 0..16 -> 0..1
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10, help="steps between loss readings")
    ap.add_argument("--capture", action="store_true", help="replay the step with lz.capture")
    args = ap.parse_args()

    lz.manual_seed(args.seed)
    x_train, y_train, x_test, y_test = load(args.seed)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    if args.optimizer == "sgd":
        opt = lz.optim.SGD(model.parameters(), lr=args.lr or 0.1, momentum=0.9)
    else:
        opt = lz.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    loss_fn = nn.CrossEntropyLoss()
    lz.sync_tensors(list(model.parameters()))  # materialize the initial weights

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
    shown = {"loss": float("nan")}
    start = time.perf_counter()
    bar = tqdm(total=args.epochs * steps_per_epoch, unit="step", dynamic_ncols=True)
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        for i in range(steps_per_epoch):
            idx = order[i * bs:(i + 1) * bs]
            xb, yb = lz.from_numpy(x_train[idx]), lz.from_numpy(y_train[idx])
            loss = train_step(xb, yb)
            step = epoch * steps_per_epoch + i
            if step % args.log_every == 0:
                # Read after the barrier: the value is already being computed, no extra run.
                # (A captured step's barrier has passed; the closure runs at the next one.)
                lz.add_step_closure(lambda v=loss: shown.__setitem__("loss", v.item()))
            if not args.capture:
                lz.sync()
            bar.update(1)
            elapsed = time.perf_counter() - start
            bar.set_postfix(epoch=epoch + 1, loss=f"{shown['loss']:.4f}",
                            samples_s=f"{(step + 1) * bs / elapsed:.0f}", refresh=False)
    lz.wait()
    bar.close()
    train_time = time.perf_counter() - start

    model.eval()
    with lz.no_grad():
        pred = model(lz.from_numpy(x_test)).argmax(1).numpy()
    accuracy = float((pred == y_test).mean())
    print(f"test accuracy: {accuracy * 100:.2f}% ({len(y_test)} images), "
          f"train time {train_time:.1f} s, final loss {shown['loss']:.4f}")
    d = lz.debug
    compile_time = (d.metric_data("CompileTime") or (0, 0.0, []))[1] / 1e9
    execute_time = (d.metric_data("ExecuteTime") or (0, 0.0, []))[1] / 1e9
    print(f"metrics: compiles {d.counter_value('UncachedCompile')}, cached compiles "
          f"{d.counter_value('CachedCompile')}, compile time {compile_time * 1e3:.1f} ms, execute "
          f"time {execute_time:.2f} s, buffers donated {d.counter_value('InputOutputAliasCount')}")
    if args.capture:
        st = train_step.capture_stats()
        print(f"capture: {st['traces']} traced steps, {st['replays']} replayed")
    return accuracy


if __name__ == "__main__":
    main()
