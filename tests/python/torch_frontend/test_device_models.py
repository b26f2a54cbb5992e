"""Real models trained on the lazy Lazuli device (lazuli.torch.device()), randomly initialised at
small sizes: torchvision's resnet18 and mobilenet_v3_small, a ViT, and GPT-2, BERT and a
Llama-style decoder from transformers. Per step the loss and every gradient equal eager PyTorch's
within float32 tolerance, no ATen op runs on the CPU, and from the third step on nothing is
compiled (counters, never timing)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value
DEV = lzt.device()


def fallbacks():
    return {n: counter(n) for n in lz.debug.counter_names()
            if n.startswith("fallback::aten.") and counter(n)}


def logits_of(out):
    return out if isinstance(out, torch.Tensor) else out.logits


def check_training(model, batches, loss_fn, rtol=2e-4, optimizer=None):
    """Optimizer steps (AdamW unless given) of `model` on the device against a copy in eager: each
    step's loss and every gradient (to `rtol` of the largest gradient of its parameter, or of the
    step's largest where the gradient is rounding noise in exact arithmetic) agree."""
    optimizer = optimizer or (lambda params: torch.optim.AdamW(params, lr=1e-3))
    torch.manual_seed(0)
    eager = copy.deepcopy(model).train()
    model = model.to(DEV).train()
    if hasattr(model, "tie_weights"):  # new Parameters on the device: shared weights re-tied
        model.tie_weights()
    opt = optimizer(model.parameters())
    opt_eager = optimizer(eager.parameters())
    compiles = []
    for step, (args, target) in enumerate(batches):
        opt.zero_grad()
        loss = loss_fn(logits_of(model(*[a.to(DEV) for a in args])), target.to(DEV))
        loss.backward()
        grads = [p.grad.cpu() if p.grad is not None else None for p in model.parameters()]
        opt.step()
        lzt.sync()
        opt_eager.zero_grad()
        loss_eager = loss_fn(logits_of(eager(*args)), target)
        loss_eager.backward()
        opt_eager.step()
        torch.testing.assert_close(loss.cpu(), loss_eager.detach(), rtol=1e-4, atol=1e-5)
        top = max(q.grad.abs().max().item() for q in eager.parameters() if q.grad is not None)
        for (name, q), g in zip(eager.named_parameters(), grads):
            if q.grad is None:
                assert g is None, name
                continue
            scale = max(q.grad.abs().max().item(), 1e-3 * top)
            err = (g - q.grad).abs().max().item()
            assert err <= rtol * scale, \
                f"step {step}: gradient of {name}: {err:.3g} off, scale {scale:.3g}"
        compiles.append(counter("UncachedCompile"))
    assert compiles[-1] == compiles[1], compiles  # steps after the second compile nothing
    assert not fallbacks(), fallbacks()


def _images(n, size, seed=1, classes=10):
    g = torch.Generator().manual_seed(seed)
    return [((torch.randn(4, 3, size, size, generator=g),),
             torch.randint(0, classes, (4,), generator=g)) for _ in range(n)]


# Batch-normalized convolutional nets train with SGD here: AdamW divides each gradient element
# by its own magnitude, so elements that are rounding noise in exact arithmetic (a batch norm
# makes its input's mean vanish) take full-size steps on both sides, in unrelated directions.
def _sgd(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


class _FollowMasks(torch.nn.Module):
    """The float64 referee's ReLU: multiplies by the 0/1 mask the device's ReLU made at the same
    call, so the referee differentiates the same piecewise-linear function the device did. Where
    the masks disagree with the referee's own signs, the pre-activation must be zero within
    float32 forward error: a device computing a wrong forward fails here."""

    def __init__(self, masks):
        super().__init__()
        self.masks = masks

    def forward(self, x):
        mask = self.masks.pop(0)
        flipped = mask != (x > 0)
        if flipped.any():
            worst = x[flipped].abs().max().item()
            assert worst <= 1e-4 * x.abs().max().item(), \
                f"a ReLU input of {worst:.3g} took the other side on the device"
        return x * mask.to(x.dtype)


def check_training_along_relu_masks(model, batches, loss_fn, optimizer, rtol=2e-4):
    """Optimizer steps of `model` on the device against a float64 copy of it whose ReLUs follow
    the device's masks (_FollowMasks). Against eager's float32 the comparison is ill-posed for a
    ReLU network: a pre-activation within float32 rounding of zero (resnet18 on an AVX2 host:
    -2.8e-6 in float64, -6.3e-7 in eager, +7.2e-7 on the device, a sum of two terms of 0.47)
    passes its whole gradient on one side and none on the other, and every later step inherits
    the difference. Following the device's decisions leaves only rounding to compare: each step's
    loss and every gradient within `rtol` of the referee's largest element of that parameter."""
    torch.manual_seed(0)
    masks, outs = [], []
    ref = copy.deepcopy(model).double().train()
    for module in list(ref.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.ReLU):
                setattr(module, name, _FollowMasks(masks))
    model = model.to(DEV).train()
    for module in model.modules():
        if isinstance(module, torch.nn.ReLU):
            module.register_forward_hook(lambda mod, args, out: outs.append(out))
    opt, opt_ref = optimizer(model.parameters()), optimizer(ref.parameters())
    compiles = []
    for step, (args, target) in enumerate(batches):
        outs.clear()
        opt.zero_grad()
        loss = loss_fn(logits_of(model(*[a.to(DEV) for a in args])), target.to(DEV))
        loss.backward()
        lzt.sync()  # the masks come from the program that computed the gradients
        grads = [p.grad.cpu() for p in model.parameters()]
        masks[:] = [(out > 0).cpu() for out in outs]
        outs.clear()
        opt.step()
        lzt.sync()
        opt_ref.zero_grad()
        loss_ref = loss_fn(logits_of(ref(*[a.double() for a in args])), target)
        loss_ref.backward()
        opt_ref.step()
        assert not masks, f"the referee used {len(masks)} fewer ReLU calls than the device"
        torch.testing.assert_close(loss.cpu().double(), loss_ref.detach(), rtol=1e-5, atol=1e-6)
        for (name, q), g in zip(ref.named_parameters(), grads):
            scale = q.grad.abs().max().item()
            err = (g.double() - q.grad).abs().max().item()
            assert err <= rtol * scale, \
                f"step {step}: gradient of {name}: {err:.3g} off, scale {scale:.3g}"
        compiles.append(counter("UncachedCompile"))
    assert compiles[-1] == compiles[1], compiles  # steps after the second compile nothing
    assert not fallbacks(), fallbacks()


def test_resnet18_training_steps_match_float64_along_the_devices_relu_masks():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    check_training_along_relu_masks(torchvision.models.resnet18(num_classes=10), _images(3, 64),
                                    F.cross_entropy, optimizer=_sgd)


def test_mobilenet_v3_small_training_steps_match_eager():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10, dropout=0.0)
    check_training(model, _images(3, 64), F.cross_entropy, optimizer=_sgd)


def test_vit_training_steps_match_eager():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                 num_heads=2, hidden_dim=32, mlp_dim=64,
                                                 num_classes=10)
    check_training(model, _images(3, 32), F.cross_entropy)


VOCAB, SEQ = 100, 16


def _tokens(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, VOCAB, (2, SEQ), generator=g)
        out.append(((ids,), ids))
    return out


def _next_token_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def _transformers():
    import sys
    sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/bench")
    from torch_workloads import _import_transformers  # hides a scipy the venv cannot load
    return _import_transformers()


def test_gpt2_training_steps_match_eager():
    tf = _transformers()
    torch.manual_seed(0)
    config = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64,
                           attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0, bos_token_id=0,
                           eos_token_id=0)
    check_training(tf.GPT2LMHeadModel(config), _tokens(3), _next_token_loss)


def test_bert_training_steps_match_eager():
    tf = _transformers()
    torch.manual_seed(0)
    config = tf.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                           intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
                           num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    g = torch.Generator().manual_seed(2)
    batches = [((ids,), torch.randint(0, 3, (2,), generator=g)) for (ids,), _ in _tokens(3)]
    check_training(tf.BertForSequenceClassification(config), batches, F.cross_entropy)


def test_llama_style_decoder_training_steps_match_eager():
    tf = _transformers()
    torch.manual_seed(0)
    config = tf.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=64, vocab_size=VOCAB,
                            max_position_embeddings=64)
    check_training(tf.LlamaForCausalLM(config), _tokens(3), _next_token_loss)
