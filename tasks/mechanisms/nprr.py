"""Nonparametric randomized response (NPRR): eps-LDP reports of bounded data points.

Unlike the registered mechanisms, which privatize a user's gradient inside the LDP-SGD
kernel, NPRR privatizes the data point itself; the ``nprr`` interval method
(:mod:`ldpsim.tasks.intervals.nprr`) applies it to the replicate's users.
"""

from __future__ import annotations

import math

import numpy as np

from ldpsim.tasks.validation import check_finite_constants, check_float, check_int


def nprr_keep_probability(eps: float, grid: int = 1) -> float:
    """r = (e^eps - 1) / (e^eps + G): the probability that NPRR reports the rounded point.

    Parameters
    ----------
    eps : float
        Privacy parameter, in (0, inf), large enough that 1 / r is finite (the intervals
        scale as 1 / r): about eps >= 5.6e-309 (G + 1).
    grid : int
        G, in [1, 10**6]: the reports lie on {0, 1/G, ..., 1}.

    Returns
    -------
    float
        r in (0, 1]. With it the likelihood ratio of a report is at most
        1 + (G + 1) r / (1 - r) = e^eps, attained at report 0 (or 1) between x = 0 and
        x = 1 (SPEC 12.1). G = 1: r = tanh(eps / 2).

    Raises
    ------
    TypeError, ValueError
        ``eps`` or ``grid`` out of range, or an eps so small that 1 / r is not a finite
        float64 (the message gives the smallest eps allowed).
    """
    eps = check_float(eps, "eps", owner="nprr", low=0)
    grid = check_int(grid, "grid", owner="nprr", low=1, high=10**6)
    check_finite_constants(
        lambda value: {
            "1 / r (r the keep probability; the intervals scale as 1 / r)": lambda: (
                1.0 / _keep(value, grid)
            )
        },
        eps,
        "eps",
        owner="nprr",
        allowed="a float in [{low}, inf)",
        context=f" with grid = {grid}",
    )
    return _keep(eps, grid)


def _keep(eps: float, grid: int) -> float:
    # From eps = 700 on, e^eps overflows; r = (1 - e^-eps) / (1 + G e^-eps) is 1 there.
    if eps >= 700.0:
        return -math.expm1(-eps) / (1.0 + grid * math.exp(-eps))
    return math.expm1(eps) / (math.exp(eps) + grid)


def nprr_release_probability(eps: float, grid: int = 1) -> float:
    """1 - r = (G + 1) / (e^eps + G): the probability that NPRR reports noise.

    Computed directly, not as 1 - r: r rounds to 1 from eps ~ 37 on, and a noise
    probability of 1 - 1 = 0 would report every point as it is (no privacy at all).
    Where it underflows (eps ~ 745 on) it is the smallest positive double instead, so
    noise keeps a positive probability at every finite eps. ``eps`` and ``grid`` are
    those :func:`nprr_keep_probability` accepts.
    """
    if eps >= 700.0:  # e^eps overflows from 710 on: (G + 1) e^-eps / (1 + G e^-eps)
        tiny = math.exp(-eps)
        return max((grid + 1) * tiny / (1.0 + grid * tiny), math.ulp(0.0))
    return (grid + 1) / (math.exp(eps) + grid)


def nprr_privatize(
    x: np.ndarray, *, eps: float, grid: int, rng: np.random.Generator
) -> np.ndarray:
    """NPRR reports Z of data points x in [0, 1] (Waudby-Smith, Wu & Ramdas, Algorithm 2).

    1. Stochastic rounding onto {0, 1/G, ..., 1}: Y = (k + 1) / G with probability
       G x - k, else k / G, k = floor(G x); E[Y | x] = x.
    2. Randomized response: Z = Y with probability r (``keep``), otherwise Z = U / G
       with U uniform on the G + 1 integers {0, ..., G} (U may equal G Y).

    Parameters
    ----------
    x : ndarray, shape (n,)
        Data points, each in [0, 1].
    eps : float
        The privacy parameter, in the range :func:`nprr_keep_probability` allows.
    grid : int
        G, in [1, 10**6].
    rng : numpy.random.Generator
        Draws n uniforms (rounding), n uniforms (keep or not), n integers (the noise), in
        that order.

    Returns
    -------
    ndarray, shape (n,)
        Reports on the grid; E[Z | x] = r x + (1 - r) / 2.

    Notes
    -----
    The point is kept when its uniform u (a multiple of 2^-53) is below 1 - (1 - r)
    rounded up to that grid (1 - r from :func:`nprr_release_probability`): noise comes
    with probability at least 1 - r, never less private than eps claims, however large
    eps is. (Kept when u < r, the keep probability was r rounded up, and 1 from eps ~ 37
    on; the two rules keep the same uniforms but for a few values in 2^53.)
    The noise is uniform on all G + 1 grid points. Drawing it as round(G V) / G with
    V ~ Uniform(0, 1) would give the end points half weight and a larger eps,
    log(1 + 2 G r / (1 - r)) (SPEC 12.1).

    References
    ----------
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023). Nonparametric extensions of
    randomized response for private confidence sets. ICML, PMLR 202 (arXiv:2202.08728),
    Algorithm 2 (NPRR).
    Warner, S. L. (1965). Randomized response: a survey technique for eliminating
    evasive answer bias. J. Amer. Statist. Assoc. 60, 63-69.
    """
    nprr_keep_probability(eps, grid)  # the checks
    release = nprr_release_probability(eps, grid)
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    scaled = grid * x
    low = np.minimum(np.floor(scaled), grid - 1)  # x = 1: k = G - 1, rounds up surely
    rounded = (low + (rng.random(n) < scaled - low)) / grid
    # Kept when u < 1 - m 2^-53, m = ceil((1 - r) 2^53): exact, probability 1 - m 2^-53
    # <= r, and the same uniforms as u < r keeps but for a few values in 2^53 (r and 1 - r
    # are rounded apart: at most 3 over 1,600 (eps, G) pairs).
    kept = rng.random(n) < 1.0 - math.ceil(release * 2.0**53) * 2.0**-53
    noise = rng.integers(0, grid + 1, n) / grid
    return np.where(kept, rounded, noise)
