"""lz.nn: modules and functional ops for training (see docs/training.md)."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from .modules import (  # noqa: F401
    Module, Parameter, Linear, ReLU, GELU, Tanh, Sigmoid, SiLU, Hardswish, Hardsigmoid,
    Sequential, ModuleList, ModuleDict, Identity, Flatten, Unflatten, Embedding, LayerNorm,
    Dropout, Dropout2d, CrossEntropyLoss, NLLLoss, MSELoss, StateDictError,
)
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .pooling import (  # noqa: F401
    MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, RMSNorm  # noqa: F401
from .transformer import MultiheadAttention, TransformerEncoderLayer  # noqa: F401,E402
from . import utils  # noqa: F401,E402
from . import parallel  # noqa: F401,E402  (DistributedDataParallel)
