"""vitcourse.training.resuming: an interrupted run keeps its model and resumes where it stopped, as
if never stopped."""

import pytest
import torch

from tests.conftest import StopAt, new_trainer
from vitcourse.checkpoints import load_checkpoint
from vitcourse.training.callbacks import Callback, CheckpointCallback


def test_interrupt_keeps_the_model_and_resume_continues(tmp_path, toy_loaders):
    path = tmp_path / "run" / "checkpoint.pt"
    steps_per_epoch = len(toy_loaders().train)
    full = new_trainer()
    full.fit()

    first = new_trainer(callbacks=[CheckpointCallback(path), StopAt(steps_per_epoch * 2 + 2)])
    history = first.fit()
    assert first.interrupted and first.epoch == 2 and first.steps_done == 2 * steps_per_epoch + 2
    assert len(history.epochs) == 2  # the model and history are kept
    assert path.exists() and not path.with_name("checkpoint.pt.tmp").exists()

    # The run from the last complete epoch: its checkpoint holds epoch 2 and the optimizer state.
    state = load_checkpoint(path)
    assert state["schedule"]["step"] == 2 * steps_per_epoch + 2
    resumed = new_trainer(seed=123)  # different init: everything must come from the checkpoint
    resumed.resume(path)
    assert resumed.epoch == 2 and resumed.steps_done == first.steps_done
    for a, b in zip(resumed.optimizer.state.values(), first.optimizer.state.values(), strict=True):
        assert torch.equal(a["exp_avg"], b["exp_avg"])
    resumed.fit()
    assert [r["epoch"] for r in resumed.history.epochs] == [1, 2, 3, 4]
    assert resumed.steps_done == full.steps_done
    # The stopped epoch's training accuracy counts the steps before the stop and after the resume.
    assert resumed.history.step_accuracies == full.history.step_accuracies
    for a, b in zip(resumed.history.epochs, full.history.epochs, strict=True):
        assert a["train_acc"] == pytest.approx(b["train_acc"])


def test_resume_from_an_epoch_boundary_matches_an_uninterrupted_run(tmp_path):
    path = tmp_path / "checkpoint.pt"
    full = new_trainer()
    full.fit()

    class StopAfterEpoch(Callback):
        def on_epoch_end(self, trainer, record):
            if trainer.epoch == 2:
                raise KeyboardInterrupt

    first = new_trainer(callbacks=[StopAfterEpoch(), CheckpointCallback(path)])
    first.fit()
    resumed = new_trainer(seed=5)
    resumed.resume(path)
    resumed.fit()
    torch.testing.assert_close(resumed.history.step_losses, full.history.step_losses)
    for a, b in zip(resumed.model.parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_a_stop_in_the_first_epoch_keeps_a_usable_model_and_resumes_that_epoch(tmp_path):
    """The Stop button in notebook 06 before the first epoch ends: no epoch in the history yet,
    the model still classifies, and the checkpoint resumes the rest of that epoch."""
    path = tmp_path / "checkpoint.pt"
    first = new_trainer(callbacks=[CheckpointCallback(path), StopAt(3)])
    history = first.fit()
    assert first.interrupted and first.epoch == 0 and first.epoch_batches_done == 3
    assert history.epochs == [] and len(history.step_losses) == 3
    images, _ = next(iter(first.loaders.val))
    assert torch.isfinite(first.model(images)).all()
    resumed = new_trainer(seed=9)
    resumed.resume(path)
    assert (resumed.epoch, resumed.steps_done, resumed.epoch_batches_done) == (0, 3, 3)
    resumed.fit()
    assert resumed.steps_done == resumed.config.epochs * resumed.steps_per_epoch


def test_a_checkpoint_without_training_accuracies_resumes(tmp_path):
    """A run saved before the history held training accuracies goes on: the epoch it resumes
    counts the accuracies of the steps it trains."""
    path = tmp_path / "checkpoint.pt"
    first = new_trainer(callbacks=[CheckpointCallback(path), StopAt(3)])
    first.fit()
    state = load_checkpoint(path)
    del state["history"]["step_accuracies"]
    torch.save(state, path)
    resumed = new_trainer()
    resumed.resume(path)
    assert resumed.history.step_accuracies == []
    resumed.fit()
    steps = resumed.steps_per_epoch
    assert len(resumed.history.step_accuracies) == resumed.steps_done - 3
    first_epoch = resumed.history.step_accuracies[: steps - 3]
    assert resumed.history.epochs[0]["train_acc"] == pytest.approx(sum(first_epoch) / (steps - 3))
