"""Arguments of the wrong kind raise TypeError / ValueError / IndexError / OverflowError naming the
function and the argument, in PyTorch's words ("lz.sum(): argument 'dim' (position 2) must be int
or tuple of ints, not str"), never pybind11's "incompatible function arguments" or "Unable to cast
Python instance"; int-like arguments (numpy integers, __index__) work as in PyTorch; Tensor.to and
format() follow PyTorch; bool subtraction is refused as in PyTorch."""
import gc
import inspect

import numpy as np
import pytest

import lazuli as lz
from lazuli import _C

PYBIND_PHRASES = ("incompatible function arguments", "Unable to cast", "Invoked with",
                  "wrong argument type", "The following argument types are supported")
USER_ERRORS = (TypeError, ValueError, IndexError, OverflowError)


def raises(exc, fn, *match):
    """fn() raises exc (exactly that class, not a subclass), with every string of `match` in its
    message and none of pybind11's phrases; no tensor is left alive."""
    gc.collect()
    before = lz.debug.live_tensor_count()
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    assert type(info.value) is exc, (type(info.value), msg)
    for m in match:
        assert m in msg, f"{m!r} not in {msg!r}"
    for p in PYBIND_PHRASES:
        assert p not in msg, msg
    del info
    gc.collect()
    assert lz.debug.live_tensor_count() == before
    return msg


# ---- the corpus: every public function and method, called with arguments of the wrong kind ----

# Runtime calls that change global state when a bad value happens to convert (eager_mode(1.5)).
NOT_SWEPT = {"eager_mode", "manual_seed", "sync", "sync_tensors", "wait", "add_step_closure"}


def _public_functions():
    out = []
    for name in sorted(dir(lz)):
        f = getattr(lz, name)
        if name.startswith("_") or name in NOT_SWEPT or isinstance(f, type):
            continue
        if callable(f) and getattr(f, "__module__", "") == "lazuli._C":
            out.append(("lz." + name, f))
    for name in sorted(dir(lz.Tensor)):
        if name.startswith("_") or name in ("backward",):
            continue
        attr = inspect.getattr_static(lz.Tensor, name)
        if callable(getattr(lz.Tensor, name)) and not isinstance(attr, property):
            out.append(("Tensor." + name, name))
    return out


FUNCTIONS = _public_functions()
# Methods whose errors come from the op they are made of.
ALIASES = {"clip": "clamp", "clip_": "clamp_", "expand_as": "expand", "fill_": "copy_",
           "index_put_": "index_copy"}
BAD_VALUES = ["x", [1, "a"], 1.5, None, object(), {"a": 1}]
# Tensors of a dtype where the dtype matters (indices, masks, bitwise ops, dims).
BAD_TENSORS = [lambda: lz.tensor([True, False]), lambda: lz.tensor([0.5, 1.5]), lambda: lz.tensor(1.5)]


def _call(target, args):
    if isinstance(target, str):  # a method name
        return getattr(lz.ones(2, 3), target)(*args)
    return target(*args)


def test_the_corpus_covers_the_api():
    names = {n for n, _ in FUNCTIONS}
    for n in ("lz.sum", "lz.exp", "lz.cat", "lz.zeros", "lz.where", "lz.clamp", "Tensor.sum",
              "Tensor.reshape", "Tensor.to", "Tensor.index_select", "Tensor.add_", "lz.add"):
        assert n in names, n
    assert len(FUNCTIONS) > 120


@pytest.mark.parametrize("name, target", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_wrong_argument_kinds_raise_user_errors_naming_the_function(name, target):
    """Each bad value in each of the first three positions (the others good tensors): a call that
    fails raises a user error whose message names the function, without pybind11's wording."""
    short = name.split(".")[-1]
    for n_args in (1, 2, 3):
        for pos in range(n_args):
            for bad in BAD_VALUES + BAD_TENSORS:
                args = [lz.ones(2, 3)] * n_args
                args[pos] = bad() if callable(bad) else bad
                try:
                    _call(target, args)
                except USER_ERRORS as e:
                    msg = str(e)
                    for p in PYBIND_PHRASES:
                        assert p not in msg, f"{name}{tuple(map(type, args))}: {msg}"
                    op = ALIASES.get(short, short).rstrip("_")  # the op the core names
                    assert short in msg or op in msg, f"{name}{tuple(map(type, args))}: {msg}"


def test_debug_functions_name_themselves():
    raises(TypeError, lambda: lz.debug.graph_hash([1, 2]), "lz.debug.graph_hash()", "'tensors'", "int")
    raises(TypeError, lambda: lz.debug.dump_graph(3), "lz.debug.dump_graph()", "'tensors'")
    raises(TypeError, lambda: lz.debug.counter_value(3), "lz.debug.counter_value()", "'name'", "str")


# ---- named arguments, in PyTorch's words -------------------------------------------------------

def test_sum_str_dim_names_function_argument_and_expected_kind():
    a = lz.ones(2, 3)
    raises(TypeError, lambda: lz.sum(a, "x"),
           "lz.sum(): argument 'dim' must be int or tuple of ints, not str")
    raises(TypeError, lambda: a.sum("x"), "Tensor.sum(): argument 'dim'", "not str")
    raises(TypeError, lambda: a.sum((0, "x")), "Tensor.sum(): argument 'dim'",
           "found element of type str at pos 1")
    raises(TypeError, lambda: lz.mean(a, dim=1.5), "lz.mean(): argument 'dim'", "not float")


def test_signature_mismatch_names_the_argument_and_its_position():
    a = lz.ones(2, 3)
    raises(TypeError, lambda: lz.sum(a, 0, "x"),
           "lz.sum(): argument 'keepdim' (position 3) must be bool, not str")
    raises(TypeError, lambda: lz.exp("a"), "lz.exp(): argument 'input' (position 1) must be Tensor, not str")
    raises(TypeError, lambda: a.transpose(0, "1"), "Tensor.transpose(): argument 'dim1' (position 2) must be int")
    raises(TypeError, lambda: lz.cat([a, 2]), "lz.cat(): argument 'tensors'",
           "found element of type int at pos 1")
    raises(TypeError, lambda: lz.stack(a), "lz.stack(): argument 'tensors' must be a list or tuple of Tensors, not Tensor")
    raises(TypeError, lambda: a.unsqueeze(1.0), "Tensor.unsqueeze(): argument 'dim'", "must be int, not float")
    raises(TypeError, lambda: lz.where(a > 0, "a", a), "lz.where(): argument 'input' (position 2)", "str")


def test_argument_count_and_keyword_mistakes_say_what_is_wrong():
    a = lz.ones(2, 3)
    raises(TypeError, lambda: lz.exp(a, a), "lz.exp() takes 1 positional argument but 2 were given")
    raises(TypeError, lambda: lz.sum(a, dims=0), "lz.sum() got an unexpected keyword argument 'dims'")
    raises(TypeError, lambda: lz.transpose(a, 0), "lz.transpose() missing required argument 'dim1' (position 3)")
    raises(TypeError, lambda: lz.sum(a, 0, dim=1), "lz.sum() got multiple values for argument 'dim'")


def test_casts_inside_bindings_name_the_argument():
    a = lz.ones(2, 3)
    raises(TypeError, lambda: a.max("x"), "Tensor.max(): argument 'dim'", "str")
    raises(TypeError, lambda: a.argmax("x"), "Tensor.argmax(): argument 'dim'")
    raises(TypeError, lambda: a.squeeze("x"), "Tensor.squeeze(): argument 'dim'")
    raises(TypeError, lambda: a.split([1, "x"]), "Tensor.split(): argument 'split_size_or_sections'", "pos 1")
    raises(TypeError, lambda: a.clamp("a"), "Tensor.clamp(): argument 'min' must be a number, not str")
    raises(TypeError, lambda: a.clamp_(max="a"), "Tensor.clamp_(): argument 'max'")
    raises(TypeError, lambda: lz.randint(0, "a", (2,)), "lz.randint(): argument 'high' must be int, not str")
    raises(TypeError, lambda: lz.eye(2, "a"), "lz.eye(): argument 'm'")
    raises(TypeError, lambda: a.std(0, "x"), "Tensor.std(): argument 'unbiased' must be bool")
    raises(TypeError, lambda: a.size("x"), "Tensor.size(): argument 'dim'")
    raises(TypeError, lambda: lz.arange(0, "a"), "lz.arange(): argument 'end' must be a number")
    raises(TypeError, lambda: lz.zeros(2, dtype="float32"), "lz.zeros(): argument 'dtype'", "'float32'")


def test_a_cast_left_inside_a_binding_names_the_function_and_the_call():
    """The fallback for a cast no converter guards (pybind11's "Unable to cast Python instance")."""
    before = lz.debug._get_config("debug")
    raises(TypeError, lambda: lz.debug._set_config("debug", "x"),
           "lz.debug._set_config(): an argument has the wrong type; got (str, str)")
    assert lz.debug._get_config("debug") == before


def test_a_setting_refuses_an_integer_it_cannot_hold_and_keeps_its_value():
    before = lz.debug._get_config("debug")
    raises(ValueError, lambda: lz.debug._set_config("debug", 2**32 + 1), "'debug'", "out of range")
    raises(ValueError, lambda: lz.debug._set_config("no_such_setting", 1), "no_such_setting")
    assert lz.debug._get_config("debug") == before


def test_autograd_arguments_name_themselves():
    w = lz.ones(2).requires_grad_()
    raises(TypeError, lambda: setattr(w, "grad", [1.0, 2.0]), "argument 'grad' must be Tensor, not list")
    raises(TypeError, lambda: w.sum().backward("x"), "Tensor.backward(): argument 'gradient' must be Tensor")


def test_shapes_refuse_bools_floats_and_strings_naming_size():
    raises(TypeError, lambda: lz.zeros(2.0), "lz.zeros(): argument 'size'", "float")
    raises(TypeError, lambda: lz.zeros(True), "lz.zeros(): argument 'size'", "bool")
    raises(TypeError, lambda: lz.ones((2, "3")), "lz.ones(): argument 'size'", "str at pos 1")
    raises(TypeError, lambda: lz.ones(2, None), "lz.ones(): argument 'size'", "NoneType at pos 1")
    raises(TypeError, lambda: lz.ones(2, 3).reshape(2, 3.0), "Tensor.reshape(): argument 'size'", "float")


# ---- int-like values ------------------------------------------------------------------------

class Index:
    """An int-like object: anything with __index__ is an int to PyTorch."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def test_numpy_integers_and_index_objects_are_ints_in_shapes_and_dims():
    assert lz.zeros(np.int64(3)).shape == (3,)
    assert lz.zeros((np.int32(2), 3)).shape == (2, 3)
    assert lz.ones(np.int64(2), np.int64(3)).shape == (2, 3)
    assert lz.rand(Index(2), 3).shape == (2, 3)
    assert lz.full((np.int64(2),), 1.0).shape == (2,)
    a = lz.ones(2, 3)
    assert a.reshape(np.int64(6)).shape == (6,)
    assert a.reshape((np.int64(3), Index(2))).shape == (3, 2)
    assert a.sum(np.int64(0)).shape == (3,)
    assert a.sum((np.int32(0), Index(1))).shape == ()
    assert a.transpose(np.int64(0), 1).shape == (3, 2)
    assert a.permute(np.int64(1), 0).shape == (3, 2)
    assert a.size(np.int64(1)) == 3
    assert lz.arange(np.int64(4)).tolist() == [0, 1, 2, 3]
    assert (a * np.int64(2)).dtype == lz.float32


def test_int_past_int64_raises_overflow_error_naming_op_value_and_dtype():
    xi = lz.tensor([1, 2])
    raises(OverflowError, lambda: xi + 2 ** 63, "__add__", "9223372036854775808", "int64")
    raises(OverflowError, lambda: 2 ** 63 + xi, "__radd__", "9223372036854775808")
    raises(OverflowError, lambda: lz.add(xi, -2 ** 70), "lz.add()", str(-2 ** 70), "the tensor is int64")
    raises(OverflowError, lambda: lz.ones(2) * 2 ** 64, "__mul__", "the tensor is float32")
    raises(OverflowError, lambda: lz.zeros(2 ** 63), "lz.zeros(): argument 'size'", "9223372036854775808")
    raises(OverflowError, lambda: lz.ones(2, 3).sum(2 ** 64), "Tensor.sum(): argument 'dim'")
    # The largest int64 still converts.
    assert (xi + (2 ** 63 - 1) - (2 ** 63 - 1)).tolist() == [1, 2]


# ---- bool subtraction, as in PyTorch -----------------------------------------------------------

def test_subtraction_with_a_bool_tensor_or_bool_raises_type_error():
    m = lz.tensor([True, False])
    f = lz.ones(2)
    raises(TypeError, lambda: m - f, "sub", "bool", "logical_not")
    raises(TypeError, lambda: f - m, "sub", "bool")
    raises(TypeError, lambda: True - f, "sub", "bool")
    raises(TypeError, lambda: f - True, "sub")
    raises(TypeError, lambda: m - m, "sub")
    raises(TypeError, lambda: lz.sub(1, m), "sub")
    raises(TypeError, lambda: f.sub_(m), "sub")
    # Addition and the other ops with bools still promote as in PyTorch.
    assert (m + f).tolist() == [2.0, 1.0]
    assert (f * True).tolist() == [1.0, 1.0]
    assert (~m).tolist() == [False, True]


# ---- Tensor.to -------------------------------------------------------------------------------

def test_to_accepts_pytorch_forms():
    t = lz.ones(2)
    assert t.to(None) is t  # PyTorch: device=None, dtype=None changes nothing
    assert t.to("cpu") is t
    assert t.to("cpu:0") is t and t.to("lazy") is t and t.to(device="lazuli:0") is t
    assert t.to(lz.float32) is t
    assert t.to(lz.float64).dtype == lz.float64
    assert t.to("cpu", lz.int32).dtype == lz.int32
    assert t.to(device="cpu", dtype=lz.int64).dtype == lz.int64
    assert t.to(dtype=lz.bool).dtype == lz.bool
    assert t.to(lz.tensor([1])).dtype == lz.int64  # to(other): other's dtype
    assert t.to(lz.float64, non_blocking=True).dtype == lz.float64
    c = t.to(lz.float32, copy=True)
    assert c is not t and c.tolist() == [1.0, 1.0]
    assert t.to("cpu", None, False, True) is not t

    class Device:  # torch.device-like: .type and .index
        type, index = "cpu", None
    assert t.to(Device()) is t


def test_to_refuses_what_pytorch_refuses_with_a_clear_error():
    t = lz.ones(2)
    raises(ValueError, lambda: t.to("float64"), "'float64' is not a Lazuli device", "lz.float64")
    raises(ValueError, lambda: t.to("banana"), "'banana'", "'cpu'")
    raises(ValueError, lambda: t.to("cuda"), "'cuda'")
    raises(ValueError, lambda: t.to("cpu:1"), "'cpu:1'")
    raises(TypeError, lambda: t.to(np.float32), "Tensor.to()", "dtype")
    raises(TypeError, lambda: t.to(3), "Tensor.to()", "int")
    raises(TypeError, lambda: t.to("cpu", "float64"), "Tensor.to()", "'dtype'", "str")
    raises(TypeError, lambda: t.to(dtype="float64"), "Tensor.to()", "'dtype'")
    raises(TypeError, lambda: t.to(lz.float64, nonblocking=True), "unexpected keyword argument 'nonblocking'")
    raises(TypeError, lambda: t.to(lz.float64, "x"), "Tensor.to(): argument 'non_blocking' must be bool")
    assert t.dtype == lz.float32


# ---- format() -----------------------------------------------------------------------------------

def test_format_of_zero_dim_tensor_formats_its_value():
    assert f"{lz.tensor(3.14159):.2f}" == "3.14"
    assert f"{lz.tensor(7):>4d}" == "   7"
    assert format(lz.tensor(True)) == "True"
    loss = lz.ones(3).sum()
    assert f"loss {loss:.4f}" == "loss 3.0000"


def test_format_of_other_tensors_is_str_or_refuses_a_spec_as_pytorch():
    t = lz.tensor([1.5])
    assert f"{t}" == str(t)
    assert format(lz.ones(2, 2), "") == str(lz.ones(2, 2))
    raises(TypeError, lambda: f"{t:.4f}", "'.4f'", "0-d", "(1,)")


# ---- lz.nn.functional ---------------------------------------------------------------------------

F = lz.nn.functional
F_NAMES = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "dropout",
           "layer_norm", "nll_loss", "cross_entropy", "mse_loss", "embedding"]


@pytest.mark.parametrize("name", F_NAMES)
def test_functional_argument_errors_name_the_function(name):
    """Bad values in the first two positions: no AttributeError from deep inside, and the message
    names the F function (or, for one-line wrappers, the primitive of the same name)."""
    fn = getattr(F, name)
    n_required = sum(1 for p in inspect.signature(fn).parameters.values() if p.default is p.empty)
    good = [lz.ones(2, 3), lz.ones(3, 3)] if name != "embedding" else [lz.tensor([0, 1]), lz.ones(3, 3)]
    if name in ("layer_norm", "softmax", "log_softmax", "dropout"):
        good[1] = 3 if name == "layer_norm" else 1
    if name in ("nll_loss", "cross_entropy"):
        good[1] = lz.tensor([0, 1])
    if name == "mse_loss":
        good[1] = lz.ones(2, 3)
    for pos in range(2):
        for bad in BAD_VALUES:
            args = good[:max(n_required, pos + 1)]
            args[pos] = bad
            try:
                fn(*args)
            except USER_ERRORS as e:
                assert name in str(e), (name, args, str(e))
                for p in PYBIND_PHRASES:
                    assert p not in str(e)


def test_functional_names_the_argument():
    x = lz.ones(2, 3)
    raises(TypeError, lambda: F.softmax(x, "a"), "F.softmax(): argument 'dim' must be int, not str")
    raises(TypeError, lambda: F.linear(x, "w"), "F.linear(): argument 'weight' must be Tensor, not str")
    raises(TypeError, lambda: F.dropout(x, "a"), "F.dropout(): argument 'p' must be a number")
    raises(TypeError, lambda: F.cross_entropy(x, [1, 2]), "F.cross_entropy(): argument 'target'", "list")
    raises(TypeError, lambda: F.layer_norm(x, 3, "w"), "F.layer_norm(): argument 'weight'")
    assert F.layer_norm(x, np.int64(3)).shape == (2, 3)
