"""How long LDP-SGD work takes on one core: the estimate behind long-run warnings and the ETA."""

from __future__ import annotations

import math

from ldpsim.pipeline.sweep import Sweep
from ldpsim.tasks.spec import ReplicateSpec

#: Nanoseconds per SGD step of the compiled kernel, all streaming statistics on, on the
#: project's 2-core machine (docs/performance.md, `benchmarks/kernels.py`, upper ends
#: of the measured ranges): quantile + randomized response (d = 1) 6.4 ns; quantile
#: regression with d = 4 and Laplace noise 59 ns. Steps in between are taken linear in d
#: through these two points.
STEP_NS_D1 = 6.4
STEP_NS_D4 = 59.0
#: Nanoseconds per step and coordinate beyond d = 4 for a model with sparse gradients,
#: where the d noise draws and the per-coordinate statistics are the whole step. The
#: `sparse` sweep's replicates of sparse_mean at d = 1000, n = 1e6 (9 cases: sparse and
#: dense Laplace, Gaussian) took 3.8-5.3 s each (medians per case; 4.37 s the median
#: case), two workers on the 2-core machine: (4370 - 59) / 996 = 4.3 ns, taken as 4.4.
#: The same line gives 0.085 s at d = 10 and 0.48 s at d = 100, where that sweep
#: measured medians of 0.06-0.09 s and 0.46-0.87 s; the sweep's 4,800 replicates are
#: estimated at 8,980 core-seconds against 9,419 measured.
STEP_NS_PER_COORDINATE = 4.4
#: Seconds of one replicate's intervals at one checkpoint, bb's multipliers apart: bm,
#: sn, the oracle and bb's set-up, computed for a whole chunk at once (issue 42). Per
#: replicate of a chunk of 2,000 (quantile, randomized response, n = 1e3; `benchmarks/
#: pipeline.py`'s ``replicate_split``, 2026-11-29, with `benchmarks/kernels.py` at 20.5
#: ns a quantile step, 3.2 times the 6.4 of :data:`STEP_NS_D1`): bm 0.62-0.85 us, sn
#: 0.15, oracle 0.07, about 0.3 us scaled; taken as 1 us.
INTERVAL_SECONDS = 1.0e-6
#: Nanoseconds of bb per multiplier (B) and coordinate at one checkpoint: the same
#: measurement gave bb 11.1 us with B = 200 and 31.4 us with B = 500 at n = 1e3 (20.5 and
#: 44.3 us at n = 1e4): 68-79 ns per multiplier, 21-25 ns scaled by 3.2; taken as 25.
BB_NS_PER_MULTIPLIER = 25.0
#: Per-replicate seeding, chain set-up, copies into the chunk's arrays and the pipeline's
#: share of a task. The same measurement: a replicate of the chunk cost 50.4 us with B =
#: 200, of which the kernel's 1,000 steps 20.5 us and the methods 12.2 us: 17.7 us left,
#: 5.5 us scaled by 3.2; taken as 6 us. (Before the chunk was computed whole: 150 us.)
REPLICATE_OVERHEAD_S = 6.0e-6
#: The competitors of SPEC 10, which do their own work on the users: method name ->
#: (the parameter that multiplies the work per user, nanoseconds per user and unit of
#: it for the quantile and the mean model). CPU seconds per replicate at n = 1e6, eps = 1
#: on the project's 2-core machine while it ran another sweep (quantile / mean):
#: fang 1.14 / 1.20 s with B + 1 = 51 chains; np_boot 0.11 / 5.22 s with B = 200 (the
#: quantile's resampling is exact and cheap, the mean's draws n users per resample);
#: cdp_blb_var 0.39 / 3.92 s and cdp_blb_pct 0.31 / 3.95 s with R = 50 (the mean's
#: Multinomial draws, R n of them whatever eps; the quantile draws only the counts
#: near rank tau n).
COMPETITOR_NS: dict[str, tuple[str, dict[str, float]]] = {
    "fang": ("B", {"quantile": 22.4, "mean": 23.5}),
    "np_boot": ("B", {"quantile": 0.54, "mean": 26.1}),
    "cdp_blb_var": ("R", {"quantile": 7.8, "mean": 78.4}),
    "cdp_blb_pct": ("R", {"quantile": 6.2, "mean": 79.0}),
}
#: Nanoseconds per user of each ``nprr`` method (SPEC 12): replaying the users and
#: privatizing them. CPU seconds of one replicate at n = 1e6, eps = 1 (mean, d = 1; the
#: replay is shared, so the first method pays it): 0.067, 0.041 and 0.036 s for the
#: Hoeffding, running and sequence bounds, 0.144 s for the three, 48 ns per user each.
NPRR_NS_PER_USER = 48.0
#: Sweeps estimated above this many core-seconds need ``ldpsim run --yes``.
LONG_RUN_SECONDS = 86_400.0


def step_seconds(dim: int, sparse: bool = False) -> float:
    """Seconds of one SGD step (one privatized gradient) of a model of dimension ``dim`` >= 1.

    Measured for d = 1 and d = 4 and linear in d through these two points. For a model
    with sparse gradients (``sparse``: it declares a gradient sparsity) beyond d = 4,
    :data:`STEP_NS_PER_COORDINATE` per further coordinate instead: there the d noise
    draws and the per-coordinate sums are the whole step (the kernel keeps only the
    diagonal of A unless a method needs the full d x d matrix, which this leaves out).
    The dense models beyond d = 4 (huber_regression at d = 7: 0.68-1.86 s per 1e7
    steps in `shi-coverage`, 1.12 s estimated) do more per coordinate than sparse_mean.
    """
    if sparse and dim > 4:
        return (STEP_NS_D4 + STEP_NS_PER_COORDINATE * (dim - 4)) * 1e-9
    return (STEP_NS_D1 + (STEP_NS_D4 - STEP_NS_D1) / 3.0 * (dim - 1)) * 1e-9


def replicate_seconds(spec: ReplicateSpec) -> float:
    """Core-seconds of one replicate of a normalized specification.

    Its ``n`` x ``batch`` privatized gradients (:func:`step_seconds`), the intervals at
    each checkpoint (:data:`INTERVAL_SECONDS`, and :data:`BB_NS_PER_MULTIPLIER` for each
    of bb's B multipliers and each coordinate), the competitors' work
    (:func:`competitor_seconds`) and the pipeline's per-replicate overhead. The layout
    sizes a task by this (about a second of work), and the progress bar weighs each task
    by it (only ratios matter there).
    """
    bootstrap = (
        sum(method.B for method in spec.methods.values() if method.name == "bb")
        * spec.model.dim
        * BB_NS_PER_MULTIPLIER
        * 1e-9
    )
    intervals = (INTERVAL_SECONDS + bootstrap) * len(spec.checkpoints or (spec.n,))
    users = spec.n * spec.batch
    sparse = spec.model.gradient_sparsity() is not None
    steps = users * step_seconds(spec.model.dim, sparse)
    return steps + intervals + competitor_seconds(spec) + REPLICATE_OVERHEAD_S


def competitor_seconds(spec: ReplicateSpec) -> float:
    """Core-seconds of the competitors' own work in one replicate (:data:`COMPETITOR_NS`).

    fang: n x batch x (B + 1) answers; np_boot: n x batch x B resampled users;
    cdp_blb_*: n x batch x R resampled users; nprr: n x batch users
    (:data:`NPRR_NS_PER_USER`). The other methods cost
    :data:`INTERVAL_SECONDS`.
    """
    total = 0.0
    for method in spec.methods.values():
        if method.name == "nprr":
            total += spec.n * spec.batch * NPRR_NS_PER_USER * 1e-9
        if method.name not in COMPETITOR_NS:
            continue
        parameter, ns = COMPETITOR_NS[method.name]
        units = getattr(method, parameter) + (1 if method.name == "fang" else 0)
        per_unit = ns.get(spec.model.name, max(ns.values()))
        total += spec.n * spec.batch * units * per_unit * 1e-9
    return total


def sweep_seconds(sweep: Sweep) -> float:
    """Core-seconds of every replicate of ``sweep`` (done or not), by :func:`replicate_seconds`."""
    return sweep.replicates * sum(replicate_seconds(point.normalized) for point in sweep.points())


def duration_text(seconds: float) -> str:
    """A duration in the largest unit that keeps it >= 1: '40 s', '3.2 h', '69 days'."""
    for unit, size in (("years", 365.25 * 86_400), ("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.2g} {unit}" if value < 10 else f"{math.floor(value):,} {unit}"
    return f"{seconds:.2g} s"
