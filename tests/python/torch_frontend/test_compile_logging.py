"""What torch.compile(backend="lazuli") says, and how: torch.compile's standard `mode` argument,
debug output through Python's logging with one prefix, the user's frames, a backward reported as
its forward's backward, and lines that fit a terminal."""
import logging
import re

import pytest
import torch
import torch._dynamo

import lazuli as lz
import lazuli.torch as lzt
from lazuli import _logging

BACKEND = lzt.backend
counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


@pytest.fixture
def debug_log(tmp_path):
    """LAZULI_DEBUG=1 into a file; yields the file's path."""
    log = tmp_path / "debug.log"
    lz.debug._set_config("debug_file", str(log))
    lz.debug._set_config("debug", 1)
    try:
        yield log
    finally:
        lz.debug._set_config("debug", 0)
        lz.debug._set_config("debug_file", "")
        _logging._sync_with_debug_level()  # the handler goes with the setting


def mlp(hidden):
    # Each test its own hidden size: a graph another test compiled would hit the compile cache,
    # and a compile's debug block is printed only on a miss.
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune",
                                  "max-autotune-no-cudagraphs"])
def test_each_torch_compile_mode_is_accepted_and_matches_eager(mode, caplog):
    model = mlp(17).eval()
    compiled = torch.compile(model, backend=BACKEND, mode=mode)
    x = torch.randn(3, 8)
    with caplog.at_level(logging.INFO, logger="lazuli"), torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    assert counter("TorchTrace") == 1
    said = [r.getMessage() for r in caplog.records if "mode=" in r.getMessage()]
    if mode == "default":
        assert not said
    else:
        # One line, once per process and mode: it says why the mode changes nothing.
        assert len(said) <= 1 and all("no setting of its own in Lazuli" in s for s in said)


def test_an_unknown_mode_names_the_modes_torch_has():
    compiled = torch.compile(mlp(18).eval(), backend=BACKEND, mode="fastest-please")
    with pytest.raises(Exception, match="unknown mode 'fastest-please'.*max-autotune"):
        with torch.no_grad():
            compiled(torch.randn(3, 8))


def test_records_reach_a_logger_the_program_configures_without_lazuli_debug(caplog):
    compiled = torch.compile(mlp(19).eval(), backend=BACKEND)
    with caplog.at_level(logging.INFO, logger="lazuli"), torch.no_grad():
        compiled(torch.randn(3, 8))
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert any(name == "lazuli.torch" and re.match(r"compiled graph\d+\.inference: \d+ ATen nodes", m)
               for name, m in messages), messages
    assert any(name == "lazuli.torch" and m.startswith("traced graph") for name, m in messages)


def test_debug_output_has_one_prefix_the_users_frames_and_the_backward_as_the_forwards(debug_log):
    model = mlp(21)
    compiled = torch.compile(model, backend=BACKEND)
    x = torch.randn(5, 8)
    loss = compiled(x).sum()  # the forward's user line
    loss.backward()           # the backward's user line
    text = debug_log.read_text()
    lines = text.splitlines()
    # One prefix: every line that starts a record is "[lazuli] ..."; the rest are its indented body.
    assert all(line.startswith("[lazuli] ") or line.startswith("  ") for line in lines), text
    assert "lazuli.torch:" not in text
    # A forward and its backward are one dynamo graph's two programs, named alike.
    fw = re.search(r"compiled (graph\d+)\.forward", text).group(1)
    assert f"compiled {fw}.backward" in text, text
    # The backward's compile is its own first compile, not a changed forward.
    blocks = text.split("[lazuli] compile of ")
    backward = next(b for b in blocks if b.startswith(f"'{fw}.backward"))
    assert f"why it compiled: first compile of {fw}.backward.fused_0" in backward, backward
    assert "structure changed" not in backward and "fewer tensor" not in backward
    assert "cause torch-compile" in backward and "capture-warmup" not in text
    # The innermost frame shown is this file's line (outer ones are pytest's, the callers here),
    # never torch's module code or FX's generated code.
    firsts = [line.strip() for line in lines if re.match(r"\s+at ", line)]
    assert len(firsts) == 2 and all("test_compile_logging.py" in f for f in firsts), firsts
    assert "torch/nn/modules" not in text and "<eval_with_key>" not in text
    # Lazuli's lines fit a terminal (long input lists are summarized); frames are as long as the
    # user's paths make them.
    ours = [line for line in lines if not re.match(r"\s+(at|called from) ", line)]
    assert max(len(line) for line in ours) <= 160, max(ours, key=len)


def test_lazuli_debug_2_lists_every_input_of_a_traced_partition(debug_log):
    lz.debug._set_config("debug", 2)
    compiled = torch.compile(mlp(22).eval(), backend=BACKEND)
    with torch.no_grad():
        compiled(torch.randn(3, 8))
    traced = [line for line in debug_log.read_text().splitlines() if "traced graph" in line]
    assert traced and " more" not in traced[0]
    assert "float32[22, 8]" in traced[0] and "float32[3, 8]" in traced[0]
