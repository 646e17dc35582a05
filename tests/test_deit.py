"""vitcourse.deit: DeiT's student, a ViT with a distillation token and two heads. (Its losses and
trainer are tested in tests/training/test_distillation.py.)"""

import dataclasses

import pytest
import torch

from vitcourse.checkpoints import load_model, save_model
from vitcourse.deit import DistilledViT
from vitcourse.live import cls_attention
from vitcourse.vit import VisionTransformer


def test_the_student_has_a_distillation_token_and_two_heads(tiny_vit):
    torch.manual_seed(0)
    model = DistilledViT(tiny_vit)
    images = torch.randn(5, 1, 8, 8)
    assert model.embed(images).shape == (5, tiny_vit.num_patches + 2, tiny_vit.dim)
    cls_logits, dist_logits = model.train()(images)
    assert cls_logits.shape == dist_logits.shape == (5, 3)
    model.eval()
    torch.testing.assert_close(model(images), (cls_logits + dist_logits) / 2)  # no dropout here
    # The extra parameters, exactly: a token, one more position and a second head.
    extra = tiny_vit.dim * 2 + tiny_vit.dim * 3 + 3
    assert model.num_parameters() == VisionTransformer(tiny_vit).num_parameters() + extra
    maps = cls_attention(model, images)  # the live plot skips both prefix tokens
    assert maps["rollout"].shape == (5, 2, 2)
    with pytest.raises(ValueError, match="needs pool='cls'"):
        DistilledViT(dataclasses.replace(tiny_vit, pool="mean"))


def test_a_distilled_model_file_loads_back(tiny_vit, tmp_path):
    model = DistilledViT(tiny_vit).eval()
    save_model(model, tmp_path / "model.pt")
    again = load_model(tmp_path / "model.pt")
    assert type(again) is DistilledViT
    images = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(again(images), model(images))
