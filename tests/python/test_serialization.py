"""lz.save / lz.load (safetensors files), and pickle / copy.deepcopy of tensors and modules.

The file layout is checked with a reader written here from the format's description (8-byte
little-endian header length, JSON header, raw little-endian data), independent of Lazuli's."""
import copy
import json
import math
import os
import pickle
import struct

import numpy as np
import pytest

import lazuli as lz
from lazuli import nn
from conftest import executions


def read_safetensors(path):
    """(header dict, {name: numpy array}) by the format's description alone."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    np_dtypes = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "BOOL": "?"}
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype=np_dtypes[info["dtype"]])
        arrays[name] = arr.reshape(info["shape"])
    return header, arrays


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def sample_tensors():
    return {
        "w": lz.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
        "b": lz.tensor(np.array([1e-300, -2.5])),
        "idx": lz.tensor(np.array([1, -2, 2**40], dtype=np.int64)),
        "i32": lz.tensor(np.array([[7], [-8]], dtype=np.int32)),
        "mask": lz.tensor(np.array([True, False, True])),
        "scalar": lz.tensor(3.5),
        "empty": lz.zeros(0, 4),
    }


def test_flat_state_dict_round_trips_names_order_dtypes_shapes_and_values(tmp_path):
    sd = sample_tensors()
    lz.save(sd, tmp_path / "m.safetensors")
    out = lz.load(tmp_path / "m.safetensors")
    assert list(out) == list(sd)
    for k, t in sd.items():
        assert out[k].dtype == t.dtype and tuple(out[k].shape) == tuple(t.shape), k
        np.testing.assert_array_equal(out[k].numpy(), t.numpy())


def test_flat_file_is_plain_safetensors_readable_by_the_format_alone(tmp_path):
    sd = sample_tensors()
    lz.save(sd, str(tmp_path / "m.safetensors"))
    header, arrays = read_safetensors(tmp_path / "m.safetensors")
    assert "__metadata__" not in header  # nothing Lazuli-specific in a flat state dict's file
    assert header["w"]["dtype"] == "F32" and header["mask"]["dtype"] == "BOOL"
    assert header["b"]["dtype"] == "F64" and header["idx"]["dtype"] == "I64"
    for k, t in sd.items():
        np.testing.assert_array_equal(arrays[k], t.numpy())
        assert arrays[k].dtype == t.numpy().dtype


def test_load_reads_a_file_written_by_another_writer(tmp_path):
    a = np.array([[1.5, -2.0]], dtype=np.float32)
    c = np.array([3, 4], dtype=np.int64)
    header = {"c": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
              "a": {"dtype": "F32", "shape": [1, 2], "data_offsets": [16, 24]},
              "__metadata__": {"format": "pt"}}
    write_safetensors(tmp_path / "x.safetensors", header, c.tobytes() + a.tobytes())
    out = lz.load(tmp_path / "x.safetensors")
    assert list(out) == ["c", "a"]
    np.testing.assert_array_equal(out["a"].numpy(), a)
    np.testing.assert_array_equal(out["c"].numpy(), c)
    assert lz.serialization.load_metadata(tmp_path / "x.safetensors") == {"format": "pt"}


def test_nested_structures_round_trip_with_their_python_values(tmp_path):
    w = lz.tensor([[1.0, 2.0]])
    obj = {
        "model": {"w": w, "b": lz.tensor([0.5])},
        "optimizer": {"state": {0: {"step": lz.tensor(3.0, dtype=lz.float64)}},
                      "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1],
                                        "nesterov": False, "foreach": None}]},
        "epoch": 7, "big": 2**70, "name": "run-1", "floats": [math.inf, -math.inf, 1e-310],
        "nan": math.nan, "tied": w, 3: "int key",
    }
    lz.save(obj, tmp_path / "ckpt.safetensors")
    out = lz.load(tmp_path / "ckpt.safetensors")
    assert out.keys() == obj.keys()
    assert out["optimizer"]["param_groups"] == obj["optimizer"]["param_groups"]
    assert isinstance(out["optimizer"]["param_groups"][0]["betas"], tuple)
    assert list(out["optimizer"]["state"]) == [0]  # int keys stay ints
    assert out["optimizer"]["state"][0]["step"].dtype == lz.float64
    assert out["epoch"] == 7 and out["big"] == 2**70 and out["name"] == "run-1"
    assert out[3] == "int key"
    assert out["floats"] == [math.inf, -math.inf, 1e-310] and math.isnan(out["nan"])
    np.testing.assert_array_equal(out["model"]["w"].numpy(), [[1.0, 2.0]])
    assert out["tied"] is out["model"]["w"]  # one tensor reached twice is stored once
    # Tensors sit under their dotted paths, readable by any safetensors reader.
    _, arrays = read_safetensors(tmp_path / "ckpt.safetensors")
    assert sorted(arrays) == ["model.b", "model.w", "optimizer.state.0.step"]


def test_a_single_tensor_and_an_empty_dict_round_trip(tmp_path):
    lz.save(lz.arange(5), tmp_path / "t.safetensors")
    np.testing.assert_array_equal(lz.load(tmp_path / "t.safetensors").numpy(), np.arange(5))
    lz.save({}, tmp_path / "e.safetensors")
    assert lz.load(tmp_path / "e.safetensors") == {}


def test_colliding_dotted_paths_get_distinct_names(tmp_path):
    obj = {"a.b": lz.tensor([1.0]), "a": {"b": lz.tensor([2.0])}}
    lz.save(obj, tmp_path / "c.safetensors")
    out = lz.load(tmp_path / "c.safetensors")
    assert out["a.b"].item() == 1.0 and out["a"]["b"].item() == 2.0


def test_save_computes_pending_values_with_one_program(tmp_path):
    a = lz.tensor([1.0, 2.0, 3.0])
    lz.sync()
    before = executions()
    lz.save({"x": a * 2, "y": (a + 1).sum(), "t": a.reshape(3, 1).T, "a": a},
            tmp_path / "p.safetensors")
    assert executions() == before + 1
    out = lz.load(tmp_path / "p.safetensors")
    np.testing.assert_array_equal(out["x"].numpy(), [2, 4, 6])
    assert out["y"].item() == 9.0
    np.testing.assert_array_equal(out["t"].numpy(), [[1, 2, 3]])


def test_load_runs_nothing_and_gives_host_tensors(tmp_path):
    lz.save({"x": lz.tensor([1.0, 2.0])}, tmp_path / "h.safetensors")
    before = executions()
    out = lz.load(tmp_path / "h.safetensors")
    assert executions() == before
    assert lz.debug.tensor_state(out["x"]) == "host"


def test_loaded_tensors_survive_the_file_being_overwritten(tmp_path):
    p = tmp_path / "o.safetensors"
    lz.save({"x": lz.ones(100)}, p)
    first = lz.load(p)
    lz.save({"x": lz.zeros(3)}, p)
    assert first["x"].sum().item() == 100.0
    assert sorted(os.listdir(tmp_path)) == ["o.safetensors"]  # no temporary file left


def test_model_state_dict_round_trip_restores_the_model(tmp_path):
    lz.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    lz.manual_seed(1)
    b = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    lz.save(a.state_dict(), tmp_path / "model.safetensors")
    b.load_state_dict(lz.load(tmp_path / "model.safetensors"))
    x = lz.randn(3, 4)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_user_metadata_is_kept_and_the_structure_key_is_reserved(tmp_path):
    p = tmp_path / "meta.safetensors"
    lz.save({"x": lz.ones(1)}, p, metadata={"format": "pt", "step": "12"})
    assert lz.serialization.load_metadata(p) == {"format": "pt", "step": "12"}
    with pytest.raises(ValueError, match="reserved"):
        lz.save({"x": lz.ones(1)}, p, metadata={"lazuli.structure": "{}"})
    with pytest.raises(TypeError, match="metadata"):
        lz.save({"x": lz.ones(1)}, p, metadata={"step": 12})


def test_unsupported_values_raise_type_error_naming_where_they_are(tmp_path):
    with pytest.raises(TypeError, match=r"type function at obj\['opt'\]\['fn'\]"):
        lz.save({"opt": {"fn": lambda: 0}}, tmp_path / "f.safetensors")
    with pytest.raises(TypeError, match="dict key of type tuple"):
        lz.save({(1, 2): lz.ones(1)}, tmp_path / "f.safetensors")
    with pytest.raises(TypeError, match="set"):
        lz.save([{1, 2}], tmp_path / "f.safetensors")
    assert not os.listdir(tmp_path)


def test_paths_and_file_objects(tmp_path):
    import io
    with pytest.raises(TypeError, match="file objects are not supported"):
        lz.save({"x": lz.ones(1)}, io.BytesIO())
    with pytest.raises(FileNotFoundError):
        lz.load(tmp_path / "absent.safetensors")
    with pytest.raises(lz.Error, match="beside it"):
        lz.save({"x": lz.ones(1)}, tmp_path / "no" / "dir.safetensors")


def test_bad_files_raise_value_error_naming_the_file(tmp_path):
    f32 = np.array([1.0, 2.0], dtype=np.float32).tobytes()
    cases = {
        "overlap": ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, f32, "overlap"),
        "dtype": ({"a": {"dtype": "I16", "shape": [4], "data_offsets": [0, 8]}}, f32,
                  "not supported"),
        "size": ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, f32, "needs 12"),
        "truncated": ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32,
                      "truncated"),
    }
    for name, (header, data, what) in cases.items():
        p = tmp_path / f"{name}.safetensors"
        write_safetensors(p, header, data)
        with pytest.raises(ValueError, match=what) as info:
            lz.load(p)
        assert str(p) in str(info.value)
    p = tmp_path / "huge.safetensors"
    p.write_bytes(struct.pack("<Q", 2**62) + b"{}")
    with pytest.raises(ValueError, match="beyond the limit"):
        lz.load(p)


def test_malformed_structure_metadata_raises_value_error(tmp_path):
    p = str(tmp_path / "s.safetensors")
    for text, what in [("not json", "not JSON"),
                       ('{"version": 1, "root": {"tensor": "missing"}}', "does not have"),
                       ('{"version": 1, "root": {"eval": "x"}}', "unexpected element"),
                       ('{"version": 99, "root": 1}', "version 99")]:
        lz._C._save_safetensors([("x", lz.ones(1))], p, {"lazuli.structure": text})
        with pytest.raises(ValueError, match=what):
            lz.load(p)


# ---- pickle and deepcopy ------------------------------------------------------------------------

def test_pickle_round_trip_keeps_values_dtype_shape_and_requires_grad():
    for name, t in sample_tensors().items():
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype == t.dtype and tuple(u.shape) == tuple(t.shape), name
        np.testing.assert_array_equal(u.numpy(), t.numpy())
        assert not u.requires_grad
    w = lz.randn(2, 3).requires_grad_()
    u = pickle.loads(pickle.dumps(w, protocol=2))
    assert u.requires_grad and u.is_leaf
    np.testing.assert_array_equal(u.numpy(), w.numpy())


def test_pickle_stores_the_value_of_pending_tensors_and_views():
    a = lz.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a * 2)).numpy(),
                                  np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a.T)).numpy(),
                                  np.arange(6).reshape(2, 3).T)


def test_deepcopy_is_an_independent_lazy_copy_with_grad():
    w = lz.tensor([1.0, 2.0]).requires_grad_()
    (w * w).sum().backward()
    lz.sync()
    before = executions()
    c = copy.deepcopy(w)
    assert executions() == before  # recorded, not run
    assert c is not w and c.requires_grad and c.is_leaf
    assert c.grad is not None and c.grad is not w.grad
    with lz.no_grad():
        c.add_(10)
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(c.numpy(), [11.0, 12.0])
    np.testing.assert_array_equal(c.grad.numpy(), [2.0, 4.0])
    memo_pair = copy.deepcopy([w, w])
    assert memo_pair[0] is memo_pair[1]


def test_deepcopy_of_a_non_leaf_that_requires_grad_raises():
    w = lz.ones(2).requires_grad_()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(w * 2)


def test_deepcopy_and_pickle_of_a_module():
    lz.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2))
    x = lz.randn(5, 3)
    for clone in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        ps, cs = list(m.parameters()), list(clone.parameters())
        assert len(ps) == len(cs) and all(p is not c for p, c in zip(ps, cs))
        assert all(c.requires_grad and c.is_leaf for c in cs)
        np.testing.assert_array_equal(clone(x).numpy(), m(x).numpy())
        with lz.no_grad():
            cs[0].zero_()
        assert not np.all(ps[0].numpy() == 0)
