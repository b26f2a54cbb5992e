"""lazuli.torch.capture: a training step over device tensors is traced until two traces agree,
then replayed without its Python. Eager PyTorch on the CPU is the oracle for every value; traces
and replays are read from capture_stats() and counters, never from timing."""
import warnings

import pytest
import torch

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value  # counters start at 0 in every test (tests/python/conftest.py)
DEV = lzt.device()
F = torch.nn.functional


def mlp(seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(dropout),
                               torch.nn.Linear(16, 4))


def batches(n, size=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(size, 8, generator=g), torch.randint(0, 4, (size,), generator=g))
            for _ in range(n)]


def step_fn(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def eager_losses(model, opt, data, sched=None):
    step = step_fn(model, opt)
    out = []
    for x, y in data:
        out.append(step(x, y).item())
        if sched is not None:
            sched.step()
    return out


def assert_same_parameters(model, eager):
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6, msg=name)


# capturable=True (Adam's step count a device tensor) on the device; eager's CPU run has no such
# mode and computes the same numbers without it.
OPTIMIZERS = {
    "sgd": lambda p, fe, dev: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2,
                                              foreach=fe),
    "adam_capturable": lambda p, fe, dev: torch.optim.Adam(p, lr=1e-2, foreach=fe, capturable=dev),
    "adamw_capturable": lambda p, fe, dev: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1,
                                                             foreach=fe, capturable=dev),
}


@pytest.mark.parametrize("foreach", [False, True], ids=["single_tensor", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_captured_training_step_replays_and_matches_eager(name, foreach):
    data = batches(6)
    eager = mlp()
    want = eager_losses(eager, OPTIMIZERS[name](eager.parameters(), foreach, False), data)
    model = mlp().to(DEV)
    step = lzt.capture(step_fn(model, OPTIMIZERS[name](model.parameters(), foreach, True)))
    got = []
    for i, (x, y) in enumerate(data):
        if i == 3:
            compiles = counter("UncachedCompile")
        got.append(step(x.to(DEV), y.to(DEV)).item())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_parameters(model, eager)
    assert step.capture_stats()["replays"] == 3  # traced three times (state made on step 1)
    assert counter("UncachedCompile") == compiles and counter("CaptureReplay") == 3
    for p, q in zip(model.parameters(), eager.parameters()):  # .grad written by the replays
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6)


class TinyAttention(torch.nn.Module):
    """Sizes written from the input's: a positional table sliced to the length, head views."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.pos = torch.nn.Parameter(torch.randn(32, 8))
        self.qkv = torch.nn.Linear(8, 24)
        self.head = torch.nn.Linear(8, 16)

    def forward(self, ids):
        b, t = ids.shape
        h = self.emb(ids) + self.pos[:t]
        q, k, v = (z.view(b, t, 2, 4).transpose(1, 2) for z in self.qkv(h).chunk(3, dim=-1))
        att = (q @ k.transpose(-1, -2) * 0.5).softmax(-1)
        return self.head((att @ v).transpose(1, 2).reshape(b, t, 8)).flatten(0, 1)


def test_a_new_sequence_length_is_traced_once_then_replayed_and_matches_eager():
    g = torch.Generator().manual_seed(3)
    lengths = [5, 5, 5, 5, 7, 7, 7, 11, 11, 5, 7, 11, 5]
    data = [(torch.randint(0, 16, (2, t), generator=g), torch.randint(0, 16, (2 * t,), generator=g))
            for t in lengths]
    torch.manual_seed(0)
    eager = TinyAttention()
    want = eager_losses(eager, torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9), data)
    torch.manual_seed(0)
    model = TinyAttention().to(DEV)
    step = lzt.capture(step_fn(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)))
    settled, adopted = counter("CaptureSettledAtNewSizes"), counter("CaptureSinksAdopted")
    got = [step(x.to(DEV), y.to(DEV)).item() for x, y in data]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_parameters(model, eager)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):  # the last step's
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6, msg=name)
    # The first length: three traces (the momentum buffers made on step 1); each new one: one.
    # Going back to a length replays it: zero_grad() in another length's trace replaced the .grad
    # tensors its record wrote, and the record takes their successors.
    assert step.capture_stats()["traces"] == 3 + 1 + 1
    assert step.capture_stats()["replays"] == len(lengths) - 5
    assert counter("CaptureSettledAtNewSizes") - settled == 2
    assert counter("CaptureSinksAdopted") - adopted == 2  # lengths 5 and 7, once each


def test_a_scheduler_outside_the_step_changes_lr_with_retraces_but_no_compile():
    data = batches(8)
    eager = mlp()
    eopt = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    want = eager_losses(eager, eopt, data, torch.optim.lr_scheduler.StepLR(eopt, 3, gamma=0.5))
    model = mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, 3, gamma=0.5)
    step = lzt.capture(step_fn(model, opt))
    got = []
    for i, (x, y) in enumerate(data):
        if i == 3:
            compiles = counter("UncachedCompile")
        got.append(step(x.to(DEV), y.to(DEV)).item())
        sched.step()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_parameters(model, eager)
    # lr changes after steps 3 and 6: the optimizer's guard refuses the replay, two traces settle
    # the new value (same program), and step 5 replays
    assert counter("CaptureReplayRefused") == 2 and step.capture_stats()["replays"] == 1
    assert counter("UncachedCompile") == compiles


def test_eval_mode_after_replays_is_not_replayed_as_training():
    model = mlp(dropout=0.5).to(DEV)
    eager = mlp(dropout=0.5).eval()

    @lzt.capture
    def forward(x):
        return model(x)

    x = torch.randn(4, 8)
    for _ in range(4):
        forward(x.to(DEV))  # training mode: dropout
    assert forward.capture_stats()["replays"] >= 1
    model.eval()
    with pytest.warns(RuntimeWarning, match="training flag changed"):
        out = forward(x.to(DEV))
    torch.testing.assert_close(out.cpu(), eager(x))  # no dropout: traced again
    assert counter("CaptureReplayRefused") == 1


def test_default_adam_counts_steps_on_the_cpu_so_it_is_traced_every_call_and_stays_right():
    data = batches(5)
    eager = mlp()
    want = eager_losses(eager, torch.optim.Adam(eager.parameters(), lr=1e-2), data)
    model = mlp().to(DEV)
    step = lzt.capture(step_fn(model, torch.optim.Adam(model.parameters(), lr=1e-2)))
    with pytest.warns(RuntimeWarning, match="changes between calls"):
        got = [step(x.to(DEV), y.to(DEV)).item() for x, y in data]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert step.capture_stats()["replays"] == 0
    assert_same_parameters(model, eager)


def test_zero_grad_outside_the_step_is_traced_again_and_stays_right():
    data = batches(5)
    eager = mlp()
    eopt = torch.optim.SGD(eager.parameters(), lr=0.1)
    want = eager_losses(eager, eopt, data)
    model = mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @lzt.capture
    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    got = []
    with warnings.catch_warnings(record=True):
        for x, y in data:
            opt.zero_grad()  # .grad = None: the tensor the record writes is gone
            got.append(step(x.to(DEV), y.to(DEV)).item())
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_parameters(model, eager)


def test_dropout_under_replay_draws_the_same_numbers_as_the_traced_device():
    def run(capture):
        model = mlp(dropout=0.5).to(DEV)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = step_fn(model, opt)
        if capture:
            step = lzt.capture(step)
        torch.manual_seed(7)
        losses = [step(x.to(DEV), y.to(DEV)).item() for x, y in batches(6)]
        return losses, [p.cpu() for p in model.parameters()]

    plain, captured = run(False), run(True)
    assert counter("CaptureReplay") == 4  # plain SGD makes no state: replays from the third call
    torch.testing.assert_close(captured, plain, rtol=1e-6, atol=1e-7)


def test_a_value_read_inside_is_traced_every_call_or_raises_with_full_graph():
    x = torch.randn(3).to(DEV)

    @lzt.capture
    def reads(t):
        return t * (t.sum().item() > 0)

    with pytest.warns(RuntimeWarning, match="executed something"):
        for _ in range(4):
            reads(x)
    assert reads.capture_stats()["replays"] == 0

    @lzt.capture(full_graph=True)
    def strict(t):
        return t * (t.sum().item() > 0)

    # RuntimeError from torch's dispatcher, as lazuli.torch.compile(full_graph=True) raises
    with pytest.raises(RuntimeError, match=r"full_graph=True.*value-read.*test_device_capture.py"):
        strict(x)
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)  # the runtime still works


def test_arguments_off_the_device_raise_type_error_naming_them():
    @lzt.capture
    def f(a, b):
        return a + b

    with pytest.raises(TypeError, match="argument 1 is on cpu"):
        f(torch.ones(2).to(DEV), torch.ones(2))


def test_a_returned_argument_is_the_callers_tensor_and_in_place_writes_reach_it():
    @lzt.capture
    def bump(t, other):
        t.add_(1)
        return t, other * 2

    x = torch.zeros(3).to(DEV)
    for i in range(5):
        same, doubled = bump(x, torch.full((3,), float(i)).to(DEV))
        assert same is x
        torch.testing.assert_close(doubled.cpu(), torch.full((3,), 2.0 * i))
    torch.testing.assert_close(x.cpu(), torch.full((3,), 5.0))
    assert bump.capture_stats()["replays"] >= 2


def test_no_grad_and_autocast_are_part_of_the_signature():
    model = mlp().to(DEV)

    @lzt.capture
    def forward(x):
        return model(x)

    x = torch.randn(2, 8).to(DEV)
    for _ in range(3):
        forward(x)
    with torch.no_grad():
        out = forward(x)
    with torch.autocast("lazuli", dtype=torch.bfloat16):
        low = forward(x)
    assert out.dtype == torch.float32 and low.dtype == torch.bfloat16
    assert forward.capture_stats()["traces"] == 4  # two to settle, then each new signature once


def test_a_per_step_schedule_on_a_device_tensor_lr_keeps_replaying():
    data = batches(7)

    def schedule(opt):
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i))

    eager = mlp()
    eopt = torch.optim.AdamW(eager.parameters(), lr=torch.tensor(1e-2))
    want = eager_losses(eager, eopt, data, schedule(eopt))
    model = mlp().to(DEV)
    # lr a device tensor: the scheduler fills it in place, every replay reads its current value
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-2, device=DEV), capturable=True)
    sched = schedule(opt)
    step = lzt.capture(step_fn(model, opt))
    got = []
    for x, y in data:
        got.append(step(x.to(DEV), y.to(DEV)).item())
        sched.step()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert_same_parameters(model, eager)
    assert step.capture_stats()["replays"] == 4


def test_a_returned_tensor_the_step_also_keeps_is_traced_every_call_with_a_warning():
    kept = []

    @lzt.capture
    def f(x):
        y = x * 2
        kept.append(y)  # a replay would return a new tensor and leave this one stale
        return y

    x = torch.ones(3).to(DEV)
    with pytest.warns(RuntimeWarning, match="also keeps"):
        for _ in range(4):
            f(x)
    assert f.capture_stats()["replays"] == 0
    torch.testing.assert_close(kept[-1].cpu(), torch.full((3,), 2.0))
