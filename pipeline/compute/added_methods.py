"""Interval methods added to a store that holds replicates: computed for those replicates.

A store grows along its ``method`` axis when a run's sweep names a method label the store
lacks (:func:`ldpsim.pipeline.store.store.inspect_store`); the new labels are appended, in
shards of their own (a shard spans the methods the store was made with). A finished
replicate then needs the new methods only: its chain is run again from its recorded
streams (a replicate is a pure function of its spec and index, SPEC 6), and only the new
methods' intervals are computed on it (:func:`ldpsim.tasks.replicate.replicate_from_state`
with ``methods``), each from its own stream. The stored methods' files are never
rewritten, and the new values equal those of a sweep that had the methods from the start.

A new method's ``method_seconds`` of a replicate is written after its other values: it
is the method's ``done`` flag. A finished replicate whose added method has none there is
*pending* (:func:`pending`); a run computes it, and one stopped meanwhile resumes it.
"""

from __future__ import annotations

import socket
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.compute.plan import Work, group_tasks, plan_work
from ldpsim.pipeline.compute.task_keys import KEY_SUFFIX
from ldpsim.pipeline.store.pending import has_added, pending

if TYPE_CHECKING:
    from collections.abc import Collection

    from distributed import Client, Future

    from ldpsim.pipeline.compute.plan import Task
    from ldpsim.pipeline.store.store import Store
    from ldpsim.pipeline.sweep import Sweep
    from ldpsim.tasks.grid_point import GridPointSetup


def pending_replicates(store: Store, sweep: Sweep) -> int:
    """The replicates of ``sweep``'s region of ``store`` that an added method lacks."""
    from ldpsim.pipeline.store.layout import store_index

    if not has_added(store.arrays):
        return 0
    _, mask = pending(store.arrays, store.done_mask())
    if not mask.any():
        return 0
    flags = mask.any(axis=len(store.layout.axes))
    reps = slice(0, sweep.replicates)
    return sum(int(flags[(*store_index(store.layout, p), reps)].sum()) for p in sweep.points())


def check_chain_code(
    path: Path, sweep: Sweep, methods_added: Collection[str], units: dict[str, dict[str, Any]]
) -> None:
    """Refuse to add interval methods to finished replicates whose chains another version
    of their model or mechanism computed.

    An added method runs a replicate's chain again, with this run's code. A replicate's
    ``code_version`` names the code that computed it
    (:mod:`ldpsim.pipeline.store.code_identity`); where its model or mechanism had another
    source (a change accepted with ``accept_code_change`` since), the chain run again
    is another chain than the one whose estimate and intervals the store holds. A
    replicate computed before the store recorded its units is judged by the store's
    first record (its code is no newer). Called before the store is locked or changed.

    Parameters
    ----------
    path : pathlib.Path
        An existing store.
    sweep : Sweep
        The run's sweep (its grid points and replicates are those looked at).
    methods_added : collection of str
        The labels this run adds to the store (every finished replicate needs them);
        the methods added before and still pending are looked at too.
    units : dict
        :func:`ldpsim.pipeline.store.code_identity.sweep_units` as the run read them.

    Raises
    ------
    InputError
        One line naming the grid points, the units and both versions, and the remedy
        (a new store); the store is unchanged.
    """
    from ldpsim.pipeline.compute.failures import GridNames
    from ldpsim.pipeline.errors import InputError
    from ldpsim.pipeline.store.code_identity import (
        CODE_VERSION,
        KIND_WORDS,
        code_differs,
        describe,
        read_generations,
        spec_units,
    )
    from ldpsim.pipeline.store.layout import axis_contains, store_index
    from ldpsim.pipeline.store.reading import read_attrs, stored_layout
    from ldpsim.pipeline.store.store import Store

    def changed(key: str, old: dict[str, Any]) -> bool:
        """Whether the model or mechanism ``key``'s known code differs from this run's."""
        if key.partition(":")[0] not in ("model", "mechanism"):
            return False
        return code_differs(old, units.get(key) or {})

    generations = read_generations(read_attrs(path))
    if not any(changed(key, old) for g in generations or [] for key, old in g.items()):
        return  # the common case: no change of a model or mechanism, nothing read
    layout = stored_layout(path)
    store = Store(path, layout, mode="r")
    if CODE_VERSION not in store.arrays or not (methods_added or has_added(store.arrays)):
        return
    done = store.done_mask()
    labels = list(methods_added)
    if has_added(store.arrays):
        first, mask = pending(store.arrays, done)
        columns = mask.any(axis=tuple(i for i in range(mask.ndim) if i != len(layout.axes)))
        labels = [layout.methods[first + i] for i in np.flatnonzero(columns)] + labels
        if not methods_added:
            done = mask.any(axis=len(layout.axes))
    if not labels:
        return
    versions = np.asarray(store.arrays[CODE_VERSION][...])
    reps = slice(0, min(sweep.replicates, layout.replicates))
    names = GridNames.of(layout.axis_values)
    stale: dict[tuple[str, str, str], list[str]] = {}  # (unit, old, new) -> grid points
    for point in sweep.points():
        if not all(axis_contains(layout.axis_values[a], point.values[a]) for a in layout.axes):
            continue  # a grid value new to the store: no replicate of it is finished
        index = store_index(layout, point)
        used = np.unique(versions[(*index, reps)][done[(*index, reps)]]).tolist()
        for version in used:
            if version >= len(generations):
                continue  # a code_version the store does not describe: nothing to compare
            generation = generations[max(int(version), 0)]
            for key in spec_units(point.normalized):
                old = generation.get(key) or {}
                if changed(key, old):
                    where = stale.setdefault((key, describe(old), describe(units[key])), [])
                    if names.name(index) not in where:
                        where.append(names.name(index))
    if not stale:
        return
    parts = []
    for (key, old, new), where in stale.items():
        kind, _, name = key.partition(":")
        shown = "; ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        parts.append(f"the {KIND_WORDS[kind]} {name!r} at {shown} ({old} -> {new})")
    what = ", ".join(map(repr, labels))
    raise InputError(
        f"Cannot add the interval method{'s' if len(labels) > 1 else ''} {what} to the "
        f"finished replicates of {str(path)!r}: their chains were computed with other "
        f"code than this run's, {'; '.join(parts)}, and an added method runs each chain "
        "again, so its intervals would belong to other chains than the stored estimates. "
        "Compute the sweep with all its methods into a new store; this one is unchanged."
    )


@dataclass(frozen=True)
class Planned:
    """The added methods' work of a run: what :func:`submit_methods` planned."""

    #: Index of the first method label computed (``layout.methods[first:]``).
    first: int
    labels: list[str]
    work: list[Work]
    tasks: list[Task]
    futures: dict[Future, Task]

    @property
    def replicates(self) -> int:
        return sum(len(w.reps) for w in self.work)


def plan_methods(sweep: Sweep, store: Store) -> tuple[int, list[Work]]:
    """The chunks of ``sweep``'s region with finished replicates that an added method
    lacks, and the index of the first method to compute for them (the methods from it on
    are computed, once the chain is run again, which costs most)."""
    layout = store.layout
    if not has_added(store.arrays):
        return len(layout.methods), []
    first, mask = pending(store.arrays, store.done_mask())
    grid = len(layout.axes)
    if not mask.any():
        return len(layout.methods), []
    columns = np.flatnonzero(mask.any(axis=tuple(i for i in range(mask.ndim) if i != grid)))
    first += int(columns[0])
    flags = mask.any(axis=grid)
    work = plan_work(sweep, layout, store.path, flags, KEY_SUFFIX)
    return first, work


def submit_methods(
    client: Client, sweep: Sweep, store: Store, units: dict[str, dict[str, Any]]
) -> Planned:
    """Plan the added methods' work (:func:`plan_methods`) and submit its tasks.

    Each task carries the source hash of every unit as the run read it, which its worker
    checks (:func:`ldpsim.pipeline.store.code_identity.check_running_units`), as the tasks of
    :func:`ldpsim.pipeline.compute.runner.submit` do.
    """
    from ldpsim.pipeline.store.code_identity import task_hashes
    from ldpsim.pipeline.store.layout import TASK_SECONDS

    first, work = plan_methods(sweep, store)
    labels = list(store.layout.methods[first:])
    tasks = group_tasks(work, TASK_SECONDS)
    hashes = task_hashes(units)
    extra = {"resources": {"GPU": 1}} if sweep.backend == "gpu" else {}
    futures = {
        client.submit(
            run_methods_task,
            [(w.point.spec, w.reps, w.key) for w in task.works],
            labels,
            store.layout.d,
            hashes,
            key=task.key,
            **extra,
        ): task
        for task in tasks
    }
    return Planned(first, labels, work, tasks, futures)


def run_methods_task(
    chunks: list[tuple[dict[str, Any], list[int], str]],
    labels: list[str],
    d: int,
    units: dict[str, str | None] | None = None,
) -> list[dict[str, Any] | Exception]:
    """The added methods ``labels`` for several chunks, each (grid point spec,
    replicates, chunk key): one Dask task, on a worker. A chunk that cannot be set up
    gives its exception in its place (:func:`run_methods_chunk`)."""
    from ldpsim.pipeline.compute.worker import each_chunk

    return each_chunk(
        chunks, lambda i, spec, reps, key: run_methods_chunk(spec, reps, labels, d, key, units)
    )


def run_methods_chunk(
    spec: dict[str, Any],
    reps: list[int],
    labels: list[str],
    d: int,
    key: str,
    units: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """The methods ``labels`` of the finished replicates ``reps`` of the grid point
    ``spec``; never raises for a replicate.

    Each replicate's chain is run again from its streams and only ``labels`` are
    computed on it (:func:`ldpsim.tasks.replicate.replicate_from_state`), so their
    values are those of a run that had them from the start.

    Returns
    -------
    dict
        ``reps``; ``lower``, ``upper`` and ``method_estimate`` (M, R, [K,] d),
        ``method_failed`` and ``method_seconds`` (M, R, [K]) for the M labels, as
        :func:`ldpsim.pipeline.compute.worker.run_chunk` shapes them; ``failed`` (R,): the
        replicate's chain raised this time (its methods are then recorded as failed and
        their ``method_seconds`` left NaN: pending, a later run tries again);
        ``warm_up_seconds`` (as :func:`ldpsim.pipeline.compute.worker.run_chunk` counts it);
        ``errors``: a method record per replicate whose added methods failed.
    """
    from ldpsim.pipeline.compute.worker import chunk_shape, method_arrays, timed_setup

    setup, setup_seconds = timed_setup(spec, units)
    rs = setup.spec
    n_reps, dim = len(reps), rs.model.dim
    out: dict[str, Any] = {
        "reps": list(reps),
        **method_arrays(len(labels), n_reps, chunk_shape(rs.checkpoints, d)),
        "failed": np.zeros(n_reps, dtype=bool),
        "warm_up_seconds": setup_seconds,
        "errors": {},
    }
    host = socket.gethostname()
    compute = _replicates(setup, reps, labels)

    def record(rep: int, methods: dict[str, str], tracebacks: dict[str, str]) -> dict[str, Any]:
        return {
            **{"key": key, "rep": rep, "seed": rs.seed, "spec": spec, "host": host},
            "kind": "method",
            "error": "; ".join(f"{k}: {v}" for k, v in methods.items()),
            "methods": methods,
            "tracebacks": tracebacks,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, rep in enumerate(reps):
            try:
                result = compute(i, rep)
            except Exception as exc:  # its chain ran before: so it is these methods' failure
                reason = f"{one_line(exc)} (in the chain run again)"
                out["failed"][i] = True
                out["method_failed"][:, i] = True
                text = traceback.format_exc()
                out["errors"][rep] = record(
                    rep, dict.fromkeys(labels, reason), dict.fromkeys(labels, text)
                )
                continue
            for m, label in enumerate(labels):
                out["lower"][m, i, ..., :dim] = result.lower[label]
                out["upper"][m, i, ..., :dim] = result.upper[label]
                out["method_estimate"][m, i, ..., :dim] = result.method_estimate[label]
                out["method_failed"][m, i] = result.method_failed[label]
                out["method_seconds"][m, i] = result.method_seconds[label]
            out["warm_up_seconds"] += result.warm_up_seconds
            if result.failures:
                out["errors"][rep] = record(rep, result.failures, result.method_tracebacks)
    return out


def _replicates(setup: GridPointSetup, reps: list[int], labels: list[str]) -> Any:
    """``compute(i, rep)``: the i-th replicate ``rep`` with the methods ``labels`` only,
    its chain started as a run starts it (:func:`ldpsim.tasks.replicate.replicate_start`;
    on the GPU backend the chains of the chunk in one launch, as a run's task)."""
    from ldpsim.tasks.grid_point import gpu_row
    from ldpsim.tasks.replicate import replicate_from_state, replicate_start

    if setup.spec.backend == "gpu":
        outputs = setup.run_gpu(list(reps))  # its values do not depend on the launch

        def start(i: int, rep: int) -> tuple[Any, Any]:
            return None, gpu_row(outputs, i)
    else:

        def start(i: int, rep: int) -> tuple[Any, Any]:
            return replicate_start(setup, rep)

    def compute(i: int, rep: int) -> Any:
        state, raw = start(i, rep)
        streams = setup.method_streams(rep)
        return replicate_from_state(setup, state, streams, methods=labels, raw=raw)

    return compute


def one_line(exc: BaseException) -> str:
    """``TypeName: the first line of its message``."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def failed_methods_chunk(failed: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """The result of a chunk whose task failed (killed worker, lost task), for its added
    methods ``labels``: ``failed``, the failed chunk of those methods as the runner makes
    it for a run's task (:func:`ldpsim.pipeline.compute.runner._failed_chunk`), with the methods
    recorded as failed and left pending (a later run tries again)."""
    out = {name: failed[name] for name in ("reps", "lower", "upper", "method_estimate")}
    out["method_seconds"] = failed["method_seconds"]
    out["method_failed"] = np.ones_like(failed["method_failed"])
    out["failed"] = failed["failed"]
    out["errors"] = {}
    for rep, record in failed["errors"].items():
        reason = record["error"]
        out["errors"][rep] = {
            **{k: v for k, v in record.items() if k != "traceback"},
            "kind": "method",
            "error": "; ".join(f"{label}: {reason}" for label in labels),
            "methods": dict.fromkeys(labels, reason),
            "tracebacks": {},
        }
    return out


def describe(planned: Planned) -> str:
    """The line saying what the added methods' work recomputes."""
    count = f"{len(planned.tasks)} task" + ("" if len(planned.tasks) == 1 else "s")
    return (
        f"Added method{'s' if len(planned.labels) > 1 else ''} "
        f"{', '.join(planned.labels)}: computing {'them' if len(planned.labels) > 1 else 'it'} "
        f"for {planned.replicates} finished replicates in {count} (each chain is run again "
        "from its seed; the stored methods are kept as they are)."
    )
