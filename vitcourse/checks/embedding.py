"""Checks for notebook 02's exercises: `PatchEmbedding` and `embed_tokens`
(`vitcourse.embedding`)."""

from __future__ import annotations

import torch

from vitcourse import embedding
from vitcourse.checks.harness import compare, randomized, run_with_reference_weights, seeded
from vitcourse.checks.registry import exercise
from vitcourse.embedding import embed_tokens

_SIZES = {"image_size": 16, "patch_size": 4, "in_channels": 3, "dim": 8}  # PatchEmbedding's check


@exercise("PatchEmbedding", "02_embeddings", embedding.PatchEmbedding)
class check_patch_embedding:
    """Check a PatchEmbedding class: `cls(image_size, patch_size, in_channels, dim)`,
    (B, C, H, W) -> (B, N, D)."""

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(embedding.PatchEmbedding(**_SIZES), seed)
        return {"weights": reference.state_dict(), "images": seeded(2, 3, 16, 16, seed=seed)}

    @staticmethod
    def run(cls, weights, images):
        return run_with_reference_weights(lambda: cls(**_SIZES), weights, images)

    @staticmethod
    def judge(got, weights, images) -> None:
        reference = embedding.PatchEmbedding(**_SIZES).eval()
        reference.load_state_dict(weights)
        with torch.no_grad():
            conv = reference.proj(images)  # (B, D, H/P, W/P)
            expected = reference(images)
        mistakes = [
            (
                "a reshape from (B, D, N) to (B, N, D) mixes up numbers; swap the axes with "
                ".transpose(1, 2) instead.",
                lambda: conv.reshape(2, 16, 8),
            ),
            (
                "the patches come out column by column: flatten the (H/P, W/P) grid as it is, row "
                "by row.",
                lambda: conv.transpose(2, 3).flatten(2).transpose(1, 2),
            ),
        ]
        compare(
            got,
            expected,
            mistakes,
            shape_hints={
                (2, 8, 16): "that is (B, D, N): move the width D last with .transpose(1, 2).",
                (2, 8, 4, 4): "that is the convolution's (B, D, H/P, W/P): flatten the grid into N "
                "tokens, then put D last: .flatten(2).transpose(1, 2).",
            },
        )


@exercise("embed_tokens", "02_embeddings", embed_tokens)
class check_embed_tokens:
    """Check `fn(patch_tokens (B, N, D), cls_token (1, 1, D), pos_embed (1, T, D)) -> (B, T, D)`."""

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "x": seeded(3, 4, 6, seed=seed + 1),
            "cls_token": seeded(1, 1, 6, seed=seed + 2),
            "pos": seeded(1, 5, 6, seed=seed + 3),
        }

    @staticmethod
    def run(embed_tokens, x, cls_token, pos):
        return embed_tokens(x, cls_token, pos)

    @staticmethod
    def judge(got, x, cls_token, pos) -> None:
        mistakes = [
            (
                "the cls token goes in front, at position 0: torch.cat([cls, x], dim=1).",
                lambda: torch.cat([x, cls_token.expand(3, -1, -1)], 1) + pos,
            ),
            (
                "the position embeddings are missing: add pos_embed to every token, the cls token "
                "too.",
                lambda: torch.cat([cls_token.expand(3, -1, -1), x], 1),
            ),
            (
                "the cls token should get position embedding 0 as well: add pos_embed after "
                "concatenating.",
                lambda: torch.cat([cls_token.expand(3, -1, -1), x + pos[:, 1:]], 1),
            ),
        ]
        compare(
            got,
            embed_tokens(x, cls_token, pos),
            mistakes,
            shape_hints={
                (3, 4, 6): "the cls token is an extra token, concatenated in front (T = N + 1), "
                "not added to the patch tokens.",
            },
        )
