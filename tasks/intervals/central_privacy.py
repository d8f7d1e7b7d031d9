"""Central-DP building blocks of seed 002: private mean, quantile, median, AboveThreshold."""

from __future__ import annotations

import math

import numpy as np


def private_mean(
    means: np.ndarray, n: int, eps: float, data_range: tuple[float, float], rng
) -> np.ndarray:
    """The Laplace mechanism on means of n points clipped to the public [L, U].

    Parameters
    ----------
    means : ndarray
        Means of n values in [L, U] (one per resample, any shape).
    n : int
        Number of values behind each mean, >= 1.
    eps : float
        Privacy parameter, in (0, inf): one value changes a mean by at most (U - L) / n,
        so Laplace((U - L) / (n eps)) noise makes it eps-DP.
    data_range : (L, U)
        Public bounds, L < U.
    rng : numpy.random.Generator

    References
    ----------
    Dwork, C., McSherry, F., Nissim, K. & Smith, A. (2006). Calibrating noise to
    sensitivity in private data analysis. TCC.
    """
    low, high = data_range
    return means + rng.laplace(0.0, (high - low) / (n * eps), np.shape(means))


def quantile_gaps(
    sorted_x: np.ndarray, data_range: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of the exponential-mechanism quantile: their left ends and widths, (m + 1,).

    Gap k lies between the k-th and (k + 1)-th smallest of the m values clipped to
    [L, U] (gap 0 starts at L, gap m ends at U).

    Parameters
    ----------
    sorted_x : ndarray, shape (m,)
        The data, sorted ascending, m >= 0.
    data_range : (L, U)
        Public bounds, L < U.

    Returns
    -------
    left, widths : ndarray, shape (m + 1,)
        The gaps' left ends, in [L, U], and widths, >= 0 (0 for ties); the widths sum
        to U - L.
    """
    low, high = data_range
    edges = np.concatenate([[low], np.clip(sorted_x, low, high), [high]])
    return edges[:-1], np.diff(edges)


def quantile_scores(
    widths: np.ndarray, below: np.ndarray, tau: float, n: int, eps: float
) -> np.ndarray:
    """log(width_k) - (eps / 2) |below_k - tau n|: the exponential mechanism's log weights.

    ``below`` (..., m + 1) counts the points at or below gap k's left end (the rank of
    every y in the gap); one point changed moves every count by at most 1, so
    exp(score) is eps-DP (utility sensitivity 1, scale eps / 2).

    Parameters
    ----------
    widths : ndarray, shape (m + 1,)
        The gaps' widths (:func:`quantile_gaps`), >= 0.
    below : ndarray, shape (..., m + 1)
        Counts of points at or below each gap's left end, in [0, n].
    tau : float
        Quantile level, in (0, 1).
    n : int
        Number of points behind the counts, >= 1.
    eps : float
        Privacy parameter, in (0, inf).

    Returns
    -------
    ndarray, shape of ``below``
        Log weights, -inf for empty gaps.

    References
    ----------
    McSherry, F. & Talwar, K. (2007). Mechanism design via differential privacy. FOCS.
    """
    with np.errstate(divide="ignore"):  # empty gaps (ties) have weight 0
        log_width = np.log(widths)
    return log_width - (eps / 2.0) * np.abs(below - tau * n)


def point_in_drawn_gap(
    scores: np.ndarray, left: np.ndarray, widths: np.ndarray, rng
) -> np.ndarray:
    """Per row of ``scores``, a gap drawn with probability proportional to exp(score),
    then a uniform point in it: the exponential mechanism's output.

    The gap is drawn by Gumbel-max (argmax of score + standard Gumbel noise, all rows
    at once), then one uniform per row.

    Parameters
    ----------
    scores : ndarray, shape (R, m + 1)
        Log weights of the gaps (-inf for empty ones), one row per draw.
    left, widths : ndarray, shape (m + 1,)
        The gaps' left ends and widths (:func:`quantile_gaps`).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (R,)

    References
    ----------
    Gumbel, E. J. (1954). Statistical theory of extreme values and some practical
    applications. NBS Applied Mathematics Series 33.
    """
    gap = np.argmax(scores + rng.gumbel(size=scores.shape), axis=1)
    return left[gap] + rng.random(gap.shape) * widths[gap]


def exponential_quantile(
    sorted_x: np.ndarray,
    tau: float,
    eps: float,
    data_range: tuple[float, float],
    rng,
    counts: np.ndarray | None = None,
) -> np.ndarray:
    """The tau-quantile by the exponential mechanism over [L, U] (eps-DP).

    A gap k of the sorted data is drawn with probability proportional to
    width_k exp(-(eps / 2) |rank_k - tau n|) (Gumbel-max), then a uniform point in it:
    the output has density proportional to exp(-(eps / 2) |#{x_i <= y} - tau n|) on
    [L, U].

    Parameters
    ----------
    sorted_x : ndarray, shape (m,)
        The data, sorted ascending.
    tau : float
        Quantile level, in (0, 1).
    eps : float
        Privacy parameter, in (0, inf).
    data_range : (L, U)
        Public bounds, L < U.
    rng : numpy.random.Generator
    counts : ndarray (R, m) of int, optional
        Multiplicities of the points in R resamples (n = counts.sum(axis=1), equal for
        all): one private quantile per resample, as if run on the resample. None: one
        run on the data itself (n = m).

    Returns
    -------
    ndarray, shape (R,) (or (1,) without ``counts``)

    References
    ----------
    McSherry, F. & Talwar, K. (2007). Mechanism design via differential privacy. FOCS.
    Smith, A. (2011). Privacy-preserving statistical estimation with optimal
    convergence rates. STOC.
    """
    left, widths = quantile_gaps(sorted_x, data_range)
    if counts is None:
        counts = np.ones((1, sorted_x.shape[0]), dtype=np.int64)
    n = int(counts[0].sum())
    below = np.zeros((counts.shape[0], counts.shape[1] + 1))
    np.cumsum(counts, axis=1, out=below[:, 1:])
    scores = quantile_scores(widths, below, tau, n, eps)
    return point_in_drawn_gap(scores, left, widths, rng)


#: Gaps left out by :func:`resampled_quantiles` have at most e^-SKIPPED_LOG_WEIGHT of
#: the weight of the best gap kept, all of them together.
SKIPPED_LOG_WEIGHT = 50.0


def resampled_quantiles(
    sorted_x: np.ndarray,
    n: int,
    tau: float,
    eps: float,
    data_range: tuple[float, float],
    size: int,
    rng,
) -> np.ndarray:
    """:func:`exponential_quantile` on ``size`` resamples of size n of ``sorted_x`` (b,).

    The same distribution as drawing Multinomial(n, 1/b) multiplicities and calling
    :func:`exponential_quantile` with them, at a fraction of the cost: the mechanism
    weights a gap by exp(-(eps / 2) |rank - tau n|), so only the gaps whose rank is near
    tau n matter, and only their cumulative counts are drawn. C_k, the number of
    resampled points among the k smallest, is a binomial walk: C_k0 ~ Binomial(n, k0/b),
    then C_(k+1) - C_k ~ Binomial(n - C_k, 1/(b - k)). The walk starts k0 cells below
    and stops where every resample's rank is far enough above tau n that the gaps left
    out weigh at most e^-50 of the best one kept (checked per resample from the ranks at
    the window's ends, which bound every rank outside it; a subset where the check fails
    is drawn in full).

    Parameters
    ----------
    sorted_x : ndarray, shape (b,)
        One subset's data, sorted ascending.
    n : int
        Resample size, >= 1.
    tau, eps, data_range
        As for :func:`exponential_quantile`.
    size : int
        Number of resamples R, >= 1.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray, shape (size,)
    """
    b = sorted_x.shape[0]
    left, widths = quantile_gaps(sorted_x, data_range)
    positive = widths[widths > 0]
    target = tau * n
    # Ranks this far from the best kept gap's weigh at most e^-50 / (b + 1) of it, even
    # against the widest gap: log(max width / min width) + log(b + 1) + 50 in score.
    spread = math.log(positive.max() / positive.min()) + math.log(b + 1.0) + SKIPPED_LOG_WEIGHT
    reach = 2.0 * spread / eps + n / b + 8.0 * math.sqrt(n / b) + 8.0
    start_rank = target - reach - 8.0 * math.sqrt(n * max(tau * (1 - tau), 1.0 / n))
    k0 = min(max(math.floor(b * start_rank / n), 0), b)
    below = [rng.binomial(n, k0 / b, size).astype(np.float64)]
    k = k0
    while k < b and np.min(below[-1]) < target + reach:
        below.append(below[-1] + rng.binomial(n - below[-1].astype(np.int64), 1.0 / (b - k)))
        k += 1
    ranks = np.stack(below, axis=1)  # (size, k - k0 + 1): gaps k0..k
    scores = quantile_scores(widths[k0 : k + 1], ranks, tau, n, eps)
    best = scores.max(axis=1)
    log_widest = math.log(positive.max())
    outside = np.full(size, -np.inf)
    if k0 > 0:  # every gap left of k0 has rank <= C_k0
        outside = np.maximum(outside, log_widest - (eps / 2.0) * (target - ranks[:, 0]))
    if k < b:  # every gap right of k has rank >= C_k
        outside = np.maximum(outside, log_widest - (eps / 2.0) * (ranks[:, -1] - target))
    if np.any(best - outside - math.log(b + 1.0) < SKIPPED_LOG_WEIGHT) or (
        k0 > 0 and np.any(ranks[:, 0] > target)
    ):
        counts = rng.multinomial(n, np.full(b, 1.0 / b), size=size)
        return exponential_quantile(sorted_x, tau, eps, data_range, rng, counts)
    return point_in_drawn_gap(scores, left[k0 : k + 1], widths[k0 : k + 1], rng)


def private_median(values: np.ndarray, eps: float, data_range: tuple[float, float], rng) -> float:
    """The median of ``values`` by the exponential mechanism over [L, U] (eps-DP).

    Parameters
    ----------
    values : ndarray, shape (m,)
        The values, any order (cdp_blb_var: one variance per subset), m >= 1.
    eps : float
        Privacy parameter, in (0, inf).
    data_range : (L, U)
        Public bounds, L < U.
    rng : numpy.random.Generator

    Returns
    -------
    float
        In [L, U].
    """
    return float(exponential_quantile(np.sort(values), 0.5, eps, data_range, rng)[0])


def above_threshold(queries: np.ndarray, threshold: float, eps: float, rng) -> int | None:
    """Index of the first query whose noisy value reaches the noisy threshold (eps-DP).

    The threshold gets Laplace(2 / eps) noise drawn ONCE, each query Laplace(4 / eps)
    noise; queries of sensitivity 1. None when no query passes.

    Parameters
    ----------
    queries : ndarray, shape (T,)
        The query values (counts), in the order they are asked.
    threshold : float
        The threshold before noise.
    eps : float
        Privacy parameter, in (0, inf).
    rng : numpy.random.Generator

    Returns
    -------
    int or None
        The index in [0, T), or None when no query passes.

    References
    ----------
    Dwork, C. & Roth, A. (2014). The algorithmic foundations of differential privacy,
    Algorithm 1 (AboveThreshold). Chadha, Duchi & Kuditipudi (seed 002), Proposition 1.
    """
    noisy_threshold = threshold + rng.laplace(0.0, 2.0 / eps)
    noisy = np.asarray(queries, dtype=np.float64) + rng.laplace(0.0, 4.0 / eps, len(queries))
    passed = np.flatnonzero(noisy >= noisy_threshold)
    return int(passed[0]) if passed.size else None


def n_subsets(n: int, eps: float, k: float) -> int:
    """s = ceil(K log n / eps), at most n: the bag of little bootstraps' subset count.

    Parameters
    ----------
    n : int
        Number of users, >= 2.
    eps : float
        The interval's budget eps_int, in (0, inf).
    k : float
        The multiplier K, > 0 (seed 002: 10).

    Returns
    -------
    int
        In [1, n].

    References
    ----------
    Chadha, K., Duchi, J. & Kuditipudi, R. (2024). Resampling methods for private
    statistical inference. arXiv:2402.07131 (seed 002).
    """
    return min(math.ceil(k * math.log(n) / eps), n)
