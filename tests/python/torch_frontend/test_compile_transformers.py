"""GPT-2 and BERT from small `transformers` configs, randomly initialised: logits,
and an AdamW training step's loss, gradients and updates, equal to eager; steady state compiles
nothing (model_checks.py). Both lower completely: no ATen op is left to PyTorch eager, attention's
forward and backward included (the ATen table's attention entries, src/aten/entries_nn.cpp)."""
import math

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import lazuli.torch as lzt
from model_checks import check_inference, check_training, compile_marks, fallback_ops

transformers = pytest.importorskip("transformers")

VOCAB, SEQ = 100, 16


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def _gpt2(dropout=0.0):
    torch.manual_seed(0)
    # Dropout off where outputs are compared: its random masks cannot match eager's (Lazuli
    # draws from its own generator). bos/eos inside the small vocabulary.
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB,
                                     n_positions=64, attn_pdrop=dropout, embd_pdrop=dropout,
                                     resid_pdrop=dropout, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def _bert(dropout=0.0):
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=VOCAB,
                                     max_position_embeddings=64, num_labels=3,
                                     hidden_dropout_prob=dropout,
                                     attention_probs_dropout_prob=dropout)
    return transformers.BertForSequenceClassification(config)


def _tokens(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (2, SEQ), generator=g) for _ in range(n)]


def _next_token_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def test_gpt2_inference_matches_eager_and_later_calls_compile_nothing():
    check_inference(_gpt2(), [(ids,) for ids in _tokens(3)])
    assert fallback_ops() == set()


def test_gpt2_training_step_matches_eager_and_later_steps_compile_nothing():
    check_training(_gpt2(), [((ids,), ids) for ids in _tokens(3)], _next_token_loss)
    assert fallback_ops() == set()


def test_bert_inference_matches_eager_and_later_calls_compile_nothing():
    check_inference(_bert(), [(ids,) for ids in _tokens(3)])
    assert fallback_ops() == set()


def test_bert_training_step_matches_eager_and_later_steps_compile_nothing():
    g = torch.Generator().manual_seed(2)
    batches = [((ids,), torch.randint(0, 3, (2,), generator=g)) for ids in _tokens(3)]
    check_training(_bert(), batches, F.cross_entropy)
    assert fallback_ops() == set()


def _train_with_dropout(model, batches, loss_fn):
    """AdamW training steps with dropout on, compiled: nothing runs in PyTorch eager (dropout's
    masks come from Lazuli's RNG, src/aten/entries_random.cpp), the steps after the second trace and
    compile nothing, the losses are finite and are not eval mode's (dropout acted); afterwards
    the trained model in eval mode still gives eager's outputs."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(args, target):
        opt.zero_grad()
        loss = loss_fn(model(*args).logits, target)
        loss.backward()
        opt.step()
        return loss

    compiled = torch.compile(step, backend=lzt.backend)
    marks = []
    for args, target in batches:
        with torch.no_grad():
            model.eval()
            eval_loss = loss_fn(model(*args).logits, target).item()
            model.train()
        loss = compiled(args, target).item()
        assert math.isfinite(loss) and loss != eval_loss
        marks.append(compile_marks())
    assert marks[1] == marks[2], marks
    assert fallback_ops() == set()  # native_dropout (and its backward) lowered
    check_inference(model, [batches[0][0]])


def test_gpt2_training_with_dropout_runs_wholly_in_lazuli():
    _train_with_dropout(_gpt2(dropout=0.1), [((ids,), ids) for ids in _tokens(3)],
                        _next_token_loss)


def test_bert_training_with_dropout_runs_wholly_in_lazuli():
    g = torch.Generator().manual_seed(2)
    batches = [((ids,), torch.randint(0, 3, (2,), generator=g)) for ids in _tokens(3)]
    _train_with_dropout(_bert(dropout=0.1), batches, F.cross_entropy)
