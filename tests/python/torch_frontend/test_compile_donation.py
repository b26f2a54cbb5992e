"""Inputs a compiled graph updates in place (parameters and optimizer state in a training step,
BatchNorm's running statistics) are donated: the Lazuli program writes their new values into the
torch tensors' own memory, so nothing is copied back, and the values are eager's."""
import copy

import torch

import lazuli.torch as lzt
from conftest import counter


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_training_step_updates_parameters_and_state_in_their_own_memory():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4))
    eager = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    compiled = torch.compile(_step, backend=lzt.backend)
    addresses = {n: p.data_ptr() for n, p in model.named_parameters()}
    addresses.update({n: b.data_ptr() for n, b in model.named_buffers()})
    for i in range(3):
        x, y = torch.randn(6, 8), torch.randn(6, 4)
        loss = compiled(model, opt, x, y)
        loss_e = _step(eager, opt_e, x, y)
        torch.testing.assert_close(loss, loss_e, rtol=1e-5, atol=1e-6)
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=n)
        assert p.data_ptr() == addresses[n], f"{n} moved: it was not updated in place"
    for (n, b), c in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=n)
        assert b.data_ptr() == addresses[n]
    # Every update went into its tensor's memory, by the program itself: nothing was copied back,
    # by the bridge or by aot_autograd (keep_inference_input_mutations keeps the optimizer's
    # updates in the graph, where a partition donates them).
    assert counter("TorchWriteBackCopy") == 0
    assert counter("TorchWriteBackInPlace") >= 3 * 4  # 4 parameters and their momenta, 3 steps


def test_an_update_stays_in_eager_when_an_eager_node_reads_the_old_value():
    # FX has no edge from the copy_ that updates `a` to the eager node reading a's old value
    # (int16: no Lazuli dtype), so the update must not run early in a partition.
    def f(a):
        with torch.no_grad():
            old = (a.to(torch.int16) * 3).to(torch.float32)
            a.mul_(2)
            return old + a

    a = torch.arange(6.0)
    want_a, want_out = a * 2, a * 3 + a * 2
    out = torch.compile(f, backend=lzt.backend)(a)
    torch.testing.assert_close(a, want_a)
    torch.testing.assert_close(out, want_out)
    assert counter("fallback::aten.copy_.default") == 1


def test_a_non_contiguous_input_updated_in_place_ends_with_eagers_value():
    def f(a):
        a.mul_(2)
        return a + 1

    base = torch.arange(12.0).reshape(3, 4)
    a = base.t()  # not contiguous: crosses as a copy
    want = base.clone().t() * 2
    out = torch.compile(f, backend=lzt.backend)(a)
    torch.testing.assert_close(a, want)
    torch.testing.assert_close(out, want + 1)
