"""Run a sweep on Dask: submit what is not done, write results as they arrive."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.compute.failures import GridNames
from ldpsim.pipeline.compute.plan import (
    Task,
    Work,
    group_tasks,
    plan,
    plan_layout,
    task_reps,
    whole_block_tasks,
)
from ldpsim.pipeline.compute.progress import Progress, ProgressMode
from ldpsim.pipeline.compute.signals import Interrupted, interruptible, stopping
from ldpsim.pipeline.compute.signals import check as check_signals
from ldpsim.pipeline.compute.worker_losses import WorkerLosses, listening, prefix_of
from ldpsim.pipeline.cost import sweep_seconds
from ldpsim.pipeline.errors import InputError, RunStopped, outcome
from ldpsim.pipeline.store.code_identity import plan_units, sweep_units, task_hashes
from ldpsim.pipeline.store.damage import find_damage, repair
from ldpsim.pipeline.store.digests import settle
from ldpsim.pipeline.store.handoff import HANDED, Handoff
from ldpsim.pipeline.store.identity import adopt_store_choices
from ldpsim.pipeline.store.layout import META_GROUP, TASK_SECONDS, Layout, layout_for, store_index
from ldpsim.pipeline.store.lock import RunLock, stale_after_from_env
from ldpsim.pipeline.store.reading import extension_pending, open_arrays, read_attrs
from ldpsim.pipeline.store.store import (
    Changes,
    Store,
    inspect_store,
    remove_partial_files,
    stored_layout,
)
from ldpsim.pipeline.sweep import Sweep

if TYPE_CHECKING:  # distributed is imported by a run that computes something
    from distributed import Client

    from ldpsim.pipeline.compute.collect import ClientLost

#: Seconds the client holds finished results before writing them (and at the end): a
#: write rewrites the chunks it touches, so results are written together; a run
#: killed hard (SIGKILL, a node lost) loses at most this much of its work. The
#: environment variable LDPSIM_WRITE_EVERY sets another (0: write each task's results
#: as they come, e.g. to watch a store fill).
WRITE_EVERY = 2.0


#: Seconds a run stopped by a signal waits for the results of tasks already finished.
STOP_GRACE = 2.0
#: What the results' iterator gives when it is exhausted.
_END = object()


def write_every() -> float:
    """:data:`WRITE_EVERY`, or the seconds in LDPSIM_WRITE_EVERY (>= 0)."""
    raw = os.environ.get("LDPSIM_WRITE_EVERY")
    if raw is None:
        return WRITE_EVERY
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise InputError(f"LDPSIM_WRITE_EVERY must be a number of seconds >= 0. Got {raw!r}.")
    return seconds


@dataclass
class RunReport:
    """What a run did, and the state of the sweep's replicates in the store after it.

    ``computed`` and ``failed`` count this run's replicates; ``replicates_failed``,
    ``method_failures`` (label -> replicates in which that interval method failed)
    and ``missing`` (replicates not done) describe the sweep's whole region of the
    store, which is what the exit code reports (:func:`ldpsim.pipeline.cli.outcome`).
    """

    store: Path
    total: int
    already_done: int
    computed: int = 0
    failed: int = 0
    replicates_failed: int = 0
    method_failures: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    changes: Changes = field(default_factory=Changes)
    seconds: float = 0.0
    #: The unit changes this run accepted (``--accept-code-change``): unit, old, new origin.
    code_changes: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds the workers spent setting up grid points and on the methods' first calls
    #: (compiling or loading kernels: :mod:`ldpsim.tasks.warm_up`), in no replicate's
    #: ``seconds``.
    warm_up_seconds: float = 0.0
    #: Finished replicates for which this run computed interval methods added to the
    #: store (:mod:`ldpsim.pipeline.compute.added_methods`); ``missing`` counts those still
    #: lacking one.
    methods_computed: int = 0
    #: Workers lost while running this run's tasks, whose tasks ran again
    #: (:mod:`ldpsim.pipeline.compute.worker_losses`; not counted on a client of the
    #: caller's own, ``client=``).
    workers_lost: int = 0


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
    start_timeout: float | None = None,
    shuffle: int | None = None,
    client: Client | None = None,
    max_failures: int | None = None,
    progress: ProgressMode = "auto",
    task_timeout: float | None = None,
    log: Callable[[str], Any] = print,
    accept_code_change: bool = False,
) -> RunReport:
    """Compute every replicate of ``sweep`` not yet done in the store; resume-safe.

    Nothing is written before everything that can be checked is: the store is
    inspected (read only) and locked, the cluster started and a worker connected;
    only then is the store created or extended, atomically.

    Parameters
    ----------
    sweep : Sweep
        Validated sweep (see :func:`ldpsim.pipeline.sweep.load_sweep`).
    store_path : path
        Zarr store of the sweep; created, extended or resumed.
    workers, scheduler, cluster, jobs, adapt, options, start_timeout, client
        Where to run (see :func:`ldpsim.pipeline.compute.clusters.connect`); with ``client``
        (a running :class:`distributed.Client`) no cluster is started or closed.
    shuffle : int or None
        Submit the chunks in a random order with this seed (tests: order independence).
    max_failures : int or None
        Stop once this many replicates of one grid point failed (the replicate or one of
        its methods; see :class:`FailureLimit`); None: never.
    progress : {"auto", "bar", "none"}
        How the progress shows (see :data:`ProgressMode`).
    task_timeout : float or None
        Seconds, in (0, inf], a task may run before its worker is restarted and the task
        run again (:class:`ldpsim.pipeline.compute.watchdog.Watchdog`; inf: never); None: from
        the cost model, max(120 s, 20 times the task's estimate).
    log : callable
        Receives each message line (default :func:`print`).
    accept_code_change : bool, default False
        Compute into a store one of whose units' source changed since it was written,
        recording the change (:func:`ldpsim.pipeline.store.code_identity.plan_units`); else
        such a run is refused.

    Raises
    ------
    InputError
        Bad store path or specification, a store held by another run, a cluster that
        does not start; the store is then unchanged (and none is created).
    """
    start = time.monotonic()
    every = write_every()  # bad input is refused before anything is read or written
    stale_after_from_env()  # the lock's, read again by RunLock: a new store's comes late
    path = Path(store_path)
    sweep = adopt_store_choices(sweep, path)  # a resumed store keeps its methods (issue 24)
    changes = inspect_store(path, sweep, fingerprint=False)  # checked below if there is work
    # Damage is repaired under the lock; a store found undamaged here is not decoded
    # again there (files go missing by accident, not by runs). An extension interrupted
    # while it was committed is completed under the lock before anything else.
    undamaged = not changes and not extension_pending(path) and not find_damage(path)
    if undamaged:
        store = Store(path, stored_layout(path), mode="r")
        work, already = plan(sweep, store)
        from ldpsim.pipeline.compute.added_methods import pending_replicates

        if not work and not pending_replicates(store, sweep):
            report = RunReport(store=path, total=already, already_done=already)
            _tally(sweep, store, report)
            log(f"Nothing to do: all {already} replicates of {sweep.name!r} are done in {path}.")
            _log_failures(report, log)
            return report
    # The units' code read once for the run: its refusal, the store's record and the
    # workers' check (submit) agree even if a file changes meanwhile.
    units = sweep_units(sweep)
    if path.exists():  # refused before the lock and the cluster; checked again under the lock
        plan_units(path, read_attrs(path), sweep, accept_code_change, units)
        from ldpsim.pipeline.compute.added_methods import check_chain_code

        # Methods added to finished replicates run their chains again: with their code.
        check_chain_code(path, sweep, changes.methods_added, units)
    # The token of this run's lock, chosen now: workers that encode shards check that
    # the store's lock holds it (pipeline/store/handoff.py), also on a store not yet created.
    token = uuid.uuid4().hex
    lock = RunLock(path / META_GROUP, token=token) if path.exists() else None

    def take_lock(_: Path) -> None:
        # The store calls this once it exists and matches the sweep, before changing it.
        nonlocal lock
        lock = lock or RunLock(path / META_GROUP, token=token)
        if not lock.held:
            _acquire(lock, log)

    try:
        if lock is not None:
            _acquire(lock, log)  # another run holding the store is refused before connecting
        where = {"workers": workers, "scheduler": scheduler, "cluster": cluster, "jobs": jobs}
        where.update(adapt=adapt, options=options, start_timeout=start_timeout, client=client)
        where.update(work_seconds=sweep_seconds(sweep))  # a dashboard or none (auto)
        from ldpsim.pipeline.compute.clusters import connect

        with connect(**where, log=log) as connected, contextlib.ExitStack() as stack:
            check_gpu_workers(connected, sweep)
            # Workers lost while running the store's tasks, from before the first is
            # submitted (a user's own client keeps its own handler of the topic).
            losses = WorkerLosses(prefix_of(path))
            if client is None:
                stack.enter_context(listening(connected, losses))
            from ldpsim.pipeline.compute.registration import shipped_units

            # Units registered in a notebook or script: on the workers while the run lasts.
            stack.enter_context(shipped_units(connected, sweep))
            # A new store's tasks are all of its replicates: the workers start on them
            # while the client creates the store (seconds for a large grid).
            early = None
            if not path.exists():
                check_signals()  # a signal that came while the cluster started stops here
                # A new store's replicates get the generation 0.
                early = submit(
                    connected, sweep, layout_for(sweep), path, None, shuffle, units, 0, token
                )
            try:
                # Creating a store is atomic and cleans up after an interruption (a
                # signal raises inside, however slow the file system): what the tasks
                # finished meanwhile has no store to go to.
                with interruptible():
                    store, changes = Store.open_or_create(
                        path,
                        sweep,
                        before_write=take_lock,
                        accept_code_change=accept_code_change,
                        units=units,
                    )
            except BaseException:
                if early is not None:
                    with contextlib.suppress(Exception):  # the original error is the one to show
                        early.cancel(connected)
                raise
            if early is not None and not (changes.created and store.layout == early.layout):
                early.cancel(connected)  # another run created the store meanwhile
                early = None
            how = (lock, shuffle, every, FailureLimit(max_failures), progress, task_timeout)
            return _execute(
                sweep,
                store,
                changes,
                undamaged,
                connected,
                start,
                early,
                units,
                token,
                *how,
                log,
                losses,
            )
    finally:
        if lock is not None:
            lock.release()


def _acquire(lock: RunLock, log: Callable[[str], Any]) -> None:
    try:
        lock.acquire(log=log)
    except OSError as exc:  # a full disk or a read-only file system
        raise InputError(
            f"Cannot write the run lock {str(lock.path)!r}: {exc.strerror or exc}; the store "
            "is unchanged."
        ) from None


@dataclass
class Submitted:
    """The tasks of a run, submitted: what :func:`submit` planned for a layout."""

    layout: Layout
    work: list[Work]
    already: int
    tasks: list[Task]
    futures: dict[Any, Task]

    def cancel(self, client: Client) -> None:
        client.cancel(list(self.futures))


def submit(
    client: Client,
    sweep: Sweep,
    layout: Layout,
    path: Path,
    done: np.ndarray | None,
    shuffle: int | None,
    units: dict[str, dict[str, Any]],
    code_version: int,
    token: str,
) -> Submitted:
    """Plan the replicates not ``done`` (:func:`plan_layout`), group them into tasks
    and submit those (in a random order with the seed ``shuffle``: tests of order
    independence). Each task carries the source hash of every unit of ``units``
    (:func:`ldpsim.pipeline.store.code_identity.sweep_units`, as the run read them), which
    its worker checks against the code it runs. A task that computes whole write blocks
    (:func:`whole_block_tasks`) has its worker encode their files
    (:mod:`ldpsim.pipeline.store.handoff`; ``code_version``: the generation its
    replicates get; ``token``: the run's lock token)."""
    work, already = plan_layout(sweep, layout, path, done)
    if shuffle is not None:
        import random

        random.Random(shuffle).shuffle(work)
    # A sweep that sets rep_chunk asks for tasks of that many replicates.
    tasks = group_tasks(work, TASK_SECONDS if sweep.rep_chunk is None else 0.0)
    from ldpsim.pipeline.compute.worker import launch_gpu, run_task  # imports ldpsim.tasks

    methods, d = list(layout.methods), layout.d
    # The units' code as the run read it: a worker that imported another version refuses.
    hashes = task_hashes(units)
    futures = {}
    # The methods of a GPU sweep prefer the workers without a GPU: Dask would run them
    # where the launch's output lies, on the GPU worker, whose threads launch.
    cpu_workers = {}
    if sweep.backend == "gpu":
        workers = client.scheduler_info(n_workers=-1)["workers"]
        cpu = [address for address, info in workers.items() if not info.get("resources", {})]
        cpu_workers = {"workers": cpu, "allow_other_workers": True} if cpu else {}
    whole = whole_block_tasks(tasks, layout)
    for task in tasks:
        chunks = [(w.point.spec, task_reps(w.reps), w.key) for w in task.works]
        handoff = None
        if task.key in whole:
            places = tuple((w.index, w.chunk) for w in task.works)
            handoff = Handoff(str(path.resolve()), token, layout, code_version, places)
        launched = ()
        if sweep.backend == "gpu":
            # The chains on a worker that holds a GPU (distributed's worker resources);
            # the methods on any worker, while the GPU runs the next launch.
            launched = (
                client.submit(
                    launch_gpu, chunks, hashes, key=f"{task.key}-gpu", resources={"GPU": 1}
                ),
            )
        args = (chunks, methods, d, task.key, hashes, *launched)
        future = client.submit(run_task, *args, handoff=handoff, key=task.key, **cpu_workers)
        futures[future] = task
    return Submitted(layout, work, already, tasks, futures)


def check_gpu_workers(client: Client, sweep: Sweep) -> None:
    """Refuse a GPU sweep on a cluster whose connected workers hold no usable GPU.

    Checked before the store is created, on the workers connected then (a batch job
    that starts later is not asked).

    Raises
    ------
    InputError
        ``sweep`` runs on the GPU backend and no connected worker declares the
        resource "GPU" (its tasks would wait for ever), or a worker that declares it
        finds no CUDA driver, device or NVVM (every launch would fail), or cannot be
        asked.
    """
    if sweep.backend != "gpu":
        return
    workers = client.scheduler_info(n_workers=-1)["workers"]
    gpus = [a for a, info in workers.items() if info.get("resources", {}).get("GPU", 0) >= 1]
    if not gpus:
        raise InputError(
            f"The sweep {sweep.name!r} runs on the GPU backend and no worker of this "
            "cluster holds a GPU (the Dask worker resource 'GPU'). Run it with --cluster "
            "local-gpu or slurm-gpu, start your workers with `--resources GPU=1`, or set "
            "backend = cpu."
        )
    # A worker may declare the resource on a machine without a CUDA driver or device
    # (CUDA_VISIBLE_DEVICES set by hand, gpu_workers given): every launch would fail.
    from ldpsim.pipeline.compute.worker import cuda_problem  # imports ldpsim.tasks

    try:
        problems = client.run(cuda_problem, workers=gpus)
    except Exception as exc:  # a worker gone, or one whose ldpsim lacks the function
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(
            f"Cannot ask the GPU workers of this cluster whether CUDA works there: {text}."
        ) from None
    lacking = sorted((address, problem) for address, problem in problems.items() if problem)
    if lacking:
        address, problem = lacking[0]
        raise InputError(
            f"The sweep {sweep.name!r} runs on the GPU backend and {len(lacking)} of the "
            f"{len(gpus)} GPU workers cannot use CUDA (worker {address}: {problem}). Run it "
            "on a machine with a GPU, or on the CPU backend (--backend cpu; backend='cpu' "
            "in Python)."
        )


def _execute(
    sweep: Sweep,
    store: Store,
    changes: Changes,
    undamaged: bool,
    client: Client,
    start: float,
    early: Submitted | None,
    units: dict[str, dict[str, Any]],
    token: str,
    lock: RunLock | None,
    shuffle: int | None,
    every: float,
    limit: FailureLimit,
    progress_mode: ProgressMode,
    task_timeout: float | None,
    log: Callable[[str], Any],
    losses: WorkerLosses,
) -> RunReport:
    submitted = early
    if submitted is None:  # a store that existed: what is done is read from it
        removed = remove_partial_files(store.path)
        if removed:
            log(f"Removed {removed} partial file(s) left by an interrupted run.")
        if store.digests:  # the writes a killed run recorded and did not finish recording
            settle(store.path, open_arrays(store.path))
        damage = None if undamaged else find_damage(store.path)
        if damage:  # their replicates are made not done, and computed below
            log(f"The store is {damage.describe('recomputing them')}.")
            try:
                repair(store.path, damage)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                lost = int(damage.replicates.sum())
                raise RunStopped(
                    f"The disk of the store {str(store.path)!r} is full "
                    f"({errno.errorcode[exc.errno]}: {exc.strerror}) before its damage was "
                    f"repaired ({lost} finished replicate(s) to compute again); the store "
                    "stays readable. Free some space, then run again.",
                    outcome(replicates_failed=0, methods_failed=0, missing=max(lost, 1)),
                ) from None
        submitted = submit(
            client,
            sweep,
            store.layout,
            store.path,
            store.done_mask(),
            shuffle,
            units,
            store.code_version,
            token,
        )
    from ldpsim.pipeline.compute.added_methods import (
        describe,
        failed_methods_chunk,
        submit_methods,
    )

    # The methods added to the store, for its finished replicates (their own tasks).
    added = submit_methods(client, sweep, store, units)
    work, already, tasks, futures = (
        submitted.work,
        submitted.already,
        submitted.tasks,
        {**submitted.futures, **added.futures},
    )
    total = len(sweep.points()) * sweep.replicates
    report = RunReport(
        store=store.path,
        total=total,
        already_done=already,
        changes=changes,
        code_changes=store.code_changes,  # an interrupted run's record names them too
    )
    todo = sum(len(w.reps) for w in work)
    count = f"{len(tasks)} task" + ("" if len(tasks) == 1 else "s")
    log(f"{todo} of {total} replicates to compute ({already} already done) in {count}.")
    if added.tasks:
        log(describe(added))
    method_keys = {task.key for task in added.tasks}
    tasks = [*tasks, *added.tasks]
    todo += added.replicates
    methods = list(store.layout.methods)
    d = store.layout.d
    progress = Progress(todo, sum(task.cost for task in tasks), log, progress_mode)
    pending: list[tuple[tuple[int, ...], int, dict]] = []
    pending_methods: list[tuple[tuple[int, ...], int, dict]] = []  # added methods' results
    written = time.monotonic()

    def write() -> None:
        nonlocal pending, pending_methods, written
        batch, pending = pending, []
        method_batch, pending_methods = pending_methods, []
        written = time.monotonic()
        if batch or method_batch:
            if lock is not None and not lock.still_held():
                # Another run took the store over: what this run has not written stays
                # unwritten (the other run computes it), and the run stops here.
                report.seconds = time.monotonic() - start
                raise _lock_lost(sweep, store, report, lock, len(batch) + len(method_batch))
            try:
                handed = [each for each in batch if HANDED in each[2]]
                if len(handed) < len(batch):
                    store.write_chunks([each for each in batch if HANDED not in each[2]])
                if handed:  # the files their workers encoded, moved into place
                    store.write_handed(handed)
                if method_batch:
                    store.write_methods(method_batch, added.first)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                report.seconds = time.monotonic() - start
                raise _disk_full(sweep, store, report, exc) from None
            for _, _, result in batch:
                report.computed += int((~result["failed"]).sum())
                report.failed += int(result["failed"].sum())
                report.warm_up_seconds += result.get("warm_up_seconds", 0.0)
            for _, _, result in method_batch:
                report.methods_computed += int((~result["failed"]).sum())
                report.warm_up_seconds += result.get("warm_up_seconds", 0.0)

    def take(task: Task, results: list | BaseException) -> None:
        if isinstance(results, Exception):  # KilledWorker, a cancelled or lost task
            losses.gave_up(task.key, results)  # not run again after its worker's losses
            results = [results] * len(task.works)
        for w, result in zip(task.works, results, strict=True):
            if task.key in method_keys:
                if isinstance(result, Exception):
                    failed = _failed_chunk(w, added.labels, d, store, result)
                    result = failed_methods_chunk(failed, added.labels)
                pending_methods.append((w.index, w.chunk, result))
            else:
                if isinstance(result, Exception):
                    result = _failed_chunk(w, methods, d, store, result)
                pending.append((w.index, w.chunk, result))
            limit.add(w, result)
        progress.update(task.reps, task.cost)

    from ldpsim.pipeline.compute.collect import ClientLost, collect
    from ldpsim.pipeline.compute.watchdog import CHECK_EVERY, Watchdog

    watchdog = Watchdog(client, {task.key: task.cost for task in tasks}, task_timeout, log)
    losses.restarted = watchdog.restarted
    collector = collect(futures, client, tick=min(max(every, 0.1), CHECK_EVERY))
    items = iter(collector)
    try:
        while True:
            check_signals()  # Ctrl-C or SIGTERM: stop here (every tick, at most 1 s)
            item = next(items, _END)
            if item is _END:
                break
            if item is not None:
                take(*item)
                if limit.reached is not None:  # keep what finished, cancel the rest
                    for finished in collector.drain():  # and stop fetching
                        take(*finished)
                    client.cancel([future for future in futures if not future.done()])
                    break
            progress.note_late(
                "; ".join(note for note in (watchdog.check(), losses.note()) if note)
            )
            if time.monotonic() - written >= every:
                write()
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM under the CLI (signals.py)
        stopping()
        # Finished while the signal came: kept too (a signal at the loop's first check
        # meets the results of tasks that finished while the store was created).
        for item in collector.drain(grace=STOP_GRACE):
            take(*item)
        progress.close()
        write()
        _tally(sweep, store, report)
        report.seconds = time.monotonic() - start
        stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        stopped.store = store.path
        stopped.kept = report.total - report.missing - report.replicates_failed
        if added.tasks:  # ``missing`` counts the replicates still lacking an added method
            stopped.methods_kept = report.methods_computed
        stopped.report = report  # what this run wrote, for its record
        raise stopped from None
    except ClientLost as exc:
        # The client lost its scheduler (stopped, killed, its node gone): distributed
        # cancels every task, so nothing more can come. What finished is kept.
        collector.close()
        progress.close()
        write()
        report.seconds = time.monotonic() - start
        raise _scheduler_lost(sweep, store, report, exc) from None
    finally:
        report.workers_lost = losses.workers
        collector.close()
        progress.close()
        write()  # what finished before an error is kept
    report.seconds = time.monotonic() - start
    _tally(sweep, store, report)
    methods_line = ""
    if added.tasks:
        methods_line = f", the added methods for {report.methods_computed} finished replicates"
    log(
        f"Computed {report.computed} replicates, {report.failed} failed{methods_line} "
        f"({report.seconds:.1f} s); store: {store.path}"
    )
    lost = losses.summary()
    if lost is not None:
        log(lost)
    if limit.reached is not None:
        log(limit.message(report.missing, GridNames.of(store.layout.axis_values)))
    _log_failures(report, log)
    return report


class FailureLimit:
    """Counts the failed replicates of each grid point; ``reached`` names the first grid
    point with ``max_failures`` of them (SimDesign's ``max_errors``).

    A replicate counts once, whether it failed or one or more of its interval methods did.
    """

    def __init__(self, max_failures: int | None) -> None:
        self.max_failures = max_failures
        self.counts: dict[tuple[int, ...], int] = {}
        self.reached: Work | None = None

    def add(self, work: Work, result: dict[str, Any]) -> None:
        """Count the failures of one chunk's ``result`` (the worker's arrays); after the
        limit is reached too, so that the stop message counts the chunks that finished
        as the run stopped, which are written with the rest."""
        if self.max_failures is None:
            return
        method_failed = result["method_failed"]
        per_rep = method_failed.reshape(*method_failed.shape[:2], -1).any(axis=(0, 2))
        failed = int((result["failed"] | per_rep).sum())
        count = self.counts.get(work.index, 0) + failed
        self.counts[work.index] = count
        if count >= self.max_failures and self.reached is None:
            self.reached = work

    def message(self, missing: int, names: GridNames) -> str:
        """The line that says why the run stopped and what is left; ``names``: the
        store's grid points (:meth:`GridNames.of` its axes' values), named as `ldpsim
        errors` and `status` name them."""
        assert self.reached is not None
        point = names.name(self.reached.index) if names.labels else "the only grid point"
        return (
            f"Stopped: {self.counts[self.reached.index]} replicates of {point} failed "
            f"(--max-failures {self.max_failures}); "
            f"{missing} replicates are not computed. See `ldpsim errors`, fix the cause and "
            "run the same command again to resume."
        )


def _disk_full(sweep: Sweep, store: Store, report: RunReport, exc: OSError) -> RunStopped:
    """The one line of a run stopped by a full disk, with what the store kept.

    A write replaces each file whole (a temp file, then a rename), so the files it did
    not finish are left as they were: the store stays readable, and resumable.
    """
    return _stopped(
        sweep,
        store,
        report,
        f"The disk of the store {str(store.path)!r} is full ({errno.errorcode[exc.errno]}: "
        f"{exc.strerror}); the store",
        "Free some space, then run again to compute the rest.",
        "stopped (disk full)",
    )


def _scheduler_lost(sweep: Sweep, store: Store, report: RunReport, exc: ClientLost) -> RunStopped:
    """The one line of a run whose client lost its Dask scheduler, with what the store kept.

    distributed cancels a client's tasks when its connection to the scheduler breaks
    (``FutureCancelledError``, reason "scheduler-connection-lost"); the run stopped with
    that traceback, distributed's log of the client's failed reconnection, and exit code
    1, as if replicates had failed.
    """
    cause = str(exc)  # the cancellation's reason, e.g. scheduler-connection-lost
    return _stopped(
        sweep,
        store,
        report,
        f"The run lost its Dask scheduler ({cause}); the store {str(store.path)!r}",
        "Start the scheduler and its workers again (or use another cluster), then run the "
        "same command to compute the rest.",
        "stopped (scheduler lost)",
    )


def _lock_lost(
    sweep: Sweep, store: Store, report: RunReport, lock: RunLock, unwritten: int
) -> RunStopped:
    """The one line of a run that found, before a write, that another run had taken its
    lock over (:meth:`ldpsim.pipeline.store.lock.RunLock.still_held`): its heartbeat had
    stalled for longer than its timeout, and two runs would have written the store."""
    chunks = f"{unwritten} finished chunk" + ("" if unwritten == 1 else "s")
    return _stopped(
        sweep,
        store,
        report,
        f"Another run took over the lock of the store {str(store.path)!r} (this run's "
        f"heartbeat had stalled for more than {lock.stale_after:g} s: a suspended process or "
        f"a file system that stopped answering); this run stopped without writing its last "
        f"{chunks}, and the store",
        f"Let the other run finish (the lock file {str(lock.path)!r} names its host, pid "
        "and command), then run the same command to compute what is missing.",
        "stopped (lock lost)",
    )


def _stopped(
    sweep: Sweep, store: Store, report: RunReport, why: str, remedy: str, ended: str
) -> RunStopped:
    """``why`` (ending with the store's name), what the store keeps, then ``remedy``; the
    exit code of the policy (3, or 1 with failures recorded); ``report`` and ``ended``
    for the run's record. A stopped run never exits 0, even where the store is complete
    (another run that took its lock over finished it meanwhile)."""
    _tally(sweep, store, report)
    kept = report.total - report.missing - report.replicates_failed
    code = outcome(
        replicates_failed=report.replicates_failed,
        methods_failed=sum(report.method_failures.values()),
        missing=max(report.missing, 1),  # it did not finish: "error:" with 0 misleads
    )
    stopped = RunStopped(
        f"{why} keeps {kept} of the sweep's {report.total} replicates ({report.computed} "
        f"written by this run). {remedy}",
        code,
    )
    stopped.report, stopped.ended = report, ended
    return stopped


def _tally(sweep: Sweep, store: Store, report: RunReport) -> None:
    """Count the failed and missing replicates of the sweep's region of the store."""
    points = [store_index(store.layout, p) for p in sweep.points()]
    reps = slice(0, sweep.replicates)
    done = np.asarray(store.group["done"][...], dtype=bool)
    failed = np.asarray(store.group["failed"][...], dtype=bool)
    method_failed = np.asarray(store.group["method_failed"][...], dtype=bool)
    # (grid..., method, rep[, checkpoint]): a failure at any checkpoint counts.
    grid = len(store.layout.axes)
    method_failed = method_failed.reshape(*method_failed.shape[: grid + 2], -1).any(-1)
    report.missing = sum(int((~done[(*p, reps)] & ~failed[(*p, reps)]).sum()) for p in points)
    report.replicates_failed = sum(int(failed[(*p, reps)].sum()) for p in points)
    from ldpsim.pipeline.compute.added_methods import pending_replicates

    report.missing += pending_replicates(store, sweep)  # finished, but for an added method
    per_method = sum(method_failed[(*p, slice(None), reps)].sum(axis=-1) for p in points)
    report.method_failures = {
        label: int(count)
        for label, count in zip(store.layout.methods, per_method, strict=True)
        if count
    }


def _log_failures(report: RunReport, log: Callable[[str], Any]) -> None:
    if report.method_failures:
        log(
            "Interval methods failed: "
            + ", ".join(
                f"{label} in {count} replicate{'s' if count > 1 else ''}"
                for label, count in report.method_failures.items()
            )
            + "."
        )
    if report.replicates_failed or report.method_failures:
        # The path as a shell reads it back (a space, & or < in it), as replay's line.
        log(f"See the failures with: ldpsim errors {shlex.quote(str(report.store))}")


def _failed_chunk(w: Work, methods: list[str], d: int, store: Store, exc: Exception) -> dict:
    from ldpsim.pipeline.compute.worker import chunk_shape, method_arrays, replicate_arrays

    n_reps = len(w.reps)
    shape = chunk_shape(store.layout.checkpoints, d)
    reason = f"{type(exc).__name__}: {exc}"
    if type(exc).__name__ == "KilledWorker":
        reason += (
            " -- the worker running this task died repeatedly (e.g. out of memory); the "
            "replicates were recorded as failed"
        )
    return {
        "reps": w.reps,
        **replicate_arrays(n_reps, shape),
        **method_arrays(len(methods), n_reps, shape),
        "failed": np.ones(n_reps, dtype=bool),
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
