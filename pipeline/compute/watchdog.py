"""Tasks that run far past the cost model's estimate: reported, and their workers restarted."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distributed import Client

#: The default task timeout (``ldpsim run --task-timeout``): this many times the task's
#: estimate (:func:`ldpsim.pipeline.cost.replicate_seconds`, one core of the project's
#: machine), ...
TIMEOUT_FACTOR = 20.0
#: ... and at least this many seconds: a worker's first task also compiles its kernels
#: (about 4 s each with an empty cache, several per task when cheap grid points share
#: one, more on a loaded machine), which the estimate leaves out.
TIMEOUT_MIN = 120.0
#: ... and a worker's first task of a run at least this many: on a loaded machine with
#: an empty kernel cache its compiling alone took minutes (each worker compiles its own;
#: a restart compiles again), and a worker restarted for it would never finish one.
FIRST_TASK_MIN = 600.0
#: A task is reported late in the progress line past this many times its estimate ...
LATE_FACTOR = 5.0
#: ... and this many seconds.
LATE_MIN = 30.0
#: Seconds between two looks at the scheduler (``Client.processing``).
CHECK_EVERY = 1.0
#: Seconds between two looks at the workers' states while a task is late (whether Dask
#: paused its worker: ``Client.scheduler_info``, every worker's metrics).
PAUSED_EVERY = 10.0
#: The end of the late note where a late task's worker is paused.
PAUSED_ADVICE = (
    "a paused worker starts no task until its memory falls: give workers more memory "
    "(memory_limit, or a job's memory)"
)


def default_timeout(estimate: float) -> float:
    """Seconds a task of ``estimate`` core-seconds may run: max(120, 20 x estimate)."""
    return max(TIMEOUT_MIN, TIMEOUT_FACTOR * estimate)


class Watchdog:
    """Watch the workers running a run's tasks; restart one whose task runs past its timeout.

    A worker whose tasks do not change for longer than the timeout of the costliest of
    them (``timeout``, else :func:`default_timeout` of its estimate) has hung: a process
    stopped (SIGSTOP, a debugger), a deadlock, a node that swaps. It cannot be asked to
    stop, so it is restarted by its nanny (``Client.restart_workers``: the nanny kills
    the process when it does not close in time and starts a new one); a worker without
    a nanny is retired (``Client.retire_workers``). Either way the scheduler reschedules
    its task on another worker, and the run completes. Each restart counts against the
    task's ``distributed.scheduler.allowed-failures``: a task that hangs every time ends
    as a recorded failure (KilledWorker).

    Parameters
    ----------
    client : distributed.Client
        The run's client.
    estimates : mapping of str to float
        Task key -> estimated core-seconds (:attr:`ldpsim.pipeline.compute.runner.Task.cost`).
    timeout : float or None
        Seconds, in (0, inf] (inf: report, never restart); None: :func:`default_timeout`.
    log : callable
        Receives the one-line message of each restart.
    """

    def __init__(
        self,
        client: Client,
        estimates: Mapping[str, float],
        timeout: float | None,
        log: Callable[[str], Any],
    ) -> None:
        self.client, self.estimates, self.timeout, self.log = client, estimates, timeout, log
        self.since: dict[str, tuple[frozenset[str], float]] = {}  # worker -> (keys, since)
        self.checked = -math.inf
        self.late = ""  # what the progress line says about late tasks
        #: Workers seen to move on from a task of this run: their kernels are compiled.
        self.warm: set[str] = set()
        #: The late workers that Dask has paused (:meth:`paused`), and when last asked.
        self.paused_notes: dict[str, str] = {}
        self.paused_checked = -math.inf
        #: Workers restarted on purpose (:meth:`restart`): not "lost"
        #: (:class:`ldpsim.pipeline.compute.worker_losses.WorkerLosses`).
        self.restarted: set[str] = set()

    def limit(self, keys: frozenset[str], worker: str | None = None) -> float:
        """The timeout of a worker's tasks ``keys``: the run's, else the default, at least
        :data:`FIRST_TASK_MIN` while the worker has not moved on from a first task."""
        if self.timeout is not None:
            return self.timeout
        limit = default_timeout(max(self.estimates[key] for key in keys))
        return limit if worker in self.warm else max(limit, FIRST_TASK_MIN)

    def check(self, now: float | None = None) -> str:
        """Look at the scheduler (at most every :data:`CHECK_EVERY` s); the late-task note."""
        now = time.monotonic() if now is None else now
        if now - self.checked < CHECK_EVERY:
            return self.late
        self.checked = now
        processing = self.client.processing()
        late, stuck = [], []
        since: dict[str, tuple[frozenset[str], float]] = {}
        for worker, keys in processing.items():
            ours = frozenset(str(key) for key in keys if str(key) in self.estimates)
            if not ours:
                continue
            before = self.since.get(worker)
            if before is not None and before[0] != ours:
                self.warm.add(worker)  # a task of it finished: its kernels are compiled
            started = before[1] if before is not None and before[0] == ours else now
            since[worker] = (ours, started)
            elapsed = now - started
            estimate = max(self.estimates[key] for key in ours)
            if elapsed > self.limit(ours, worker):
                stuck.append((worker, ours, elapsed, estimate))
            elif elapsed > max(LATE_MIN, LATE_FACTOR * estimate):
                late.append((worker, elapsed, estimate))
        self.since = since
        for worker, keys, elapsed, estimate in stuck:
            self.log(
                f"A task has run {elapsed:.0f} s on worker {worker}, past its timeout of "
                f"{self.limit(keys, worker):g} s (estimate {estimate:.2g} s; --task-timeout): "
                "restarting that worker (retiring it if it has no nanny); its task runs "
                "again."
            )
            self.restart(worker)
            self.since.pop(worker, None)
        if late and now - self.paused_checked >= PAUSED_EVERY:
            self.paused_checked = now
            self.paused_notes = self.paused({worker for worker, _, _ in late})
        paused = self.paused_notes if late else {}
        notes = [
            f"{elapsed:.0f} s on {worker} (estimate {estimate:.2g} s{paused.get(worker, '')})"
            for worker, elapsed, estimate in late
        ]
        if any(worker in paused for worker, _, _ in late):
            notes.append(PAUSED_ADVICE)
        plural = "s" if len(late) > 1 else ""
        self.late = f"{len(late)} task{plural} late: {'; '.join(notes)}" if late else ""
        return self.late

    def paused(self, workers: set[str]) -> dict[str, str]:
        """What to add to the late note of each of ``workers`` that Dask has paused: its
        memory against its limit (a paused worker starts no task, so the tasks given to
        it wait; the cause is usually a memory limit too small for the sweep)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)["workers"]
        except Exception:  # the scheduler is going: the note goes without
            return {}
        notes = {}
        for worker in workers:
            state = info.get(worker, {})
            if state.get("status") != "paused":
                continue
            memory = state.get("metrics", {}).get("memory")
            limit = state.get("memory_limit")
            notes[worker] = (
                f"; worker paused at {memory / 1e6:.0f} MB of its {limit / 1e6:.0f} MB limit"
                if memory and limit
                else "; worker paused"
            )
        return notes

    def restart(self, worker: str) -> None:
        self.restarted.add(worker)  # before: its removal may come while this waits
        try:
            self.client.restart_workers([worker], timeout=60, raise_for_error=False)
        except ValueError:  # no nanny to restart it: the scheduler lets it go
            self.client.retire_workers([worker], close_workers=True)
