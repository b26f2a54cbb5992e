"""What every real-model test checks in one place: a model compiled with
`backend=lazuli.torch.backend` gives eager's outputs, or eager's losses, gradients and AdamW
updates, call after call; from the second call on nothing is traced or compiled (counters, never
timing); and the ATen ops it leaves to PyTorch eager are the ones docs/torch.md lists for it."""
import copy

import torch

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value


def compile_marks():
    """Everything a call can cost beyond running: FX graphs, partition traces, programs, kernels."""
    return {name: counter(name) for name in
            ("TorchGraphCompiled", "TorchTrace", "UncachedCompile", "KernelCompile")}


def fallback_ops():
    """The ATen overloads that ran in PyTorch eager so far ("aten.convolution.default", ...)."""
    return {name[len("fallback::"):] for name in lz.debug.counter_names()
            if name.startswith("fallback::aten.") and counter(name) > 0}


def output_tensor(out):
    """The tensor a model returns: itself, or a transformers output's logits."""
    return out if isinstance(out, torch.Tensor) else out.logits


def check_inference(model, batches, rtol=1e-5, atol=1e-6):
    """Each batch (a tuple of arguments) through the compiled model equals eager; the calls after
    the first compile nothing."""
    model.eval()
    compiled = torch.compile(model, backend=lzt.backend)
    marks = []
    with torch.no_grad():
        for args in batches:
            got, want = output_tensor(compiled(*args)), output_tensor(model(*args))
            assert want.abs().max() > 1e-3  # a model whose outputs vanish would prove nothing
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
            marks.append(compile_marks())
    assert marks[0]["TorchTrace"] > 0
    assert all(m == marks[0] for m in marks[1:]), marks


# Gradient elements below this fraction of the step's largest gradient are zero in exact
# arithmetic (attention's key bias: softmax ignores a constant added to a row of scores; a bias
# followed by a training-mode batch norm, which subtracts the mean). Both sides compute rounding
# noise there, which Adam divides by its own magnitude into a full-size step, so those elements
# are checked to stay noise, not to move alike; they do not change the model's function.
STRUCTURAL_ZERO = 1e-6


def check_training(model, batches, loss_fn, rtol=1e-4, lr=1e-3):
    """A compiled training step (zero_grad, loss, backward, AdamW step) against the same step in
    eager on a copy: per batch the loss, every gradient (to `rtol` of its parameter's largest
    gradient) and every parameter after the update agree; the calls after the first compile
    nothing."""
    model.train()
    eager = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    opt_eager = torch.optim.AdamW(eager.parameters(), lr=lr)

    def step(m, o, args, target):
        o.zero_grad()
        loss = loss_fn(output_tensor(m(*args)), target)
        loss.backward()
        o.step()
        return loss

    compiled = torch.compile(step, backend=lzt.backend)
    named = list(model.named_parameters())
    moved_by_noise = [torch.zeros_like(p, dtype=torch.bool) for _, p in named]
    marks = []
    for args, target in batches:
        loss = compiled(model, opt, args, target)
        loss_eager = step(eager, opt_eager, args, target)
        torch.testing.assert_close(loss, loss_eager, rtol=1e-5, atol=1e-6)
        top = max(q.grad.abs().max().item() for q in eager.parameters() if q.grad is not None)
        for k, ((name, p), q) in enumerate(zip(named, eager.parameters())):
            if q.grad is None:
                assert p.grad is None, name
                continue
            noise = q.grad.abs() <= STRUCTURAL_ZERO * top
            assert (p.grad.abs()[noise] <= STRUCTURAL_ZERO * top).all(), name
            moved_by_noise[k] |= noise
            err = (p.grad - q.grad).abs().max().item()
            assert err <= rtol * q.grad.abs().max().item() + STRUCTURAL_ZERO * top, \
                f"gradient of {name}: {err:.3g} off, scale {q.grad.abs().max().item():.3g}"
            keep = ~moved_by_noise[k]
            torch.testing.assert_close(p.detach()[keep], q.detach()[keep], rtol=1e-5,
                                       atol=10 * rtol * lr, msg=f"{name} after the AdamW step")
        marks.append(compile_marks())
    assert all(m == marks[0] for m in marks[1:]), marks
    return model, eager
