"""vitcourse.training.pretraining: masked-patch pre-training (notebook 09), its trainer and its
reconstructions. (The masked autoencoder itself is tested in tests/test_mae.py.)"""

import torch

from vitcourse.checkpoints import load_model, save_model
from vitcourse.mae import (
    MAEConfig,
    MaskedAutoencoder,
)
from vitcourse.patching import patchify
from vitcourse.training.loop import TrainConfig
from vitcourse.training.pretraining import PretrainTrainer, plot_reconstructions
from vitcourse.vit import VisionTransformer


def tiny_mae(tiny_rgb_vit, **changes) -> MaskedAutoencoder:
    torch.manual_seed(0)
    return MaskedAutoencoder(MAEConfig(encoder=tiny_rgb_vit, decoder_dim=16, **changes))


def test_reconstructions_paste_the_visible_patches_and_draw(tiny_rgb_vit):
    mae = tiny_mae(tiny_rgb_vit)
    images = torch.randn(2, 3, 16, 16)
    mask, rebuilt = mae.reconstruct(images, torch.Generator().manual_seed(0))
    visible = ~mask
    torch.testing.assert_close(patchify(rebuilt, 4)[visible], patchify(images, 4)[visible])
    assert not torch.allclose(patchify(rebuilt, 4)[mask], patchify(images, 4)[mask])
    fig = plot_reconstructions(mae, images, images.sigmoid(), torch.sigmoid)
    assert len(fig.axes) == 3 * 2
    assert [fig.axes[i].get_ylabel() for i in (0, 2, 4)] == [
        "original",
        "encoder sees (25%)",
        "reconstruction",
    ]


def test_pretraining_lowers_the_reconstruction_loss_and_resumes(tiny_vit, toy_loaders, tmp_path):
    config = MAEConfig(encoder=tiny_vit, decoder_dim=16, mask_ratio=0.5)  # 2 of 4 patches hidden
    torch.manual_seed(0)
    trainer = PretrainTrainer(
        MaskedAutoencoder(config), toy_loaders(), TrainConfig(epochs=8, lr=3e-3), device="cpu"
    )
    before = trainer.validate()["loss"]
    history = trainer.fit()
    assert history.epochs[-1]["val_acc"] is None  # no labels, no accuracy
    assert history.epochs[-1]["val_loss"] < 0.7 * before
    trainer.save(tmp_path / "checkpoint.pt")
    # A checkpoint of the whole autoencoder rebuilds through the registry ...
    assert isinstance(load_model(tmp_path / "checkpoint.pt"), MaskedAutoencoder)
    # ... and the encoder saved alone is a plain ViT with the same weights.
    save_model(trainer.model.encoder, tmp_path / "model.pt")
    encoder = load_model(tmp_path / "model.pt")
    assert type(encoder) is VisionTransformer
    torch.testing.assert_close(encoder.pos_embed, trainer.model.encoder.pos_embed)
    again = PretrainTrainer(
        MaskedAutoencoder(config), toy_loaders(), TrainConfig(epochs=10, lr=3e-3), device="cpu"
    )
    again.resume(tmp_path / "checkpoint.pt")
    assert again.epoch == 8 and len(again.fit().epochs) == 10


def test_validation_masks_the_same_patches_every_time(tiny_vit, toy_loaders):
    trainer = PretrainTrainer(
        MaskedAutoencoder(MAEConfig(encoder=tiny_vit, decoder_dim=16, mask_ratio=0.5)),
        toy_loaders(),
        device="cpu",
    )
    assert trainer.validate() == trainer.validate()


def test_ctrl_c_keeps_a_pretraining_run_that_resumes_where_it_stopped(
    tiny_vit, toy_loaders, tmp_path
):
    from vitcourse.training.callbacks import Callback, CheckpointCallback

    class StopAt(Callback):  # Ctrl-C in the middle of the second epoch
        def on_step_end(self, trainer, loss):
            if trainer.steps_done == 13:
                raise KeyboardInterrupt

    def new(callbacks=()):
        torch.manual_seed(0)
        config = MAEConfig(encoder=tiny_vit, decoder_dim=16, mask_ratio=0.5)
        return PretrainTrainer(
            MaskedAutoencoder(config),
            toy_loaders(),
            TrainConfig(epochs=3),
            callbacks=callbacks,
            device="cpu",
        )

    path = tmp_path / "checkpoint.pt"
    first = new([CheckpointCallback(path), StopAt()])
    first.fit()
    assert first.interrupted and first.steps_done == 13 and path.exists()
    resumed = new()
    resumed.resume(path)
    assert resumed.steps_done == 13
    resumed.fit()
    assert [r["epoch"] for r in resumed.history.epochs] == [1, 2, 3]
    assert resumed.steps_done == 3 * len(toy_loaders().train)
