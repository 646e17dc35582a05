"""vitcourse.checks.embedding: PatchEmbedding and embed_tokens accept right answers and name each
mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch
from torch import nn

from vitcourse import checks
from vitcourse.embedding import PatchEmbedding

# --- embeddings -------------------------------------------------------------------------------


def _patch_embedding(forward):
    class Learner(nn.Module):
        def __init__(self, image_size, patch_size, in_channels, dim):
            super().__init__()
            self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

        def forward(self, images):
            return forward(self.proj(images))

    return Learner


def test_patch_embedding():
    good = _patch_embedding(lambda x: x.flatten(2).transpose(1, 2))
    assert checks.check_patch_embedding(good) is good
    assert checks.check_patch_embedding(PatchEmbedding) is PatchEmbedding


@pytest.mark.parametrize(
    "forward, hint",
    [
        (lambda x: x.flatten(2), r"that is \(B, D, N\)"),
        (lambda x: x, "merge the grid into N"),
        (lambda x: x.reshape(x.shape[0], -1, x.shape[1]), "swap the two axes instead"),
        (lambda x: x.flatten(2).transpose(1, 2).flip(1), "shape is right but the values"),
        (lambda x: x.transpose(2, 3).flatten(2).transpose(1, 2), "column by column"),
    ],
)
def test_patch_embedding_mistakes(forward, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_patch_embedding(_patch_embedding(forward))


def test_patch_embedding_with_other_parameter_names_is_refused():
    class Renamed(nn.Module):
        def __init__(self, image_size, patch_size, in_channels, dim):
            super().__init__()
            self.conv = nn.Conv2d(in_channels, dim, patch_size, patch_size)

        def forward(self, images):
            return self.conv(images).flatten(2).transpose(1, 2)

    with pytest.raises(AssertionError, match="keep __init__ exactly as given"):
        checks.check_patch_embedding(Renamed)


def test_embed_tokens():
    def good(x, cls_token, pos):
        return torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1) + pos

    assert checks.check_embed_tokens(good) is good
    with pytest.raises(AssertionError, match="cls token goes in front"):
        checks.check_embed_tokens(
            lambda x, c, p: torch.cat([x, c.expand(x.shape[0], -1, -1)], 1) + p
        )
    with pytest.raises(AssertionError, match="position embeddings are missing"):
        checks.check_embed_tokens(lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x], 1))
    with pytest.raises(AssertionError, match="extra token in front of the patches"):
        checks.check_embed_tokens(lambda x, c, p: x + c)


def test_the_verdicts_hold_for_another_seed():
    good = _patch_embedding(lambda x: x.flatten(2).transpose(1, 2))
    assert checks.EXERCISES["PatchEmbedding"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="column by column"):
        checks.EXERCISES["PatchEmbedding"].check(
            _patch_embedding(lambda x: x.transpose(2, 3).flatten(2).transpose(1, 2)), seed=12345
        )

    def good_tokens(x, cls_token, pos):
        return torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1) + pos

    assert checks.EXERCISES["embed_tokens"].check(good_tokens, seed=12345) is good_tokens
    with pytest.raises(AssertionError, match="position embeddings are missing"):
        checks.EXERCISES["embed_tokens"].check(
            lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x], 1), seed=12345
        )
