"""The README's main demo (examples/train_digits.py) keeps its promises: at least 95% test
accuracy within its default epochs, deterministic under a fixed seed, and the same result when the
step is captured and replayed (--capture)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def have(module):
    """Found without importing it: importing sklearn here would slow every later test's gc."""
    import importlib.util
    return importlib.util.find_spec(module) is not None


def run_demo(*args):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the example finds the package itself (source tree or installed)
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_digits.py"), *args],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    m = re.search(r"test accuracy: ([0-9.]+)%.*final loss ([0-9.]+)", out.stdout)
    assert m, out.stdout
    return float(m.group(1)), float(m.group(2)), out.stdout


@pytest.mark.skipif(not (have("sklearn") and have("tqdm")), reason="needs python3-sklearn and python3-tqdm")
def test_digits_demo_reaches_95_percent_deterministically_traced_or_captured():
    acc, loss, _ = run_demo()
    assert acc >= 95.0
    acc2, loss2, _ = run_demo()
    assert (acc2, loss2) == (acc, loss)
    acc3, loss3, out = run_demo("--capture")
    assert (acc3, loss3) == (acc, loss)
    replayed = int(re.search(r"(\d+) replayed", out).group(1))
    assert replayed > 400
