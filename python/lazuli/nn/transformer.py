"""Attention and transformer layers, as torch.nn's: MultiheadAttention and
TransformerEncoderLayer, with PyTorch's parameter names (so state_dicts load both ways), over one
attention in C++ (lz.nn.functional.scaled_dot_product_attention)."""
import math

from .. import _C
from . import functional as F
from .modules import Dropout, LayerNorm, Linear, Module

def _cast_parameters(module, dtype):
    """Every parameter of module (and its children) as a new leaf of `dtype` (PyTorch's dtype=
    argument of the layers)."""
    if dtype is None or dtype == _C.dtype.float32:
        return
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and p.dtype != dtype:
                setattr(m, name, p.detach().to(dtype).requires_grad_())


def _float_mask(mask, dtype, name):
    """A PyTorch attention mask as an additive float mask: bool True (masked out) becomes -inf,
    a float mask is added as it is."""
    if mask is None:
        return None
    if not isinstance(mask, _C.Tensor):
        raise TypeError(f"MultiheadAttention: {name} must be a Tensor, not {type(mask).__name__}")
    if mask.dtype == _C.dtype.bool:
        return _C.where(mask, float("-inf"), _C.zeros(*mask.shape, dtype=dtype))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"MultiheadAttention: {name} must be bool or floating, got {mask.dtype}")
    return mask.to(dtype)


class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention: in_proj_weight/in_proj_bias (or q/k/v_proj_weight when
    kdim or vdim differ from embed_dim), out_proj, bias_k/bias_v, so a PyTorch state_dict loads.
    forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights,
    is_causal) -> (output, weights or None). Masks: bool True (or -inf) means "do not attend"
    (the opposite of scaled_dot_product_attention's bool masks, as in PyTorch)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, "
                             f"got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first = dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        dt = _C.dtype.float32 if dtype is None else dtype
        from . import init
        if self._qkv_same_embed_dim:
            self.in_proj_weight = init.xavier_uniform_(
                _C.zeros(3 * embed_dim, embed_dim, dtype=dt)).requires_grad_()
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = init.xavier_uniform_(
                _C.zeros(embed_dim, embed_dim, dtype=dt)).requires_grad_()
            self.k_proj_weight = init.xavier_uniform_(
                _C.zeros(embed_dim, self.kdim, dtype=dt)).requires_grad_()
            self.v_proj_weight = init.xavier_uniform_(
                _C.zeros(embed_dim, self.vdim, dtype=dt)).requires_grad_()
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _C.zeros(3 * embed_dim, dtype=dt).requires_grad_()
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = _C.zeros(embed_dim).requires_grad_()
        _cast_parameters(self.out_proj, dt)
        if add_bias_kv:
            self.bias_k = init.xavier_normal_(_C.zeros(1, 1, embed_dim, dtype=dt)).requires_grad_()
            self.bias_v = init.xavier_normal_(_C.zeros(1, 1, embed_dim, dtype=dt)).requires_grad_()
        else:
            self.bias_k = self.bias_v = None

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"

    def _projections(self, query, key, value):
        e, b = self.embed_dim, self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def _check(self, query, key, value, batched):
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"MultiheadAttention: {name} must be a Tensor, not "
                                f"{type(t).__name__}")
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"MultiheadAttention: query, key and value must all be 3-D (batched) "
                             f"or 2-D (unbatched), got {tuple(query.shape)}, {tuple(key.shape)}, "
                             f"{tuple(value.shape)}")
        dims = (("query", query, self.embed_dim), ("key", key, self.kdim),
                ("value", value, self.vdim))
        for name, t, want in dims:
            if t.shape[-1] != want:
                raise ValueError(f"MultiheadAttention: {name}'s last dim must be {want}, got "
                                 f"shape {tuple(t.shape)}")
        seq = 1 if batched and self.batch_first else 0
        if key.shape[seq] != value.shape[seq] or (batched and key.shape[1 - seq] != value.shape[1 - seq]):
            raise ValueError(f"MultiheadAttention: key and value must have the same batch and "
                             f"sequence sizes, got {tuple(key.shape)} and {tuple(value.shape)}")
        if batched and query.shape[1 - seq] != key.shape[1 - seq]:
            raise ValueError(f"MultiheadAttention: query and key must have the same batch size, "
                             f"got {tuple(query.shape)} and {tuple(key.shape)}")

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = isinstance(query, _C.Tensor) and query.ndim == 3
        self._check(query, key, value, batched)
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint; it needs attn_mask (PyTorch's "
                             "rule): pass the causal mask as attn_mask")
        if batched and not self.batch_first:  # (L, N, E) -> (N, L, E)
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        elif not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        n, l_q, e = query.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)
        kpm = _float_mask(key_padding_mask, q.dtype, "key_padding_mask")
        mask = _float_mask(attn_mask, q.dtype, "attn_mask")
        if self.bias_k is not None:  # one more key and value, never masked
            k = _C.cat([k, self.bias_k.expand(n, 1, e)], 1)
            v = _C.cat([v, self.bias_v.expand(n, 1, e)], 1)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        if self.add_zero_attn:  # and a zero key and value
            k = _C.cat([k, _C.zeros(n, 1, e, dtype=k.dtype)], 1)
            v = _C.cat([v, _C.zeros(n, 1, e, dtype=v.dtype)], 1)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        s = k.shape[1]
        if mask is not None:
            if mask.ndim == 2:
                want = (l_q, s)
            elif mask.ndim == 3:
                want = (n * h, l_q, s)
            else:
                want = None
            if want is None or tuple(mask.shape) != want:
                raise ValueError(f"MultiheadAttention: attn_mask must be ({l_q}, {s}) or "
                                 f"({n * h}, {l_q}, {s}), got {tuple(attn_mask.shape)}")
            mask = mask.reshape(1, 1, l_q, s) if mask.ndim == 2 else mask.reshape(n, h, l_q, s)
        if kpm is not None:
            if tuple(kpm.shape) != (n, s):
                raise ValueError(f"MultiheadAttention: key_padding_mask must be (batch, source "
                                 f"length) = ({n}, {s}), got {tuple(key_padding_mask.shape)}")
            kpm = kpm.reshape(n, 1, 1, s)
            mask = kpm if mask is None else mask + kpm
        q = q.reshape(n, l_q, h, d).transpose(1, 2)
        k = k.reshape(n, s, h, d).transpose(1, 2)
        v = v.reshape(n, s, h, d).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        if need_weights:  # PyTorch's path: a plain softmax, the weights returned after dropout
            scores = _C.matmul(q * (1.0 / math.sqrt(d)), k.transpose(-2, -1))
            if mask is not None:
                scores = scores + mask
            weights = F.dropout(F.softmax(scores, -1), p, p > 0.0)
            out = _C.matmul(weights, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, mask, p)
            weights = None
        out = self.out_proj(out.transpose(1, 2).reshape(n, l_q, e))
        if batched and not self.batch_first:
            out = out.transpose(0, 1)
        elif not batched:
            out = out.squeeze(0)
        if weights is not None:
            if average_attn_weights:
                weights = _C.mean(weights, 1)
            if not batched:
                weights = weights.squeeze(0)
        return out, weights


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise ValueError(f"TransformerEncoderLayer: activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """PyTorch's nn.TransformerEncoderLayer (self_attn, linear1, dropout, linear2, norm1, norm2,
    dropout1, dropout2): self-attention then a feed-forward block, each with a residual; layer
    norms after each (norm_first=False) or before (norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.batch_first = batch_first
        _cast_parameters(self, dtype)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x
