"""The optimizer base: param_groups (list of dicts of hyper-parameters, changeable between steps),
per-parameter state, zero_grad, and hyper-parameters as graph parameters.

Every number a step uses (learning rate, betas, weight decay...) enters the graph as a device
scalar (a parameter, never a baked constant), so a schedule that changes it every step reuses the
compiled program; even 0 and 1, which would otherwise be baked, keep the same graph. Each scalar is
one tensor kept across steps and given new contents when its Python value changes, and a step
traced inside lz.capture registers a replay guard that does the same before every replay: a
replayed step reads the current param_groups, and a change that alters the update's structure
(weight decay turned on) sends the call back to tracing.

state_dict() / load_state_dict() use PyTorch's structure (state keyed by parameter index, counted
across the groups in order; each group's 'params' a list of indices), so a state dict round-trips
through lz.save / lz.load and a resumed run continues exactly where the saved one stopped."""
import numbers

import numpy as np

from .. import _C
from .._capture import _add_replay_guard
from ..autograd import no_grad

_NP = {_C.dtype.float32: np.float32, _C.dtype.float64: np.float64}


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        self.state = {}  # parameter id -> dict of state tensors
        self._hyper_slots = {}  # (group index, dtype, kind) -> {name: [value, device scalar]}
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, group):
        group = dict(group)
        ps = group["params"]
        group["params"] = [ps] if isinstance(ps, _C.Tensor) else list(ps)
        seen = {p._id for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"optimizer params must be tensors, got {type(p).__name__}")
            if not p.requires_grad or not p.is_leaf:
                raise ValueError("optimizer can only optimize leaf tensors that require grad")
            if p._id in seen:
                raise ValueError("some parameters appear in more than one parameter group "
                                 "(or twice in one)")
            seen.add(p._id)
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    def _state(self, p):
        return self.state.setdefault(p._id, {})

    @staticmethod
    def _scalar(value, dtype):
        """A device scalar holding `value`: a graph parameter whatever the value."""
        return _C.from_numpy(np.array(value, dtype=_NP.get(dtype, np.float32)))

    def _hyper_values(self, group, kind="main"):
        """{name: number} of the device scalars a step of this group reads: kind "main" in the
        parameters' dtype (which names appear, a momentum term only when momentum != 0, is the
        update's structure); other kinds are the optimizer's own (Adam's float64 set)."""
        raise NotImplementedError

    def _structure(self, group):
        """Settings that change the update's ops other than through _hyper_values' names."""
        return ()

    def _hyper(self, group_index, dtype, kind="main", values=None):
        """The group's hyper-parameters as device scalars (refreshed from the Python values;
        `values`: _hyper_values' result when the caller has it)."""
        group = self.param_groups[group_index]
        slots = self._hyper_slots.setdefault((group_index, dtype, kind), {})
        out = {}
        if values is None:
            values = self._hyper_values(group, kind)
        for name, value in values.items():
            slot = slots.get(name)
            if slot is None:
                slots[name] = slot = [value, self._scalar(value, dtype)]
            elif slot[0] != value:
                _C._set_host_data(slot[1], np.array(value, dtype=_NP.get(dtype, np.float32)))
                slot[0] = value
            out[name] = slot[1]
        return out

    def _replay_guard(self, traced):
        """A check run before each replay of a captured step: refreshes the scalars and says
        whether the traced update still applies. `traced`: {group index: structure}."""
        def check():
            if len(self.param_groups) != len(traced):
                return False
            main = []
            for gi, group in enumerate(self.param_groups):
                values = self._hyper_values(group)
                if traced[gi] != (tuple(values), self._structure(group)):
                    return False
                main.append(values)
            for gi, dtype, kind in list(self._hyper_slots):
                self._hyper(gi, dtype, kind, main[gi] if kind == "main" else None)
            return True
        return check

    def step(self, closure=None):
        loss = None
        if closure is not None:
            from ..autograd import enable_grad
            with enable_grad():
                loss = closure()
        with no_grad():
            for gi, group in enumerate(self.param_groups):
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._update_group(gi, group, params, self._hyper(gi, params[0].dtype))
        if _C._capture_tracing():
            traced = {gi: (tuple(self._hyper_values(g)), self._structure(g))
                      for gi, g in enumerate(self.param_groups)}
            _add_replay_guard(self._replay_guard(traced), id(self))
        return loss

    def _update_group(self, group_index, group, params, hyper):
        """Records the update of `params` (those with a grad) reading the scalars in `hyper`."""
        raise NotImplementedError

    # Per-parameter state this optimizer keeps: key -> "param" (a tensor of the parameter's shape
    # and dtype) or "step" (a float64 0-d count, as Adam's).
    _state_spec = {}

    def _foreign_flags(self):
        """PyTorch group flags this optimizer does not implement, with the values under which
        ignoring them is exact (None: any value). A loaded group with another value is refused."""
        return {"maximize": (False,), "differentiable": (False,), "fused": (None, False),
                "foreach": None, "capturable": None}

    def state_dict(self):
        """{'state': {index: {name: tensor}}, 'param_groups': [{..., 'params': [index, ...]}]}, as
        PyTorch: indices count the parameters across the groups in order; the state tensors are
        the optimizer's own (not copies): save or clone them before stepping again."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(p._id, len(index))
            packed["params"] = [index[p._id] for p in g["params"]]
            groups.append(packed)
        state = {index[pid]: dict(s) for pid, s in self.state.items() if s and pid in index}
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict() (this optimizer's, one read back with lz.load, or PyTorch's for the
        same optimizer): hyper-parameters into param_groups, each state tensor copied (cast to the
        parameter's dtype) into this optimizer's own state, in place where it already has that
        tensor, so a captured step keeps replaying. The dict itself is not kept or changed."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise TypeError(f"{name}: expected a dict with 'state' and 'param_groups', got "
                            f"{type(state_dict).__name__}")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, (list, tuple)) or not isinstance(saved_state, dict):
            raise TypeError(f"{name}: 'param_groups' must be a list and 'state' a dict")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}: loaded state dict has a different number of parameter "
                             f"groups ({len(saved_groups)}, this optimizer has "
                             f"{len(self.param_groups)})")
        by_index = {}
        flags = self._foreign_flags()
        for gi, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if not isinstance(saved, dict) or not isinstance(saved.get("params"), (list, tuple)):
                raise TypeError(f"{name}: param_groups[{gi}] must be a dict with a 'params' list")
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{name}: loaded param_groups[{gi}] has {len(saved['params'])} "
                                 f"parameters, this optimizer's group has {len(group['params'])}")
            for k, v in saved.items():
                if k in flags and flags[k] is not None and v not in flags[k]:
                    raise ValueError(f"{name}: param_groups[{gi}] has {k}={v!r}, which "
                                     f"{type(self).__name__} does not support")
            by_index.update(zip(saved["params"], group["params"]))
        for key in saved_state:
            if key not in by_index:
                raise ValueError(f"{name}: state for parameter index {key!r}, which no loaded "
                                 f"param group lists")
        # Check and convert everything before changing anything.
        new_state = {}
        for key, entry in saved_state.items():
            p = by_index[key]
            if not isinstance(entry, dict):
                raise TypeError(f"{name}: state[{key!r}] must be a dict, got "
                                f"{type(entry).__name__}")
            new_state[p._id] = self._loaded_entry(name, key, p, entry)
        for group, saved in zip(self.param_groups, saved_groups):
            for k, v in saved.items():
                if k != "params":
                    group[k] = tuple(v) if k == "betas" else v
        with no_grad():
            for p_id, entry in new_state.items():
                own = self.state.get(p_id, {})
                for k, v in entry.items():
                    cur = own.get(k)
                    same = cur is not None and cur.dtype == v.dtype and cur.shape == v.shape
                    if same:
                        cur.copy_(v)
                        entry[k] = cur
                    else:
                        entry[k] = v.clone()
        self.state = {p._id: new_state.get(p._id, {}) for g in self.param_groups
                      for p in g["params"] if p._id in new_state}

    def _loaded_entry(self, name, key, p, entry):
        out = {}
        for k, v in entry.items():
            kind = self._state_spec.get(k)
            where = f"state[{key!r}][{k!r}]"
            if kind is None:
                raise ValueError(f"{name}: {where} is not state {type(self).__name__} keeps "
                                 f"(it keeps {sorted(self._state_spec)})")
            if v is None:
                continue  # a buffer not made yet (PyTorch's momentum_buffer before a step)
            if kind == "step":
                if isinstance(v, _C.Tensor):
                    if v.numel() != 1:
                        raise ValueError(f"{name}: {where} must be a single count, got shape "
                                         f"{tuple(v.shape)}")
                    v = v.reshape(()).to(_C.dtype.float64)
                elif isinstance(v, numbers.Real) and not isinstance(v, bool):
                    v = self._scalar(float(v), _C.dtype.float64)
                else:
                    raise TypeError(f"{name}: {where} must be a tensor or a number, got "
                                    f"{type(v).__name__}")
            else:
                if not isinstance(v, _C.Tensor):
                    raise TypeError(f"{name}: {where} must be a tensor, got {type(v).__name__}")
                if tuple(v.shape) != tuple(p.shape):
                    raise ValueError(f"{name}: {where} has shape {tuple(v.shape)}, the parameter "
                                     f"{tuple(p.shape)}")
                if v.dtype != p.dtype:
                    v = v.to(p.dtype)
            out[k] = v
        missing = [k for k in self._state_spec if k not in out]
        if out and missing:
            raise ValueError(f"{name}: state[{key!r}] lacks {missing}")
        return out
