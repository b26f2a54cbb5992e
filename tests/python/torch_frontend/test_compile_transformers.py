"""GPT-2 and BERT from small `transformers` configs, randomly initialised (issue 11 item 9): logits,
and an AdamW training step's loss, gradients and updates, equal to eager; steady state compiles
nothing (model_checks.py). Both lower completely: no ATen op is left to PyTorch eager, attention's
forward and backward included (lowering_attention.py)."""
import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from model_checks import check_inference, check_training, fallback_ops

transformers = pytest.importorskip("transformers")

VOCAB, SEQ = 100, 16


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _gpt2():
    torch.manual_seed(0)
    # Dropout off: its random masks cannot match eager's. bos/eos inside the small vocabulary.
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB,
                                     n_positions=64, attn_pdrop=0.0, embd_pdrop=0.0,
                                     resid_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def _bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=VOCAB,
                                     max_position_embeddings=64, num_labels=3,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
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
