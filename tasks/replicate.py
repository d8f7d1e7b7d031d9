"""One simulation replicate: data -> LDP-SGD -> intervals by every method."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsim.tasks.l1_projection import intersect_with_ball, project_l1_ball
from ldpsim.tasks.rng import set_state, state_of
from ldpsim.tasks.seeding import data_stream, method_stream
from ldpsim.tasks.sgd import ldp_sgd
from ldpsim.tasks.spec import ReplicateSpec, normalize_spec
from ldpsim.tasks.stats import StreamingStats
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import check_int


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
    ``seconds`` is the whole replicate's.
    A method that failed has NaN bounds where it failed, True in ``method_failed`` there
    (shape (), or (n_checkpoints,)) and its first reason in ``failures``; a non-finite
    estimate (overflowing iterates) is recorded under ``failures['estimate']``.
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


def replicate_cuts(rs: ReplicateSpec) -> np.ndarray:
    """Segment ends the kernel must record: every method's partition at every checkpoint,
    the checkpoints, and the powers of two (extra recentring points)."""
    n = rs.n
    parts = [np.array([n], dtype=np.int64), 2 ** np.arange(0, n.bit_length(), dtype=np.int64)]
    for point in rs.checkpoints or (n,):
        parts.append(np.array([point], dtype=np.int64))
        for method in rs.methods.values():
            if method.own_estimate:
                continue  # computes from the users, not from the run's segments
            try:
                parts.append(method.cuts(point, rs.gamma))
            except ValueError:
                continue  # cannot be computed at this checkpoint; recorded as a failure
    cuts = np.unique(np.concatenate(parts))
    return cuts[(cuts >= 1) & (cuts <= n)]


def needs_full_matrix(rs: ReplicateSpec) -> bool:
    """Whether a method of ``rs`` reads the whole d x d matrix A of the self-normalizer.

    Otherwise the kernel keeps only its diagonal: a step then costs O(d), not O(d^2).
    """
    return any(method.needs_full_matrix for method in rs.methods.values())


def run_kernel(rs: ReplicateSpec, cuts: np.ndarray, data_rng: np.random.Generator) -> tuple:
    """Call :func:`ldpsim.tasks.sgd.ldp_sgd` for ``rs`` with segment ends ``cuts``; its raw output.

    The kernel draws from ``data_rng``'s PCG64 state inline (:mod:`ldpsim.tasks.rng`) and the
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


def run_stats(rs: ReplicateSpec, data_rng: np.random.Generator) -> StreamingStats:
    """Run the LDP-SGD kernel on the stream ``data_rng``; wrap its streaming statistics.

    The statistics hold all of A, or its diagonal, as the methods of ``rs`` need
    (:func:`needs_full_matrix`).
    """
    model, mechanism = rs.model, rs.mechanism
    cuts = replicate_cuts(rs)
    _, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta = run_kernel(rs, cuts, data_rng)
    return StreamingStats(
        n=rs.n,
        cuts=cuts,
        seg_dev=seg_dev,
        seg_shift=seg_shift,
        snap_t=snap_t,
        snap_b=snap_b,
        snap_a=snap_a,
        snap_theta=snap_theta,
        gamma=rs.gamma,
        asymptotic_cov=model.asymptotic_cov(mechanism.variance(model), rs.batch),
    )


def run_replicate(spec: Mapping[str, Any] | ReplicateSpec, rep: int) -> ReplicateResult:
    """Run replicate ``rep`` of ``spec``: a pure function of its arguments.

    Parameters
    ----------
    spec : mapping or ReplicateSpec
        See :func:`ldpsim.tasks.spec.normalize_spec`.
    rep : int
        Replicate index, >= 0. Together with the seed and the values of the spec it
        determines every random number (SPEC section 6).

    Returns
    -------
    ReplicateResult
    """
    rs = spec if isinstance(spec, ReplicateSpec) else normalize_spec(spec)
    rep = check_int(rep, "rep", low=0)
    streams = {
        label: method_stream(rs.seed, rs.path_key(), rep, rs.method_key(label))
        for label, method in rs.methods.items()
        if method.uses_rng
    }
    return compute_replicate(rs, data_stream(rs.seed, rs.path_key(), rep), streams)


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
    """
    start = time.perf_counter()
    users = Users.of(rs, state_of(data_rng))
    stats = run_stats(rs, data_rng)
    points = rs.checkpoints or (rs.n,)
    d = rs.model.dim
    estimate = np.empty((len(points), d))
    last = np.empty((len(points), d))
    lower = {label: np.full((len(points), d), np.nan) for label in rs.methods}
    upper = {label: np.full((len(points), d), np.nan) for label in rs.methods}
    method_estimate = {label: np.full((len(points), d), np.nan) for label in rs.methods}
    method_seconds = {label: np.full(len(points), np.nan) for label in rs.methods}
    method_failed = {label: np.zeros(len(points), dtype=bool) for label in rs.methods}
    failures: dict[str, str] = {}
    radius = rs.model.constraint_radius()
    projected = None if radius is None else np.full((len(points), d), np.nan)
    for k, point in enumerate(points):
        sub = stats if point == rs.n else stats.prefix(point)
        estimate[k] = sub.theta_bar
        last[k] = sub.last_iterate
        if not np.all(np.isfinite(estimate[k])):
            where = f" at n = {point}" if rs.checkpoints else ""
            failures.setdefault(
                "estimate", f"non-finite theta_bar{where}: the iterates overflowed"
            )
        elif projected is not None:
            projected[k] = project_l1_ball(estimate[k], radius)
        for label, method in rs.methods.items():
            rng = method_rngs.get(label)
            if rng is not None and point != rs.n:
                rng = checkpoint_stream(rng, point)
            method_start = time.perf_counter()
            try:
                with np.errstate(all="raise"):
                    if method.own_estimate:
                        centre, lo, hi = method.estimate_interval(users, rs.level, rng)
                    else:
                        centre = estimate[k]
                        lo, hi = method.interval(sub, rs.level, rng)
                if method.intersect_constraint:  # |theta*_j| <= r (checked in the spec)
                    lo, hi = intersect_with_ball(lo, hi, radius)
                if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
                    raise FloatingPointError("non-finite interval bound")
            except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
                where = f" at n = {point}" if rs.checkpoints else ""
                failures.setdefault(label, f"{type(exc).__name__}{where}: {exc}")
                method_failed[label][k] = True
                continue
            finally:
                method_seconds[label][k] = time.perf_counter() - method_start
            lower[label][k], upper[label][k] = lo, hi
            method_estimate[label][k] = centre
    seconds = time.perf_counter() - start
    if rs.checkpoints is None:
        estimate, last = estimate[0], last[0]
        projected = None if projected is None else projected[0]
        lower = {k: v[0] for k, v in lower.items()}
        upper = {k: v[0] for k, v in upper.items()}
        method_failed = {k: v.reshape(()) for k, v in method_failed.items()}
        method_estimate = {k: v[0] for k, v in method_estimate.items()}
        method_seconds = {k: v.reshape(()) for k, v in method_seconds.items()}
    return ReplicateResult(
        estimate=estimate,
        last=last,
        truth=rs.model.truth(),
        lower=lower,
        upper=upper,
        seconds=seconds,
        checkpoints=rs.checkpoints,
        failures=failures,
        method_failed=method_failed,
        method_estimate=method_estimate,
        method_seconds=method_seconds,
        projected=projected,
    )
