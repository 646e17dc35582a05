"""vitcourse.bridges.transformers: the bridge to Hugging Face transformers: `from_transformers` and `to_transformers`
give the same logits, carry the LayerNorm epsilon, and refuse what the other side cannot hold.

transformers is an optional extra (requirements-extras.txt): every test that needs it takes the
`transformers` fixture, which skips without it (and fails under CI). All models are randomly
initialised; nothing is downloaded.
"""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vitcourse.bridges.transformers as vit_module
from tests.conftest import TINY_RGB_VIT, need
from vitcourse.bridges.transformers import from_transformers, to_transformers
from vitcourse.checkpoints import TRAINED_MODEL, build_model, load_model
from vitcourse.deit import DistilledViT
from vitcourse.presets import preset
from vitcourse.pretrained import PretrainedUnavailable
from vitcourse.vit import VisionTransformer, ViTConfig

REPO = Path(__file__).resolve().parent.parent
ATOL = 1e-4  # the bridge's promise: logits equal within this

# transformers' side: ViTConfig keyword arguments of the models converted into ours.
THEIR_SHAPES = {
    "tiny-rgb": dict(
        image_size=16,
        patch_size=4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        num_labels=5,
    ),
    "gray-28-patch-7": dict(
        image_size=28,
        patch_size=7,
        num_channels=1,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=96,
        num_labels=10,
    ),
    "no-qkv-bias": dict(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=7,
        qkv_bias=False,
        layer_norm_eps=1e-6,
        hidden_dropout_prob=0.1,  # dropout carries across; eval mode runs without it
        attention_probs_dropout_prob=0.1,
    ),
    # An epsilon so large that a model which dropped it would give other logits.
    "large-eps": dict(
        image_size=16,
        patch_size=4,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=3,
        layer_norm_eps=0.5,
    ),
}

# Our side: the configs converted into transformers'.
OUR_CONFIGS = {
    "tiny-rgb": TINY_RGB_VIT,
    "course-28/7": preset("course-28/7"),
    "no-qkv-bias": dataclasses.replace(TINY_RGB_VIT, qkv_bias=False, dropout=0.1, attn_dropout=0.1),
    "eps-1e-12": dataclasses.replace(TINY_RGB_VIT, norm_eps=1e-12),
    "large-eps": dataclasses.replace(TINY_RGB_VIT, norm_eps=0.5),
}


@pytest.fixture(scope="module")
def transformers():
    return need("transformers")


def randomize(model: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Random values in every trained parameter, so equal outputs mean equal computations (fresh
    heads and LayerNorms are zeros and ones, which hide a mix-up of biases or scales)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # sin-cos position embeddings keep their values
                p.normal_(0, 0.2)
    return model.eval()


def their_model(transformers, **config):
    """A randomly initialised transformers ViTForImageClassification, in eval mode."""
    return randomize(transformers.ViTForImageClassification(transformers.ViTConfig(**config)))


def images_for(config: ViTConfig, n: int = 3) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(n, config.in_channels, config.image_size, config.image_size)


def max_difference(ours: VisionTransformer, theirs, images: torch.Tensor) -> float:
    """The largest gap between our logits and theirs, after checking it is within ATOL."""
    with torch.no_grad():
        expected = theirs(pixel_values=images).logits
        got = ours(images)
    assert expected.std() > 0.1, "a meaningful comparison needs logits that vary"
    torch.testing.assert_close(got, expected, rtol=0, atol=ATOL)
    return (got - expected).abs().max().item()


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


# --- from transformers ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", THEIR_SHAPES)
def test_from_transformers_gives_the_same_logits(shape, transformers):
    theirs = their_model(transformers, **THEIR_SHAPES[shape])
    ours = from_transformers(theirs)
    c, hf = ours.config, theirs.config
    assert not ours.training  # the same mode as theirs
    assert (c.image_size, c.patch_size, c.in_channels, c.num_classes) == (
        hf.image_size,
        hf.patch_size,
        hf.num_channels,
        hf.num_labels,
    )
    assert (c.dim, c.depth, c.num_heads, c.mlp_dim, c.qkv_bias) == (
        hf.hidden_size,
        hf.num_hidden_layers,
        hf.num_attention_heads,
        hf.intermediate_size,
        hf.qkv_bias,
    )
    assert (c.dropout, c.attn_dropout) == (hf.hidden_dropout_prob, hf.attention_probs_dropout_prob)
    assert c.norm_eps == hf.layer_norm_eps  # transformers' default is 1e-12, ours 1e-6
    norms = [m for m in ours.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 * c.depth + 1 and {m.eps for m in norms} == {hf.layer_norm_eps}
    images = images_for(c)
    max_difference(ours, theirs, images)
    # The same through the written-out attention path.
    with torch.no_grad():
        x = ours.embed(images)
        for block in ours.blocks:
            x, _ = block(x, return_weights=True)
        written_out = ours.forward_head(ours.norm(x))
        torch.testing.assert_close(written_out, theirs(images).logits, rtol=0, atol=ATOL)


def test_the_epsilon_changes_the_logits(transformers):
    """The large-eps shape is a real test of carrying the epsilon: with ours it would differ."""
    theirs = their_model(transformers, **THEIR_SHAPES["large-eps"])
    ours = from_transformers(theirs)
    wrong_eps = VisionTransformer(dataclasses.replace(ours.config, norm_eps=1e-6)).eval()
    wrong_eps.load_state_dict(ours.state_dict())
    images = images_for(ours.config)
    with torch.no_grad():
        gap = (wrong_eps(images) - theirs(images).logits).abs().max()
    assert gap > 100 * ATOL


def test_from_transformers_keeps_training_mode(transformers):
    theirs = their_model(transformers, **THEIR_SHAPES["tiny-rgb"]).train()
    assert from_transformers(theirs).training


def test_the_fused_qkv_is_query_key_value_in_order(transformers):
    theirs = their_model(transformers, **THEIR_SHAPES["tiny-rgb"])
    ours = from_transformers(theirs)
    attention = theirs.vit.layers[0].attention if hasattr(theirs.vit, "layers") else None
    if attention is None:  # transformers 4 names its modules otherwise
        attention = theirs.vit.encoder.layer[0].attention.attention
        parts = (attention.query, attention.key, attention.value)
    else:
        parts = (attention.q_proj, attention.k_proj, attention.v_proj)
    q, k, v = ours.blocks[0].attn.qkv.weight.chunk(3)  # (3D, D) -> 3 x (D, D)
    for ours_part, theirs_part in zip((q, k, v), parts, strict=True):
        assert torch.equal(ours_part, theirs_part.weight)


# --- to transformers -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", OUR_CONFIGS)
def test_to_transformers_gives_the_same_logits(name, transformers):
    ours = randomize(VisionTransformer(OUR_CONFIGS[name]))
    theirs = to_transformers(ours)
    assert isinstance(theirs, transformers.ViTForImageClassification) and not theirs.training
    c, hf = ours.config, theirs.config
    assert (hf.image_size, hf.patch_size, hf.num_channels, hf.num_labels) == (
        c.image_size,
        c.patch_size,
        c.in_channels,
        c.num_classes,
    )
    assert (hf.hidden_size, hf.num_hidden_layers, hf.num_attention_heads) == (
        c.dim,
        c.depth,
        c.num_heads,
    )
    assert (hf.intermediate_size, hf.qkv_bias, hf.hidden_act) == (c.mlp_dim, c.qkv_bias, "gelu")
    assert (hf.hidden_dropout_prob, hf.attention_probs_dropout_prob) == (c.dropout, c.attn_dropout)
    assert hf.layer_norm_eps == c.norm_eps
    max_difference(ours, theirs, images_for(c))


def test_round_trip_gives_identical_state_dicts(transformers):
    for config in OUR_CONFIGS.values():
        ours = randomize(VisionTransformer(config))
        back = from_transformers(to_transformers(ours))
        assert back.config == config
        assert_same_state(back, ours)
    theirs = their_model(transformers, **THEIR_SHAPES["no-qkv-bias"])
    assert_same_state(to_transformers(from_transformers(theirs)), theirs)


def test_drop_path_and_sincos_are_carried_with_their_documented_loss(transformers):
    """Neither changes eval logits: drop path is dropped, sin-cos positions become learned."""
    config = dataclasses.replace(TINY_RGB_VIT, drop_path=0.2, pos_embed="sincos")
    ours = randomize(VisionTransformer(config))
    theirs = to_transformers(ours)
    max_difference(ours, theirs, images_for(config))
    back = from_transformers(theirs)
    assert back.config == dataclasses.replace(config, drop_path=0.0, pos_embed="learned")
    assert back.pos_embed.requires_grad and torch.equal(back.pos_embed, ours.pos_embed)


def test_through_save_pretrained_and_from_pretrained(tmp_path, transformers):
    ours = randomize(VisionTransformer(dataclasses.replace(TINY_RGB_VIT, norm_eps=1e-12)))
    to_transformers(ours).save_pretrained(tmp_path / "hf")
    reloaded = transformers.ViTForImageClassification.from_pretrained(tmp_path / "hf")
    assert reloaded.config.layer_norm_eps == 1e-12
    max_difference(ours, reloaded, images_for(ours.config))
    for folder in (tmp_path / "hf", str(tmp_path / "hf")):  # a path, or its name
        again = from_transformers(folder)
        assert again.config == ours.config and not again.training
        assert_same_state(again, ours)


# --- what cannot be converted --------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_act": "gelu_new"}, r"hidden_act 'gelu_new' \(expected 'gelu'"),
        ({"image_size": [16, 32]}, "a non-square image 16x32"),
        ({"patch_size": [4, 8]}, "non-square patches 4x8"),
        ({"image_size": 18}, "image size 18 not a multiple of patch size 4"),
    ],
)
def test_from_transformers_refuses_what_it_cannot_model(changes, message, transformers):
    theirs = their_model(transformers, **{**THEIR_SHAPES["tiny-rgb"], **changes})
    with pytest.raises(ValueError, match="features vitcourse does not model: " + message):
        from_transformers(theirs)


def test_from_transformers_refuses_other_models(transformers):
    bare = transformers.ViTModel(transformers.ViTConfig(**THEIR_SHAPES["tiny-rgb"]))
    with pytest.raises(ValueError, match="got a bare ViTModel, which has no classifier head"):
        from_transformers(bare)
    deit = transformers.DeiTForImageClassification(
        transformers.DeiTConfig(**THEIR_SHAPES["tiny-rgb"])
    )
    with pytest.raises(
        ValueError,
        match="expected transformers' ViTForImageClassification .or its hub name., got "
        "transformers.*DeiTForImageClassification",
    ):
        from_transformers(deit)


@pytest.mark.parametrize(
    "model, message",
    [
        (
            VisionTransformer(dataclasses.replace(TINY_RGB_VIT, pool="mean")),
            "pool='mean' .transformers' ViT classifies the cls token and has no mean pooling",
        ),
        (DistilledViT(TINY_RGB_VIT), "a distilled ViT .*DeiTForImageClassificationWithTeacher"),
        (
            VisionTransformer(preset("course-28/conv")),
            r"a convolutional stem \(16, 32, 64\)",
        ),
    ],
    ids=["mean-pool", "distilled", "conv-stem"],
)
def test_to_transformers_refuses_what_it_cannot_hold(model, message, transformers):
    with pytest.raises(ValueError, match="ViTForImageClassification cannot hold this model: "):
        to_transformers(model)
    with pytest.raises(ValueError, match=message):
        to_transformers(model)


def test_to_transformers_refuses_other_models(transformers):
    with pytest.raises(ValueError, match="expected a vitcourse VisionTransformer, got Linear"):
        to_transformers(torch.nn.Linear(2, 2))


# --- hub names: offline is a clear error -----------------------------------------------------------


def test_a_hub_name_offline_is_a_clear_error(tmp_path, transformers):
    """In a fresh process with the hub offline and an empty cache: no download is tried."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "TRANSFORMERS_CACHE")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf-home"))
    code = (
        "from vitcourse.bridges.transformers import from_transformers\n"
        "from vitcourse.pretrained import PretrainedUnavailable\n"
        "try:\n"
        "    from_transformers('google/vit-base-patch16-224')\n"
        "except PretrainedUnavailable as e:\n"
        "    print('raised:', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert (
        "raised: offline: transformers' google/vit-base-patch16-224 is not in the Hugging Face "
        "cache and cannot be downloaded (it needs huggingface.co)"
    ) in result.stdout, result.stderr[-2000:]
    assert not list((tmp_path / "hf-home").rglob("*.safetensors"))


def test_a_failed_load_says_whether_it_is_offline(tmp_path, monkeypatch, transformers):
    def refuse(name, *args, **kwargs):
        raise OSError("no connection")

    for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setattr(transformers.ViTForImageClassification, "from_pretrained", refuse)
    monkeypatch.setattr(vit_module, "is_online", lambda url: False)
    with pytest.raises(PretrainedUnavailable, match="offline: transformers' someone/some-vit"):
        from_transformers("someone/some-vit")
    monkeypatch.setattr(vit_module, "is_online", lambda url: True)  # online, yet it failed
    with pytest.raises(
        PretrainedUnavailable, match="transformers could not load someone/some-vit: OSError"
    ):
        from_transformers("someone/some-vit")
    monkeypatch.setattr(vit_module, "is_online", lambda url: False)
    with pytest.raises(PretrainedUnavailable, match="transformers could not load"):
        from_transformers(tmp_path)  # a folder on disk is never "offline"


# --- transformers stays optional; the epsilon field keeps old checkpoints -----------------------


def test_importing_vitcourse_does_not_import_transformers():
    code = "import sys, vitcourse, vitcourse.vit; print('transformers' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.strip() == "False", result.stderr[-2000:]


def test_norm_eps_defaults_to_the_old_value_and_old_configs_load():
    model = VisionTransformer(TINY_RGB_VIT)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert TINY_RGB_VIT.norm_eps == 1e-6 and {m.eps for m in norms} == {1e-6}
    # A checkpoint's config from before the field existed lacks the key.
    old = {k: v for k, v in dataclasses.asdict(TINY_RGB_VIT).items() if k != "norm_eps"}
    assert build_model("vit", old).config == TINY_RGB_VIT
    if TRAINED_MODEL.exists():  # the shipped model was saved before norm_eps
        assert load_model(TRAINED_MODEL).config.norm_eps == 1e-6
    with pytest.raises(ValueError, match="norm_eps must be positive, got 0"):
        dataclasses.replace(TINY_RGB_VIT, norm_eps=0)
