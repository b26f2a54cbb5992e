"""The optimizer base: param_groups (list of dicts of hyper-parameters, changeable between steps),
per-parameter state, zero_grad, and hyper-parameters as graph parameters.

Every number a step uses (learning rate, bias corrections, betas...) enters the graph as a device
scalar (a parameter, never a baked constant), so a schedule that changes it every step reuses the
compiled program; even 0 and 1, which would otherwise be baked, keep the same graph."""
import numpy as np

from .. import _C
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

    def step(self, closure=None):
        loss = None
        if closure is not None:
            from ..autograd import enable_grad
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._update_group(group, params)
        return loss

    def _update_group(self, group, params):
        raise NotImplementedError

    def state_dict(self):
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        return {"state": self.state, "param_groups": groups}
