"""SGD with momentum, weight decay and Nesterov, as torch.optim.SGD."""
from .optimizer import Optimizer


class SGD(Optimizer):
    _state_spec = {"momentum_buffer": "param"}

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: invalid lr={lr}, momentum={momentum} or weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    def _hyper_values(self, group, kind="main"):
        v = {"lr": group["lr"]}
        if group["weight_decay"] != 0:
            v["weight_decay"] = group["weight_decay"]
        if group["momentum"] != 0:
            v["momentum"] = group["momentum"]
            v["one_minus_dampening"] = 1.0 - group["dampening"]
        return v

    def _structure(self, group):
        return (bool(group["nesterov"]),)

    def _update_group(self, group_index, group, params, hyper):
        lr = hyper["lr"]
        wd_t = hyper.get("weight_decay")
        mom_t = hyper.get("momentum")
        damp_t = hyper.get("one_minus_dampening")
        for p in params:
            g = p.grad
            if wd_t is not None:
                g = g + p * wd_t
            if mom_t is not None:
                state = self._state(p)
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = g.clone()  # first step: buf = grad
                else:
                    buf.mul_(mom_t)
                    buf.add_(g * damp_t)
                g = g + buf * mom_t if group["nesterov"] else buf
            p.sub_(g * lr)
