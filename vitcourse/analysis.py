"""Looking inside a trained ViT: where its attention goes (notebook 07; rollout also in 06).

`attention_rollout` follows Abnar & Zuidema, "Quantifying Attention Flow in Transformers" (2020):
attention in one layer says which tokens a token reads, but the residual connection also carries
the token itself forward, and layers compose. Rollout averages the heads, adds the identity for
the residual path, renormalises each row, and multiplies the layers together, giving how much
each output token draws on each input token through the whole stack.
"""

from __future__ import annotations

import torch


def attention_rollout(maps: torch.Tensor) -> torch.Tensor:
    """(layers, B, heads, T, T) attention weights -> (B, T, T) rolled-out attention.

    Row i of the result says how much token i at the top draws on each input token; rows sum to 1.
    """
    if maps.ndim != 5:
        raise ValueError(f"expected maps (layers, B, heads, T, T), got shape {tuple(maps.shape)}")
    L, B, h, T, _ = maps.shape
    identity = torch.eye(T, dtype=maps.dtype, device=maps.device)
    rollout = identity.expand(B, T, T)
    for layer in maps:  # (B, h, T, T), from the first block to the last
        a = layer.mean(dim=1) + identity  # average the heads; the residual path keeps each token
        a = a / a.sum(dim=-1, keepdim=True)  # rows sum to 1 again
        rollout = a @ rollout  # this layer reads what the layers below have mixed
    return rollout
