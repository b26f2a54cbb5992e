"""Lowering entries: scaled dot-product attention (part of the table in lowering.py).

On the CPU, ``F.scaled_dot_product_attention`` reaches aot_autograd's graphs as
``_scaled_dot_product_flash_attention_for_cpu`` (returning the output and the row-wise logsumexp
of the scores) and, in the backward graph, ``..._for_cpu_backward``, which reads that logsumexp.
PyTorch's decomposition of the forward op returns the attention weights in the logsumexp's place
(it is meant for export, "excluded by inductor"), so the table keeps the op whole instead
(lowering.py leaves it out of the decompositions) and lowers both directions here:

    scores = q @ k^T * scale (+ mask)        lse = logsumexp(scores, -1)
    out    = exp(scores - lse) @ v
    dv = p^T @ dout,  ds = p * (dout @ v^T - rowsum(dout * out)),  dq = ds @ k * scale,
    dk = ds^T @ q * scale,  where p = exp(scores - lse) is recomputed from the saved lse.

A row whose every score is masked (-inf) gives output 0 and logsumexp 0, as eager's kernel does,
and no gradient. Dropout is not lowered (dropout_p must be 0: its random mask cannot match eager).
"""
import math

import torch

import lazuli as lz

from .lowering import FLOATS, aten, lower, torch_dtype


def _attention_when(q, k, v, dropout_p=0.0, is_causal=False, *rest, attn_mask=None, scale=None):
    if dropout_p:
        return f"dropout_p={dropout_p}"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "q, k, v not 4-dimensional"
    if q.shape[1] != k.shape[1] or k.shape[1] != v.shape[1]:
        return "different head counts (grouped-query attention)"
    if attn_mask is not None and attn_mask.dtype != torch.bool and attn_mask.dtype != q.dtype:
        return f"a {attn_mask.dtype} mask on {q.dtype} inputs"
    return None


def _backward_when(grad, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None, scale=None):
    return _attention_when(q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)


def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def _scores(q, k, is_causal, attn_mask, scale):
    s = lz.mul(lz.matmul(q, lz.transpose(k, -2, -1)), _scale(q, scale))
    if is_causal:  # top-left aligned: query i sees keys 0..i
        n_q, n_k = q.shape[-2], k.shape[-2]
        keep = lz.ge(lz.reshape(lz.arange(n_q), (n_q, 1)), lz.reshape(lz.arange(n_k), (1, n_k)))
        s = lz.where(keep, s, -math.inf)
    if attn_mask is not None:
        if torch_dtype(attn_mask) == torch.bool:
            s = lz.where(attn_mask, s, -math.inf)
        else:
            s = lz.add(s, attn_mask)
    return s


def _weights(scores, lse):
    """exp(scores - lse), 0 on fully masked rows (lse 0, scores -inf)."""
    return lz.exp(lz.sub(scores, lz.unsqueeze(lse, -1)))


@lower(aten._scaled_dot_product_flash_attention_for_cpu.default, dtypes=FLOATS,
       when=_attention_when, note="(out, logsumexp); dropout_p 0; a fully masked row gives 0")
def _flash_attention(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    scores = _scores(q, k, is_causal, attn_mask, scale)
    row_max = lz.amax(scores, -1, True)
    masked = lz.eq(row_max, -math.inf)  # every score of the row masked
    shifted = lz.sub(scores, lz.where(masked, 0.0, row_max))
    total = lz.sum(lz.exp(shifted), -1, True)
    lse = lz.where(masked, 0.0, lz.add(lz.log(total), row_max))
    out = lz.matmul(_weights(scores, lz.squeeze(lse, -1)), v)
    return out, lz.squeeze(lse, -1)


@lower(aten._scaled_dot_product_flash_attention_for_cpu_backward.default, dtypes=FLOATS,
       when=_backward_when, note="(grad_q, grad_k, grad_v); dropout_p 0")
def _flash_attention_backward(grad, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None,
                              scale=None):
    p = _weights(_scores(q, k, is_causal, attn_mask, scale), lse)
    grad_v = lz.matmul(lz.transpose(p, -2, -1), grad)
    dp = lz.matmul(grad, lz.transpose(v, -2, -1))
    ds = lz.mul(p, lz.sub(dp, lz.sum(lz.mul(grad, out), -1, True)))
    s = _scale(q, scale)
    grad_q = lz.mul(lz.matmul(ds, k), s)
    grad_k = lz.mul(lz.matmul(lz.transpose(ds, -2, -1), q), s)
    return grad_q, grad_k, grad_v
