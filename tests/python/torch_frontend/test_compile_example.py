"""examples/torch_compile_mlp.py keeps its promises: the loss falls, and after the first step
nothing is traced again (every later partition call is a replay)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_torch_compile_example_learns_and_replays_after_its_first_step(tmp_path):
    env = dict(os.environ, LAZULI_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)  # the example finds the package itself
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_compile_mlp.py"),
                          "--steps", "12"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", out.stdout)]
    assert len(losses) == 3 and losses[-1] < losses[0], out.stdout
    m = re.search(r"traces: (\d+) \((\d+) after the first step\), replays: (\d+)", out.stdout)
    assert m, out.stdout
    assert m.group(1) == m.group(2) and int(m.group(3)) > 0, out.stdout
