"""Learning-rate schedules: they change group['lr'] between steps, which never recompiles.
Step a schedule outside a captured function (lz.capture): inside, its Python would not run on
replays, so such a function is never replayed."""
from .._capture import _refuse_replay


class LambdaLR:
    def __init__(self, optimizer, lr_lambda):
        self.optimizer = optimizer
        self.lr_lambda = lr_lambda
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = 0
        self._apply()

    def _apply(self):
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = base * self.lr_lambda(self.last_epoch)

    def step(self):
        _refuse_replay("an LR scheduler steps inside the function (a replay would not run it); "
                       "call scheduler.step() outside the captured function")
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self):
        return [g["lr"] for g in self.optimizer.param_groups]
