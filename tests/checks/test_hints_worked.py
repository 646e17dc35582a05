"""The third tier of each check's hints works a small case by hand (`worked`): its numbers are
the course's own results on that case, computed here."""

import math

import torch
import torch.nn.functional as F

from vitcourse import analysis, checks, mae, scrambling
from vitcourse.attention import scaled_dot_product_attention
from vitcourse.embedding import embed_tokens
from vitcourse.patching import patchify, unpatchify
from vitcourse.training.distillation import distillation_loss
from vitcourse.vit import VisionTransformer, ViTConfig, count_parameters

IMAGE = torch.arange(16.0).reshape(1, 1, 4, 4)


def said(name: str) -> str:
    return checks.EXERCISES[name].worked


def test_patches_of_a_4_by_4_image():
    assert patchify(IMAGE, 2).tolist() == [
        [[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]
    ]
    assert "[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13] and [10, 11, 14, 15]" in said("patchify")
    assert torch.equal(unpatchify(patchify(IMAGE, 2), 2, (4, 4)), IMAGE)
    assert "(1, 2, 2, 2, 2, 1), then (1, 1, 2, 2, 2, 2)" in said("unpatchify")


def test_tokens_of_a_tiny_batch():
    tokens = torch.tensor([[[1.0], [2.0]], [[3.0], [4.0]]])
    out = embed_tokens(tokens, torch.zeros(1, 1, 1), torch.tensor([[[10.0], [20.0], [30.0]]]))
    assert out.tolist() == [[[10], [21], [32]], [[10], [23], [34]]]
    assert "[[[10], [21], [32]], [[10], [23], [34]]]" in said("embed_tokens")


def test_attention_of_one_query():
    q, k = torch.ones(1, 4), torch.tensor([[1.0, 1, 1, 1], [0, 0, 0, 0]])
    out, weights = scaled_dot_product_attention(q, k, torch.eye(2))
    assert [round(w, 3) for w in weights[0].tolist()] == [0.881, 0.119]
    assert [round(w, 3) for w in out[0].tolist()] == [0.881, 0.119]
    assert "[[0.881, 0.119]]" in said("attention")


def test_layer_norm_of_one_token():
    x = torch.tensor([[1.0, 2, 3, 4]])
    assert [round(v, 3) for v in F.layer_norm(x, (4,), eps=0.0)[0].tolist()] == [
        -1.342,
        -0.447,
        0.447,
        1.342,
    ]
    assert [round(v, 3) for v in F.layer_norm(x, (4,), eps=1.0)[0].tolist()] == [
        -1.0,
        -0.333,
        0.333,
        1.0,
    ]
    assert "[-1.342, -0.447, 0.447, 1.342]" in said("layer_norm")
    assert "[-1, -0.333, 0.333, 1]" in said("layer_norm")


def test_the_parameters_of_a_tiny_vit():
    config = ViTConfig(
        image_size=8, patch_size=4, in_channels=1, num_classes=2, dim=4, depth=1, num_heads=1,
        mlp_dim=8,
    )  # fmt: skip
    assert count_parameters(config) == VisionTransformer(config).num_parameters() == 282
    assert "282 in all" in said("count_parameters")
    model = VisionTransformer(config)
    assert sum(p.numel() for p in model.blocks[0].parameters()) == 172
    assert "so 172" in said("count_parameters")


def test_a_rollout_of_two_tokens():
    maps = torch.tensor([[0.0, 1.0], [1.0, 0.0]]).reshape(1, 1, 1, 2, 2)
    assert analysis.attention_rollout(maps).tolist() == [[[0.5, 0.5], [0.5, 0.5]]]
    two = torch.cat([maps, maps])
    assert analysis.attention_rollout(two).tolist() == [[[0.5, 0.5], [0.5, 0.5]]]
    assert "[[0.5, 0.5], [0.5, 0.5]]" in said("attention_rollout")


def test_equivariance_of_the_identity_and_of_a_pattern():
    image = torch.randn(1, 1, 10, 12)
    assert analysis.equivariance_error(lambda x: x, image, 3, 0) == 0
    assert analysis.equivariance_error(lambda x: x + torch.arange(12.0), image, 3, 2) > 0
    assert "lambda x: x + torch.arange(12.)" in said("equivariance_error")


def test_the_masking_counts_and_the_order_by_noise():
    assert mae.hidden_count(10, 0.75) == 8 and int(10 * 0.75) == 7
    assert mae.hidden_count(16, 0.75) == 12
    assert torch.tensor([0.3, 0.9, 0.1, 0.5]).argsort().tolist() == [2, 0, 3, 1]
    assert "round(7.5) = 8" in said("random_masking") and "[2, 0, 3, 1]" in said("random_masking")


def test_the_masked_loss_of_two_patches():
    predicted, target = torch.tensor([[[1.0, 1], [0, 0]]]), torch.zeros(1, 2, 2)
    assert mae.masked_patch_loss(predicted, target, torch.tensor([[True, False]])).item() == 1
    assert mae.masked_patch_loss(predicted, target, torch.tensor([[True, True]])).item() == 0.5


def test_distillation_of_one_image():
    c, d, t, y = torch.zeros(1, 2), torch.zeros(1, 2), torch.tensor([[2.0, 0]]), torch.tensor([1])
    assert round(distillation_loss(c, d, t, y, "hard", 0.5, 1.0).item(), 3) == round(math.log(2), 3)
    teacher = torch.tensor([1.0, 0]).softmax(-1)
    kl = (teacher * (teacher / 0.5).log()).sum().item()
    assert round(kl, 3) == 0.111 and round(4 * kl, 3) == 0.444
    assert round(distillation_loss(c, d, t, y, "soft", 0.5, 2.0).item(), 3) == 0.568
    assert "≈ 0.568" in said("distillation_loss") and "0.731" in said("distillation_loss")


def test_a_scrambled_4_by_4_image():
    order = torch.tensor([1, 0, 2, 3])
    out = scrambling.scramble(IMAGE, 2, order, order)
    assert out[0, 0, 0].tolist() == [3, 2, 1, 0]
    assert patchify(out, 2)[0].tolist() == [
        [3, 2, 6, 7],
        [1, 0, 4, 5],
        [9, 8, 12, 13],
        [11, 10, 14, 15],
    ]
    assert "[3, 2, 6, 7], [1, 0, 4, 5], [9, 8, 12, 13], [11, 10, 14, 15]" in said("scramble")
