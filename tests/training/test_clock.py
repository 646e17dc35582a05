"""vitcourse.training.clock: the time budget drives the schedule and stops training; paused time is
not counted."""

import pytest

from tests.conftest import new_trainer
from vitcourse.training.callbacks import Callback
from vitcourse.training.loop import TrainConfig, learning_rate


def test_time_budget_drives_the_schedule_and_stops(monkeypatch):
    """With a stand-in clock on which every step takes 10 ms, the run is the same on any
    machine, busy or not: the budget, not the speed of the computer, decides."""
    from vitcourse.training import clock

    monkeypatch.setattr(clock, "now", lambda: trainer.steps_done * 0.01)
    config = TrainConfig(minutes=0.5 / 60, lr=1e-3, warmup=0.2)  # half a (stand-in) second
    trainer = new_trainer(config)
    seen = []

    class Watch(Callback):
        def on_step_end(self, trainer, loss):
            seen.append((trainer.progress(), trainer.optimizer.param_groups[0]["lr"]))

    trainer.callbacks.append(Watch())
    trainer.fit()
    assert trainer.progress() == 1.0 and 0.5 <= trainer.elapsed < 0.6
    assert len(seen) > 20 and trainer.epoch >= 2  # several epochs fit in the budget
    progress = [p for p, _ in seen]
    # Callbacks see the time up to date, this step included: 10 ms of the budget per step.
    assert progress == [min(0.02 * (i + 1), 1.0) for i in range(len(seen))]
    rates = [lr for _, lr in seen]  # warm-up, then decay, over the budget
    peak = rates.index(max(rates))
    assert 0 < peak < len(rates) - 1 and max(rates) <= config.lr
    assert rates[:peak] == sorted(rates[:peak]) and rates[peak:] == sorted(
        rates[peak:], reverse=True
    )
    # Each step's learning rate is the schedule's at the progress made before that step.
    for before, (_, lr) in zip([0.0, *progress], seen, strict=False):
        assert lr == pytest.approx(learning_rate(before, config))


def test_the_clock_counts_training_and_leaves_paused_time_out(monkeypatch):
    from vitcourse.training import clock

    readings = iter([10.0, 12.0, 13.0, 20.0, 21.5])
    monkeypatch.setattr(clock, "now", lambda: next(readings))
    c = clock.Clock(elapsed=5.0)  # 5 s from before a resume
    assert c.start() == 10.0
    assert c.count() == 7.0  # 2 s since the start
    with c.paused():  # counts up to 13, then 13 -> 20 is left out
        pass
    assert c.elapsed == 8.0
    assert c.count() == 9.5
