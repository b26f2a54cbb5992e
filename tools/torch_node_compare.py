#!/usr/bin/env python3
"""Bisects a numerical difference between torch.compile(backend=lazuli) and eager, node by node.

Captures the ATen graphs aot_autograd hands a backend (forward and backward, with the lowering
table's decompositions) for one training step (cross entropy, backward) of a torchvision model,
replays each graph in eager on the captured inputs, and for every node the lowering table handles
runs its lowering on the very same float32 inputs. Each result is compared with eager's float32
result and with the node evaluated in float64 on those inputs; the nodes where Lazuli is farthest
from float64 relative to eager's own distance come first. A lowering bug shows as a node far from
both; float32 rounding as a ratio near 1-10 at 1e-7 of the node's scale.

    PYTHONPATH=python <torch venv>/bin/python tools/torch_node_compare.py resnet18 --size 32
"""
import argparse
import operator
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402

from lazuli.torch import _aten  # noqa: E402
from lazuli.torch._boundary import to_lazuli  # noqa: E402


def capture_graphs(model, x, y):
    """[(kind, GraphModule, inputs)] of one compiled training step."""
    graphs = []

    def capture(kind):
        def compiler(gm, example_inputs):
            def run(args):  # boxed: aot_autograd hands over a list
                graphs.append((kind, gm, [a.detach().clone() if isinstance(a, torch.Tensor) else a
                                          for a in args]))
                return gm(*args)
            run._boxed_call = True
            return run
        return compiler

    backend = aot_autograd(fw_compiler=capture("forward"), bw_compiler=capture("backward"),
                           decompositions=_aten.decompositions())

    def step(m, a, b):
        loss = F.cross_entropy(m(a), b)
        loss.backward()
        return loss

    torch.compile(step, backend=backend)(model, x, y)
    return graphs


def _double(v):
    return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def compare(kind, gm, inputs):
    """Rows (ratio, lazuli vs float64, eager vs float64, lazuli vs eager, kind, node, op)."""
    rows, env = [], {}
    it = iter(inputs)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
            continue
        if node.op != "call_function":
            continue
        load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a  # noqa: E731
        args = torch.fx.node.map_aggregate(node.args, load)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, load)
        env[node] = out = node.target(*args, **kwargs)
        if node.target is operator.getitem or _aten.why_not_lowered(node) is not None:
            continue
        if _aten.entry(node.target) is None:
            continue
        kw64 = dict(torch.fx.node.map_aggregate(kwargs, _double))
        if kw64.get("dtype") == torch.float32:
            kw64["dtype"] = torch.float64
        try:
            out64 = node.target(*torch.fx.node.map_aggregate(args, _double), **kw64)
        except Exception:  # noqa: BLE001 (an op without a float64 kernel: no reference)
            continue
        to_lz = lambda a: to_lazuli(a) if isinstance(a, torch.Tensor) else a  # noqa: E731
        got = _aten.lower(node.target, torch.fx.node.map_aggregate(args, to_lz),
                          torch.fx.node.map_aggregate(kwargs, to_lz))
        triples = zip(*(v if isinstance(v, (list, tuple)) else [v] for v in (out, got, out64)))
        for want, lz_value, ref in triples:
            if not isinstance(want, torch.Tensor) or not want.is_floating_point():
                continue
            value = torch.from_numpy(np.array(lz_value.numpy())).double()
            scale = ref.abs().max().item() or 1.0
            e_lz = (value - ref).abs().max().item() / scale
            e_eager = (want.double() - ref).abs().max().item() / scale
            e_both = (value - want.double()).abs().max().item() / scale
            rows.append((e_lz / max(e_eager, 1e-12), e_lz, e_eager, e_both, kind, node.name,
                         str(node.target)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a torchvision.models constructor (resnet18, ...)")
    parser.add_argument("--size", type=int, default=32, help="image size (default 32)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--top", type=int, default=20, help="rows printed (default 20)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10)
    x = torch.randn(args.batch, 3, args.size, args.size)
    y = torch.randint(0, 10, (args.batch,))
    rows = []
    for kind, gm, inputs in capture_graphs(model, x, y):
        rows += compare(kind, gm, inputs)
    rows.sort(reverse=True)
    print(f"{len(rows)} lowered node outputs; errors relative to each output's float64 scale")
    print("ratio     lazuli-f64  eager-f64  lazuli-eager  graph     node")
    for r in rows[:args.top]:
        print(f"{r[0]:<9.3g} {r[1]:<11.3g} {r[2]:<10.3g} {r[3]:<13.3g} {r[4]:<9} %{r[5]} = {r[6]}")


if __name__ == "__main__":
    main()
