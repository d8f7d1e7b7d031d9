"""One simulation replicate: data -> LDP-SGD -> intervals by every method."""

from __future__ import annotations

import time
import traceback
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsim.tasks.grid_point import (
    GridPointSetup,
    needs_full_matrix,
    setup_of,
)
from ldpsim.tasks.kernel.sgd import ldp_sgd
from ldpsim.tasks.l1_projection import intersect_with_ball, project_l1_ball
from ldpsim.tasks.spec import ReplicateSpec
from ldpsim.tasks.stats import StreamingStats
from ldpsim.tasks.streams.rng import set_state, state_of
from ldpsim.tasks.validation import check_int
from ldpsim.tasks.warm_up import warm_up_methods


@dataclass(frozen=True)
class ReplicateResult:
    """What one replicate returns; small and picklable.

    ``estimate`` is the average theta_bar_n, ``last`` the last iterate theta_n (each at
    every checkpoint when the spec has them). ``projected`` is the projection of
    theta_bar_n onto the l1 ball of radius r that the model states theta* lies in
    (:meth:`ldpsim.tasks.models.base.Model.constraint_radius`; SPEC 11), None for a
    model that states none. Arrays have shape (d,), or (n_checkpoints, d) when the spec
    has checkpoints. ``method_estimate`` is each method's point estimate (theta_bar_n
    for bb, bm, sn and the oracle; a competitor's own, SPEC 10) and ``method_seconds``
    the compute time of each method (shape (), or (n_checkpoints,)): its interval from
    the statistics, or for a competitor all its work (replaying the users included);
    ``seconds`` is the whole replicate's. ``warm_up_seconds``: the first calls of the
    methods in this process, made before the timed pass and counted in neither
    (:mod:`ldpsim.tasks.warm_up`); 0 but for a process's first replicate of a method,
    model and mechanism.
    A method that failed (any exception from it, of any type) has NaN bounds where it
    failed, True in ``method_failed`` there (shape (), or (n_checkpoints,)), its first
    reason in ``failures`` and that exception's traceback in ``method_tracebacks``; the
    other methods are unaffected. A run whose theta_bar is not finite gives no result:
    :func:`replicate_from_state` raises :class:`ldpsim.tasks.diagnose.NonFiniteRun`.
    """

    estimate: np.ndarray
    last: np.ndarray
    truth: np.ndarray
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    seconds: float
    checkpoints: tuple[int, ...] | None = None
    failures: dict[str, str] = field(default_factory=dict)
    method_failed: dict[str, np.ndarray] = field(default_factory=dict)
    method_estimate: dict[str, np.ndarray] = field(default_factory=dict)
    method_seconds: dict[str, np.ndarray] = field(default_factory=dict)
    projected: np.ndarray | None = None
    method_tracebacks: dict[str, str] = field(default_factory=dict)
    warm_up_seconds: float = 0.0


class MethodFailure(Exception):
    """An interval method's exception, raised instead of recorded.

    Raised by :func:`replicate_from_state` with ``raise_failures=True`` (``ldpsim
    replay``, which reruns a recorded method failure); the method's own exception, with
    its traceback, is the ``__cause__``.

    Attributes
    ----------
    label : str
        The method's label in the spec.
    reason : str
        The text a :class:`ReplicateResult` records for it in ``failures``
        (``"ValueError at n = 3: bb needs at least 2 blocks; n = 3 gives 1."``).
    """

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(label, reason)
        self.label, self.reason = label, reason

    def __str__(self) -> str:
        return f"method {self.label}: {self.reason}"


def run_kernel(rs: ReplicateSpec, cuts: np.ndarray, data_rng: np.random.Generator) -> tuple:
    """Call :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` for ``rs`` with segment ends ``cuts``;
    its raw output.

    The kernel draws from ``data_rng``'s PCG64 state inline
    (:mod:`ldpsim.tasks.streams.rng`) and the
    advanced state is written back, as if ``data_rng`` itself had drawn the numbers. It keeps
    all of A only where a method of ``rs`` needs it (:func:`needs_full_matrix`).
    """
    model, mechanism = rs.model, rs.mechanism
    st = np.array(state_of(data_rng), dtype=np.uint64)
    out = ldp_sgd(
        type(model).sample_gradient,
        mechanism.callback(),
        model.params(),
        mechanism.params(model),
        np.array(rs.theta0, dtype=np.float64),
        rs.c,
        rs.gamma,
        rs.batch,
        np.asarray(cuts, dtype=np.int64),
        st,
        project=type(model).project,
        full_matrix=needs_full_matrix(rs),
    )
    set_state(data_rng, st)
    return out


def run_stats(
    rs: ReplicateSpec, data_rng: np.random.Generator, setup: GridPointSetup | None = None
) -> StreamingStats:
    """Run the LDP-SGD kernel on the stream ``data_rng``; wrap its streaming statistics.

    The statistics hold all of A, or its diagonal, as the methods of ``rs`` need
    (:func:`needs_full_matrix`). ``setup``: the grid point's set-up, if the caller has
    it (:class:`ldpsim.tasks.grid_point.GridPointSetup`; built here otherwise).
    """
    setup = GridPointSetup.of(rs) if setup is None else setup
    state = np.array(state_of(data_rng), dtype=np.uint64)
    stats = setup.stats(setup.run_kernel(setup.cuts, state))
    set_state(data_rng, state)
    return stats


def run_replicate(
    spec: Mapping[str, Any] | ReplicateSpec | GridPointSetup, rep: int
) -> ReplicateResult:
    """Run replicate ``rep`` of ``spec``: a pure function of its arguments.

    Parameters
    ----------
    spec : mapping, ReplicateSpec or GridPointSetup
        See :func:`ldpsim.tasks.spec.normalize_spec`. A mapping's set-up is kept per
        process (:func:`ldpsim.tasks.grid_point.setup_of`); a task that runs many
        replicates of one grid point passes its :class:`GridPointSetup`.
    rep : int
        Replicate index, >= 0. Together with the seed and the values of the spec it
        determines every random number (SPEC section 6).

    Returns
    -------
    ReplicateResult

    Raises
    ------
    NonFiniteRun
        The SGD run's theta_bar is not finite; the message names the model or
        mechanism and the step where a non-finite value appeared, or the step where the
        iterates overflowed and the step size to lower (:mod:`ldpsim.tasks.diagnose`).
    """
    if isinstance(spec, GridPointSetup):
        setup = spec
    elif isinstance(spec, ReplicateSpec):
        setup = GridPointSetup.of(spec)
    else:
        setup = setup_of(spec)
    rep = check_int(rep, "rep", low=0)
    state, raw = replicate_start(setup, rep)
    return replicate_from_state(setup, state, setup.method_streams(rep), raw=raw)


def replicate_start(setup: GridPointSetup, rep: int) -> tuple[np.ndarray | None, tuple | None]:
    """Where replicate ``rep`` of ``setup`` starts: ``(state, raw)`` for
    :func:`replicate_from_state`.

    On the CPU backend the PCG64 state of its data stream and None; on the GPU backend
    None and its chain's output, from a launch of this replicate alone (its numbers do
    not depend on the launch).
    """
    if setup.spec.backend == "gpu":
        from ldpsim.tasks.grid_point import gpu_row

        return None, gpu_row(setup.run_gpu([rep]), 0)
    return setup.data_state(rep), None


def checkpoint_stream(rng: np.random.Generator, point: int) -> np.random.Generator:
    """A child of a method's stream for the checkpoint ``point`` (< n).

    The stream of the last point n is the method's own, so a method's interval at n is
    the same with or without checkpoints, and one checkpoint does not shift another.
    """
    seq = rng.bit_generator.seed_seq
    child = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, int(point)))
    return np.random.Generator(np.random.PCG64(child))


def compute_replicate(
    rs: ReplicateSpec,
    data_rng: np.random.Generator,
    method_rngs: Mapping[str, np.random.Generator],
    setup: GridPointSetup | None = None,
) -> ReplicateResult:
    """The replicate on given streams (:func:`run_replicate` derives them from the seed).

    Parameters
    ----------
    rs : ReplicateSpec
        Normalized specification.
    data_rng : numpy.random.Generator
        Stream of the data and the privacy noise.
    method_rngs : mapping label -> Generator
        One stream per method that draws random numbers (``uses_rng``).
    setup : GridPointSetup, optional
        The set-up of ``rs`` (:class:`ldpsim.tasks.grid_point.GridPointSetup`), shared
        by the replicates of a task; built here when not given.
    """
    setup = GridPointSetup.of(rs) if setup is None else setup
    state = np.array(state_of(data_rng), dtype=np.uint64)
    result = replicate_from_state(setup, state, method_rngs)
    set_state(data_rng, state)
    return result


def replicate_from_state(
    setup: GridPointSetup,
    state: np.ndarray,
    method_rngs: Mapping[str, np.random.Generator],
    *,
    methods: Collection[str] | None = None,
    raise_failures: bool = False,
    raw: tuple | None = None,
) -> ReplicateResult:
    """The replicate of ``setup`` whose data stream starts at the PCG64 ``state``.

    This is the one place a replicate is computed: ``ldpsim replay`` reruns a recorded
    method failure through it too (``methods``, ``raise_failures``), so that it
    computes what the task computed.

    Parameters
    ----------
    setup : GridPointSetup
        The grid point's set-up.
    state : ndarray of uint64, shape (4,), or None
        The data-and-noise stream's state (:func:`ldpsim.tasks.streams.rng.state_of`);
        advanced in place by the run. None with ``raw``.
    method_rngs : mapping label -> Generator
        One stream per method that draws random numbers (``uses_rng``).
    methods : collection of str, optional
        Labels of the spec's methods to compute; the result holds these only, in the
        spec's order. Default: every method. A method's values do not depend on which
        others run (each has its own stream).
    raise_failures : bool, default False
        Raise a method's exception, as :class:`MethodFailure`, instead of recording it
        in the result.
    raw : tuple, optional
        The kernel's output for this replicate, computed already (the GPU backend's
        launch, :meth:`ldpsim.tasks.grid_point.GridPointSetup.run_gpu`): the kernel is
        not run and ``state`` is not used (None).

    Raises
    ------
    NonFiniteRun
        The run's theta_bar is not finite (:func:`run_replicate`).
    MethodFailure
        A method raised, with ``raise_failures``; the first, in the order checkpoint,
        then method.
    ValueError
        ``methods`` names a label the spec does not have.
    """
    start = time.perf_counter()
    rs = setup.spec
    chosen = dict(rs.methods)
    if methods is not None:
        unknown = sorted(set(methods) - set(chosen))
        if unknown:
            raise ValueError(
                f"The 'methods' parameter names labels the spec does not have: "
                f"{', '.join(map(repr, unknown))}; its methods are {', '.join(chosen)}."
            )
        chosen = {label: method for label, method in chosen.items() if label in methods}
    users = rs.users(tuple(np.uint64(w) for w in state)) if setup.own_estimate else None
    # The kernel advances state in place; a diagnosis replays from its start.
    start_state = None if state is None else state.copy()
    if raw is None:
        raw = setup.run_kernel(setup.cuts, state)
    stats = setup.stats(raw)
    points = rs.checkpoints or (rs.n,)
    labels = list(chosen)
    d, n_points, n_methods = rs.model.dim, len(points), len(labels)
    estimate = np.empty((n_points, d))
    last = np.empty((n_points, d))
    lower = np.full((n_methods, n_points, d), np.nan)
    upper = np.full((n_methods, n_points, d), np.nan)
    method_estimate = np.full((n_methods, n_points, d), np.nan)
    method_seconds = np.full((n_methods, n_points), np.nan)
    method_failed = np.zeros((n_methods, n_points), dtype=bool)
    failures: dict[str, str] = {}
    tracebacks: dict[str, str] = {}
    radius = setup.radius
    projected = None if radius is None else np.full((n_points, d), np.nan)
    warm_up = 0.0
    cold = setup.cold_methods  # empty after a set-up's first replicates: nothing to do
    if cold and not cold.isdisjoint(chosen) and np.isfinite(stats.theta_bar).all():
        # (a failed run, below, runs no method)
        first_calls = {label: method for label, method in chosen.items() if label in cold}
        warm_up = warm_up_methods(
            first_calls, rs.model.name, rs.mechanism.name, rs.level, stats, users, method_rngs
        )
        cold.difference_update(first_calls)
    for k, point in enumerate(points):
        sub = stats if point == rs.n else stats.prefix(point)
        estimate[k] = sub.theta_bar
        last[k] = sub.last_iterate
        where = f" at n = {point}" if rs.checkpoints else ""
        if not np.isfinite(estimate[k]).all():  # the run failed: so does the replicate
            # Imported here: the diagnosis compiles a checked loop, needed on failure only.
            from ldpsim.tasks.diagnose import NonFiniteRun, diagnose_nonfinite

            if start_state is None:  # the GPU's run: its replay on the CPU has other streams
                raise NonFiniteRun(
                    f"non-finite theta_bar{where} on the GPU backend (the step where it "
                    "appeared is found on the CPU: run the grid point with backend = cpu)"
                )
            try:
                diagnosis = diagnose_nonfinite(setup, start_state)
            except Exception as exc:  # the replay itself failed: say so, keep the failure
                diagnosis = f"the replay that finds the step failed ({type(exc).__name__}: {exc})"
            raise NonFiniteRun(f"non-finite theta_bar{where}: {diagnosis}")
        if projected is not None:
            projected[k] = project_l1_ball(estimate[k], radius)
        with np.errstate(all="raise"):
            for i, (label, method) in enumerate(chosen.items()):
                rng = method_rngs.get(label)
                if rng is not None and point != rs.n:
                    rng = checkpoint_stream(rng, point)
                method_start = time.perf_counter()
                try:
                    if method.own_estimate:
                        centre, lo, hi = method.estimate_interval(users, rs.level, rng)
                    else:
                        centre = estimate[k]
                        lo, hi = method.interval(sub, rs.level, rng)
                    if method.intersect_constraint:  # |theta*_j| <= r (checked in the spec)
                        lo, hi = intersect_with_ball(lo, hi, radius)
                    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
                        raise FloatingPointError("non-finite interval bound")
                except Exception as exc:  # any type: only this method's bounds are lost
                    if raise_failures or label not in failures:
                        reason = f"{type(exc).__name__}{where}: {exc}"
                        if raise_failures:
                            raise MethodFailure(label, reason) from exc
                        failures[label] = reason
                        tracebacks[label] = traceback.format_exc()
                    method_failed[i, k] = True
                    continue
                finally:
                    method_seconds[i, k] = time.perf_counter() - method_start
                lower[i, k], upper[i, k] = lo, hi
                method_estimate[i, k] = centre
    seconds = time.perf_counter() - start - warm_up
    first = 0 if rs.checkpoints is None else slice(None)  # no checkpoint axis without them
    if rs.checkpoints is None:
        estimate, last = estimate[0], last[0]
        projected = None if projected is None else projected[0]
    return ReplicateResult(
        estimate=estimate,
        last=last,
        truth=setup.truth,
        lower=dict(zip(labels, lower[:, first], strict=True)),
        upper=dict(zip(labels, upper[:, first], strict=True)),
        seconds=seconds,
        checkpoints=rs.checkpoints,
        failures=failures,
        method_failed=dict(zip(labels, method_failed[:, first], strict=True)),
        method_estimate=dict(zip(labels, method_estimate[:, first], strict=True)),
        method_seconds=dict(zip(labels, method_seconds[:, first], strict=True)),
        projected=projected,
        method_tracebacks=tracebacks,
        warm_up_seconds=warm_up,
    )
