"""The ATen lowering table (C++, src/aten/) as the torch.compile bridge sees it through its one
binding (lazuli.torch._aten): conditions decided from FX metadata before tracing, eager's type
promotion and integer semantics, results checked against the graph's metadata, constants, the
decomposition table, and the entries' flags against PyTorch's own schemas."""
import operator
import pathlib
import re

import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import lazuli as lz
from lazuli import _C
from lazuli.torch import _aten as lowering

aten = torch.ops.aten


def _lowered(f, *args):
    """f traced to ATen with the table's decompositions, run on Lazuli, as torch tensors."""
    gm = make_fx(f, lowering.decompositions())(*args)
    reasons = {n.name: lowering.why_not_lowered(n) for n in gm.graph.nodes}
    assert all(r is None for r in reasons.values()), reasons
    out = lowering.interpret(gm, *[lz.from_numpy(np.array(a.numpy(), order="C")) for a in args])
    return torch.from_numpy(np.array(out.numpy()))


def test_float_alpha_on_int64_operand_computes_in_float64():
    x = torch.zeros(1, dtype=torch.float64)
    y = torch.tensor([2 ** 30 + 1])
    got = _lowered(lambda a, b: torch.add(a, b, alpha=2.5), x, y)
    # In float32 the product would round to 2684354560.
    torch.testing.assert_close(got, torch.add(x, y, alpha=2.5), rtol=0, atol=0)


def test_integer_trunc_division_rounds_toward_zero():
    a = torch.tensor([-7, 7, -8, 5], dtype=torch.int32)
    b = torch.tensor([2, -2, 2, 3], dtype=torch.int32)
    f = lambda x, y: torch.div(x, y, rounding_mode="trunc")  # noqa: E731
    torch.testing.assert_close(_lowered(f, a, b), f(a, b), rtol=0, atol=0)


def test_integer_true_division_gives_float32():
    a, b = torch.tensor([7, -7]), torch.tensor([2, 2])
    got = _lowered(lambda x, y: x / y, a, b)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, a / b)


def test_bool_add_is_logical_or():
    a = torch.tensor([True, True, False])
    got = _lowered(lambda x, y: x + y, a, a)
    torch.testing.assert_close(got, a + a)


def test_cat_promotes_dtypes_and_skips_legacy_empty_tensors():
    a = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    b = torch.randn(2, 3, dtype=torch.float64)
    e = torch.zeros(0)
    f = lambda x, y, z: torch.cat([x, z, y])  # noqa: E731
    torch.testing.assert_close(_lowered(f, a, b, e), f(a, b, e))


def test_scatter_value_with_repeated_indices_matches_eager():
    base = torch.zeros(2, 4)
    index = torch.tensor([[0, 0, 3], [1, 1, 1]])
    f = lambda x, i: torch.scatter(x, 1, i, 5.0)  # noqa: E731
    torch.testing.assert_close(_lowered(f, base, index), f(base, index))


def test_unsupported_cases_are_named_before_tracing():
    x = torch.empty(2, 3, device="meta", dtype=torch.int16)
    assert lowering.why_not(aten.add.Tensor, (x, x), {}) == "dtype int16 not supported"
    y = torch.empty(2, 3, device="meta")
    assert lowering.why_not(aten._softmax.default, (y, 1, True), {}) == "half_to_float"
    i = torch.empty(2, device="meta", dtype=torch.int64)
    assert "accumulate=False" in lowering.why_not(aten.index_put.default, (y, [i], y), {})
    assert lowering.why_not(aten.special_i0.default, (y,), {}) == "no lowering"
    assert "fractional" in lowering.why_not(aten.var.correction, (y,), {"correction": 0.5})


def test_cast_to_a_dtype_lazuli_lacks_is_a_fallback():
    gm = make_fx(lambda x: x.to(torch.int16) * 2)(torch.randn(3))
    reasons = {str(n.target): lowering.why_not_lowered(n) for n in gm.graph.nodes
               if n.op == "call_function"}
    assert reasons["aten._to_copy.default"] == "dtype int16 not supported"


def test_entry_giving_the_wrong_dtype_raises_lowering_mismatch(monkeypatch):
    gm = make_fx(lambda x: -x)(torch.randn(3))
    table_lower = lowering.lower

    def wrong(target, args, kwargs, *rest):
        out = table_lower(target, args, kwargs, *rest)
        return out.to(lz.float64) if target is aten.neg.default else out

    monkeypatch.setattr(lowering, "lower", wrong)
    monkeypatch.setattr(lowering, "aten_graph", lambda gm: None)  # the walk in Python, which
    with pytest.raises(lowering.LoweringMismatch, match="aten.neg.default.*float64.*float32"):
        lowering.interpret(gm, lz.zeros(3))                      # calls lower() per node


def test_result_unlike_the_graphs_metadata_raises_lowering_mismatch_naming_the_first_node():
    # Recorded in C++ (the graph's table form), checked against each node's metadata after.
    gm = make_fx(lambda x: (-x).exp())(torch.randn(3))
    neg = next(n for n in gm.graph.nodes if n.target is aten.neg.default)
    neg.meta["val"] = neg.meta["val"].to(torch.float64)  # what a float64-giving entry would meet
    assert lowering.aten_graph(gm) is not None
    with pytest.raises(lowering.LoweringMismatch, match="aten.neg.default.*float32.*float64"):
        lowering.interpret(gm, lz.zeros(3))
    assert lowering.interpret(gm, lz.zeros(3), check=False).numpy().tolist() == [1, 1, 1]


def test_a_graph_is_converted_once_and_recorded_in_cpp_for_every_size():
    def f(x):  # sym_size, then floordiv on it: the sizes are values of the graph
        return (x.view(x.shape[0] // 2, -1) * 2).sum(1) + x.shape[0]

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(4, 3))
    assert {operator.floordiv, aten.sym_size.int} <= {n.target for n in gm.graph.nodes}
    converted = lowering.aten_graph(gm)
    assert converted is not None and lowering.aten_graph(gm) is converted
    before = lz.debug.counter_value("TorchGraphInPython")
    for rows in (4, 6, 10):
        x = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3)
        out = lowering.interpret(gm, lz.from_numpy(x.numpy()))
        np.testing.assert_array_equal(out.numpy(), f(x).numpy())
    assert lz.debug.counter_value("TorchGraphInPython") == before  # never walked in Python


def test_a_failing_record_names_its_node_and_is_not_walked_again():
    from lazuli.torch._bridge import _failing_node
    gm = make_fx(lambda x: (x * 2).view(2, -1).exp())(torch.randn(4))
    before = lz.debug.counter_value("TorchGraphInPython")
    with pytest.raises(ValueError, match="reshape") as info:  # 5 values do not view as [2, -1]
        lowering.interpret(gm, lz.zeros(5), check=False)
    assert _failing_node(info.value).target is aten.view.default
    assert lz.debug.counter_value("TorchGraphInPython") == before


def test_an_in_place_update_of_a_constant_is_walked_in_python():
    # copy_ into a tensor constant (get_attr), as a hand-written graph could have it: every
    # recording of the C++ form shares the graph's constants, so it takes no such graph.
    root = torch.nn.Module()
    root.c = torch.zeros(3)
    g = torch.fx.Graph()
    x = g.placeholder("x")
    upd = g.call_function(aten.copy_.default, (g.get_attr("c"), x))
    g.output(upd)
    gm = torch.fx.GraphModule(root, g)
    assert lowering.aten_graph(gm) is None
    before = lz.debug.counter_value("TorchGraphInPython")
    assert lowering.interpret(gm, lz.ones(3)).numpy().tolist() == [1, 1, 1]
    assert lz.debug.counter_value("TorchGraphInPython") == before + 1


def test_a_converted_graph_module_is_freed_with_its_conversion():
    import gc
    import weakref
    gm = make_fx(lambda x: (x * 2).sum())(torch.randn(3))
    assert lowering.aten_graph(gm) is not None
    gone = weakref.ref(gm)
    del gm
    gc.collect()
    assert gone() is None  # the conversion holds no node (a node holds its GraphModule)


def test_tensor_constant_in_the_graph_is_copied_in():
    const = torch.tensor([1.0, 2.0, 3.0])
    gm = make_fx(lambda x: x * const)(torch.randn(3))
    assert any(n.op == "get_attr" for n in gm.graph.nodes)
    assert all(lowering.why_not_lowered(n) is None for n in gm.graph.nodes)
    out = lowering.interpret(gm, lz.ones(3))
    np.testing.assert_array_equal(out.numpy(), const.numpy())


def test_entry_of_an_op_another_module_registers_is_found_by_name():
    # prims.fma exists only once torch._inductor is imported (its decompositions emit it); the
    # table names overloads by their printed name, so its entry applies from then on.
    import torch._inductor.decomposition  # noqa: F401
    op = torch.ops.prims.fma.default
    x = torch.empty(3, device="meta")
    assert lowering.why_not(op, (x, x, x), {}) is None
    assert any(r["op"] == "prims.fma.default" for r in lowering.supported_ops())


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


def test_supported_ops_are_the_cpp_tables_entries():
    rows = lowering.supported_ops()
    names = [e.name for e in _C._aten.entries()]
    assert [r["op"] for r in rows] == names == sorted(names)
    assert len(rows) >= 225
    add = next(r for r in rows if r["op"] == "aten.add.Tensor")
    assert add["dtypes"] == ["bool", "float32", "float64", "int32", "int64"]
    assert add["conditions"] == "bool + bool is logical or"


def _overload(name):
    return lowering._overload(name)


def test_view_and_in_place_flags_agree_with_pytorchs_schemas():
    # An entry flagged view keeps 16-bit operands (its result aliases its input), one flagged
    # mutating updates an argument: both must be what the op's schema says.
    import torch._inductor.decomposition  # noqa: F401  (registers prims.fma)
    wrong = []
    for e in _C._aten.entries():
        op = _overload(e.name)
        assert op is not None, f"{e.name}: no such overload in this PyTorch"
        if e.view != op.is_view or e.mutates != op._schema.is_mutable:
            wrong.append(f"{e.name}: view {e.view}/{op.is_view}, mutates {e.mutates}/"
                         f"{op._schema.is_mutable}")
    assert not wrong, wrong


def test_random_entries_are_flagged():
    random = {e.name for e in _C._aten.entries() if e.random}
    assert random == {"aten.native_dropout.default", "aten.bernoulli.p", "aten.rand_like.default"}


def test_decompositions_keep_ops_the_table_lowers_whole():
    table = lowering.decompositions()
    assert aten.native_layer_norm.default not in table  # lowered directly
    assert aten.addcdiv.default in table and aten.lerp.Scalar in table  # the optimizers' ops
    assert table is not lowering.decompositions()  # callers may add to their copy


def _direct(f, *args):
    """f (which calls one ATen overload directly) traced without decompositions and compared."""
    gm = make_fx(f)(*args)
    assert all(lowering.why_not_lowered(n) is None for n in gm.graph.nodes)
    out = lowering.interpret(gm, *[lz.from_numpy(np.array(a.numpy(), order="C")) for a in args])
    torch.testing.assert_close(torch.from_numpy(np.array(out.numpy())), f(*args), equal_nan=True)


_I = torch.tensor([[-7, 3], [5, -2]])
_F = torch.tensor([[-1.5, 0.25], [2.0, 7.5]])
_B = torch.tensor([[True, False], [True, True]])
# Overloads no OpInfo graph reaches (PyTorch rewrites them into others before a graph exists),
# each called directly: _opinfo.NOT_IN_OPINFO names these.
DIRECT = {
    "all.dim": (lambda x: aten.all.dim(x, 1), _B),
    "all.dims": (lambda x: aten.all.dims(x, [0, 1], True), _B),
    "arange.default": (lambda x: aten.arange.default(4) + x, _I[0, 0]),
    "arange.start": (lambda x: aten.arange.start(2, 7) * x, _F[0, 0]),
    "bitwise_and.Scalar": (lambda x: aten.bitwise_and.Scalar(x, 6), _I),
    "bitwise_or.Scalar": (lambda x: aten.bitwise_or.Scalar(x, 6), _I),
    "bitwise_xor.Scalar": (lambda x: aten.bitwise_xor.Scalar(x, 6), _I),
    "clamp_max.default": (lambda x: aten.clamp_max.default(x, 0.5), _F),
    "clamp_min.default": (lambda x: aten.clamp_min.default(x, 3), _I),
    "copy.default": (lambda x, y: aten.copy.default(x, y), _F, _I[0]),
    "div.Scalar_mode": (lambda x: aten.div.Scalar_mode(x, 2, rounding_mode="trunc"), _I),
    "fill.Scalar": (lambda x: aten.fill.Scalar(x, 3), _F),
    "fill.Tensor": (lambda x, v: aten.fill.Tensor(x, v), _I, _F[0, 1]),
    "floor_divide.Scalar": (lambda x: aten.floor_divide.Scalar(x, 3), _I),
    "isfinite.default": (lambda x: aten.isfinite.default(x / 0.0), _F),
    "pow.Scalar": (lambda x: aten.pow.Scalar(0.9, x), _F),
    "remainder.Scalar_Tensor": (lambda x: aten.remainder.Scalar_Tensor(5, x), _I),
    "reshape.default": (lambda x: aten.reshape.default(x, [-1]), _F),
    "rsub.Scalar": (lambda x: aten.rsub.Scalar(x, 2), _I),
    "rsub.Tensor": (lambda x, y: aten.rsub.Tensor(x, y, alpha=2), _F, _I),
    "lerp.Tensor": (lambda x, y, w: aten.lerp.Tensor(x, y, w), _F, _F * 3,
                    torch.tensor([[0.2, 0.7], [0.5, -0.1]])),
}


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_overload_no_opinfo_reaches_matches_eager(name):
    f, *args = DIRECT[name]
    _direct(f, *args)


def test_direct_cases_cover_the_opinfo_gaps():
    from lazuli.torch import _opinfo
    gaps = {name.replace("aten.", "") for name, why in _opinfo.NOT_IN_OPINFO.items()
            if "test_aten_table" in why}
    assert gaps == set(DIRECT)


# ---- attention: kept whole (PyTorch's decomposition is for inference only) -------------------

def _attention_case(dtype, n_q, n_k, causal, mask):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g, dtype=dtype) for n in (n_q, n_k, n_k))
    m = None
    if mask is not None:
        m = torch.randn(n_q, n_k, generator=g, dtype=dtype)
        if mask == "a fully masked row":
            m[1] = -float("inf")
    return q, k, v, m


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_q,n_k,causal,mask", [(4, 4, False, None), (3, 6, True, None),
                                                 (3, 5, False, "additive"),
                                                 (3, 5, False, "a fully masked row")])
def test_flash_attention_and_its_backward_equal_eager(dtype, n_q, n_k, causal, mask):
    fw = aten._scaled_dot_product_flash_attention_for_cpu.default
    bw = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    q, k, v, m = _attention_case(dtype, n_q, n_k, causal, mask)
    scale = None if mask is None else 0.3
    out, lse = fw(q, k, v, 0.0, causal, attn_mask=m, scale=scale)
    grad = torch.randn_like(out)
    want = (out, lse) + bw(grad, q, k, v, out, lse, 0.0, causal, attn_mask=m, scale=scale)

    def lz_(t):
        return None if t is None else lz.from_numpy(np.array(t.numpy(), order="C"))

    got = lowering.lower(fw, (lz_(q), lz_(k), lz_(v), 0.0, causal), dict(attn_mask=lz_(m), scale=scale))
    got += lowering.lower(bw, (lz_(grad), lz_(q), lz_(k), lz_(v), lz_(out), lz_(lse), 0.0, causal),
                          dict(attn_mask=lz_(m), scale=scale))
    tol = dict(rtol=1e-5, atol=2e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    for name, g, w in zip(("out", "logsumexp", "grad_q", "grad_k", "grad_v"), got, want):
        torch.testing.assert_close(torch.from_numpy(np.array(g.numpy())), w, msg=name, **tol)


def test_attention_is_not_decomposed_so_its_backward_gets_the_logsumexp():
    # PyTorch's decomposition returns the attention weights as the logsumexp (export only), and
    # the backward op then computes wrong gradients from them.
    assert aten._scaled_dot_product_flash_attention_for_cpu.default not in lowering.decompositions()
    assert lowering.why_not(aten._scaled_dot_product_flash_attention_for_cpu.default,
                            (torch.empty(1, 2, 3, 4),) * 3, {"dropout_p": 0.1}) == "dropout_p=0.1"


def test_support_doc_lists_every_entry_with_its_dtypes_and_conditions():
    # docs/torch-support.md is generated (tools/gen_torch_support.py) from the C++ table and an
    # OpInfo run; an entry added, removed or changed without regenerating it fails here.
    doc = pathlib.Path(__file__).resolve().parents[3] / "docs" / "torch-support.md"
    listed = {}
    for line in doc.read_text().splitlines():
        m = re.match(r"\| `([^`]+)` \|[^|]*\|[^|]*\| ([^|]*) \| ([^|]*) \|", line)
        if m:
            listed[m[1]] = (m[2].split(), m[3].strip())
    table = {r["op"]: r for r in lowering.supported_ops()}
    stale = "docs/torch-support.md is stale: run tools/gen_torch_support.py"
    assert sorted(listed) == sorted(table), stale
    for op, row in table.items():
        dtypes, note = listed[op]
        assert dtypes == row["dtypes"] and note.startswith(row["conditions"]), f"{op}: {stale}"
