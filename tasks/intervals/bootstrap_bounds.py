"""bb's intervals for a chunk of replicates, compiled (Dette & Graw's multiplier block
bootstrap; :class:`ldpsim.tasks.intervals.bootstrap.BlockBootstrap` is the method).

Each replicate's bootstrap draws are theta*_b = sum_k e_bk centred_k / (m l), b < B, from
its multipliers e (B, m) and its block deviations centred (m, d). :func:`multiplier_bounds`
draws the multipliers and reads the interval off the draws one replicate at a time, in
buffers of one replicate's size: at d = 1 each multiplier is added into its draw's sum
as it comes (:func:`drawn_sums`: 11.2 -> 9.7 us a replicate at B = 500, m = 5); at larger
d a replicate's multipliers are drawn first and the d sums of a draw formed together
(:func:`weighted_sums`, faster there). Every sum runs in a fixed order, from 0: the same
bits either way, and on every machine (a BLAS product's order depends on its kernel,
which OpenBLAS picks by processor).
"""

from __future__ import annotations

import numpy as np

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.quantiles import column_quantiles
from ldpsim.tasks.stats import sum_rows_as_numpy
from ldpsim.tasks.streams.multipliers import next_multiplier

#: The ``form`` codes of :func:`multiplier_bounds`.
BASIC, PERCENTILE, SUP_T = 0, 1, 2


# nogil: a Dask worker's event loop runs while a chunk's intervals are computed.
@cached_njit(nogil=True)
def multiplier_bounds(
    code, states, given, centred, scale, form, previous, following, weight, selected,
    centre, lower, upper, failed,
):  # fmt: skip
    """Every replicate's bb interval (``form`` BASIC or PERCENTILE) or sup-t band (SUP_T).

    Parameters
    ----------
    code : int
        The multipliers' law (:func:`ldpsim.tasks.streams.multipliers.multiplier_code`).
    states : ndarray of uint64, shape (R, 4)
        Each replicate's stream, from which its B m multipliers are drawn row by row
        (:func:`ldpsim.tasks.streams.multipliers.next_multiplier`), where ``given`` is
        empty.
    given : ndarray, shape (R, B, m) or (0, B, m)
        The multipliers themselves (drawn by numpy's Generators), or none.
    centred : ndarray, shape (R, m, d)
        Block deviations S_k - l theta_bar.
    scale : float
        m l.
    form : int
        BASIC: [centre - q_hi, centre - q_lo]; PERCENTILE: [centre + q_lo, centre + q_hi]
        (q: the two quantiles of the draws at ``previous`` ... ``selected``,
        :func:`ldpsim.tasks.quantiles.linear_positions`); SUP_T: the band of
        :func:`sup_t_replicate` (one quantile, of the largest studentized draw).
    centre, lower, upper : ndarray, shape (R, d)
        The estimate the interval is centred on; the bounds, written.
    failed : ndarray of bool, shape (R,)
        Set where the sup-t band has a zero sd (its bounds NaN).
    """
    n_reps, n_blocks, d = centred.shape
    n_draws = given.shape[1]
    drawn = np.empty((n_draws, n_blocks if d > 1 else 0))
    flat = drawn.reshape(drawn.size)
    draws = np.empty((n_draws, d))
    column = np.empty(n_draws)
    buffer = np.empty(n_draws)
    q = np.empty(2)
    total, sd = np.empty(d), np.empty(d)
    squares = np.empty((n_draws, d))
    for r in range(n_reps):
        if given.shape[0] == 0:
            state = (states[r, 0], states[r, 1], states[r, 2], states[r, 3])
            if d == 1:  # each multiplier added into its draw's sum as it comes
                drawn_sums(code, state, centred[r], scale, draws)
            else:  # the multipliers first: d sums of a draw at a time
                fill_multipliers(code, state, flat)
                weighted_sums(drawn, centred[r], scale, draws)
        else:
            weighted_sums(given[r], centred[r], scale, draws)
        if form == SUP_T:
            failed[r] = sup_t_replicate(
                centre[r], draws, previous, following, weight, selected, lower[r], upper[r],
                total, sd, squares, column, buffer, q,
            )  # fmt: skip
            continue
        for j in range(d):
            for b in range(n_draws):
                column[b] = draws[b, j]
            column_quantiles(column, buffer, previous, following, weight, selected, q)
            if form == BASIC:
                lower[r, j] = centre[r, j] - q[1]
                upper[r, j] = centre[r, j] - q[0]
            else:
                lower[r, j] = centre[r, j] + q[0]
                upper[r, j] = centre[r, j] + q[1]


@cached_njit(inline="always")
def drawn_sums(code, state, centred, scale, draws):
    """draws[b, 0] = sum_k e_bk centred[k, 0] / scale (d = 1), the multipliers e of law
    ``code`` drawn from ``state`` in C order, each added into its draw's sum as it
    comes: the numbers of :func:`weighted_sums` on the multipliers drawn first."""
    n_draws, n_blocks = draws.shape[0], centred.shape[0]
    held, has_held = np.uint64(0), False
    for b in range(n_draws):
        total = 0.0
        for k in range(n_blocks):
            e, state, held, has_held = next_multiplier(code, state, held, has_held)
            total += e * centred[k, 0]
        draws[b, 0] = total / scale


@cached_njit(inline="always")
def fill_multipliers(code, state, out):
    """``out`` (1-d) filled with the multipliers of law ``code`` drawn from ``state``
    in order (:func:`ldpsim.tasks.streams.multipliers.next_multiplier`)."""
    held, has_held = np.uint64(0), False
    for i in range(out.size):
        out[i], state, held, has_held = next_multiplier(code, state, held, has_held)


@cached_njit(inline="always")
def weighted_sums(multipliers, centred, scale, draws):
    """draws[b, j] = sum_k multipliers[b, k] centred[k, j] / scale, each sum from 0 over
    the blocks in order."""
    n_draws, n_blocks = multipliers.shape
    d = centred.shape[1]
    for b in range(n_draws):
        for j in range(d):
            total = 0.0
            for k in range(n_blocks):
                total += multipliers[b, k] * centred[k, j]
            draws[b, j] = total / scale


@cached_njit()
def sup_t_replicate(
    centre, draws, previous, following, weight, selected, lower, upper,
    total, sd, squares, largest, buffer, critical,
):  # fmt: skip
    """One replicate's sup-t band centre_j +- c sd_j from its draws (B, d): sd_j their sd
    (numpy's ``std(axis=0, ddof=1)`` in numpy's order of additions,
    :func:`ldpsim.tasks.stats.sum_rows_as_numpy`), c the quantile at ``previous`` ...
    ``selected`` of max_j |draws[b, j]| / sd_j. Returns True (bounds NaN) where an sd is
    0. The rest are buffers: ``total``, ``sd`` (d,), ``squares`` (B, d), ``largest``,
    ``buffer`` (B,), ``critical`` (at least 1)."""
    n_draws, d = draws.shape
    sum_rows_as_numpy(draws, 0, n_draws, total)
    for b in range(n_draws):
        for j in range(d):
            deviation = draws[b, j] - total[j] / n_draws
            squares[b, j] = deviation * deviation
    sum_rows_as_numpy(squares, 0, n_draws, sd)
    zero = False
    for j in range(d):
        sd[j] = np.sqrt(sd[j] / (n_draws - 1))
        zero = zero or not sd[j] > 0.0
    if zero:
        lower[:] = np.nan
        upper[:] = np.nan
        return True
    for b in range(n_draws):
        top = abs(draws[b, 0]) / sd[0]
        for j in range(1, d):
            ratio = abs(draws[b, j]) / sd[j]
            if ratio > top or np.isnan(ratio):  # np.max: a NaN wins
                top = ratio
        largest[b] = top
    column_quantiles(largest, buffer, previous, following, weight, selected, critical)
    for j in range(d):
        lower[j] = centre[j] - critical[0] * sd[j]
        upper[j] = centre[j] + critical[0] * sd[j]
    return False


@cached_njit(nogil=True)
def symmetric_bounds(centre, centred, scale, critical, lower, upper, failed):
    """centre_j +- critical sd_j of each replicate, sd_j = sqrt(sum_k centred_kj^2) /
    (m l) (:func:`ldpsim.tasks.intervals.bootstrap.conditional_sd`; ``scale`` = m l),
    for bb's t form and Sidak's band; ``failed`` True (bounds NaN) where a coordinate's
    sd is 0 or NaN."""
    n_reps, n_blocks, d = centred.shape
    squares = np.empty((n_blocks, d))
    sd = np.empty(d)
    for r in range(n_reps):
        for k in range(n_blocks):
            for j in range(d):
                squares[k, j] = centred[r, k, j] * centred[r, k, j]
        sum_rows_as_numpy(squares, 0, n_blocks, sd)
        zero = False
        for j in range(d):
            sd[j] = np.sqrt(sd[j]) / scale
            zero = zero or not sd[j] > 0.0
        if zero:
            failed[r] = True
            lower[r] = np.nan
            upper[r] = np.nan
            continue
        for j in range(d):
            lower[r, j] = centre[r, j] - critical * sd[j]
            upper[r, j] = centre[r, j] + critical * sd[j]
