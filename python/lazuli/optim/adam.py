"""Adam and AdamW, as torch.optim.Adam / AdamW (without amsgrad). Each parameter's step count is a
device scalar (float64, as torch keeps a tensor step) advanced inside the step's graph, and the bias
corrections are computed there in float64: no step count is baked into the graph, and a captured
step (lz.capture) needs no Python to advance it."""
from .. import _C
from .optimizer import Optimizer


class Adam(Optimizer):
    _decoupled = False
    _state_spec = {"step": "step", "exp_avg": "param", "exp_avg_sq": "param"}

    def _foreign_flags(self):
        return dict(super()._foreign_flags(), amsgrad=(False,),
                    decoupled_weight_decay=(self._decoupled,))

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas}, eps={eps} or "
                             f"weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _hyper_values(self, group, kind="main"):
        b1, b2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        if kind == "bias":  # float64: the bias corrections' inputs
            return {"lr": lr, "beta1": b1, "beta2": b2}
        v = {"beta1": b1, "beta2": b2, "one_minus_beta1": 1.0 - b1, "one_minus_beta2": 1.0 - b2,
             "eps": group["eps"]}
        if wd != 0:
            if self._decoupled:
                v["decay"] = 1.0 - lr * wd
            else:
                v["weight_decay"] = wd
        return v

    def _update_group(self, group_index, group, params, hyper):
        dtype = params[0].dtype
        h64 = self._hyper(group_index, _C.dtype.float64, "bias")
        wd_t, decay = hyper.get("weight_decay"), hyper.get("decay")
        for p in params:
            state = self._state(p)
            if not state:
                state["step"] = _C.zeros((), dtype=_C.dtype.float64)
                state["exp_avg"] = _C.zeros_like(p)
                state["exp_avg_sq"] = _C.zeros_like(p)
            t = state["step"]
            t.add_(1)
            step_size = (h64["lr"] / (1 - h64["beta1"] ** t)).to(dtype)
            inv_sqrt_bc2 = (1 - h64["beta2"] ** t).rsqrt().to(dtype)
            g = p.grad
            if wd_t is not None:
                g = g + p * wd_t
            if decay is not None:
                p.mul_(decay)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.mul_(hyper["beta1"])
            m.add_(g * hyper["one_minus_beta1"])
            v.mul_(hyper["beta2"])
            v.add_(g * g * hyper["one_minus_beta2"])
            denom = v.sqrt() * inv_sqrt_bc2 + hyper["eps"]
            p.sub_(m / denom * step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam update."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)
