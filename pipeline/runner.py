"""Run a sweep on Dask: submit what is not done, write results as they arrive."""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpsim.pipeline.clusters import connect
from ldpsim.pipeline.collect import collect
from ldpsim.pipeline.lock import RunLock
from ldpsim.pipeline.store import META_GROUP, Store, remove_partial_files
from ldpsim.pipeline.sweep import GridPoint, Sweep
from ldpsim.pipeline.worker import run_chunk

#: Seconds between progress lines when stderr is not a terminal.
PLAIN_PROGRESS_EVERY = 10.0


@dataclass
class RunReport:
    """What a run did: counts of replicates computed, failed and already done."""

    store: Path
    total: int
    already_done: int
    computed: int = 0
    failed: int = 0
    changes: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


@dataclass(frozen=True)
class Work:
    point: GridPoint
    index: tuple[int, ...]
    chunk: int
    reps: list[int]
    key: str


def plan(sweep: Sweep, store: Store) -> tuple[list[Work], int]:
    """The chunks with replicates not yet done, and the count already done."""
    done = store.done_mask()
    token = hashlib.sha256(store.path.resolve().as_posix().encode()).hexdigest()[:8]
    work, already = [], 0
    for point in sweep.points():
        index = store.index_of(point)
        for chunk in range(store.n_chunks()):
            wanted = [r for r in store.chunk_reps(chunk) if r < sweep.replicates]
            todo = [r for r in wanted if not done[(*index, r)]]
            already += len(wanted) - len(todo)
            if todo:
                label = "-".join(map(str, index)) or "0"
                work.append(Work(point, index, chunk, todo, f"ldpsim-{token}-{label}-c{chunk}"))
    return work, already


class Progress:
    """tqdm bar on a terminal, a plain line every few seconds otherwise."""

    def __init__(self, total: int, log) -> None:
        self.total, self.count, self.log = total, 0, log
        self.start = self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="rep", smoothing=0.1)

    def update(self, k: int) -> None:
        self.count += k
        if self.bar is not None:
            self.bar.update(k)
            return
        now = time.monotonic()
        if now - self.last >= PLAIN_PROGRESS_EVERY or self.count == self.total:
            self.last = now
            rate = self.count / max(now - self.start, 1e-9)
            eta = (self.total - self.count) / rate if rate > 0 else float("inf")
            self.log(
                f"progress: {self.count}/{self.total} replicates "
                f"({100 * self.count / self.total:.1f}%), {rate:.2f} rep/s, ETA {eta:.0f} s"
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_sweep(
    sweep: Sweep,
    store_path: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    options: dict[str, Any] | None = None,
    shuffle: int | None = None,
    log=print,
) -> RunReport:
    """Compute every replicate of ``sweep`` not yet done in the store; resume-safe.

    Parameters
    ----------
    sweep : Sweep
        Validated sweep (see :func:`ldpsim.pipeline.sweep.load_sweep`).
    store_path : path
        Zarr store of the sweep; created, extended or resumed.
    workers, scheduler, cluster, jobs, adapt, options
        Where to run (see :func:`ldpsim.pipeline.clusters.connect`).
    shuffle : int or None
        Submit the chunks in a random order with this seed (tests: order independence).
    """
    start = time.monotonic()
    where = {"workers": workers, "scheduler": scheduler, "cluster": cluster, "jobs": jobs}
    lock: RunLock | None = None

    def take_lock(path: Path) -> None:
        # Called by the store once it exists and matches the sweep, before any change.
        nonlocal lock
        lock = RunLock(path / META_GROUP)
        lock.acquire(log=log)

    try:
        store, changes = Store.open_or_create(store_path, sweep, before_write=take_lock)
        where.update(adapt=adapt, options=options)
        return _execute(sweep, store, changes, start, where, shuffle, log)
    finally:
        if lock is not None:
            lock.release()


def _execute(
    sweep: Sweep,
    store: Store,
    changes: dict[str, Any],
    start: float,
    where: dict[str, Any],
    shuffle: int | None,
    log,
) -> RunReport:
    removed = remove_partial_files(store.path)
    if removed:
        log(f"Removed {removed} partial file(s) left by an interrupted run.")
    work, already = plan(sweep, store)
    total = len(sweep.points()) * sweep.replicates
    report = RunReport(store=store.path, total=total, already_done=already, changes=changes)
    if not work:
        log(f"Nothing to do: all {total} replicates of {sweep.name!r} are done in {store.path}.")
        report.seconds = time.monotonic() - start
        return report
    if shuffle is not None:
        import random

        random.Random(shuffle).shuffle(work)
    todo = sum(len(w.reps) for w in work)
    log(f"{todo} of {total} replicates to compute ({already} already done) in {len(work)} tasks.")
    methods = list(store.layout.methods)
    d = store.layout.d
    with connect(**where, log=log) as client:
        futures = {
            client.submit(run_chunk, w.point.spec, w.reps, methods, d, w.key, key=w.key): w
            for w in work
        }
        progress = Progress(todo, log)
        try:
            for w, result in collect(futures):
                if isinstance(result, Exception):  # KilledWorker, a cancelled or lost task
                    result = _failed_chunk(w, methods, d, store, result)
                store.write_chunk(w.index, w.chunk, result)
                report.computed += int((~result["failed"]).sum())
                report.failed += int(result["failed"].sum())
                progress.update(len(w.reps))
        finally:
            progress.close()
    report.seconds = time.monotonic() - start
    log(
        f"Computed {report.computed} replicates, {report.failed} failed "
        f"({report.seconds:.1f} s); store: {store.path}"
    )
    if report.failed:
        log(f"See the failures with: ldpsim errors {store.path}")
    return report


def _failed_chunk(w: Work, methods: list[str], d: int, store: Store, exc: Exception) -> dict:
    import numpy as np

    n_reps = len(w.reps)
    checkpoints = store.layout.checkpoints
    extra = (len(checkpoints), d) if checkpoints else (d,)
    reason = f"{type(exc).__name__}: {exc}"
    if type(exc).__name__ == "KilledWorker":
        reason += (
            " -- the worker running this task died repeatedly (e.g. out of memory); the "
            "replicates were recorded as failed"
        )
    return {
        "reps": w.reps,
        "estimate": np.full((n_reps, *extra), np.nan),
        "lower": np.full((len(methods), n_reps, *extra), np.nan),
        "upper": np.full((len(methods), n_reps, *extra), np.nan),
        "method_failed": np.zeros((len(methods), n_reps), dtype=bool),
        "failed": np.ones(n_reps, dtype=bool),
        "seconds": np.full(n_reps, np.nan),
        "job_id": np.zeros(n_reps, dtype=np.int64),
        "errors": {
            rep: {
                "key": w.key,
                "rep": rep,
                "spec": w.point.spec,
                "seed": w.point.spec.get("seed"),
                "kind": "task",
                "error": reason,
                "traceback": "",
            }
            for rep in w.reps
        },
    }
