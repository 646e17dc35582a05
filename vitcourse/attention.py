"""Attention: every token looks at every other and takes a weighted mix (ViT paper, appendix A).

Introduced in notebook 03. Each token asks a question (its query q), offers a label (its key k)
and carries content (its value v). A token's output is the average of all values, weighted by how
well its query matches each key: softmax(q k^T / sqrt(d)) v. Multi-head attention runs h of these
side by side on d = D/h-wide slices, so different heads can attend to different things.

`scaled_dot_product_attention` writes this out so the weights can be drawn. The module uses
PyTorch's fused `F.scaled_dot_product_attention` (faster, less memory) unless the weights are
asked for; the tests prove the two paths equal.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.language import _


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., T, d) queries, keys and values -> (output (..., T, d), weights (..., T, T)).

    Row i of the weights is how much query i attends to each key; it sums to 1. With
    `dropout_p`, some weights are dropped when mixing the values (training only); the returned
    weights are the ones before dropout.
    """
    d = q.shape[-1]
    # Dividing by sqrt(d) keeps the scores' spread near 1 whatever the head width, so the
    # softmax does not saturate into a one-hot choice (notebook 03 shows what happens if it does).
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (..., T, d) @ (..., d, T) -> (..., T, T)
    weights = scores.softmax(dim=-1)  # over the keys: each query's weights sum to 1
    mixing = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return mixing @ v, weights  # (..., T, T) @ (..., T, d) -> (..., T, d)


class MultiHeadSelfAttention(nn.Module):
    """(B, T, D) tokens -> (B, T, D): h heads of self-attention, then an output projection."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        qkv_bias: bool = True,
        attn_dropout: float = 0.0,
        dropout: float = 0.0,
    ):
        super().__init__()
        if dim % num_heads:
            message = _("dim {dim} is not divisible by num_heads {num_heads}")
            raise ValueError(message.format(dim=dim, num_heads=num_heads))
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.attn_dropout = attn_dropout
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)  # queries, keys and values in one matmul
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """With `return_weights`, also return the attention weights (B, h, T, T)."""
        B, T, D = x.shape
        h, d = self.num_heads, self.head_dim
        qkv = (
            self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
        )  # (B, T, 3D) -> (3, B, h, T, d)
        q, k, v = qkv.unbind(0)  # each (B, h, T, d)
        dropout_p = self.attn_dropout if self.training else 0.0
        if return_weights:
            out, weights = scaled_dot_product_attention(q, k, v, dropout_p)
        else:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        out = out.transpose(1, 2).reshape(B, T, D)  # (B, h, T, d) -> (B, T, h, d) -> (B, T, D)
        out = self.proj_drop(self.proj(out))
        return (out, weights) if return_weights else out
