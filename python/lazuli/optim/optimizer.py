"""The optimizer base: param_groups (list of dicts of hyper-parameters, changeable between steps),
per-parameter state, zero_grad, and hyper-parameters as graph parameters.

Every number a step uses (learning rate, betas, weight decay...) enters the graph as a device
scalar (a parameter, never a baked constant), so a schedule that changes it every step reuses the
compiled program; even 0 and 1, which would otherwise be baked, keep the same graph. Each scalar is
one tensor kept across steps and given new contents when its Python value changes, and a step
traced inside lz.capture registers a replay guard that does the same before every replay: a
replayed step reads the current param_groups, and a change that alters the update's structure
(weight decay turned on) sends the call back to tracing."""
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
        for p in group["params"]:
            if not p.requires_grad or not p.is_leaf:
                raise ValueError("optimizer can only optimize leaf tensors that require grad")
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

    def state_dict(self):
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        return {"state": self.state, "param_groups": groups}
