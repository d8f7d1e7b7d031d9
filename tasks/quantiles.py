"""Empirical quantiles by selection, compiled: numpy's linear interpolation, bit for bit."""

from __future__ import annotations

import functools

import numpy as np

from ldpsim.tasks.compiled import cached_njit


@functools.lru_cache(maxsize=64)
def linear_positions(
    count: int, probs: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where ``np.quantile(x, probs)`` (method 'linear') reads a sample of ``count`` values.

    Returns
    -------
    (previous, following, weight, selected)
        The order statistics below and above each quantile (0-based ranks, int64), the
        interpolation weight between them (float64) and the sorted distinct ranks to
        select. numpy's own: virtual index (count - 1) p, its floor and the next rank,
        both clipped to the sample, and the weight from the clipped floor (so that the
        bits are numpy's). Cached: they depend on the count and ``probs`` only.
    """
    virtual = (count - 1) * np.asarray(probs, dtype=np.float64)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= count - 1
    previous[above] = following[above] = -1
    below = virtual < 0
    previous[below] = following[below] = 0
    weight = virtual - previous
    previous = np.where(previous < 0, count - 1, previous).astype(np.int64)
    following = np.where(following < 0, count - 1, following).astype(np.int64)
    selected = np.unique(np.concatenate((previous, following)))
    for array in (previous, following, weight, selected):
        array.flags.writeable = False
    return previous, following, weight, selected


def linear_quantiles(draws: np.ndarray, probs: tuple[float, ...]) -> np.ndarray:
    """Column quantiles of ``draws`` by linear interpolation: ``np.quantile(draws, probs,
    axis=0)``, the same numbers bit for bit, by selection (no sort) in one compiled call.

    Parameters
    ----------
    draws : ndarray, shape (B, d)
        B >= 1 draws of d coordinates, float64 (not changed).
    probs : tuple of float
        Probabilities in [0, 1].

    Returns
    -------
    ndarray, shape (len(probs), d)
        A column holding a NaN gets NaN, as from ``np.quantile``.
    """
    draws = np.asarray(draws, dtype=np.float64)
    previous, following, weight, selected = linear_positions(draws.shape[0], tuple(probs))
    out = np.empty((len(probs), draws.shape[1]))
    # Contiguous columns and quantiles, as bb's compiled intervals pass them: the one
    # compiled signature they share (a strided column compiled two more, 7 s).
    column, buffer, q = np.empty(draws.shape[0]), np.empty(draws.shape[0]), np.empty(len(probs))
    for j in range(draws.shape[1]):
        column[:] = draws[:, j]
        column_quantiles(column, buffer, previous, following, weight, selected, q)
        out[:, j] = q
    return out


@cached_njit()
def column_quantiles(values, buffer, previous, following, weight, selected, out):
    """The quantiles of ``values`` (1-d) at :func:`linear_positions` into ``out``.

    ``buffer`` (as long as ``values``) is overwritten. The order statistics are selected
    (:func:`keep_extremes` where every rank lies near an end of the sample, else
    :func:`select_ranks` on a copy); between two of them the value is numpy's ``_lerp``:
    a + (b - a) t, or b - (b - a)(1 - t) for t >= 0.5. A NaN among the values gives NaN.
    """
    count = values.shape[0]
    has_nan = False
    for i in range(count):
        has_nan |= np.isnan(values[i])
    if has_nan:
        out[:] = np.nan
        return
    n_low, n_high = extreme_counts(count, selected)
    if n_low * n_low <= EXTREMES_FACTOR * count and n_high * n_high <= EXTREMES_FACTOR * count:
        keep_extremes(values, n_low, n_high, buffer)
    else:
        for i in range(count):  # element by element: a slice copy compiles numba's
            buffer[i] = values[i]  # broadcasting copy, seconds of a cold start
        select_ranks(buffer, selected)
    for p in range(previous.shape[0]):
        low = buffer[previous[p]]
        high = buffer[following[p]]
        step = high - low
        t = weight[p]
        out[p] = high - step * (1.0 - t) if t >= 0.5 else low + step * t


#: :func:`column_quantiles` keeps the extremes (:func:`keep_extremes`) where the values
#: kept at each end, k, satisfy k^2 <= EXTREMES_FACTOR * count, and selects otherwise.
#: Their times per sample, compiled, extremes over selection (2026-11-30, the machine
#: busy with a test suite: ratios only): 0.26 at count 200 (k = 6), 0.43 at 500 (k =
#: 14), 0.64 at 500 (k = 26), 0.40 at 2,000 (k = 51), 0.55 at 2,000 (k = 101), 0.90 at
#: 5,000 (k = 251), 0.68 at 10,000 (k = 251), 2.6 at 10,000 (k = 501).
EXTREMES_FACTOR = 16


@cached_njit()
def extreme_counts(count, ranks):
    """How many of the smallest and of the largest values hold ``ranks`` (sorted,
    distinct, 0-based, below ``count``): ranks below count / 2 count from the bottom,
    the others from the top. (0, 0) for no ranks."""
    n_low, n_high = 0, 0
    for k in ranks:
        if 2 * k < count:
            n_low = k + 1
        elif n_high == 0:
            n_high = count - k
    return n_low, n_high


@cached_njit()
def keep_extremes(values, n_low, n_high, out):
    """Write the ``n_low`` smallest of ``values`` (1-d, no NaN) into ``out[:n_low]``,
    ascending, and the ``n_high`` largest into ``out[count - n_high:]``, ascending:
    ``out[k]`` is then the k-th smallest value (0-based) for every k below ``n_low``
    and from ``count - n_high`` on (n_low + n_high <= count). ``values`` is not changed;
    the rest of ``out`` is scratch.

    Each end keeps a sorted buffer of the k values kept so far, and a value goes in
    only where it beats the buffer's last. Over all the values that happens about k
    log(count / k) times, mostly early, each a mispredicted branch and k / 2 moves; so
    where the sample is large enough, a bound is taken first, the (k / 8 + 6)-th
    extreme of every 8th value: the values beyond it are gathered without a branch and
    only they go through the buffer. For normal draws, about 72 values for k = 26 of
    500 (bb's 90% level), and fewer than k, which sends the sample to the plain pass,
    in about 1 sample in 800; relatively fewer as k grows (1.9 k and 1 in 64 for k = 51
    of 2,000; 1.3 k and 1 in 10 for k = 126 of 5,000). Equal values are interchangeable:
    only the sign of a zero could tell them apart, and bb's draws (sums from 0.0) and
    their ratios to an sd are never -0.0.
    """
    count = values.shape[0]
    free_lo, free_hi = n_low, count - n_high
    if n_low > 0:
        _keep_least(values, n_low, 1.0, out, 0, 1, free_lo, free_hi)
    if n_high > 0:
        _keep_least(values, n_high, -1.0, out, count - 1, -1, free_lo, free_hi)


#: :func:`keep_extremes` bounds a sample of at least SAMPLED_FROM values by every
#: SAMPLE_EVERY-th value's (k / SAMPLE_EVERY + SAMPLE_MARGIN)-th extreme. Per end, at
#: bb's 90% level with B = 500 (k = 26), 1.7 against 2.7 us (2026-11-30).
SAMPLED_FROM = 256
SAMPLE_EVERY = 8
SAMPLE_MARGIN = 6


@cached_njit(inline="always")
def _keep_least(values, keep, sign, out, base, direction, free_lo, free_hi):
    # The `keep` least of sign * values, ascending, at out[base + direction * p] (p <
    # keep), multiplied back by sign; out[free_lo:free_hi] is scratch.
    count = values.shape[0]
    rank = keep // SAMPLE_EVERY + SAMPLE_MARGIN
    samples = count // SAMPLE_EVERY
    capacity = free_hi - free_lo
    done = False
    if count >= SAMPLED_FROM and 4 * rank <= samples and max(2 * keep, rank) <= capacity:
        _insert_least(values, 0, samples * SAMPLE_EVERY, SAMPLE_EVERY, rank, sign, out, free_lo, 1)
        bound = out[free_lo + rank - 1]
        gathered = 0
        for i in range(count):
            value = sign * values[i]
            out[free_lo + gathered] = value
            gathered += value <= bound
            if gathered == capacity:
                break
        if keep <= gathered < capacity:
            _insert_least(out, free_lo, free_lo + gathered, 1, keep, 1.0, out, base, direction)
            done = True
    if not done:
        _insert_least(values, 0, count, 1, keep, sign, out, base, direction)
    if sign < 0:
        for p in range(keep):
            out[base + direction * p] = -out[base + direction * p]


@cached_njit(inline="always")
def _insert_least(values, start, stop, step, keep, sign, out, base, direction):
    # The `keep` least of sign * values[start:stop:step] (at least `keep` of them),
    # ascending, at out[base + direction * p]: the first `keep` by insertion, then only
    # a value below the largest kept.
    i = start
    for n in range(keep):
        value = sign * values[i]
        p = n
        while p > 0 and value < out[base + direction * (p - 1)]:
            out[base + direction * p] = out[base + direction * (p - 1)]
            p -= 1
        out[base + direction * p] = value
        i += step
    last = base + direction * (keep - 1)
    bound = out[last]
    while i < stop:
        value = sign * values[i]
        if value < bound:
            p = keep - 1
            while p > 0 and value < out[base + direction * (p - 1)]:
                out[base + direction * p] = out[base + direction * (p - 1)]
                p -= 1
            out[base + direction * p] = value
            bound = out[last]
        i += step


@cached_njit()
def select_ranks(values, ranks):
    """Put the order statistics of the given ``ranks`` (sorted, distinct, 0-based) of
    ``values`` (1-d, no NaN) in their places: afterwards ``values[k]`` is the k-th
    smallest for each k of ``ranks``. Expected O(len(values)) per rank, in place.

    After rank k is placed, every value after it is at least as large, so the next rank
    is searched for among those alone; rank k + 1 is then their minimum.
    """
    start = 0
    for k in ranks:
        if k == start and start > 0:  # the smallest of the rest: one pass, no swaps
            smallest = start
            for i in range(start + 1, values.shape[0]):
                if values[i] < values[smallest]:
                    smallest = i
            values[start], values[smallest] = values[smallest], values[start]
        else:
            _quickselect(values, start, values.shape[0] - 1, k)
        start = k + 1


@cached_njit()
def _quickselect(values, low, high, k):
    # numpy's introselect (npysort/selection.cpp) without its median-of-5 fallback:
    # the median of three as the pivot, the smallest and largest of the three as
    # sentinels, Hoare's partition (equal values split evenly). ``high`` is inclusive.
    while low + 1 < high:
        mid = low + (high - low) // 2
        if values[high] < values[mid]:
            values[high], values[mid] = values[mid], values[high]
        if values[high] < values[low]:
            values[high], values[low] = values[low], values[high]
        if values[low] < values[mid]:
            values[low], values[mid] = values[mid], values[low]
        values[mid], values[low + 1] = values[low + 1], values[mid]
        pivot = values[low]
        ll, hh = low + 1, high
        while True:
            ll += 1
            while values[ll] < pivot:
                ll += 1
            hh -= 1
            while pivot < values[hh]:
                hh -= 1
            if hh < ll:
                break
            values[ll], values[hh] = values[hh], values[ll]
        values[low], values[hh] = values[hh], values[low]
        if hh >= k:
            high = hh - 1
        if hh <= k:
            low = ll
    if high == low + 1 and values[high] < values[low]:
        values[high], values[low] = values[low], values[high]
