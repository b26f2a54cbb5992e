"""examples/train_digits_cnn.py keeps its promises: in a few epochs the CNN reaches at
least the MLP example's test accuracy on the same split, the steps after the first epoch compile
nothing (programs or kernels, from a fresh kernel cache), and the captured step gives the same
result as the traced one."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example(name, *args, cache_dir):
    env = dict(os.environ, LAZULI_CACHE_DIR=str(cache_dir))
    env.pop("PYTHONPATH", None)  # the example finds the package itself
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    m = re.search(r"test accuracy: ([0-9.]+)%.*final loss ([0-9.]+)", out.stdout)
    assert m, out.stdout
    return float(m.group(1)), float(m.group(2)), out.stdout


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None
                    or importlib.util.find_spec("tqdm") is None,
                    reason="needs python3-sklearn and python3-tqdm")
def test_cnn_example_beats_the_mlp_example_in_three_epochs_and_steady_steps_compile_nothing(
        tmp_path):
    mlp_acc, _, _ = run_example("train_digits.py", cache_dir=tmp_path / "mlp")
    acc, loss, out = run_example("train_digits_cnn.py", "--epochs", "3",
                                 cache_dir=tmp_path / "cnn")
    assert acc >= mlp_acc, out
    m = re.search(r"first epoch: (\d+) programs compiled, (\d+) kernels compiled; steady state "
                  r"\(epochs 2-3\): (\d+) programs compiled, (\d+) kernels compiled", out)
    assert m, out
    first_programs, first_kernels, steady_programs, steady_kernels = map(int, m.groups())
    assert first_programs > 0 and first_kernels > 0  # a fresh cache: the counters see compiles
    assert (steady_programs, steady_kernels) == (0, 0)
    acc2, loss2, out2 = run_example("train_digits_cnn.py", "--epochs", "3", "--capture",
                                    cache_dir=tmp_path / "cnn")
    assert (acc2, loss2) == (acc, loss)
    assert int(re.search(r"(\d+) replayed", out2).group(1)) > 50
