"""Randomized response on a binary gradient (Warner 1965), debiased."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism, draw_budget
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random
from ldpsim.tasks.validation import Constants, reading_recorded


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _randomized_response(d, g, params, s):
    # params = (q, lo, hi, scale, report_0, report_1): keep the bit with probability
    # p = 1 - q, flip it otherwise, report lo + scale (btilde - q) with
    # scale = (hi - lo) / (1 - 2q); unbiased for g. Both possible reports are
    # precomputed (report_b = lo + scale (b - q)), so the report is a select on
    # bit != flip and no arithmetic sits on the theta -> g -> theta dependency chain.
    u, s = random(s)
    flip = u < params[0]
    bit = g[0] > 0.5 * (params[1] + params[2])
    g[0] = params[5] if bit != flip else params[4]
    return s


@njit(inline="always")
def _randomized_response_per_user(d, g, params, s):
    # params = (lo, hi, low, high - low): the user's eps ~ Uniform(low, high) first, then
    # the flip with that user's q = 1 / (1 + e^eps) (finite_flip_probability), and the
    # report debiased with the same q.
    eps, s = draw_budget(params[2], params[3], s)
    q = finite_flip_probability(eps)
    u, s = random(s)
    bit = g[0] > 0.5 * (params[0] + params[1])
    reported = 1.0 if bit != (u < q) else 0.0
    g[0] = params[0] + (params[1] - params[0]) * (reported - q) / (1.0 - 2.0 * q)
    return s


#: The smallest eps (and budget_range low) accepted. The flip is drawn as u < q with u on
#: a grid of 2^-53 (2^-52 on the GPU), so the flip probability realized is q to within
#: 2^-52, and the debiased report's mean is off by at most 2^-52 / (1 - 2q) of hi - lo,
#: relative; 1 - 2q = tanh(eps / 2) ~ eps / 2 for small eps. At eps = 1e-6 that is
#: 4.5e-10; at eps = 1e-15 it would be 0.44 (the reports then ignore the data).
SMALLEST_EPS = 1e-6


def keep_probability(eps: float) -> float:
    """p = e^eps / (1 + e^eps), the probability that the true bit is reported."""
    return 1.0 if math.isinf(eps) else 1.0 / (1.0 + math.exp(-eps))


@njit(inline="always")
def finite_flip_probability(eps):
    """q = 1 / (1 + e^eps) for a finite eps > 0, as e^-eps / (1 + e^-eps) (1 - p loses
    all digits for large eps: q would round to 0 from eps ~ 37 on, no privacy at all).
    From eps ~ 745 on e^-eps underflows to 0; q is then the smallest positive double, so
    the flip keeps a positive probability (one uniform in 2^53) at every finite eps. The
    per-user callback calls it for each user's eps."""
    e = math.exp(-eps)
    return max(e / (1.0 + e), 5e-324)


def flip_probability(eps: float) -> float:
    """q = 1 - p = 1 / (1 + e^eps) (:func:`finite_flip_probability`); 0 at eps = inf."""
    return 0.0 if math.isinf(eps) else float(finite_flip_probability.py_func(eps))


_BELOW_SMALLEST = (
    "below it the flip probability 1 / (1 + e^eps) is so close to 1/2 that drawing the "
    "flip on the uniforms' grid (2^-53) biases the debiased reports by more than 4.5e-10 "
    "of hi - lo (from eps ~ 4.4e-16 down they ignore the data)."
)


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse(Mechanism):
    """Randomized response on the bit b of a two-valued gradient g in {lo, hi}.

    The user reports btilde = b with probability p = e^eps / (1 + e^eps) and 1 - b
    otherwise; the collector uses ghat = lo + (hi - lo)(btilde - (1 - p)) / (2p - 1),
    which satisfies E[ghat | X] = g. The likelihood ratio of any report under the two
    inputs is p / (1 - p) = e^eps: the mechanism is eps-LDP.

    Parameters
    ----------
    eps : float or None
        Privacy parameter, in [1e-6, inf] (:data:`SMALLEST_EPS`): below it the flip
        probability q is so close to 1/2 that drawing the flip on the uniforms' grid
        (2^-53) biases the debiased report by more than 4.5e-10 of hi - lo; from
        eps ~ 4.4e-16 down the reports ignore the data. None (the default): 1, unless
        ``budget_range`` is given.
    budget_range : list of 2 floats, optional
        ``[low, high]`` with 1e-6 <= low <= high < inf: user i's eps_i is drawn iid
        Uniform(low, high) and the report is flipped and debiased with that user's
        p_i. The report's variance averaged over users is
        (hi - lo)^2 E[e^eps / (e^eps - 1)^2]
        = (hi - lo)^2 (1 / (e^low - 1) - 1 / (e^high - 1)) / (high - low)
        (e^eps / (e^eps - 1)^2 is the derivative of -1 / (e^eps - 1)).

    References
    ----------
    Warner, S. L. (1965). Randomized response. JASA 60, 63-69.
    Dette, H. & Graw, C., section 4 (quantile estimation under LDP).
    Shi, Xie, Jiang, Kong & He (seed 004), section 3 (per-user budgets).
    """

    name = "randomized_response"
    privatize = _randomized_response
    privatize_per_user = _randomized_response_per_user

    eps: float | None = None

    def __post_init__(self) -> None:
        # The floor first, so that eps = 0 or a negative one is told the range that holds
        # here, [1e-6, inf], not the base's (0, inf]; then the base's checks of the rest.
        if not reading_recorded():
            self._check_floor()
        super().__post_init__()

    def _check_floor(self) -> None:
        def below(value: object) -> bool:
            real = isinstance(value, numbers.Real) and not isinstance(value, bool)
            return real and not math.isnan(value) and value < SMALLEST_EPS

        if self.budget_range is None and self.eps is not None and below(self.eps):
            raise ValueError(
                f"The 'eps' parameter of randomized_response must be a float in "
                f"[{SMALLEST_EPS:g}, inf]: {_BELOW_SMALLEST} Got {self.eps!r}."
            )
        pair = self.budget_range
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and below(pair[0]):
            raise ValueError(
                f"The 'budget_range' parameter of randomized_response must be a list "
                f"[low, high] of two finite floats with {SMALLEST_EPS:g} <= low <= high: "
                f"{_BELOW_SMALLEST} Got {list(pair)!r}."
            )

    def check_model(self, model: Model) -> None:
        if not model.binary_gradient:
            raise ValueError(
                f"The 'mechanism' randomized_response needs a model with a two-valued "
                f"gradient (quantile). Got model {model.name!r}."
            )

    def params(self, model: Model) -> np.ndarray:
        self.check_model(model)
        lo, hi = model.gradient_range()
        if self.budget_range is not None:
            low, high = self.budget_range
            return np.array([lo, hi, low, high - low], dtype=np.float64)
        q = flip_probability(self.eps)
        scale = (hi - lo) / (1.0 - 2.0 * q)
        report_0, report_1 = lo + scale * (0.0 - q), lo + scale * (1.0 - q)
        return np.array([q, lo, hi, scale, report_0, report_1], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        lo, hi = model.gradient_range()
        return hi - lo

    def constants(self, model: Model) -> Constants:
        if self.budget_range is not None:
            return {
                "the report variance averaged over the users' eps": lambda: self.variance(model)
            }
        return {
            "the debiasing scale (hi - lo) / (1 - 2q)": lambda: self.params(model),
            "the report variance": lambda: self.variance(model),
        }

    def likelihood_ratio(self) -> float:
        """P(report = b | b) / P(report = b | 1 - b) = p / (1 - p) = e^eps (fixed eps)."""
        if self.budget_range is not None:
            raise ValueError("The likelihood ratio e^eps_i differs between users.")
        q = flip_probability(self.eps)
        return math.inf if q == 0.0 else (1.0 - q) / q

    def variance(self, model: Model) -> np.ndarray:
        # Conditional variance of the debiased report: (hi-lo)^2 p(1-p)/(2p-1)^2,
        # = e^eps/(e^eps-1)^2 for hi - lo = 1 (SPEC 3.1, corrected privacy term).
        width = self.sensitivity(model)
        if self.budget_range is not None:
            return np.array([[width**2 * mean_privacy_variance(*self.budget_range)]])
        q = flip_probability(self.eps)
        return np.array([[width**2 * q * (1.0 - q) / (1.0 - 2.0 * q) ** 2]])


def mean_privacy_variance(low: float, high: float) -> float:
    """E[e^eps / (e^eps - 1)^2] for eps ~ Uniform(low, high), 0 < low <= high < inf.

    = (1 / (e^low - 1) - 1 / (e^high - 1)) / (high - low). Below a relative width of
    1e-6 the difference would cancel; the midpoint value is used there instead (its
    error, O(width^2), is below 1e-11 relative).
    """
    if high - low <= 1e-6 * high:
        mid = 0.5 * (low + high)
        return math.exp(-mid) / math.expm1(-mid) ** 2  # e^eps / (e^eps - 1)^2, no overflow
    return (_inverse_expm1(low) - _inverse_expm1(high)) / (high - low)


def _inverse_expm1(eps: float) -> float:
    """1 / (e^eps - 1) for eps > 0; e^-eps, its value to the last digit, from eps = 700 on,
    where e^eps overflows (a budget range up to 1e300 is allowed)."""
    return math.exp(-eps) if eps >= 700.0 else 1.0 / math.expm1(eps)
