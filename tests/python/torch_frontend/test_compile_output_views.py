"""Transposes the bridge never computes: a partition output that is a view of one of its inputs
(aot_autograd saves a linear layer's `t()` of its weight for the backward) is returned as that
view of the torch input, as eager returns it; and a transpose of a transpose (a weight's gradient
through its `t()`) is folded away before tracing."""
import torch

import lazuli.torch as lzt
from conftest import counter
from lazuli.torch import _bridge


def test_a_saved_transposed_weight_is_a_view_of_the_weight_and_gradients_match_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    x = torch.randn(5, 6)
    compiled = torch.compile(lambda m, x: m(x).square().sum(), backend=lzt.backend)
    loss = compiled(model, x)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want = model(x).square().sum()
    want.backward()
    torch.testing.assert_close(loss, want)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    # The second layer's t(), saved for the input gradient (the first layer's input needs none).
    assert counter("TorchOutputView") == 1


def test_a_view_of_an_input_the_graph_updates_is_not_returned_as_a_view():
    # In a functional graph, permute(a) names a's value before the copy_ at the end updates it; a
    # view of the torch input would show the new value after the write-back. (dynamo's graphs
    # never return such a view: eager's views follow the update; this is the bridge's guard.)
    g = torch.fx.Graph()
    a = g.placeholder("a")
    b = g.placeholder("b")
    ta = g.call_function(torch.ops.aten.permute.default, (a, [1, 0]))
    tb = g.call_function(torch.ops.aten.t.default, (b,))
    g.call_function(torch.ops.aten.copy_.default, (a, b))
    g.output((ta, tb))
    views = _bridge._input_views(torch.fx.GraphModule({}, g))
    assert views[0] is None
    assert views[1] == (1, [(torch.ops.aten.t.default, (), {})])


def _graph_with_meta(build):
    """An ATen FX graph from `build(x)` (a 2x3x4 input), with shape metadata as aot_autograd's."""
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(build)(torch.randn(2, 3, 4))


def test_a_transpose_of_a_transpose_is_folded_away_and_chains_compose():
    gm = _graph_with_meta(lambda x: (x.permute(1, 0, 2).permute(1, 0, 2) * 2,
                                     x.transpose(0, 2).permute(2, 0, 1)))
    gm = _bridge._fold_permutes(gm)
    permutes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in (
        torch.ops.aten.permute.default, torch.ops.aten.transpose.int)]
    assert len(permutes) == 1  # the identity went, the other chain is one permute
    x = torch.randn(2, 3, 4)
    a, b = gm(x)
    torch.testing.assert_close(a, x * 2)
    torch.testing.assert_close(b, x.transpose(0, 2).permute(2, 0, 1))
