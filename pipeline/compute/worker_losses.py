"""Workers lost while they ran a run's tasks: counted, and said in the progress and at the end.

A worker whose process ends while it runs a task (the kernel's out-of-memory killer, the
nanny's memory limit, a batch job's end, a `kill` by hand) is restarted by its nanny, or
replaced, and the scheduler runs its tasks again elsewhere: the run completes, only later,
and Dask's own log of it is silenced (``silence_logs``). Where it happens to the same task
more than ``distributed.scheduler.allowed-failures`` times, the task is recorded as failed
(KilledWorker). These losses are read from the scheduler's ``"all"`` event topic
(``Client.subscribe_topic``): each ``remove-worker`` event names the tasks its worker was
processing, and says whether the removal was ``expected`` (a worker retired by adaptive
scaling or closed at the end).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ldpsim.pipeline.compute.task_keys import chunk_key, store_token

if TYPE_CHECKING:
    from distributed import Client

#: The scheduler's event topic of workers and clients coming and going.
TOPIC = "all"


class WorkerLosses:
    """Counts the workers lost while processing tasks of one run.

    Called with each event of the scheduler's :data:`TOPIC` (on the client's event loop
    thread), from before the run submits its first task. A removal counts where it was
    not ``expected``, its worker was processing a task of the store (a key starting with
    ``prefix``: one run holds a store at a time), and it is not a worker that the run's
    watchdog restarted itself (``restarted``, read at each event and set once the
    watchdog exists: :class:`ldpsim.pipeline.compute.watchdog.Watchdog` says those
    restarts in its own words).

    Parameters
    ----------
    prefix : str
        The start of the store's task keys (:func:`prefix_of`).
    restarted : collection of str
        Addresses of workers restarted on purpose (the watchdog's set, shared).
    """

    def __init__(self, prefix: str, restarted: Collection[str] = ()) -> None:
        self.prefix = prefix
        self.restarted = restarted
        #: Workers lost, and the run's tasks they were processing (each loss counted).
        self.workers = 0
        self.tasks = 0
        #: The keys of those tasks, and how many of them were then given up
        #: (:meth:`gave_up`): those did not run again.
        self.lost_keys: set[str] = set()
        self.failed = 0

    def __call__(self, event: tuple[float, Any]) -> None:
        message = event[1] if isinstance(event, tuple) and len(event) == 2 else event
        if not isinstance(message, dict) or message.get("action") != "remove-worker":
            return
        if message.get("expected") or message.get("worker") in self.restarted:
            return
        keys = message.get("processing-tasks") or ()
        ours = [key for key in keys if str(key).startswith(self.prefix)]
        if ours:
            self.workers += 1
            self.tasks += len(ours)
            self.lost_keys.update(map(str, ours))

    def gave_up(self, key: str, error: BaseException) -> None:
        """Note a task of the run (``key``, its launch ``key-gpu`` alike) that ended in
        ``error``: a ``KilledWorker`` after a counted loss is a task that was not run
        again (the scheduler gave it up after ``allowed-failures`` losses)."""
        if type(error).__name__ != "KilledWorker":
            return
        if key in self.lost_keys or f"{key}-gpu" in self.lost_keys:
            self.failed += 1

    @property
    def ran_again(self) -> int:
        """The lost tasks run again: those not given up (:meth:`gave_up`)."""
        return max(self.tasks - self.failed, 0)

    def _failed_words(self) -> str:
        if not self.failed:
            return ""
        return f", {_count(self.failed, 'task')} failed (KilledWorker)"

    def note(self) -> str:
        """The progress line's words on the losses so far; empty while there are none."""
        if not self.workers:
            return ""
        return (
            f"{_count(self.workers, 'worker')} lost (process ended: out of memory?), "
            f"{_count(self.ran_again, 'task')} run again{self._failed_words()}"
        )

    def summary(self) -> str | None:
        """The run's closing words on the losses; None where there were none."""
        if not self.workers:
            return None
        their = "its" if self.workers == 1 else "their"
        return (
            f"{_count(self.workers, 'worker')} lost while running this run's tasks ({their} "
            "process ended: killed by the system for lack of memory, by the nanny's memory "
            f"limit, at a batch job's end, or by hand); {_count(self.ran_again, 'task')} ran "
            f"again{self._failed_words()}. A task whose worker is lost more than "
            "distributed.scheduler.allowed-failures times (3 by default) is recorded as "
            "failed (KilledWorker; `ldpsim errors`)."
        )


def prefix_of(store: str | Path) -> str:
    """The start of every task key of ``store`` (:func:`~.task_keys.chunk_key`)."""
    return chunk_key(store_token(store), (), 0).removesuffix("0-c0")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@contextlib.contextmanager
def listening(client: Client, losses: WorkerLosses) -> Iterator[WorkerLosses]:
    """Feed ``client``'s events of :data:`TOPIC` to ``losses`` while the block runs.

    A client holds one handler per topic: a user's own client (``run_sweep(client=...)``)
    is not given this one, which would replace theirs. Unsubscribed on exit, before the
    client closes: the scheduler otherwise sends the client's own removal to a closed
    connection and logs that at CRITICAL.
    """
    client.subscribe_topic(TOPIC, losses)
    try:
        yield losses
    finally:
        with contextlib.suppress(Exception):  # the scheduler may be gone already
            client.unsubscribe_topic(TOPIC)
