"""How long LDP-SGD work takes on one core: the estimate behind long-run warnings."""

from __future__ import annotations

import math

from ldpsim.pipeline.sweep import Sweep

#: Nanoseconds per SGD step of the compiled kernel, all streaming statistics on, on the
#: project's 2-core machine (README "Performance", `benchmarks/kernels.py`, upper ends
#: of the measured ranges): quantile + randomized response (d = 1) 6.4 ns; quantile
#: regression with d = 4 and Laplace noise 59 ns. Steps in between and beyond are taken
#: linear in d through these two points.
STEP_NS_D1 = 6.4
STEP_NS_D4 = 59.0
#: Per-replicate scheduling and storage overhead (README "Performance": 1.1-1.8 ms).
REPLICATE_OVERHEAD_S = 2e-3
#: Sweeps estimated above this many core-seconds need ``ldpsim run --yes``.
LONG_RUN_SECONDS = 86_400.0


def estimated_seconds(n: int, dim: int, replicates: int = 1) -> float:
    """Core-seconds that ``replicates`` replicates of ``n`` SGD steps take.

    Parameters
    ----------
    n : int
        SGD steps per replicate times the mini-batch size (privatized gradients), >= 1.
    dim : int
        The model's parameter dimension d, >= 1.
    replicates : int
        Number of replicates, >= 0.

    Returns
    -------
    float
        The estimate in seconds of one core. It is measured for d = 1 and d = 4 and
        linear in d in between; beyond d = 4 it may be low where the d x d
        self-normalization sums dominate. Interval methods after the run (bb: B m d
        operations) are left out: they are small next to the n steps.
    """
    per_step_ns = STEP_NS_D1 + (STEP_NS_D4 - STEP_NS_D1) / 3.0 * (dim - 1)
    return replicates * (n * per_step_ns * 1e-9 + REPLICATE_OVERHEAD_S)


def sweep_seconds(sweep: Sweep) -> float:
    """Core-seconds of every replicate of ``sweep`` (done or not), by :func:`estimated_seconds`."""
    total = 0.0
    for point in sweep.points():
        spec = point.normalized
        total += estimated_seconds(spec.n * spec.batch, spec.model.dim, sweep.replicates)
    return total


def duration_text(seconds: float) -> str:
    """A duration in the largest unit that keeps it >= 1: '40 s', '3.2 h', '69 days'."""
    for unit, size in (("years", 365.25 * 86_400), ("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.2g} {unit}" if value < 10 else f"{math.floor(value):,} {unit}"
    return f"{seconds:.2g} s"
