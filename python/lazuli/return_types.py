"""The named tuples some ops return, as torch.return_types: ``max(dim)``, ``min(dim)``,
``sort`` and ``topk`` give ``(values, indices)``, readable as ``r.values`` / ``r.indices`` or
unpacked as a pair."""
from ._C import _max_result as max, _min_result as min  # noqa: A004 (PyTorch's names)
from ._C import _sort_result as sort, _topk_result as topk

__all__ = ["max", "min", "sort", "topk"]
