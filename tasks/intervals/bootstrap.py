"""Multiplier block bootstrap over the SGD iterates (Dette & Graw)."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

import numpy as np

from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.intervals.base import IntervalMethod, smallest_b
from ldpsim.tasks.intervals.bootstrap_bounds import (
    BASIC,
    PERCENTILE,
    SUP_T,
    multiplier_bounds,
    sup_t_replicate,
    symmetric_bounds,
)
from ldpsim.tasks.intervals.critical_values import student_t_quantile
from ldpsim.tasks.quantiles import linear_positions
from ldpsim.tasks.stats import StackedStats, StreamingStats, floor_power
from ldpsim.tasks.streams.multipliers import Multiplier, draw_multipliers, multiplier_code
from ldpsim.tasks.validation import check_choice, check_float, check_int
from ldpsim.tasks.warnings import OutsideTheoryWarning

Form = Literal["basic", "percentile", "t"]
Band = Literal["sup-t", "sidak"]

#: The paper's block-length exponent: l = floor(n^beta).
DEFAULT_BETA = 0.75


@functools.lru_cache(maxsize=256)
def block_partition(n: int, beta: float) -> tuple[int, int]:
    """The bootstrap's blocks for a run of n steps: (block_len, n_blocks).

    block_len l = floor(n^beta) (at least 1) and n_blocks m = floor(n / l). Batch means
    takes m as its default batch count (SPEC 5.2), from this same function.

    Parameters
    ----------
    n : int
        Number of SGD steps, >= 1.
    beta : float
        Block-length exponent, in (0, 1).
    """
    block_len = max(floor_power(n, beta), 1)
    return block_len, n // block_len


@functools.lru_cache(maxsize=256)
def block_bounds(block_len: int, n_blocks: int) -> np.ndarray:
    """0, l, 2 l, ..., m l: the ends of the bootstrap's blocks (read-only; cached)."""
    bounds = block_len * np.arange(0, n_blocks + 1, dtype=np.int64)
    bounds.flags.writeable = False
    return bounds


@dataclass(frozen=True, kw_only=True)
class BlockBootstrap(IntervalMethod):
    """Multiplier block bootstrap of the Polyak-Ruppert average.

    Blocks of length l = floor(n^beta), m = floor(n / l) of them, with sums S_j;
    theta*_r = (1/(m l)) sum_j e_j (S_j - l theta_bar_n), r = 1..B, with iid
    multipliers e_j of mean 0 and variance 1. q_a are the coordinatewise empirical
    quantiles (numpy's linear interpolation) of theta*_1..B.

    Parameters
    ----------
    B : int
        Number of bootstrap replicates, in [2, 10**6] (paper: 500); one draw has no
        spread (B = 1 gave intervals of length 0, or no sup-t band at all).
    beta : float
        Block-length exponent, in (0, 1) (paper: 0.75). Theory needs gamma < beta.
    multiplier : {'uniform', 'rademacher', 'gaussian', 'mammen'}
        Law of the multipliers; uniform is Uniform(-sqrt 3, sqrt 3).
    form : {'basic', 'percentile', 't'}
        Default: 't' in a sweep, 'basic' for this class. A sweep's bb that names no
        ``form`` gets 't', written into a new store (so resuming it never changes it;
        ``ldpsim run`` prints a note saying so, and ``form = "basic"`` gives the
        intervals of ldpsim < 0.2); the class itself keeps 'basic', what a store that
        recorded no form was computed with and what
        :func:`ldpsim.tasks.run_replicate` gives a spec naming none.
        'basic' (pivotal, the paper's method):
        [theta_bar - q_{1-a/2}, theta_bar - q_{a/2}];
        'percentile' (as printed in the paper): [theta_bar + q_{a/2}, theta_bar + q_{1-a/2}];
        't': theta_bar_j +- sqrt(m / (m - 1)) t_{m-1}((1 + level) / 2) sd_j, with sd_j
        the bootstrap's exact conditional sd (as for ``band = 'sidak'``; no draws are
        needed, ``B`` and ``multiplier`` play no part). The bootstrap's variance is a
        batch-means variance with m - 1 degrees of freedom, and the normal-like
        bootstrap quantiles ignore them: at m = 31 a 90% 'basic' interval covers about
        0.884 even with Gaussian blocks. The t form is the fixed-m pivot's quantile: exact
        for iid normal blocks, asymptotically equal to 'basic' as m grows. It is the
        marginal interval of Sidak's band at d = 1.
    simultaneous : bool
        False (default): the marginal intervals above. True: the sup-t band
        theta_bar_j +- c sd_j, where sd_j is the sd of theta*_1j..theta*_Bj and c the
        ``level`` quantile of max_j abs(theta*_rj) / sd_j over r (numpy's
        linear interpolation): all d coordinates are covered at once with probability
        ``level`` asymptotically. The band is symmetric, so ``form`` does not apply.
        A coordinate whose bootstrap sd is 0 makes the band fail (NaN, recorded).
    band : {'sup-t', 'sidak'}
        The simultaneous band's critical value (only with ``simultaneous = true``).
        Default: 'sidak' in a sweep, 'sup-t' for this class (as for ``form``: a new
        store records the sweep's; ``band = "sup-t"`` gives the band of ldpsim < 0.2).
        'sup-t': from the bootstrap draws, as above. 'sidak': theta_bar_j +-
        c sd_j with sd_j the bootstrap's exact conditional sd, sqrt(sum_k (S_kj -
        l theta_bar_j)^2) / (m l) (the multipliers have variance 1; no draws are
        needed), and c = sqrt(m / (m - 1)) t_{m-1}((1 + level^(1/d)) / 2): the
        quantile of the fixed-m batch-means pivot at Sidak's per-coordinate level.
        For a Gaussian error with known variances Sidak's inequality makes it valid
        for any correlation of the coordinates; with each sd_j estimated from the
        same m blocks that holds asymptotically (m -> infinity). Exact for iid normal
        blocks with independent coordinates. Unlike sup-t it does not need m > d.
        A coordinate whose sd is 0 makes the band fail, as with sup-t. ``B``,
        ``multiplier`` and ``form`` play no part in it (they stay in the method's key).

    References
    ----------
    Dette, H. & Graw, C. Uncertainty quantification by block bootstrap for
    differentially private stochastic gradient descent.
    Montiel Olea, J. L. & Plagborg-Moller, M. (2019). Simultaneous confidence bands:
    theory, implementation, and an application to SVARs. J. Appl. Econometrics 34, 1-17
    (the sup-t band).
    Sidak, Z. (1967). Rectangular confidence regions for the means of multivariate
    normal distributions. J. Amer. Statist. Assoc. 62, 626-633.
    """

    name = "bb"
    uses_rng: ClassVar[bool] = True
    #: The modules whose source is part of bb's identity in a store, beside this one
    #: (:mod:`ldpsim.pipeline.store.code_identity`): its compiled intervals and the
    #: quantiles they read off the draws.
    source_modules: ClassVar[tuple[str, ...]] = (
        "ldpsim.tasks.intervals.bootstrap_bounds",
        "ldpsim.tasks.quantiles",
        "ldpsim.tasks.streams.multipliers",
    )

    B: int = 500
    beta: float = DEFAULT_BETA
    multiplier: Multiplier = "uniform"
    form: Form = "basic"
    simultaneous: bool = False
    band: Band = "sup-t"

    late_params: ClassVar[tuple[str, ...]] = ("intersect_constraint", "simultaneous", "band")

    def __post_init__(self) -> None:
        draws = check_int(self.B, "B", owner=self.name, low=smallest_b(), high=10**6)
        object.__setattr__(self, "B", draws)
        object.__setattr__(
            self, "beta", check_float(self.beta, "beta", owner=self.name, low=0, high=1)
        )
        check_choice(
            self.multiplier,
            "multiplier",
            ("uniform", "rademacher", "gaussian", "mammen"),
            owner=self.name,
        )
        check_choice(self.form, "form", get_args(Form), owner=self.name)
        if not isinstance(self.simultaneous, bool):
            raise TypeError(
                f"The 'simultaneous' parameter of {self.name} must be true or false. "
                f"Got {self.simultaneous!r}."
            )
        check_choice(self.band, "band", get_args(Band), owner=self.name)
        if self.band != "sup-t" and not self.simultaneous:
            raise ValueError(
                f"The 'band' parameter of {self.name} applies only to a simultaneous band: "
                f"set simultaneous = true, or leave 'band' out. Got band = {self.band!r}."
            )

    def block_len(self, n: int) -> int:
        """l = floor(n^beta)."""
        return block_partition(n, self.beta)[0]

    def n_blocks(self, n: int) -> int:
        """m = floor(n / l)."""
        return block_partition(n, self.beta)[1]

    def check(self, n: int, gamma: float) -> None:
        m = self.n_blocks(n)
        if m < 2:
            raise ValueError(
                f"The 'beta' parameter of bb gives fewer than 2 blocks for n = {n}: "
                f"block_len = {self.block_len(n)}, n_blocks = {m}; bb needs n_blocks >= 2. "
                f"Use a smaller beta or a larger n. Got beta = {self.beta}."
            )
        if gamma >= self.beta:
            warnings.warn(
                f"bb: the theory needs gamma < beta; got gamma = {gamma}, beta = {self.beta}.",
                OutsideTheoryWarning,
                stacklevel=2,
            )

    def cuts(self, n: int, gamma: float) -> np.ndarray:
        block_len = self.block_len(n)
        return block_len * np.arange(1, self.n_blocks(n) + 1, dtype=np.int64)

    def interval(
        self, stats: StreamingStats, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray]:
        lower, upper, failed = self.bounds(stats.stacked(), level, [rng])
        if failed[0]:
            raise FloatingPointError(self.zero_sd_failure)
        return lower[0], upper[0]

    def intervals_batch(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        lower, upper, _ = self.bounds(stats, level, rngs)
        return lower, upper

    @property
    def zero_sd_failure(self) -> str:
        """Why a replicate whose bootstrap sd is 0 in a coordinate has no interval."""
        what = "interval" if not self.simultaneous and self.form == "t" else "band"
        return f"a coordinate's bootstrap sd is 0: no {what}"

    def bounds(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every replicate's interval: (lower, upper) (R, d) and ``failed`` (R,), True
        where a coordinate's bootstrap sd is 0 (t form, simultaneous bands; its bounds
        NaN). The same numbers for a replicate alone or in a chunk, on every machine:
        compiled sums in a fixed order (:mod:`ldpsim.tasks.intervals.bootstrap_bounds`),
        no BLAS product."""
        n = stats.n
        if self.n_blocks(n) < 2:
            raise ValueError(f"bb needs at least 2 blocks; n = {n} gives {self.n_blocks(n)}.")
        block_len, n_blocks = self.block_len(n), self.n_blocks(n)
        theta_bar = np.ascontiguousarray(stats.theta_bar)
        centred = stats.deviation_sums(block_bounds(block_len, n_blocks), theta_bar)
        scale = float(n_blocks * block_len)
        shape = theta_bar.shape
        lower, upper = np.empty(shape), np.empty(shape)
        failed = np.zeros(shape[0], dtype=np.bool_)
        if self.simultaneous and self.band == "sidak":
            critical = t_critical(n_blocks, (1.0 + level ** (1.0 / stats.dim)) / 2.0)
            symmetric_bounds(theta_bar, centred, scale, critical, lower, upper, failed)
            return lower, upper, failed
        if not self.simultaneous and self.form == "t":
            critical = t_critical(n_blocks, (1.0 + level) / 2.0)
            symmetric_bounds(theta_bar, centred, scale, critical, lower, upper, failed)
            return lower, upper, failed
        alpha = 1.0 - level
        probs = (level,) if self.simultaneous else (alpha / 2, 1 - alpha / 2)
        positions = linear_positions(self.B, probs)
        form = SUP_T if self.simultaneous else BASIC if self.form == "basic" else PERCENTILE
        code = multiplier_code(self.multiplier)
        states = getattr(rngs, "states", None)
        batch = states() if callable(states) else None
        if batch is not None:  # every replicate's multipliers drawn in the compiled call
            none_given = np.empty((0, self.B, n_blocks))
            in_turn(multiplier_bounds)(
                code, batch, none_given, centred, scale, form, *positions, theta_bar,
                lower, upper, failed,
            )  # fmt: skip
            return lower, upper, failed
        # Generators only (a replicate alone): numpy draws the multipliers, a block of
        # replicates at a time, so that they stay in memory.
        no_states = np.empty((0, 4), dtype=np.uint64)
        rows = max(1, MULTIPLIERS_HELD // (self.B * n_blocks))
        for start in range(0, shape[0], rows):
            part = slice(start, min(start + rows, shape[0]))
            given = np.stack(
                [draw_multipliers(self.multiplier, (self.B, n_blocks), rng) for rng in rngs[part]]
            )
            in_turn(multiplier_bounds)(
                code, no_states, given, centred[part], scale, form, *positions,
                theta_bar[part], lower[part], upper[part], failed[part],
            )  # fmt: skip
        return lower, upper, failed


#: Multipliers drawn by numpy's Generators held at once by bb (float64s, 16 MB): where a
#: chunk's streams are Generators only, its replicates are bootstrapped this many at a time.
MULTIPLIERS_HELD = 2**21


def basic_interval(
    estimate: np.ndarray, deviations: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Efron's basic bootstrap interval [estimate - q_(1-a/2), estimate - q_(a/2)].

    Parameters
    ----------
    estimate : ndarray, shape (d,)
        The point estimate.
    deviations : ndarray, shape (B, d)
        Bootstrap draws minus the estimate (theta* - thetahat), B >= 1.
    level : float
        Confidence level 1 - a, in (0, 1).

    Returns
    -------
    (estimate, lower, upper) : three ndarrays of shape (d,)

    References
    ----------
    Davison, A. C. & Hinkley, D. V. (1997). Bootstrap methods and their application,
    section 5.2 (the basic interval).
    """
    alpha = 1.0 - level
    q_lo, q_hi = np.quantile(deviations, [alpha / 2, 1 - alpha / 2], axis=0)
    return estimate, estimate - q_hi, estimate - q_lo


def sup_t_band(
    centre: np.ndarray, draws: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """The sup-t band centre_j +- c sd_j from bootstrap draws of the estimator's error.

    Parameters
    ----------
    centre : ndarray, shape (d,)
        The estimate the band is centred on.
    draws : ndarray, shape (B, d)
        Bootstrap draws of (estimate* - estimate), B >= 2.
    level : float
        Simultaneous confidence level, in (0, 1).

    Returns
    -------
    (lower, upper), each of shape (d,)
        sd_j is the sample sd (ddof 1) of draws[:, j] and c the ``level`` quantile of
        max_j |draws[r, j]| / sd_j. A zero sd raises FloatingPointError.

    References
    ----------
    Montiel Olea, J. L. & Plagborg-Moller, M. (2019). Simultaneous confidence bands:
    theory, implementation, and an application to SVARs. J. Appl. Econometrics 34, 1-17.
    """
    draws = np.ascontiguousarray(draws, dtype=np.float64)
    (n_draws, d), positions = draws.shape, linear_positions(draws.shape[0], (level,))
    lower, upper = np.empty(d), np.empty(d)
    centre = np.ascontiguousarray(centre, dtype=np.float64)
    buffers = (np.empty(d), np.empty(d), np.empty((n_draws, d)), *np.empty((2, n_draws)))
    if sup_t_replicate(centre, draws, *positions, lower, upper, *buffers, np.empty(1)):
        raise FloatingPointError("a coordinate's bootstrap sd is 0: no band")
    return lower, upper


def sidak_band(
    centre: np.ndarray, centred: np.ndarray, block_len: int, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Sidak's band centre_j +- c sd_j from the block deviations of the bootstrap.

    Parameters
    ----------
    centre : ndarray, shape (d,)
        The estimate the band is centred on.
    centred : ndarray, shape (m, d)
        Block deviations S_k - l centre, m >= 2 blocks.
    block_len : int
        l >= 1, the block length: the bootstrap's draws are
        theta*_r = sum_k e_k centred_k / (m l).
    level : float
        Simultaneous confidence level, in (0, 1).

    Returns
    -------
    (lower, upper), each of shape (d,)
        sd_j = sqrt(sum_k centred_kj^2) / (m l) is the conditional sd of theta*_rj
        for multipliers of variance 1, and c = sqrt(m / (m - 1)) t_{m-1}(q) with
        q = (1 + level^(1/d)) / 2. For iid normal blocks (theta_bar_j - theta_j) / sd_j
        is sqrt(m / (m - 1)) times a t_{m-1} variable, so each coordinate is covered
        with probability level^(1/d), and all d with probability >= level by Sidak's
        inequality (= level for independent coordinates). A zero sd raises
        FloatingPointError (the method fails, as sup-t does).

    References
    ----------
    Sidak, Z. (1967). Rectangular confidence regions for the means of multivariate
    normal distributions. J. Amer. Statist. Assoc. 62, 626-633.
    """
    n_blocks, d = centred.shape
    critical = t_critical(n_blocks, (1.0 + level ** (1.0 / d)) / 2.0)
    return one_symmetric_bounds(centre, centred, block_len, critical, "band")


def conditional_sd(centred: np.ndarray, block_len: int) -> np.ndarray:
    """The multiplier bootstrap's exact conditional sd, per coordinate.

    Parameters
    ----------
    centred : ndarray, shape (m, d)
        Block deviations S_k - l theta_bar, m >= 1 blocks.
    block_len : int
        l >= 1, the block length.

    Returns
    -------
    ndarray, shape (d,)
        sqrt(sum_k centred_kj^2) / (m l): the sd of theta*_rj = sum_k e_k centred_kj / (m l)
        given the blocks, for iid multipliers of mean 0 and variance 1.
    """
    n_blocks = centred.shape[0]
    return np.sqrt(np.sum(centred**2, axis=0)) / (n_blocks * block_len)


def t_critical(n_blocks: int, quantile: float) -> float:
    """sqrt(m / (m - 1)) t_{m-1}(quantile): the fixed-m batch-means pivot's quantile.

    Parameters
    ----------
    n_blocks : int
        m >= 2.
    quantile : float
        In (0, 1).

    Notes
    -----
    For iid N(mu, s^2) block means, (theta_bar - mu) / sd with ``sd`` from
    :func:`conditional_sd` equals sqrt(m / (m - 1)) times a t_{m-1} variable, since
    sd^2 = (m - 1) s_m^2 / m^2 with s_m^2 the sample variance of the block means.
    """
    return math.sqrt(n_blocks / (n_blocks - 1)) * student_t_quantile(quantile, n_blocks - 1)


def t_interval(
    centre: np.ndarray, centred: np.ndarray, block_len: int, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """bb's ``form = 't'``: centre_j +- sqrt(m / (m - 1)) t_{m-1}((1 + level) / 2) sd_j.

    Parameters
    ----------
    centre : ndarray, shape (d,)
        The estimate the interval is centred on (theta_bar_n).
    centred : ndarray, shape (m, d)
        Block deviations S_k - l centre, m >= 2 blocks.
    block_len : int
        l >= 1, the block length.
    level : float
        Confidence level of each coordinate's interval, in (0, 1).

    Returns
    -------
    (lower, upper), each of shape (d,)
        sd_j from :func:`conditional_sd`. Each coordinate is covered with probability
        exactly ``level`` for iid normal blocks; the same as :func:`sidak_band` at d = 1.
        A zero sd raises FloatingPointError (the method fails).

    References
    ----------
    Dette, H. & Graw, C. (the blocks and the multiplier bootstrap).
    Chen, X., Lee, J. D., Tong, X. T. & Zhang, Y. (2020). Statistical inference for model
    parameters in stochastic gradient descent. Ann. Statist. 48, 251-273 (batch means).
    """
    critical = t_critical(centred.shape[0], (1.0 + level) / 2.0)
    return one_symmetric_bounds(centre, centred, block_len, critical, "interval")


def one_symmetric_bounds(
    centre: np.ndarray, centred: np.ndarray, block_len: int, critical: float, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`symmetric_bounds` of one replicate; FloatingPointError ("... no ``what``")
    where a coordinate's sd is 0."""
    centre = np.ascontiguousarray(centre, dtype=np.float64)
    lower, upper = np.empty((1, centre.size)), np.empty((1, centre.size))
    failed = np.zeros(1, dtype=np.bool_)
    scale = float(centred.shape[0] * block_len)
    centred = np.ascontiguousarray(centred, dtype=np.float64)[None]
    symmetric_bounds(centre[None], centred, scale, critical, lower, upper, failed)
    if failed[0]:
        raise FloatingPointError(f"a coordinate's bootstrap sd is 0: no {what}")
    return lower[0], upper[0]
