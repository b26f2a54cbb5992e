"""Tests of the PyTorch front ends (lazuli.torch). They need PyTorch 2 (the project's pinned torch,
installed by scripts/test.sh); without it they are skipped and the core suite still runs."""
import pytest

torch = pytest.importorskip("torch", minversion="2.1")
