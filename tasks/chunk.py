"""A chunk of replicates of one grid point, computed whole: every chain, then each interval
method on the chunk's stacked statistics, in one call per method where it has a batched
path (``intervals_batch``), and replicate by replicate where it has not."""

from __future__ import annotations

import dataclasses
import functools
import time
import traceback
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ldpsim.tasks import compile_lock
from ldpsim.tasks.diagnose import NonFiniteRun, diagnose_nonfinite
from ldpsim.tasks.grid_point import GridPointSetup, needs_full_matrix
from ldpsim.tasks.intervals.base import IntervalMethod, has_batch
from ldpsim.tasks.l1_projection import intersect_with_ball, project_l1_ball
from ldpsim.tasks.spec import ReplicateSpec
from ldpsim.tasks.stats import StackedStats
from ldpsim.tasks.users import Users
from ldpsim.tasks.warm_up import IN_TURN_WARM, warm_up_methods

#: A batched plugin method and its own per-replicate path may differ by this much,
#: relative to the largest bound of the chunk: the order of a sum (what the built-in
#: methods' batched paths are held to against their old BLAS products).
BATCH_RTOL = 1e-12
#: Replicates of the sweep's first grid point on which a plugin's ``intervals_batch``
#: is checked against its ``interval`` before a run (the start of the run's first chunk).
CHECKED_REPLICATES = 20


class MethodFailure(Exception):
    """An interval method's exception, raised instead of recorded.

    Raised by :func:`ldpsim.tasks.replicate.replicate_from_state` with
    ``raise_failures=True`` (``ldpsim replay``, which reruns a recorded method failure);
    the method's own exception, with its traceback, is the ``__cause__``.

    Attributes
    ----------
    label : str
        The method's label in the spec.
    reason : str
        The text a replicate records for it in ``failures``
        (``"ValueError at n = 3: bb needs at least 2 blocks; n = 3 gives 1."``).
    """

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(label, reason)
        self.label, self.reason = label, reason

    def __str__(self) -> str:
        return f"method {self.label}: {self.reason}"


def checkpoint_stream(rng: np.random.Generator, point: int) -> np.random.Generator:
    """A child of a method's stream for the checkpoint ``point`` (< n).

    The stream of the last point n is the method's own, so a method's interval at n is
    the same with or without checkpoints, and one checkpoint does not shift another.
    """
    seq = rng.bit_generator.seed_seq
    child = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, int(point)))
    return np.random.Generator(np.random.PCG64(child))


class ChunkStreams(Sequence):
    """One random method's streams for replicates of a chunk, at one point: item i is
    replicate ``rows[i]``'s stream (at a checkpoint below n, its child,
    :func:`checkpoint_stream`). Each item is made, at its start, when first asked for,
    and is the same Generator at every later access (by index, iteration or a slice), so
    that a method drawing from ``rngs[i]`` twice gets the stream's next numbers, as
    ``interval`` does from its ``rng``. Where ``stream_of`` hands out one Generator set
    to each row's start in turn (a thread's own streams,
    :meth:`ldpsim.tasks.grid_point.GridPointSetup.method_streams`, used only where ldpsim's
    own methods draw and no checkpoint is asked for), a row asked for again after
    another is set to its start again: never to another row's state.

    ``states_of(rows, point)``, where given, returns the PCG64 states (uint64, (R, 4))
    at which those streams start, all in one compiled call
    (:meth:`ldpsim.tasks.grid_point.GridPointSetup.method_states`): :meth:`states`, which
    a built-in method drawing from every stream of a chunk at once uses instead of the
    Generators (bb's multipliers,
    :func:`ldpsim.tasks.intervals.bootstrap_bounds.multiplier_bounds`).
    """

    def __init__(
        self,
        stream_of: Callable[[int], np.random.Generator],
        rows: np.ndarray,
        point: int | None,
        states_of: Callable[[np.ndarray, int | None], np.ndarray] | None = None,
        made: dict[int, np.random.Generator] | None = None,
        holders: dict[int, int] | None = None,
    ) -> None:
        self.stream_of, self.rows, self.point = stream_of, rows, point
        self.states_of = states_of
        self.made = {} if made is None else made  # row -> its Generator, shared by slices
        self.holders = {} if holders is None else holders  # id(Generator) -> its row

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ChunkStreams(
                self.stream_of,
                self.rows[index],
                self.point,
                self.states_of,
                self.made,
                self.holders,
            )
        row = int(self.rows[index])
        if row not in self.made:
            rng = self.stream_of(row)
            rng = rng if self.point is None else checkpoint_stream(rng, self.point)
            # A Generator that stream_of set to this row's start after another's: that
            # row no longer has its own (asked for again, it is set to its start again).
            self.made.pop(self.holders.get(id(rng), row), None)
            self.made[row], self.holders[id(rng)] = rng, row
        return self.made[row]

    def states(self) -> np.ndarray | None:
        """The streams' start states (uint64, (R, 4)), or None where they are only
        available as Generators."""
        return None if self.states_of is None else self.states_of(self.rows, self.point)


def chosen_methods(
    rs: ReplicateSpec, methods: Collection[str] | None
) -> dict[str, IntervalMethod]:
    """The spec's methods named by ``methods`` (None: all), in the spec's order.

    Raises
    ------
    ValueError
        ``methods`` names a label the spec does not have.
    """
    chosen = dict(rs.methods)
    if methods is None:
        return chosen
    unknown = sorted(set(methods) - set(chosen))
    if unknown:
        raise ValueError(
            f"The 'methods' parameter names labels the spec does not have: "
            f"{', '.join(map(repr, unknown))}; its methods are {', '.join(chosen)}."
        )
    return {label: method for label, method in chosen.items() if label in methods}


def empty_outputs(setup: GridPointSetup, count: int) -> tuple[np.ndarray, ...]:
    """NaN kernel outputs for ``count`` replicates, stacked (the kernel's tuple, each
    array with a leading replicate axis)."""
    d, n_cuts = setup.spec.model.dim, len(setup.cuts)
    columns = d if needs_full_matrix(setup.spec) else 1
    shapes = [(d,), *[(n_cuts, d)] * 4, (n_cuts, d, columns), (n_cuts, d)]
    return tuple(np.full((count, *shape), np.nan) for shape in shapes)


def run_chains(
    setup: GridPointSetup, reps: Sequence[int]
) -> tuple[tuple[np.ndarray, ...], dict[int, tuple[BaseException, str]]]:
    """Every chain of replicates ``reps`` of ``setup``'s grid point (CPU backend).

    All chains run in one compiled call that also seeds them
    (:meth:`ldpsim.tasks.grid_point.GridPointSetup.run_chains`). Where that call raises
    (a model's or mechanism's callback can), the chains run again one by one, so that
    only the replicates whose chain raises fail.

    Returns
    -------
    (outputs, errors)
        The kernel's outputs stacked along a first axis of replicates (row i: what
        :meth:`ldpsim.tasks.grid_point.GridPointSetup.run_kernel` returns for
        ``reps[i]`` from its data stream's start), and the exception and traceback of
        each row whose chain raised (its outputs NaN).
    """
    try:
        return setup.run_chains(reps), {}
    except Exception as exc:  # a chain raised: find which, row by row, below
        if setup.kernel is None:  # a GPU set-up: its launch failed, every replicate with it
            text = traceback.format_exc()
            return empty_outputs(setup, len(reps)), {i: (exc, text) for i in range(len(reps))}
    outputs = empty_outputs(setup, len(reps))
    errors: dict[int, tuple[BaseException, str]] = {}
    states = setup.data_states(reps)  # every data stream's start, in one compiled call
    for i in range(len(reps)):
        try:
            row = setup.run_kernel(setup.cuts, states[i])
        except Exception as exc:  # that replicate alone fails
            errors[i] = (exc, traceback.format_exc())
            continue
        for stacked, value in zip(outputs, row, strict=True):
            stacked[i] = value
    return outputs, errors


def stacked_stats(setup: GridPointSetup, outputs: tuple[np.ndarray, ...]) -> StackedStats:
    """The statistics of a chunk from its stacked kernel outputs (:func:`run_chains`, or
    the GPU backend's launch): :meth:`GridPointSetup.stats` of every replicate at once."""
    contiguous = tuple(np.ascontiguousarray(output, dtype=np.float64) for output in outputs)
    return StackedStats(**setup.stats_fields(contiguous))


def compute_chunk(
    setup: GridPointSetup,
    reps: Iterable[int],
    methods: Collection[str] | None = None,
    raw: tuple[np.ndarray, ...] | None = None,
) -> dict[str, Any]:
    """Replicates ``reps`` of ``setup``'s grid point, computed whole; never raises for a
    replicate.

    The chains run first (``raw``: their stacked outputs, computed already, e.g. by the
    GPU backend's launch; on the CPU backend :func:`run_chains` otherwise). Then each
    method with a batched path (``intervals_batch``: bb, bm, sn, the oracle, and plugins
    that have one) computes the intervals of all replicates in one call at each point
    (n and every checkpoint); the others (the competitors, plugins without one) run
    replicate by replicate. The numbers are those of
    :func:`ldpsim.tasks.replicate.run_replicate` for each replicate, bit for bit.

    Failures are per replicate and per method (as in a replicate alone): a chain that
    raises or gives a non-finite theta_bar fails its replicate (``failed``, its error);
    a method that raises, or gives a non-finite bound, for a replicate loses that cell
    only (``method_failed``). A replicate whose bounds from the batched call are not
    finite is computed again by the method's ``interval``, alone, for its exception and
    traceback; a batched call that raises makes the method run replicate by replicate.

    Parameters
    ----------
    setup : GridPointSetup
        The grid point's set-up.
    reps : iterable of int
        Replicate indices, >= 0 (R of them).
    methods : collection of str, optional
        Labels of the spec's methods to compute (in the spec's order); default all.
    raw : tuple of ndarray, optional
        The chains' stacked outputs (row i for ``reps[i]``).

    Returns
    -------
    dict
        ``estimate``, ``last``, ``projected`` (R, [K,] d; projected NaN for a model
        without an l1 ball); ``lower``, ``upper``, ``method_estimate`` (M, R, [K,] d);
        ``method_failed``, ``method_seconds`` (M, R, [K]); ``failed``, ``seconds`` (R,);
        ``warm_up_seconds`` (the methods' first calls in this process,
        :mod:`ldpsim.tasks.warm_up`); ``errors``: for each failed replicate
        ``{"kind": "replicate", "error", "traceback"}``, for each replicate with failed
        methods ``{"kind": "method", "error", "methods", "tracebacks"}``, keyed by rep.
        K is the number of checkpoints (n included), absent without checkpoints.
        ``seconds`` is the chunk's time (chains and methods) divided evenly among its
        replicates that did not fail, and a batched method's ``method_seconds`` its
        call's time divided so; a method computed replicate by replicate has each
        replicate's own.
    """
    start = time.perf_counter()
    reps = [int(rep) for rep in reps]
    rep_array = np.asarray(reps, dtype=np.int64)
    if len(reps) and rep_array.min() < 0:
        raise ValueError(f"Replicate indices must be >= 0. Got {rep_array.min()}.")
    chosen = chosen_methods(setup.spec, methods)
    chain_errors: dict[int, tuple[BaseException, str]] = {}
    if raw is None:
        raw, chain_errors = run_chains(setup, reps)
    gpu = setup.spec.backend == "gpu"

    def start_state(i: int) -> np.ndarray | None:
        return None if gpu else setup.data_state(reps[i])

    def stream_of(label: str, i: int) -> np.random.Generator:
        return setup.method_streams(reps[i])[label]

    def states_of(label: str, rows: np.ndarray, point: int | None) -> np.ndarray:
        return setup.method_states(label, rep_array[rows], point)

    out = compute_rows(
        setup,
        raw,
        chosen,
        start=start,
        start_state=start_state,
        stream_of=stream_of,
        stream_labels=setup.method_words,
        chain_errors=chain_errors,
        states_of=states_of,
    )
    out["errors"] = {reps[i]: record for i, record in out["errors"].items()}
    out["methods"] = list(chosen)
    if not setup.spec.checkpoints:  # no checkpoint axis
        for name in ("estimate", "last", "projected"):
            out[name] = out[name][:, 0]
        for name in ("lower", "upper", "method_estimate", "method_failed", "method_seconds"):
            out[name] = out[name][:, :, 0]
    return out


def method_cell(
    method: IntervalMethod,
    stats: Any,
    users: Users | None,
    level: float,
    rng: np.random.Generator | None,
    radius: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One method's (estimate, lower, upper) for one replicate at one point, each (d,),
    the bounds intersected with the model's l1 ball where the method asks for it
    (``intersect_constraint``); they may be non-finite (:func:`finite_bounds`).

    ``stats`` is the replicate's :class:`ldpsim.tasks.stats.StreamingStats` there;
    a competitor (``own_estimate``) gets ``users`` instead. Raises what the method
    raises, and ValueError where it returns arrays of another shape than (d,) (a
    scalar would fill every coordinate with one interval).
    """
    if method.own_estimate:
        centre, lower, upper = method.estimate_interval(users, level, rng)
        name = "estimate_interval"
    else:
        centre = stats.theta_bar
        lower, upper = method.interval(stats, level, rng)
        name = "interval"
    centre, lower, upper = (np.asarray(a, dtype=np.float64) for a in (centre, lower, upper))
    returned = (centre, lower, upper) if method.own_estimate else (lower, upper)
    if any(array.shape != (stats.dim,) for array in returned):
        shapes = " and ".join(str(array.shape) for array in returned)
        raise ValueError(
            f"{name} of {method.name!r} must return arrays of shape ({stats.dim},) "
            f"(one value per coordinate); got {shapes}."
        )
    if method.intersect_constraint:  # |theta*_j| <= r (checked in the spec)
        lower, upper = intersect_with_ball(lower, upper, radius)
    return centre, lower, upper


def finite_bounds(lower: np.ndarray, upper: np.ndarray) -> bool:
    """Whether every bound of an interval is finite: a cell whose bounds are not fails."""
    return bool(np.isfinite(lower).all() and np.isfinite(upper).all())


def nonfinite_run(
    setup: GridPointSetup, start_state: np.ndarray | None, where: str
) -> NonFiniteRun:
    """The failure of a replicate whose theta_bar is not finite (``where``: " at n = k"
    at a checkpoint, else ""), with the diagnosis of its run replayed from
    ``start_state`` (None on the GPU backend, whose run the CPU cannot replay)."""
    if start_state is None:
        return NonFiniteRun(
            f"non-finite theta_bar{where} on the GPU backend (the step where it "
            "appeared is found on the CPU: run the grid point with backend = cpu)"
        )
    try:
        diagnosis = diagnose_nonfinite(setup, start_state)
    except Exception as exc:  # the replay itself failed: say so, keep the failure
        diagnosis = f"the replay that finds the step failed ({type(exc).__name__}: {exc})"
    return NonFiniteRun(f"non-finite theta_bar{where}: {diagnosis}")


def compute_rows(
    setup: GridPointSetup,
    raw: tuple[np.ndarray, ...],
    chosen: Mapping[str, IntervalMethod],
    *,
    start: float,
    start_state: Callable[[int], np.ndarray | None],
    stream_of: Callable[[str, int], np.random.Generator | None],
    stream_labels: Collection[str],
    chain_errors: Mapping[int, tuple[BaseException, str]] | None = None,
    states_of: Callable[[str, np.ndarray, int | None], np.ndarray] | None = None,
    per_replicate: Collection[str] = (),
    raise_failures: bool = False,
    raise_replicate_failures: bool = False,
    raise_batch_shapes: bool = False,
) -> dict[str, Any]:
    """The methods ``chosen`` on the stacked chain outputs ``raw`` of R replicates:
    what :func:`compute_chunk` and :func:`ldpsim.tasks.replicate.replicate_from_state`
    (R = 1) both compute, with the checkpoint axis always present.

    Parameters
    ----------
    start : float
        ``time.perf_counter()`` when the chunk started (its chains included).
    start_state : callable row -> state or None
        Row i's data stream at its start (for a competitor's users and a diagnosis).
    stream_of : callable (label, row) -> Generator
        Row i's stream of a random method at n, made afresh for each call.
    stream_labels : collection of str
        The labels that have a stream.
    chain_errors : mapping row -> (exception, traceback)
        Rows whose chain raised.
    states_of : callable (label, rows, point) -> ndarray, optional
        The start states (uint64, (R, 4)) of those rows' streams of a random method at
        a point (None: n), in one call (:class:`ChunkStreams`); without it the batched
        methods draw from the Generators of ``stream_of``.
    per_replicate : collection of str
        Labels computed replicate by replicate even where they have a batched path.
    raise_failures : bool
        Raise a method's failure (:class:`MethodFailure`) instead of recording it.
    raise_replicate_failures : bool
        Raise a replicate's failure (its chain's exception, or
        :class:`ldpsim.tasks.diagnose.NonFiniteRun`) instead of recording it.
    raise_batch_shapes : bool
        Raise a batched call's :class:`BatchShapeError` (the check of a plugin's
        ``intervals_batch``) instead of computing its rows one by one, as for any other
        exception of a batched call.
    """
    rs = setup.spec
    chain_errors = chain_errors or {}
    stats = stacked_stats(setup, raw)
    count, d = stats.count, stats.dim
    points = rs.checkpoints or (rs.n,)
    labels = list(chosen)
    n_points, n_methods = len(points), len(labels)
    subs = [stats if point == rs.n else stats.prefix(point) for point in points]
    estimate = np.stack([sub.theta_bar for sub in subs], axis=1)
    last = np.stack([sub.last_iterate for sub in subs], axis=1)
    lower = np.full((n_methods, count, n_points, d), np.nan)
    upper = np.full((n_methods, count, n_points, d), np.nan)
    method_estimate = np.full((n_methods, count, n_points, d), np.nan)
    method_seconds = np.full((n_methods, count, n_points), np.nan)
    method_failed = np.zeros((n_methods, count, n_points), dtype=bool)
    failed = np.zeros(count, dtype=bool)
    errors: dict[int, dict[str, Any]] = {}
    failures: dict[int, dict[str, str]] = {}
    tracebacks: dict[int, dict[str, str]] = {}

    def where_of(point: int) -> str:
        return f" at n = {point}" if rs.checkpoints else ""

    # A replicate fails with its chain: the chain raised, or theta_bar is not finite at
    # a point (the first such point is named).
    finite = np.isfinite(estimate).all(axis=2)
    for i in np.flatnonzero(~finite.all(axis=1) | np.isin(np.arange(count), list(chain_errors))):
        i = int(i)
        if i in chain_errors:
            exc, text = chain_errors[i]
            if raise_replicate_failures:
                raise exc
        else:
            exc = nonfinite_run(setup, start_state(i), where_of(points[np.argmin(finite[i])]))
            if raise_replicate_failures:
                raise exc
            try:
                raise exc
            except NonFiniteRun:
                text = traceback.format_exc()
        failed[i] = True
        error = f"{type(exc).__name__}: {exc}"
        errors[i] = {"kind": "replicate", "error": error, "traceback": text}
    estimate[failed] = last[failed] = np.nan  # a failed replicate has no values
    alive = np.flatnonzero(~failed)
    users: dict[int, Users] = {}
    if setup.own_estimate:
        for i in alive:
            users[int(i)] = rs.users(tuple(np.uint64(w) for w in start_state(int(i))))
    projected = np.full((count, n_points, d), np.nan)
    if setup.radius is not None and len(alive):
        projected[alive] = project_l1_ball(estimate[alive], setup.radius)

    def streams(label: str, point: int, rows: np.ndarray) -> ChunkStreams | None:
        if label not in stream_labels:
            return None
        by_states = None if states_of is None else functools.partial(states_of, label)
        return ChunkStreams(
            lambda i: stream_of(label, i), rows, None if point == rs.n else point, by_states
        )

    warm_up = 0.0
    cold = setup.cold_methods  # empty after a set-up's first replicates: nothing to do
    if cold and not cold.isdisjoint(chosen) and len(alive):
        row = int(alive[0])
        first_calls = {label: method for label, method in chosen.items() if label in cold}
        rngs = {label: stream_of(label, row) for label in first_calls if label in stream_labels}
        # ldpsim's own methods of the statistics make their first calls in this process
        # (their batched path on this row too) one process of the host at a time, so
        # that a cluster's workers starting together compile the functions they reach
        # once; once per class and path, as that code does not depend on the model. The
        # competitors' replays and the plugins' methods warm up side by side.
        model_name, mechanism_name = rs.model.name, rs.mechanism.name
        batched = {
            label
            for label, method in first_calls.items()
            if has_batch(method) and label not in per_replicate
        }
        own = [
            label
            for label, method in first_calls.items()
            if is_builtin(method)
            and not method.own_estimate
            and (
                (type(method), "one") not in IN_TURN_WARM
                or (label in batched and (type(method), "batch") not in IN_TURN_WARM)
            )
        ]

        def first_calls_of(labels: Collection[str]) -> float:
            chosen_calls = {label: first_calls[label] for label in labels}
            return warm_up_methods(
                chosen_calls,
                model_name,
                mechanism_name,
                rs.level,
                stats.replicate(row),
                users.get(row),
                rngs,
            )

        if own:
            start_warm_up = time.perf_counter()  # the wait for the lock included
            with compile_lock.package_lock():
                first_calls_of(own)
                one_row = np.array([row])
                for label in own:
                    method = first_calls[label]
                    IN_TURN_WARM.add((type(method), "one"))
                    if label not in batched:
                        continue
                    try:
                        with np.errstate(all="ignore"):
                            batch_bounds(
                                method,
                                stats.rows(one_row),
                                rs.level,
                                streams(label, rs.n, one_row),
                            )
                    except Exception:  # the timed pass records it; here only the start-up
                        pass
                    IN_TURN_WARM.add((type(method), "batch"))
            warm_up = time.perf_counter() - start_warm_up
        warm_up += first_calls_of([label for label in first_calls if label not in own])
        cold.difference_update(first_calls)

    def one_by_one(m: int, k: int, rows: Iterable[int], spent: float = 0.0) -> None:
        # The method ``labels[m]`` at point k for each of ``rows``, alone: the reference
        # for every method, and the path of those without a batched one. A method with
        # a batched path fails a cell as that path does, by a bound that is not finite
        # (floating-point warnings alone, an underflow, fail nothing), and is then run
        # once more, from the same stream, with numpy raising (underflows aside), to
        # name the operation that went wrong; one without keeps numpy raising
        # throughout (issue 23's rule).
        label, point = labels[m], points[k]
        method, sub = chosen[label], subs[k]
        by_rows = has_batch(method)

        def cell(i: int, **errors: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            rng = streams(label, point, np.array([i]))
            with np.errstate(**errors):
                return method_cell(
                    method,
                    sub.replicate(i),
                    users.get(i),
                    rs.level,
                    None if rng is None else rng[0],
                    setup.radius,
                )

        for i in rows:
            method_start = time.perf_counter()
            seconds = None  # the cell's own time, without a run again for its reason
            try:
                centre, lo, hi = cell(i, all="ignore" if by_rows else "raise")
                if not finite_bounds(lo, hi):
                    seconds = time.perf_counter() - method_start
                    if by_rows:  # numpy names the operation, where it can
                        cell(i, all="raise", under="ignore")
                    raise FloatingPointError("non-finite interval bound")
            except Exception as exc:  # any type: only this cell is lost
                method_failed[m, i, k] = True
                reasons = failures.setdefault(i, {})
                if raise_failures or label not in reasons:
                    reason = f"{type(exc).__name__}{where_of(point)}: {exc}"
                    if raise_failures:
                        raise MethodFailure(label, reason) from exc
                    reasons[label] = reason
                    tracebacks.setdefault(i, {})[label] = traceback.format_exc()
                continue
            finally:
                if seconds is None:
                    seconds = time.perf_counter() - method_start
                method_seconds[m, i, k] = spent + seconds
            lower[m, i, k], upper[m, i, k] = lo, hi
            method_estimate[m, i, k] = centre

    for k, point in enumerate(points):
        sub = subs[k] if len(alive) == count else subs[k].rows(alive)
        for m, label in enumerate(labels):
            method = chosen[label]
            if not has_batch(method) or label in per_replicate or not len(alive):
                one_by_one(m, k, (int(i) for i in alive))
                continue
            method_start = time.perf_counter()
            try:
                with np.errstate(all="ignore"):  # non-finite bounds mark their rows
                    lo, hi = batch_bounds(method, sub, rs.level, streams(label, point, alive))
                    if method.intersect_constraint:
                        lo, hi = intersect_with_ball(lo, hi, setup.radius)
            except Exception as exc:  # the batched call as a whole: each replicate alone
                if raise_batch_shapes and isinstance(exc, BatchShapeError):
                    raise
                one_by_one(m, k, (int(i) for i in alive))
                continue
            ok = np.isfinite(lo).all(axis=1) & np.isfinite(hi).all(axis=1)
            rows = alive[ok]
            lower[m, rows, k], upper[m, rows, k] = lo[ok], hi[ok]
            method_estimate[m, rows, k] = estimate[rows, k]
            share = (time.perf_counter() - method_start) / len(alive)
            method_seconds[m, alive, k] = share
            # Each replicate that failed, alone: its exception and traceback.
            one_by_one(m, k, (int(i) for i in alive[~ok]), share)

    for i, reasons in failures.items():
        errors[i] = {
            "kind": "method",
            "error": "; ".join(f"{label}: {reason}" for label, reason in reasons.items()),
            "methods": reasons,
            "tracebacks": tracebacks[i],
        }
    seconds = np.full(count, np.nan)
    if len(alive):
        seconds[alive] = (time.perf_counter() - start - warm_up) / len(alive)
    return {
        "estimate": estimate,
        "last": last,
        "projected": projected,
        "lower": lower,
        "upper": upper,
        "method_estimate": method_estimate,
        "method_failed": method_failed,
        "method_seconds": method_seconds,
        "failed": failed,
        "seconds": seconds,
        "warm_up_seconds": warm_up,
        "errors": errors,
    }


class BatchDisagreement(ValueError):
    """A plugin method's ``intervals_batch`` gives other intervals than its ``interval``;
    the message is one line."""


class BatchShapeError(BatchDisagreement):
    """A method's ``intervals_batch`` returned arrays of another shape than (R, d)."""


def batch_bounds(
    method: IntervalMethod,
    stats: StackedStats,
    level: float,
    rngs: Sequence[np.random.Generator] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``method.intervals_batch``, its result checked: two float arrays (R, d).

    Raises
    ------
    BatchShapeError
        The method returned arrays of another shape.
    """
    lower, upper = method.intervals_batch(stats, level, rngs)
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    shape = (stats.count, stats.dim)
    if lower.shape != shape or upper.shape != shape:
        unit = type(method)
        raise BatchShapeError(
            f"The interval method {method.name!r} ({unit.__module__}.{unit.__qualname__}): "
            f"its intervals_batch must return (lower, upper) of shape (R, d) = {shape} "
            f"for {stats.count} replicates of d = {stats.dim}; got {lower.shape} and "
            f"{upper.shape} (docs/extending.md)."
        )
    return lower, upper


def is_builtin(unit: object) -> bool:
    """Whether ``unit`` (an interval method, model or mechanism) is one of ldpsim's own
    (not a plugin's)."""
    return type(unit).__module__.startswith("ldpsim.")


def check_batch_api(rs: ReplicateSpec, reps: Iterable[int]) -> int | None:
    """Compute replicates ``reps`` of the grid point ``rs`` by each plugin method's
    ``intervals_batch`` and by its ``interval``, one replicate at a time; refuse a method
    whose two ways disagree.

    They agree when the same replicates fail (at each point) and every bound differs by
    at most :data:`BATCH_RTOL` of the largest bound's magnitude (the order of a sum).
    The chains run on the CPU (a GPU grid point's included: the check is of the
    method's code, not of the chains).

    Returns
    -------
    int or None
        The number of methods checked (those of plugins that have ``intervals_batch``);
        None where the grid point cannot be set up (a singular ``jacobian()``), so that
        nothing is compared there (its replicates fail on the workers, recorded).

    Raises
    ------
    BatchDisagreement
        One line naming the method, the replicate, the point and the bound; or
        (:class:`BatchShapeError`) the shapes, where ``intervals_batch`` returned arrays
        of another shape than (R, d).
    """
    chosen = {
        label: method
        for label, method in rs.methods.items()
        if has_batch(method) and not is_builtin(method)
    }
    if not chosen:
        return 0
    if rs.backend != "cpu":
        rs = dataclasses.replace(rs, backend="cpu")
    try:
        setup = GridPointSetup.of(rs)
    except Exception as exc:
        from ldpsim.tasks.plugins import plugin_code_error

        if plugin_code_error(exc) is not None:
            raise  # a plugin's own code: one line on the client (plugin_code_errors)
        # The grid point cannot be set up (a singular jacobian: numpy's LinAlgError), so
        # no replicate of it computes an interval either way: nothing to compare. Its
        # replicates fail on the workers, recorded, as without intervals_batch; raised
        # here it was a traceback on the client instead (a hunt, 2026-12-02).
        return None
    reps = [int(rep) for rep in reps]
    raw, chain_errors = run_chains(setup, reps)

    def both(per_replicate: Collection[str]) -> dict[str, Any]:
        return compute_rows(  # a wrong shape by intervals_batch refused, not passed over
            setup,
            raw,
            chosen,
            start=time.perf_counter(),
            start_state=lambda i: setup.data_state(reps[i]),
            stream_of=lambda label, i: setup.method_streams(reps[i])[label],
            stream_labels=setup.method_words,
            chain_errors=chain_errors,
            per_replicate=per_replicate,
            raise_batch_shapes=True,
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batched, alone = both(()), both(chosen)
    points = rs.checkpoints or (rs.n,)
    for m, label in enumerate(chosen):
        for name in ("lower", "upper"):
            got, want = batched[name][m], alone[name][m]
            scale = np.nanmax(np.abs(want), initial=0.0)
            apart = np.isnan(got) != np.isnan(want)
            apart |= np.abs(got - want) > BATCH_RTOL * scale
            if apart.any():
                i, k, j = (int(v) for v in np.argwhere(apart)[0])
                where = f" at n = {points[k]}" if rs.checkpoints else ""
                unit = type(chosen[label])
                raise BatchDisagreement(
                    f"The interval method {label!r} ({unit.__module__}.{unit.__qualname__}): "
                    f"its intervals_batch disagrees with its interval on replicate "
                    f"{reps[i]}{where}, {name} bound of coordinate {j}: "
                    f"{float(got[i, k, j])!r} by intervals_batch, {float(want[i, k, j])!r} "
                    "by interval; make them agree "
                    "(docs/extending.md), or remove intervals_batch."
                )
    return len(chosen)
