"""vitcourse.mae: the masked autoencoder (He et al. 2022): which patches it hides, what its
encoder reads, what its loss counts. (Pre-training with it is in tests/training/test_pretraining.py.)
"""

import dataclasses

import pytest
import torch

from vitcourse.mae import (
    MAEConfig,
    MaskedAutoencoder,
    hidden_count,
    masked_patch_loss,
    random_masking,
)
from vitcourse.patching import patchify
from vitcourse.presets import preset


def tiny_mae(tiny_rgb_vit, **changes) -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAEConfig(encoder=tiny_rgb_vit, decoder_dim=16, **changes))


def test_masking_hides_exactly_the_ratio_in_every_image_and_says_which():
    visible, mask = random_masking(64, 16, 0.75, torch.Generator().manual_seed(0))
    assert visible.shape == (64, 4) and mask.shape == (64, 16) and mask.dtype == torch.bool
    assert (mask.sum(dim=1) == 12).all()  # 75% of 16, in every image
    assert (visible.diff(dim=1) > 0).all()  # sorted, no repeats
    assert not mask.gather(1, visible).any()  # the visible ones are not hidden ...
    assert (mask.sum(1) + visible.shape[1] == 16).all()  # ... and every other one is
    assert len({tuple(row) for row in visible.tolist()}) > 50  # each image has its own
    # Every patch gets hidden about equally often: no position is favoured.
    share = random_masking(4000, 16, 0.75, torch.Generator().manual_seed(1))[1].float().mean(0)
    assert share.min() > 0.7 and share.max() < 0.8
    again = random_masking(64, 16, 0.75, torch.Generator().manual_seed(0))[0]
    assert torch.equal(visible, again)


@pytest.mark.parametrize(
    ("ratio", "hidden"), [(0.75, 12), (0.5, 8), (0.1, 2), (0.9, 14), (0.95, 15)]
)
def test_hidden_count_rounds_the_ratio_of_the_patches(ratio, hidden):
    assert hidden_count(16, ratio) == hidden


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1, 0.99, 0.01])
def test_a_ratio_that_hides_none_or_all_is_a_clear_error(ratio):
    with pytest.raises(ValueError, match="mask_ratio"):
        random_masking(2, 16, ratio)


def test_the_loss_counts_the_hidden_patches_only():
    gen = torch.Generator().manual_seed(0)
    predicted, target = torch.randn(2, 4, 3, generator=gen), torch.randn(2, 4, 3, generator=gen)
    mask = torch.tensor([[True, False, False, True], [False, True, False, False]])
    by_hand = torch.stack(
        [((predicted[b, n] - target[b, n]) ** 2).mean() for b, n in [(0, 0), (0, 3), (1, 1)]]
    ).mean()
    torch.testing.assert_close(masked_patch_loss(predicted, target, mask), by_hand)
    # Any guess on a visible patch changes nothing.
    changed = predicted.clone()
    changed[~mask] = 100.0
    torch.testing.assert_close(masked_patch_loss(changed, target, mask), by_hand)
    with pytest.raises(ValueError, match="expected predicted and target"):
        masked_patch_loss(predicted, target[:, :3], mask)


def test_the_encoder_reads_the_cls_token_and_the_visible_patches_only(tiny_rgb_vit):
    mae = tiny_mae(tiny_rgb_vit).eval()
    images = torch.randn(3, 3, 16, 16)
    seen = []
    mae.encoder.blocks[0].register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0]))
    visible, _ = random_masking(3, 16, 0.75, torch.Generator().manual_seed(0))
    mae.encode(images, visible)
    assert seen[0].shape == (3, 1 + 4, tiny_rgb_vit.dim)
    # They are exactly the tokens the full ViT would embed for those patches, positions included.
    tokens = mae.encoder.embed(images)  # (B, 1 + 16, D)
    expected = torch.cat(
        [tokens[:, :1], tokens[:, 1:].gather(1, visible[..., None].expand(-1, -1, 32))], 1
    )
    torch.testing.assert_close(seen[0], expected)


def test_the_forward_pass_predicts_every_patch_and_only_the_hidden_ones_get_gradients(
    tiny_rgb_vit,
):
    mae = tiny_mae(tiny_rgb_vit)
    images = torch.randn(4, 3, 16, 16)
    out = mae(images, generator=torch.Generator().manual_seed(0))
    assert out.predicted.shape == patchify(images, 4).shape == (4, 16, 48)
    assert (out.mask.sum(1) == 12).all()
    torch.testing.assert_close(
        out.loss, masked_patch_loss(out.predicted, patchify(images, 4), out.mask)
    )
    predicted = out.predicted.detach().requires_grad_()
    masked_patch_loss(predicted, patchify(images, 4), out.mask).backward()
    assert predicted.grad[~out.mask].abs().sum() == 0
    assert (predicted.grad[out.mask].abs().sum(-1) > 0).all()
    out.loss.backward()  # and the encoder learns from it
    assert mae.encoder.blocks[0].attn.qkv.weight.grad.abs().sum() > 0


def test_the_config_refuses_a_hybrid_and_a_ratio_that_leaves_nothing(tiny_rgb_vit):
    with pytest.raises(ValueError, match="needs a pure ViT"):
        MAEConfig(encoder=preset("course-28/conv"))
    with pytest.raises(ValueError, match="hides 16 of 16"):
        MAEConfig(encoder=tiny_rgb_vit, mask_ratio=0.99)
    with pytest.raises(ValueError, match="decoder_dim 30 is not divisible"):
        MAEConfig(encoder=tiny_rgb_vit, decoder_dim=30, decoder_heads=4)
    as_stored = dataclasses.asdict(MAEConfig(encoder=tiny_rgb_vit))  # a checkpoint's plain dict
    assert MAEConfig(**as_stored).encoder == tiny_rgb_vit
