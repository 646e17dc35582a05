"""The transformer block: attention, then an MLP, each in a pre-norm residual (ViT paper, eq. 2-3).

Introduced in notebook 04. A block reads `x = x + attn(norm1(x))`, then `x = x + mlp(norm2(x))`.
The residual path carries the tokens through unchanged and each branch adds a correction, which
is what lets a deep stack train; normalising *before* each branch (pre-norm, as the ViT does)
keeps that path clean. Dropout and stochastic depth (`DropPath`) help when training on small data.
"""

from __future__ import annotations

import torch
from torch import nn

from vitcourse.attention import MultiHeadSelfAttention
from vitcourse.language import _


def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """LayerNorm written out (notebook 04's exercise): each token normalised over its D features,
    then scaled by `weight` and shifted by `bias`. Equal to `F.layer_norm(x, x.shape[-1:], ...)`."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)  # the population variance: divide by D
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


class MLP(nn.Module):
    """(B, T, D) -> (B, T, D): widen to `hidden_dim`, GELU, narrow back; each token on its own."""

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: in training, skip a residual branch for a random `rate` of the samples.

    Kept branches are scaled by 1 / (1 - rate) so the expected output is unchanged; at evaluation
    time every branch runs (Huang et al., 2016).
    """

    def __init__(self, rate: float = 0.0):
        super().__init__()
        if not 0.0 <= rate < 1.0:
            raise ValueError(_("drop-path rate must be in [0, 1), got {rate}").format(rate=rate))
        self.rate = rate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        mask = x.new_empty(x.shape[0], *([1] * (x.ndim - 1))).bernoulli_(
            keep
        )  # one draw per sample
        return x * mask / keep


class TransformerBlock(nn.Module):
    """(B, T, D) -> (B, T, D): one pre-norm transformer encoder block."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_dim: int,
        qkv_bias: bool = True,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        drop_path: float = 0.0,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = MultiHeadSelfAttention(dim, num_heads, qkv_bias, attn_dropout, dropout)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLP(dim, mlp_dim, dropout)
        self.drop_path = DropPath(drop_path)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """With `return_weights`, also return the attention weights (B, h, T, T)."""
        if return_weights:
            attended, weights = self.attn(self.norm1(x), return_weights=True)
        else:
            attended = self.attn(self.norm1(x))
        x = x + self.drop_path(attended)
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return (x, weights) if return_weights else x
