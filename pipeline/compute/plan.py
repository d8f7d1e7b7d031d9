"""What a run computes: the replicates not done, chunk by chunk (:class:`Work`), grouped
into Dask tasks of about a second each (:class:`Task`), and the keys that name them.

Its tasks' keys are :mod:`ldpsim.pipeline.compute.task_keys`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldpsim.pipeline.compute.task_keys import chunk_key, store_token
from ldpsim.pipeline.cost import replicate_seconds
from ldpsim.pipeline.store.layout import TASK_SECONDS, Layout, store_index
from ldpsim.pipeline.sweep import GridPoint, Sweep

if TYPE_CHECKING:
    from ldpsim.pipeline.store.store import Store


@dataclass(frozen=True)
class Work:
    """One chunk's replicates not yet done: a grid point and some of a chunk's replicates."""

    point: GridPoint
    index: tuple[int, ...]
    chunk: int
    reps: list[int]
    key: str

    @property
    def cost(self) -> float:
        return len(self.reps) * replicate_seconds(self.point.normalized)


@dataclass(frozen=True)
class Task:
    """What one Dask task computes: consecutive chunks worth about TASK_SECONDS."""

    works: list[Work]
    key: str

    @property
    def cost(self) -> float:
        return sum(w.cost for w in self.works)

    @property
    def reps(self) -> int:
        return sum(len(w.reps) for w in self.works)


def plan(sweep: Sweep, store: Store) -> tuple[list[Work], int]:
    """The chunks with replicates not yet done, and the count already done.

    Reads the store's ``done`` flags only (one read), never its values.
    """
    return plan_layout(sweep, store.layout, store.path, store.done_mask())


def plan_layout(
    sweep: Sweep, layout: Layout, path: Path, done: np.ndarray | None = None
) -> tuple[list[Work], int]:
    """:func:`plan` for the store at ``path`` with ``layout`` and ``done`` flags (None:
    none done, a store still to be created)."""
    if done is None:
        done = np.zeros((*layout.grid_shape, layout.replicates), dtype=bool)
    work = plan_work(sweep, layout, path, ~done)
    todo = sum(len(w.reps) for w in work)
    return work, len(sweep.points()) * sweep.replicates - todo


def plan_work(
    sweep: Sweep, layout: Layout, path: Path, todo: np.ndarray, suffix: str = ""
) -> list[Work]:
    """The replicates of ``sweep`` flagged in ``todo`` (grid..., rep), chunk by chunk:
    a :class:`Work` per chunk that has some, keyed by :func:`chunk_key` (``suffix``:
    :data:`KEY_SUFFIX` for the methods added to a finished store)."""
    token = store_token(path)
    work = []
    for point in sweep.points():
        index = store_index(layout, point)
        flags = todo[index]
        for chunk in range(layout.task_chunks()):
            reps = layout.task_chunk_reps(chunk)
            stop = min(reps.stop, sweep.replicates)
            if stop <= reps.start:
                break
            chosen = (np.flatnonzero(flags[reps.start : stop]) + reps.start).tolist()
            if chosen:
                key = chunk_key(token, index, chunk, suffix)
                work.append(Work(point, index, chunk, chosen, key))
    return work


def whole_block_tasks(tasks: list[Task], layout: Layout) -> set[str]:
    """The keys of the tasks that compute every replicate of each write block they touch
    (:meth:`Layout.write_block`), and that no other task touches: their workers may
    encode those blocks' files themselves (:mod:`ldpsim.pipeline.store.handoff`).

    Counted per chunk of work, never per replicate: a block is whole when the task's
    replicates in it are as many as the block holds (a task's replicates are distinct
    and not done).
    """
    holders: dict[tuple[int, ...], set[str]] = {}
    counts: dict[tuple[str, tuple[int, ...]], int] = {}
    for task in tasks:
        for w in task.works:
            block = layout.block_of(w.index, w.chunk)
            holders.setdefault(block, set()).add(task.key)
            counts[task.key, block] = counts.get((task.key, block), 0) + len(w.reps)
    whole = {task.key for task in tasks}
    for (key, block), count in counts.items():
        grid, reps = layout.block_slices(block)
        points = math.prod(g.stop - g.start for g in grid)
        if len(holders[block]) > 1 or count != points * (reps.stop - reps.start):
            whole.discard(key)
    return whole


def task_reps(reps: Sequence[int]) -> Sequence[int]:
    """``reps`` (ascending, as planned) as a task carries them: a ``range`` when they are
    consecutive, as they are but for failed or repaired replicates.

    Dask walks every element of a list in a task's arguments when it submits the task
    (about a microsecond each, the driver's whole budget for a replicate); a range is
    one object, and a worker iterates over it as over the list.
    """
    if len(reps) and reps[-1] - reps[0] + 1 == len(reps):
        return range(int(reps[0]), int(reps[-1]) + 1)
    return reps


#: Tasks a run's work is grouped into at least, where its chunks allow: a run of a few
#: seconds of work is still spread over the workers (2 workers and 3 tasks of a second
#: leave one idle for a third of the run).
MIN_TASKS = 32


def group_tasks(work: list[Work], seconds: float = TASK_SECONDS) -> list[Task]:
    """Consecutive chunks grouped into tasks of about ``seconds`` of estimated work each,
    or less where that makes fewer than :data:`MIN_TASKS` tasks.

    A chunk is never split (it is at most a task's worth by the layout); chunks of
    grid points that cost little share a task, so a sweep of many small grid points
    is not many tiny tasks. Each task takes chunks while they fit in its seconds, with
    a share of the whole (the work over :data:`MIN_TASKS`) as the most. Where chunks of
    uneven cost then close tasks early and make fewer than ``min(MIN_TASKS, chunks)``
    tasks (20 chunks of 1 s and 40 of 0.1 s made 26), the seconds are lowered to the
    most that makes at least that many (:func:`_uneven_tasks`: 34 there); a grouping
    that already makes so many is kept as it is. Only the spreading of the load
    depends on it: a chunk's replicates, and their streams, are the same in any task.

    Parameters
    ----------
    work : list of Work
        The chunks, in the order their tasks are to hold them (costs > 0).
    seconds : float, default TASK_SECONDS
        The most estimated seconds a task of several chunks holds; 0: a task per chunk.

    Returns
    -------
    list of Task
        Every chunk of ``work`` once, in order, keyed by its first chunk's key and its
        count of chunks (``<key>-x<count>``); at least ``min(MIN_TASKS, len(work))``.
    """
    costs = [w.cost for w in work]
    seconds = min(seconds, sum(costs) / MIN_TASKS)
    tasks: list[Task] = []
    group: list[Work] = []
    cost = 0.0
    for w, chunk_cost in zip(work, costs, strict=True):
        if group and cost + chunk_cost > seconds:
            tasks.append(Task(group, f"{group[0].key}-x{len(group)}"))
            group, cost = [], 0.0
        group.append(w)
        cost += chunk_cost
    if group:
        tasks.append(Task(group, f"{group[0].key}-x{len(group)}"))
    wanted = min(MIN_TASKS, len(work))
    return tasks if len(tasks) >= wanted else _uneven_tasks(work, costs, seconds, wanted)


def _uneven_tasks(work: list[Work], costs: list[float], seconds: float, wanted: int) -> list[Task]:
    """At least ``wanted`` tasks of consecutive chunks (costs ``costs``), each of at
    most the largest seconds (below ``seconds``) that makes so many, found by bisection.

    A task takes chunks while their total, from the cumulative costs, is at most its
    seconds (at least one chunk). A task's end is then no earlier for more seconds or
    for a later start (rounding is monotone too), so by induction each task ends no
    earlier for more seconds and the count of tasks never grows with them: a bisection
    finds the most seconds that still make ``wanted`` (64 steps at most; 0 s makes a
    task per chunk). A count stops at ``wanted``, so each step costs ``wanted`` binary
    searches, not a pass over the chunks. The tasks made are fewer than about twice
    ``wanted`` (two consecutive tasks of small chunks hold more than the seconds, and a
    little more seconds make fewer than ``wanted``): 0.04 s of the 0.3 s that grouping
    a million chunks of uneven cost takes.
    """
    totals = np.cumsum(costs)

    def ends(seconds: float, most: int | None = None) -> list[int]:
        out: list[int] = []
        start, before = 0, 0.0
        while start < len(work) and (most is None or len(out) < most):
            end = max(int(np.searchsorted(totals, before + seconds, side="right")), start + 1)
            out.append(end)
            start, before = end, float(totals[end - 1])
        return out

    low, high = 0.0, seconds  # as many tasks as chunks at 0 (costs > 0); too few at high
    for _ in range(64):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if len(ends(middle, wanted)) >= wanted:
            low = middle
        else:
            high = middle
    tasks, start = [], 0
    for end in ends(low):
        group = work[start:end]
        tasks.append(Task(group, f"{group[0].key}-x{len(group)}"))
        start = end
    return tasks
