"""Tests of the PyTorch front ends (lazuli.torch). They need PyTorch 2 (the project's pinned torch,
installed by scripts/test.sh); without it they are not collected and the core suite still runs."""
import importlib.util

if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]
