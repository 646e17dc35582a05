"""vitcourse.vit: the whole model and its config. (The presets are tested in test_presets.py,
the converters from timm and torchvision in test_pretrained.py.)"""

import dataclasses

import pytest
import torch

import vitcourse
from tests.conftest import TINY_RGB_VIT, randomize
from vitcourse.embedding import sincos_2d_position_embedding
from vitcourse.presets import PRESETS, preset
from vitcourse.vit import VisionTransformer, ViTConfig, count_parameters


def test_top_level_exports():
    assert vitcourse.ViTConfig is ViTConfig and vitcourse.VisionTransformer is VisionTransformer


def test_defaults_are_the_papers_vit_base():
    c = ViTConfig()
    assert (c.image_size, c.patch_size, c.dim, c.depth, c.num_heads, c.mlp_dim) == (
        224,
        16,
        768,
        12,
        12,
        3072,
    )
    assert (c.pool, c.qkv_bias, c.dropout, c.pos_embed) == ("cls", True, 0.0, "learned")
    assert (c.num_patches, c.num_tokens) == (196, 197)


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("pos_embed", ["learned", "sincos"])
def test_shapes_through_every_stage(pool, pos_embed, tiny_rgb_vit):
    model = VisionTransformer(dataclasses.replace(tiny_rgb_vit, pool=pool, pos_embed=pos_embed))
    images = torch.randn(3, 3, 16, 16)
    tokens = model.embed(images)
    assert tokens.shape == (3, 17, 32)
    features = model.forward_features(tokens)
    assert features.shape == (3, 17, 32)
    logits = model.forward_head(features)
    assert logits.shape == (3, 5) and torch.isfinite(logits).all()
    torch.testing.assert_close(model(images), logits)


def test_submodule_names_follow_the_paper_and_timm(tiny_rgb_vit):
    model = VisionTransformer(tiny_rgb_vit)
    names = [n for n, _ in model.named_children()]
    assert names == ["stem", "patch_embed", "pos_drop", "blocks", "norm", "head"]
    assert len(model.stem) == 0  # a pure ViT's stem is empty: no layers, no parameters
    params = dict(VisionTransformer(tiny_rgb_vit).named_parameters())
    assert {"cls_token", "pos_embed", "blocks.1.attn.qkv.weight", "head.bias"} <= params.keys()


@pytest.mark.parametrize(
    "config",
    [
        TINY_RGB_VIT,
        dataclasses.replace(TINY_RGB_VIT, pool="mean", drop_path=0.1, dropout=0.1, qkv_bias=False),
    ],
)
def test_gradients_reach_every_parameter(config):
    model = VisionTransformer(config).train()
    torch.manual_seed(0)
    loss = torch.nn.functional.cross_entropy(
        model(torch.randn(4, 3, 16, 16)), torch.tensor([0, 1, 2, 3])
    )
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def test_sincos_position_embeddings_are_fixed(tiny_rgb_vit):
    model = VisionTransformer(dataclasses.replace(tiny_rgb_vit, pos_embed="sincos"))
    assert not model.pos_embed.requires_grad
    learned = VisionTransformer(tiny_rgb_vit)
    assert model.num_parameters() == learned.num_parameters() - learned.pos_embed.numel()


def test_attention_maps_are_the_weights_forward_uses(tiny_rgb_vit):
    model = randomize(VisionTransformer(tiny_rgb_vit))
    images = torch.randn(2, 3, 16, 16)
    maps = model.attention_maps(images)
    assert maps.shape == (2, 2, 4, 17, 17)  # (layers, B, h, T, T)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 4, 17))
    # The first block's weights, recomputed by hand from its query and key projections.
    x = model.blocks[0].norm1(model.embed(images))
    q, k, _ = model.blocks[0].attn.qkv(x).reshape(2, 17, 3, 4, 8).permute(2, 0, 3, 1, 4)
    torch.testing.assert_close(maps[0], (q @ k.transpose(-2, -1) / 8**0.5).softmax(-1))


def test_seeded_construction_is_deterministic(tiny_rgb_vit):
    torch.manual_seed(7)
    a = VisionTransformer(tiny_rgb_vit)
    torch.manual_seed(7)
    b = VisionTransformer(tiny_rgb_vit)
    torch.manual_seed(8)
    c = VisionTransformer(tiny_rgb_vit)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.head.weight, c.head.weight)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"image_size": 30}, "image_size 30 is not a multiple of patch_size 4"),
        ({"num_heads": 5}, "dim 32 is not divisible by num_heads 5"),
        ({"pool": "max"}, "pool must be 'cls' or 'mean', got 'max'"),
        ({"pos_embed": "rope"}, "pos_embed must be 'learned' or 'sincos', got 'rope'"),
        ({"pos_embed": "sincos", "dim": 30, "num_heads": 3}, "divisible by 4, got 30"),
        ({"stem_channels": (8, 0)}, r"stem_channels must be positive, got \(8, 0\)"),
        ({"stem_channels": (8,), "stem_stride": 3}, "stem_stride must be 1 or 2, got 3"),
        ({"stem_stride": 2}, "stem_stride=2 needs stem convolutions: set stem_channels too"),
        (
            {"stem_channels": (8,), "stem_stride": 2, "patch_size": 3},
            "the stem's output size 8 is not a multiple of patch_size 3",
        ),
    ],
)
def test_bad_configs_are_refused(changes, message, tiny_rgb_vit):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(tiny_rgb_vit, **changes)


# --- guards ------------------------------------------------------------------------------------


def test_bad_inputs_get_clear_errors(tiny_rgb_vit):
    model = VisionTransformer(tiny_rgb_vit)
    with pytest.raises(ValueError, match="expected 3 image channels, got 1"):
        model(torch.zeros(1, 1, 16, 16))
    with pytest.raises(ValueError, match="expected 16x16 images, got 32x32.*set_image_size"):
        model(torch.zeros(1, 3, 32, 32))
    with pytest.raises(
        ValueError, match=r"expected images \(B, C, H, W\), got shape \(3, 16, 16\)"
    ):
        model(torch.zeros(3, 16, 16))


def test_state_dict_of_another_shape_is_a_clear_error(tiny_rgb_vit):
    small = VisionTransformer(tiny_rgb_vit)
    other = VisionTransformer(dataclasses.replace(tiny_rgb_vit, image_size=32))
    with pytest.raises(
        ValueError,
        match=r"another shape[\s\S]*pos_embed: checkpoint \(1, 65, 32\), "
        r"model \(1, 17, 32\)",
    ):
        small.load_state_dict(other.state_dict())
    with pytest.raises(RuntimeError, match="Missing key"):
        small.load_state_dict({k: v for k, v in small.state_dict().items() if k != "head.bias"})


@pytest.mark.parametrize("pos_embed", ["learned", "sincos"])
def test_set_image_size_runs_at_another_resolution(pos_embed, tiny_rgb_vit):
    model = randomize(VisionTransformer(dataclasses.replace(tiny_rgb_vit, pos_embed=pos_embed)))
    before = model.pos_embed.detach().clone()
    model.set_image_size(32)
    assert model.config.image_size == 32 and model.pos_embed.shape == (1, 65, 32)
    assert torch.equal(model.pos_embed[:, 0], before[:, 0])
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 5)
    model.set_image_size(16)
    if pos_embed == "sincos":  # recomputed for the new grid, not interpolated
        torch.testing.assert_close(model.pos_embed[0, 1:], sincos_2d_position_embedding(4, 32))
    with pytest.raises(ValueError, match="image_size 18 is not a multiple of patch_size 4"):
        model.set_image_size(18)


# --- the hybrid: convolutions before the patches ------------------------------------------------


def test_hybrid_stem_feeds_the_patch_embedding(tiny_rgb_vit):
    hybrid = VisionTransformer(
        dataclasses.replace(tiny_rgb_vit, stem_channels=[8, 12])
    )  # a list: JSON
    assert hybrid.config.stem_channels == (8, 12)
    convs = [m for m in hybrid.stem.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.stride) for c in convs] == [
        (3, 8, (1, 1)),
        (8, 12, (1, 1)),
    ]
    assert hybrid.patch_embed.proj.in_channels == 12
    images = torch.randn(2, 3, 16, 16)
    assert hybrid.embed(images).shape == (2, tiny_rgb_vit.num_tokens, tiny_rgb_vit.dim)
    assert hybrid(images).shape == (2, 5)
    pure = VisionTransformer(tiny_rgb_vit)
    # A pure ViT has no stem parameters: its state dict (and the shipped checkpoint) is unchanged.
    assert not [k for k in pure.state_dict() if k.startswith("stem")]
    extra = 3 * 8 * 9 + 2 * 8 + 8 * 12 * 9 + 2 * 12 + (12 - 3) * 4 * 4 * tiny_rgb_vit.dim
    assert (
        sum(p.numel() for p in hybrid.parameters()) - sum(p.numel() for p in pure.parameters())
        == extra
    )


def test_a_stride_2_stem_makes_the_token_grid():
    """course-28/conv: 28 -> 14 -> 7 -> 4 pixels, then each cell of the 4 x 4 grid is a token."""
    config = PRESETS["course-28/conv"]
    assert (config.stem_size, config.grid_size, config.num_tokens) == (4, 4, 17)
    model = VisionTransformer(config)
    convs = [m for m in model.stem.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.stride) for c in convs] == [
        (1, 16, (2, 2)),
        (16, 32, (2, 2)),
        (32, 64, (2, 2)),
    ]
    images = torch.randn(3, 1, 28, 28)
    assert model.stem(images).shape == (3, 64, 4, 4)
    assert model.embed(images).shape == (3, 17, 128)
    assert model(images).shape == (3, 10)
    assert model.attention_maps(images).shape == (3, 3, 4, 17, 17)
    # The same transformer as the pure course-28/7; only the way in differs.
    pure = PRESETS["course-28/7"]
    assert (config.dim, config.depth, config.num_heads, config.num_tokens) == (
        pure.dim,
        pure.depth,
        pure.num_heads,
        pure.num_tokens,
    )
    # An odd size rounds up at each halving: 30 -> 15 -> 8 -> 4.
    model.set_image_size(30)
    assert model.config.grid_size == 4 and model(torch.randn(1, 1, 30, 30)).shape == (1, 10)
    model.set_image_size(56)  # 56 -> 28 -> 14 -> 7: a 7 x 7 grid, position embeddings resized
    assert model.pos_embed.shape == (1, 50, 128)
    assert model(torch.randn(1, 1, 56, 56)).shape == (1, 10)


@pytest.mark.parametrize(
    "config",
    [
        *(
            pytest.param(c, marks=pytest.mark.slow) if c.dim >= 384 else c  # ViT-S and ViT-B
            for c in PRESETS.values()
            if not c.stem_channels
        ),
        ViTConfig(
            image_size=32,
            patch_size=8,
            qkv_bias=False,
            pos_embed="sincos",
            dim=64,
            num_heads=4,
            depth=2,
        ),
    ],
)
def test_count_parameters_reference_is_exact(config):
    assert count_parameters(config) == VisionTransformer(config).num_parameters()


def test_count_parameters_refuses_a_hybrid():
    with pytest.raises(ValueError, match="counts a pure ViT; this config has a convolutional"):
        count_parameters(PRESETS["course-28/conv"])


def test_embed_uses_embed_tokens(tiny_rgb_vit):
    from vitcourse.embedding import embed_tokens

    model = randomize(VisionTransformer(tiny_rgb_vit))
    images = torch.randn(2, 3, 16, 16)
    expected = embed_tokens(model.patch_embed(images), model.cls_token, model.pos_embed)
    torch.testing.assert_close(model.embed(images), expected)


def test_token_pixels_is_the_spacing_of_tokens_on_the_image():
    assert PRESETS["course-28/4"].token_pixels == 4
    assert PRESETS["course-28/7"].token_pixels == 7
    # Three stride-2 convolutions: 28 -> 14 -> 7 -> 4, each cell 8 pixels from the next.
    assert PRESETS["course-28/conv"].token_pixels == 8
    assert preset("course-28/7", stem_channels=(8,)).token_pixels == 7  # stride 1 keeps the size


def test_copy_encoder_keeps_every_weight_but_the_head(tiny_rgb_vit):
    from vitcourse.vit import copy_encoder

    source = VisionTransformer(tiny_rgb_vit)
    target = VisionTransformer(dataclasses.replace(tiny_rgb_vit, num_classes=7))  # a new head
    head_before = target.head.weight.clone()
    copy_encoder(target, source.state_dict())
    for name, value in source.state_dict().items():
        if not name.startswith("head"):
            assert torch.equal(target.state_dict()[name], value), name
    assert torch.equal(target.head.weight, head_before)
    with pytest.raises(ValueError, match="missing .'norm.weight'"):
        copy_encoder(target, {k: v for k, v in source.state_dict().items() if k != "norm.weight"})
    wider = VisionTransformer(dataclasses.replace(tiny_rgb_vit, dim=64, num_heads=4, mlp_dim=64))
    with pytest.raises(ValueError, match="saved from a model of another shape"):
        copy_encoder(target, wider.state_dict())


def test_the_models_errors_are_in_the_translation_template():
    """What a learner reads when a shape or a config is wrong, in the model's files and the
    scaling room, goes through `_` (vitcourse.language), so the catalog extraction finds it."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "image height {size} is not a multiple of patch size {patch_size}",  # patching
        "expected {expected} image channels, got {channels}",  # embedding, vit
        "dim {dim} is not divisible by num_heads {num_heads}",  # attention, vit
        "drop-path rate must be in [0, 1), got {rate}",  # block
        "expected {size}x{size} images, got {height}x{width}; "  # vit
        "to run at another resolution, call model.set_image_size(new_size) first",
        "the weights were saved from a model of another shape (compare the configs):\n  {tensors}",
        "unknown CNN preset {name}: expected one of {names}",  # cnn
        "a distilled ViT runs at the size it was trained at",  # deit
        "mask_ratio is the share of patches hidden, in (0, 1); got {mask_ratio}",  # mae
        "{shape} images in {patch_size} x {patch_size} patches need a "  # scrambling
        "patch_order of {patches} and a pixel_order of {numbers}, got "
        "{patch_order} and {pixel_order}",
        "rank must be in [0, {world_size}), got {rank}",  # training.scaling
    ):
        assert catalog.get(message) is not None, message
