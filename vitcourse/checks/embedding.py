"""Checks for notebook 02's exercises: `PatchEmbedding` and `embed_tokens`
(`vitcourse.embedding`)."""

from __future__ import annotations

import torch

from vitcourse import embedding
from vitcourse.checks.harness import compare, randomized, run_with_reference_weights, seeded
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.embedding import embed_tokens
from vitcourse.language import N_

_SIZES = {"image_size": 16, "patch_size": 4, "in_channels": 3, "dim": 8}  # PatchEmbedding's check

_EMBED_MORE = N_(
    "the convolution gives (B, D, H/P, W/P). Two steps make it (B, N, D): merge the grid's two "
    "axes into one axis of N patches, then move D to the end."
)


@exercise("PatchEmbedding", "02_embeddings", embedding.PatchEmbedding)
class check_patch_embedding:
    """Check a PatchEmbedding class: `cls(image_size, patch_size, in_channels, dim)`,
    (B, C, H, W) -> (B, N, D)."""

    called = N_(
        "images (2, 3, 16, 16), in a PatchEmbedding(16, 4, 3, 8) with the reference's weights"
    )
    more = _EMBED_MORE

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
                Hint(
                    N_(
                        "a reshape from (B, D, N) to (B, N, D) keeps the numbers in memory order, "
                        "so it mixes features with patches: swap the two axes instead."
                    ),
                    more=N_(
                        "reshape and view only regroup numbers in their order; moving an axis is "
                        "a transpose (or a permute)."
                    ),
                ),
                lambda: conv.reshape(2, 16, 8),
            ),
            (
                Hint(
                    N_(
                        "the patches come out column by column: flatten the (H/P, W/P) grid row by "
                        "row, in reading order, as patchify does."
                    ),
                    more=N_(
                        "after the convolution the grid's axes are already (rows, columns): "
                        "flatten them as they are, without swapping them."
                    ),
                ),
                lambda: conv.transpose(2, 3).flatten(2).transpose(1, 2),
            ),
        ]
        compare(
            got,
            expected,
            mistakes,
            generic=Hint(
                N_(
                    "the tokens are not the convolution's outputs in the order the transformer "
                    "wants: one token per patch, in reading order, D numbers each."
                ),
                more=_EMBED_MORE,
            ),
            shape_hints={
                (2, 8, 16): Hint(
                    N_("that is (B, D, N): the width D should come last, (B, N, D)."),
                    more=N_("one swap of the last two axes turns (B, D, N) into (B, N, D)."),
                ),
                (2, 8, 4, 4): N_(
                    "that is the convolution's (B, D, H/P, W/P): merge the grid into N "
                    "tokens, then put D last."
                ),
            },
        )


_TOKENS_MORE = N_(
    "the paper's equation 1 (section 3.1): the sequence is [cls token; patch tokens] + E_pos, "
    "T = N + 1 tokens, joined along the token axis (dim 1)."
)


@exercise("embed_tokens", "02_embeddings", embed_tokens)
class check_embed_tokens:
    """Check `fn(patch_tokens (B, N, D), cls_token (1, 1, D), pos_embed (1, T, D)) -> (B, T, D)`."""

    called = N_("patch_tokens (3, 4, 6), cls_token (1, 1, 6), pos_embed (1, 5, 6)")
    raised = [
        (
            "Sizes of tensors must match",
            Hint(
                N_(
                    "the cls token is (1, 1, D), one for the whole model, and the patch tokens are "
                    "(B, N, D): to join them along the token axis, each of the B images needs its "
                    "own view of the cls token."
                ),
                more=N_(
                    "`expand` makes B views of a tensor without copying it (the instructions "
                    "mention it); the sizes you do not change stay as they are."
                ),
            ),
        )
    ]
    more = _TOKENS_MORE

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
                Hint(
                    N_("the cls token goes in front, at position 0, not after the patches."),
                    more=N_("in the list of tensors you join, the cls token comes first."),
                ),
                lambda: torch.cat([x, cls_token.expand(3, -1, -1)], 1) + pos,
            ),
            (
                Hint(
                    N_(
                        "the position embeddings are missing: every token gets its own, the cls "
                        "token too (the paper's equation 1)."
                    ),
                    more=N_(
                        "pos_embed is (1, T, D): it broadcasts over the batch, so it adds to the "
                        "(B, T, D) sequence as it is."
                    ),
                ),
                lambda: torch.cat([cls_token.expand(3, -1, -1), x], 1),
            ),
            (
                Hint(
                    N_(
                        "the cls token should get position embedding 0 as well: equation 1 adds "
                        "E_pos to the whole sequence."
                    ),
                    more=N_(
                        "add the positions once, after the cls token is in front, so that "
                        "position 0 goes to it."
                    ),
                ),
                lambda: torch.cat([cls_token.expand(3, -1, -1), x + pos[:, 1:]], 1),
            ),
        ]
        compare(
            got,
            embed_tokens(x, cls_token, pos),
            mistakes,
            generic=Hint(
                N_(
                    "compare your steps with the paper's equation 1 (section 3.1): the cls token "
                    "in front of the patch tokens, then the position embeddings added to every "
                    "token."
                ),
                more=_TOKENS_MORE,
            ),
            shape_hints={
                (3, 4, 6): N_(
                    "the cls token is an extra token in front of the patches (T = N + 1), "
                    "not added to them."
                ),
            },
        )
