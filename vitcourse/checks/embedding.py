"""Checks for notebook 02's exercises: `PatchEmbedding` and `embed_tokens`
(`vitcourse.embedding`)."""

from __future__ import annotations

import torch

from vitcourse import embedding
from vitcourse.checks.harness import Hint, compare, randomized, run_with_reference_weights, seeded
from vitcourse.checks.registry import exercise
from vitcourse.embedding import embed_tokens
from vitcourse.language import N_

# PatchEmbedding's check: two modules, so that sizes written into the code show
_SIZES = {"image_size": 16, "patch_size": 4, "in_channels": 3, "dim": 8}
_MORE_SIZES = {"image_size": 8, "patch_size": 2, "in_channels": 1, "dim": 6}

_EMBED_MORE = N_(
    "the convolution gives (B, D, H/P, W/P). Two steps make it (B, N, D): merge the grid's two "
    "axes into one axis of N patches, then move D to the end."
)


def _embedding_mistakes(conv, bias) -> list:
    """PatchEmbedding's classic slips, from the convolution's output (B, D, H/P, W/P) and its
    bias (D,)."""
    B, D, rows, cols = conv.shape
    return [
        (
            Hint(
                N_(
                    "the convolution's bias is missing: call proj itself, which adds its D "
                    "biases, rather than its weights alone."
                ),
                more=N_("proj holds a weight and a bias; the patch embedding uses both."),
            ),
            lambda: (conv - bias.reshape(1, D, 1, 1)).flatten(2).transpose(1, 2),
        ),
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
            lambda: conv.reshape(B, rows * cols, D),
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


@exercise("PatchEmbedding", "02_embeddings", embedding.PatchEmbedding)
class check_patch_embedding:
    """Check a PatchEmbedding class: `cls(image_size, patch_size, in_channels, dim)`,
    (B, C, H, W) -> (B, N, D), at two sizes."""

    called = N_(
        "images (2, 3, 16, 16), in a PatchEmbedding(16, 4, 3, 8), and images (2, 1, 8, 8), in a "
        "PatchEmbedding(8, 2, 1, 6), each with the reference's weights"
    )
    more = _EMBED_MORE
    worked = N_(
        "for the check's images (2, 3, 16, 16), patch size 4 and D = 8: after proj (2, 8, 4, 4); "
        "the grid merged into one axis (2, 8, 16); D moved last (2, 16, 8). Token n is the "
        "convolution's output at grid row n // 4, column n % 4: token 5 of yours should equal "
        "self.proj(images)[:, :, 1, 1]."
    )
    shown = {"more_images": "`images`"}

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(embedding.PatchEmbedding(**_SIZES), seed)
        other = randomized(embedding.PatchEmbedding(**_MORE_SIZES), seed + 1)
        return {
            "weights": reference.state_dict(),
            "images": seeded(2, 3, 16, 16, seed=seed),
            "more_weights": other.state_dict(),
            "more_images": seeded(2, 1, 8, 8, seed=seed + 1),
        }

    @staticmethod
    def run(cls, weights, images, more_weights, more_images):
        return [
            run_with_reference_weights(lambda: cls(**_SIZES), weights, images),
            run_with_reference_weights(lambda: cls(**_MORE_SIZES), more_weights, more_images),
        ]

    @staticmethod
    def judge(got, weights, images, more_weights, more_images) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        cases = ((_SIZES, weights, images), (_MORE_SIZES, more_weights, more_images))
        for answer, (sizes, state, x) in zip(got, cases, strict=True):
            reference = embedding.PatchEmbedding(**sizes).eval()
            reference.load_state_dict(state)
            with torch.no_grad():
                conv = reference.proj(x)  # (B, D, H/P, W/P)
                expected = reference(x)
            B, D, rows, cols = conv.shape
            compare(
                answer,
                expected,
                _embedding_mistakes(conv, reference.proj.bias),
                generic=Hint(
                    N_(
                        "the tokens are not the convolution's outputs in the order the "
                        "transformer wants: one token per patch, in reading order, D numbers "
                        "each."
                    ),
                    more=_EMBED_MORE,
                ),
                shape_hints={
                    (B, D, rows * cols): Hint(
                        N_("that is (B, D, N): the width D should come last, (B, N, D)."),
                        more=N_("one swap of the last two axes turns (B, D, N) into (B, N, D)."),
                    ),
                    (B, D, rows, cols): N_(
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
    worked = N_(
        "with B = 2, N = 2 and D = 1: patch tokens [[[1], [2]], [[3], [4]]], cls token [[[0]]] "
        "and positions [[[10], [20], [30]]] give [[[10], [21], [32]], [[10], [23], [34]]], of shape "
        "(2, 3, 1): each image starts with the cls token, and each of the three places gets its "
        "own position. Run yours on these (as tensors) and compare; the caller's patch tokens "
        "must still be [[[1], [2]], [[3], [4]]] afterwards."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "patch_tokens": seeded(3, 4, 6, seed=seed + 1),
            "cls_token": seeded(1, 1, 6, seed=seed + 2),
            "pos_embed": seeded(1, 5, 6, seed=seed + 3),
        }

    @staticmethod
    def run(embed_tokens, patch_tokens, cls_token, pos_embed):
        return embed_tokens(patch_tokens, cls_token, pos_embed)

    @staticmethod
    def judge(got, patch_tokens, cls_token, pos_embed) -> None:
        x, pos = patch_tokens, pos_embed
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
