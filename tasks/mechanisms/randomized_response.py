"""Randomized response on a binary gradient (Warner 1965), debiased."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.rng import random


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


def keep_probability(eps: float) -> float:
    """p = e^eps / (1 + e^eps), the probability that the true bit is reported."""
    return 1.0 if math.isinf(eps) else 1.0 / (1.0 + math.exp(-eps))


def flip_probability(eps: float) -> float:
    """q = 1 - p = 1 / (1 + e^eps), computed directly: 1 - p loses all digits for
    large eps (q would round to 0 from eps ~ 37 on, i.e. no privacy at all)."""
    if math.isinf(eps):
        return 0.0
    e = math.exp(-eps)
    return e / (1.0 + e)


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse(Mechanism):
    """Randomized response on the bit b of a two-valued gradient g in {lo, hi}.

    The user reports btilde = b with probability p = e^eps / (1 + e^eps) and 1 - b
    otherwise; the collector uses ghat = lo + (hi - lo)(btilde - (1 - p)) / (2p - 1),
    which satisfies E[ghat | X] = g. The likelihood ratio of any report under the two
    inputs is p / (1 - p) = e^eps: the mechanism is eps-LDP.

    Parameters
    ----------
    eps : float
        Privacy parameter, in (0, inf].

    References
    ----------
    Warner, S. L. (1965). Randomized response. JASA 60, 63-69.
    Dette, H. & Graw, C., section 4 (quantile estimation under LDP).
    """

    name = "randomized_response"
    privatize = _randomized_response

    def check_model(self, model: Model) -> None:
        if not model.binary_gradient:
            raise ValueError(
                f"The 'mechanism' randomized_response needs a model with a two-valued "
                f"gradient (quantile). Got model {model.name!r}."
            )

    def params(self, model: Model) -> np.ndarray:
        self.check_model(model)
        lo, hi = model.gradient_range()
        q = flip_probability(self.eps)
        scale = (hi - lo) / (1.0 - 2.0 * q)
        report_0, report_1 = lo + scale * (0.0 - q), lo + scale * (1.0 - q)
        return np.array([q, lo, hi, scale, report_0, report_1], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        lo, hi = model.gradient_range()
        return hi - lo

    def likelihood_ratio(self) -> float:
        """P(report = b | b) / P(report = b | 1 - b) = p / (1 - p) = e^eps."""
        q = flip_probability(self.eps)
        return math.inf if q == 0.0 else (1.0 - q) / q

    def variance(self, model: Model) -> np.ndarray:
        # Conditional variance of the debiased report: (hi-lo)^2 p(1-p)/(2p-1)^2,
        # = e^eps/(e^eps-1)^2 for hi - lo = 1 (SPEC 3.1, corrected privacy term).
        q = flip_probability(self.eps)
        width = self.sensitivity(model)
        return np.array([[width**2 * q * (1.0 - q) / (1.0 - 2.0 * q) ** 2]])
