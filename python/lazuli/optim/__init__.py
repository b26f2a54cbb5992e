"""lz.optim: optimizers whose step() updates parameters and state in place under no_grad, so at
the step barrier each old buffer is donated to its new value (see docs/training.md)."""
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from . import lr_scheduler  # noqa: F401
