"""The time budget's clock: seconds of training, with validation and other measuring left out.

`Trainer(config=TrainConfig(minutes=5))` trains for five minutes of this clock, and the learning
rate schedule runs over it (notebook 06). Validation after each epoch, and anything else done
inside `with clock.paused():` (extra evaluations to draw a curve, notebook 08), takes nothing from
the budget, so two models compared over the same budget train for the same seconds however slow
their evaluation is. Under torchrun the processes agree on the slowest one's clock (`agree`), so
that they all stop after the same step.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from vitcourse.training.scaling import all_reduce_max


def now() -> float:
    """The wall clock the budget is read from (a function, so tests can stand in for it)."""
    return time.perf_counter()


class Clock:
    """Counts seconds of training in `elapsed`: the wall time between `start()` and each
    `count()`, less what was spent `paused()`."""

    def __init__(self, elapsed: float = 0.0):
        self.elapsed = elapsed
        self._tick: float | None = None  # the last reading; None until the clock starts

    def start(self) -> float:
        """Count from now on (training begins, or goes on after the callbacks between epochs);
        returns the wall clock's reading."""
        self._tick = now()
        return self._tick

    def since(self, reading: float) -> float:
        """Wall seconds since `reading`, paused time included."""
        return now() - reading

    def count(self) -> float:
        """Add the wall time since the last reading to `elapsed`, and return it."""
        reading = now()
        self.elapsed += reading - (reading if self._tick is None else self._tick)
        self._tick = reading
        return self.elapsed

    @contextmanager
    def paused(self):
        """Time spent inside `with clock.paused():` does not count as training."""
        self.count()
        try:
            yield
        finally:
            self._tick = now()

    def agree(self, device: torch.device) -> None:
        """Under torchrun, every process takes the slowest one's `elapsed`; the wait for the
        others counts for none of them."""
        self.count()
        self.elapsed = all_reduce_max(self.elapsed, device)
        self._tick = now()
