"""lz.nn: modules and functional ops for training (see docs/training.md)."""
from . import functional  # noqa: F401
from .modules import (  # noqa: F401
    Module, Parameter, Linear, ReLU, GELU, Tanh, Sigmoid, SiLU, Sequential, Embedding, LayerNorm,
    Dropout, CrossEntropyLoss, NLLLoss, MSELoss,
)
from . import utils  # noqa: F401,E402
