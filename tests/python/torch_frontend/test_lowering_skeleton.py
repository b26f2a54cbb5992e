"""The lowering table records an ATen graph of a linear layer on Lazuli tensors and gets eager's
value; a node without an entry is reported before tracing."""
import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import lazuli as lz
from lazuli.torch import lowering


def test_linear_relu_graph_lowers_and_matches_eager():
    def f(x, w, b):
        return torch.relu(torch.nn.functional.linear(x, w, b)).sum(1).mean()

    args = (torch.randn(4, 3), torch.randn(5, 3), torch.randn(5))
    gm = make_fx(f)(*args)
    assert all(lowering.why_not_lowered(n) is None for n in gm.graph.nodes)
    out = lowering.interpret(gm, *[lz.from_numpy(a.numpy()) for a in args])
    np.testing.assert_allclose(out.item(), f(*args).item(), rtol=1e-6)


def test_node_without_entry_is_known_before_tracing():
    gm = make_fx(lambda x: torch.special.i0(x))(torch.randn(3))
    reasons = [lowering.why_not_lowered(n) for n in gm.graph.nodes if n.op == "call_function"]
    assert reasons == ["no lowering"]
