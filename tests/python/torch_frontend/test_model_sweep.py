"""The CI subset of bench/model_sweep.py: its smallest models of three kinds (a
timm convolutional net, a timm vision transformer, a transformers encoder; model_sweep.CI_SUBSET)
through the sweep's own checks: compiled with `backend=lazuli.torch.backend`, inference and a
training step's loss and every gradient equal eager's, a second call traces and compiles nothing,
and the ATen ops left to PyTorch eager are the ones listed here. No timing."""
import os
import sys

import pytest
import torch

pytest.importorskip("timm")
pytest.importorskip("transformers")

sys.path.insert(0, os.path.join(__file__.rsplit("/tests/", 1)[0], "bench"))
import model_sweep  # noqa: E402  (bench/model_sweep.py: the sweep's models and checks)

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py

# The ATen overloads each model leaves to PyTorch eager (fallback::aten.* counters that ran).
FALLBACKS = {
    "lcnet_050": set(),
    "beit_base_patch16_224": set(),
    "BertForMaskedLM": set(),
}


def test_the_subset_is_in_the_sweep():
    assert set(FALLBACKS) == set(model_sweep.CI_SUBSET)
    assert set(model_sweep.CI_SUBSET) <= set(model_sweep.MODELS)


@pytest.mark.parametrize("name", model_sweep.CI_SUBSET)
def test_sweep_model_matches_eager(name):
    model, x = model_sweep.build(name)
    inference = model_sweep.check_inference(model, x)
    assert inference["verdict"] == "match", inference
    assert inference["first_counts"].get("TorchTrace", 0) > 0
    assert not inference["recompiled_on_second"], inference["recompiled_on_second"]
    training = model_sweep.check_training(model, x)
    assert training["verdict"] == "match", {k: v for k, v in training.items() if k != "fallbacks"}
    assert not training["grad_missing"]
    assert not training["recompiled_on_second"], training["recompiled_on_second"]
    fallbacks = set(inference["fallbacks"]) | set(training["fallbacks"])
    assert fallbacks == FALLBACKS[name]
