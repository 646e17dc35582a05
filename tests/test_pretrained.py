"""vitcourse.pretrained: timm's and torchvision's ViTs as the course's, with the very same outputs,
and timm's pretrained weights read from a file."""

import pytest
import timm
import torch
import torchvision

from tests.conftest import randomize
from vitcourse.presets import PRESETS
from vitcourse.pretrained import from_timm, from_torchvision


@pytest.mark.parametrize(
    "kwargs",
    [
        {
            "img_size": 16,
            "patch_size": 4,
            "num_classes": 5,
            "embed_dim": 32,
            "depth": 2,
            "num_heads": 4,
        },
        {
            "img_size": 28,
            "patch_size": 7,
            "in_chans": 1,
            "num_classes": 10,
            "embed_dim": 48,
            "depth": 3,
            "num_heads": 3,
            "mlp_ratio": 2.0,
            "qkv_bias": False,
            "global_pool": "avg",
            "fc_norm": False,
        },
    ],
)
def test_from_timm_gives_identical_outputs(kwargs):
    theirs = randomize(timm.models.VisionTransformer(**kwargs))
    ours = from_timm(theirs).eval()
    images = torch.randn(3, kwargs.get("in_chans", 3), kwargs["img_size"], kwargs["img_size"])
    with torch.no_grad():
        expected = theirs(images)
        torch.testing.assert_close(ours(images), expected, rtol=1e-5, atol=1e-5)
        # And through the written-out attention path too.
        x = ours.embed(images)
        for block in ours.blocks:
            x, _ = block(x, return_weights=True)
        torch.testing.assert_close(ours.forward_head(ours.norm(x)), expected, rtol=1e-5, atol=1e-5)
    assert expected.std() > 0.1, "a meaningful comparison needs outputs that vary"


def test_from_timm_vit_tiny_224():
    theirs = randomize(timm.create_model("vit_tiny_patch16_224", pretrained=False))
    ours = from_timm(theirs).eval()
    assert ours.config == PRESETS["vit-tiny/16"]
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(ours(images), theirs(images), rtol=1e-5, atol=1e-5)


def test_from_timm_refuses_what_it_cannot_model():
    with pytest.raises(ValueError, match="layer scale"):
        from_timm(
            timm.models.VisionTransformer(
                img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=4, init_values=1e-5
            )
        )
    with pytest.raises(ValueError, match="fc_norm after pooling"):
        from_timm(
            timm.models.VisionTransformer(
                img_size=16, patch_size=4, embed_dim=32, depth=1, num_heads=4, global_pool="avg"
            )
        )


def test_from_torchvision_gives_identical_outputs():
    theirs = randomize(
        torchvision.models.VisionTransformer(
            image_size=32,
            patch_size=8,
            num_layers=2,
            num_heads=4,
            hidden_dim=64,
            mlp_dim=128,
            num_classes=7,
        )
    )
    ours = from_torchvision(theirs).eval()
    images = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        expected = theirs(images)
        torch.testing.assert_close(ours(images), expected, rtol=1e-5, atol=1e-5)
    assert expected.std() > 0.1


@pytest.mark.slow  # an 86M-parameter model
def test_from_torchvision_vit_b_16_shapes():
    ours = from_torchvision(torchvision.models.vit_b_16())
    assert ours.config == PRESETS["vit-base/16"]


@pytest.mark.slow  # builds a ViT-Ti/16 twice
def test_load_pretrained_reads_timms_weights_from_a_file(tmp_path, monkeypatch):
    """The real loading path (timm.create_model with pretrained=True), on a weights file that a
    randomly initialised timm model wrote: no download."""
    import vitcourse.pretrained as vit_module
    from vitcourse.pretrained import PRETRAINED, PretrainedUnavailable, load_pretrained

    theirs = timm.create_model(PRETRAINED, pretrained=False).eval()
    torch.save(theirs.state_dict(), tmp_path / "weights.pth")
    ours, norm = load_pretrained(file=tmp_path / "weights.pth")
    photos = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(ours(photos), theirs(photos))  # the file's weights, not new ones
    assert norm == {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    # A classroom without the network: the file named by VITCOURSE_PRETRAINED.
    monkeypatch.setenv("VITCOURSE_PRETRAINED", str(tmp_path / "weights.pth"))
    again, _ = load_pretrained()
    torch.testing.assert_close(again.head.weight, ours.head.weight)
    monkeypatch.setenv("VITCOURSE_PRETRAINED", str(tmp_path / "missing.pth"))
    with pytest.raises(PretrainedUnavailable, match="no weights file at"):
        load_pretrained()
    monkeypatch.delenv("VITCOURSE_PRETRAINED")
    monkeypatch.setattr(vit_module, "is_online", lambda url: False)
    with pytest.raises(PretrainedUnavailable, match="offline: timm's pretrained"):
        load_pretrained()
