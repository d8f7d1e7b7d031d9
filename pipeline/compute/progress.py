"""A run's progress: a bar on a terminal, a plain line every few seconds otherwise, each
task weighed by its estimated cost."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

#: Seconds between progress lines when stderr is not a terminal.
PLAIN_PROGRESS_EVERY = 10.0
#: The least seconds since the first finished task over which the plain line measures a
#: rate for its ETA; before that it says "ETA not known yet".
ETA_AFTER_SECONDS = 1.0


def eta_seconds(elapsed: float, work_done: float, work_total: float) -> float:
    """Seconds left if the remaining work goes at the rate of the work done so far.

    Parameters
    ----------
    elapsed : float
        Seconds since the first task was submitted, >= 0.
    work_done, work_total : float
        Cost of the finished tasks and of all tasks, 0 <= work_done <= work_total (see
        :func:`ldpsim.pipeline.cost.replicate_seconds`).

    Returns
    -------
    float
        ``inf`` before any work is done; never negative: the tasks' costs are summed
        in another order than the total, so the work done may pass it by a rounding
        error (which printed "ETA -0 s").
    """
    if work_done <= 0:
        return math.inf
    return max(elapsed * (work_total - work_done) / work_done, 0.0)


#: How :class:`Progress` shows itself: ``auto`` a tqdm bar when stderr is a terminal, else
#: a plain line every :data:`PLAIN_PROGRESS_EVERY` seconds (the CLI); ``bar`` a
#: ``tqdm.auto`` bar (a widget in a notebook); ``none`` nothing.
ProgressMode = Literal["auto", "bar", "none"]


class Progress:
    """tqdm bar on a terminal, a plain line every few seconds otherwise.

    Both weigh each task by its cost, so that the share done and the ETA are those of
    the work, not of the task count (a task at n = 1e6 costs 8 times one at n = 1e4).
    The plain ETA counts from the first finished task, and only once tasks have
    finished over :data:`ETA_AFTER_SECONDS` since it ("ETA not known yet" before): until
    the first, the cluster started and the workers compiled or loaded the kernels, a
    one-off cost (the demo's first line read "ETA 5983 s" for a run of 17 s, its first
    tasks 0.2% of the work after 10 s of start-up).
    """

    def __init__(
        self, reps: int, cost: float, log: Callable[[str], Any], mode: ProgressMode = "auto"
    ) -> None:
        self.reps, self.cost, self.log, self.mode = reps, cost, log, mode
        self.reps_done, self.cost_done = 0, 0.0
        self.start = self.last = time.monotonic()
        self.first: tuple[float, float] | None = None  # (time, cost) of the first task
        self.late = ""  # tasks running far past their estimate (watchdog.Watchdog)
        self.bar = None
        # No bar for nothing to do: a notebook would keep it at 0% in its saved output.
        if reps and (mode == "bar" or (mode == "auto" and sys.stderr.isatty())):
            if mode == "bar":
                from tqdm.auto import tqdm
            else:
                from tqdm import tqdm

            # tqdm's rate and ETA then count cost, its postfix the replicates.
            self.bar = tqdm(
                total=cost,
                bar_format="{l_bar}{bar}| {postfix} [{elapsed}<{remaining}]",
                smoothing=0.1,
            )
            self.bar.set_postfix_str(f"0/{reps} rep")

    def update(self, reps: int, cost: float) -> None:
        self.reps_done += reps
        self.cost_done += cost
        now = time.monotonic()
        if self.first is None:
            self.first = (now, self.cost_done)
        if self.bar is not None:
            self.bar.set_postfix_str(self._postfix(), refresh=False)
            self.bar.update(cost)
            return
        if now - self.last >= PLAIN_PROGRESS_EVERY or self.reps_done == self.reps:
            self._line(now)

    def note_late(self, late: str) -> None:
        """Show ``late``: the run's trouble so far (tasks running far past their
        estimate, :mod:`.watchdog`; workers lost while running its tasks,
        :mod:`.worker_losses`), or "" where there is none.

        Called while the run waits too: the plain line is printed every
        :data:`PLAIN_PROGRESS_EVERY` seconds even when no task finishes, so that a hung
        worker shows.
        """
        changed, self.late = late != self.late, late
        if self.bar is not None:
            if changed:
                self.bar.set_postfix_str(self._postfix())
            return
        now = time.monotonic()
        if self.late and now - self.last >= PLAIN_PROGRESS_EVERY:
            self._line(now)

    def _postfix(self) -> str:
        return f"{self.reps_done}/{self.reps} rep" + (f", {self.late}" if self.late else "")

    def _line(self, now: float) -> None:
        if self.mode == "none":
            return
        self.last = now
        share = self.cost_done / self.cost if self.cost > 0 else 1.0
        since, done = self.first or (self.start, 0.0)
        if self.reps_done == self.reps:
            eta = "ETA 0 s"
        elif self.cost_done > done and now - since >= ETA_AFTER_SECONDS:
            # a rate without the start-up
            left = eta_seconds(now - since, self.cost_done - done, self.cost - done)
            eta = f"ETA {left:.0f} s"
        else:
            eta = "ETA not known yet"
        late = f"; {self.late}" if self.late else ""
        self.log(
            f"progress: {self.reps_done}/{self.reps} replicates, {100 * share:.1f}% of "
            f"the work, {eta}{late}"
        )

    def close(self) -> None:
        if self.bar is not None:
            if self.reps_done == self.reps:  # all done: the bar shows 100%, whatever the
                self.bar.n = self.bar.total  # rounding of the costs added up
                self.bar.set_postfix_str(self._postfix(), refresh=False)
                self.bar.refresh()
            self.bar.close()
            self.bar = None  # closed once (a stopped run closes it, then its finally)
