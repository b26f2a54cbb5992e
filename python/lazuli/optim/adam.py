"""Adam and AdamW, as torch.optim.Adam / AdamW (without amsgrad). The bias corrections are Python
floats computed per step and passed as device scalars, so no step count is baked into the graph."""
import math

from .. import _C
from .optimizer import Optimizer


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas}, eps={eps} or "
                             f"weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _update_group(self, group, params):
        dtype = params[0].dtype
        b1, b2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        s = self._scalar
        b1_t, b2_t = s(b1, dtype), s(b2, dtype)
        one_m_b1, one_m_b2 = s(1.0 - b1, dtype), s(1.0 - b2, dtype)
        eps = s(group["eps"], dtype)
        decay = s(1.0 - lr * wd, dtype) if (self._decoupled and wd != 0) else None
        wd_t = s(wd, dtype) if (not self._decoupled and wd != 0) else None
        scalars = {}  # per step count: (step size, 1/sqrt(bias correction 2))
        for p in params:
            state = self._state(p)
            if not state:
                state["step"] = 0
                state["exp_avg"] = _C.zeros_like(p)
                state["exp_avg_sq"] = _C.zeros_like(p)
            state["step"] += 1
            t = state["step"]
            if t not in scalars:
                bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
                scalars[t] = (s(lr / bc1, dtype), s(1.0 / math.sqrt(bc2), dtype))
            step_size, inv_sqrt_bc2 = scalars[t]
            g = p.grad
            if wd_t is not None:
                g = g + p * wd_t
            if decay is not None:
                p.mul_(decay)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.mul_(b1_t)
            m.add_(g * one_m_b1)
            v.mul_(b2_t)
            v.add_(g * g * one_m_b2)
            denom = v.sqrt() * inv_sqrt_bc2 + eps
            p.sub_(m / denom * step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam update."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)
