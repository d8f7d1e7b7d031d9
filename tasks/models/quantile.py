"""Quantile model (d = 1): theta* = F^-1(tau) of X ~ N(loc, 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model, check_loc
from ldpsim.tasks.normal import normal_pdf, normal_ppf
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import check_float


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _quantile_gradient(d, theta, params, s, g):
    # params = (tau, loc, -tau, 1 - tau); g = 1{X <= theta} - tau with X ~ N(loc, 1).
    # Branch-free (the branch would be a coin flip): a select between the two values,
    # precomputed in params so that no arithmetic sits between theta and g.
    z, s = standard_normal(s)
    x = params[1] + z
    g[0] = params[3] if x <= theta[0] else params[2]
    return s


@njit(inline="always")
def _quantile_observation(d, params, s, x):
    # The draw of _quantile_gradient: X = loc + Z, Z ~ N(0, 1).
    z, s = standard_normal(s)
    x[0] = params[1] + z
    return s


@dataclass(frozen=True, kw_only=True)
class Quantile(Model):
    """The tau-quantile of X ~ N(loc, 1), estimated by SGD on the check loss.

    Parameters
    ----------
    tau : float
        Quantile level, in (0, 1).
    loc : float
        Location of the data, in [-1e6, 1e6] (shifts theta* by ``loc``; used by the
        location-equivariance checks). Beyond it the draws' rounding (ulp(loc)) begins
        to change the data's law: at 1e16 every draw is loc.

    Notes
    -----
    g(X, theta) = 1{X <= theta} - tau takes two values, so randomized response on the
    bit applies. G = f(theta*), S = tau (1 - tau). Delta1 = Delta2 = 1.

    References
    ----------
    Dette, H. & Graw, C. Uncertainty quantification by block bootstrap for
    differentially private stochastic gradient descent, section 4.
    """

    name = "quantile"
    sample_gradient = _quantile_gradient
    sample_observation = _quantile_observation
    binary_gradient = True

    tau: float = 0.5
    loc: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tau", check_float(self.tau, "tau", owner=self.name, low=0, high=1)
        )
        object.__setattr__(self, "loc", check_loc(self.loc, self.name))

    @property
    def dim(self) -> int:
        return 1

    def params(self) -> np.ndarray:
        return np.array([self.tau, self.loc, 0.0 - self.tau, 1.0 - self.tau], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.array([self.loc + normal_ppf(self.tau)])

    def jacobian(self) -> np.ndarray:
        return np.array([[normal_pdf(normal_ppf(self.tau))]])

    def gradient_cov(self) -> np.ndarray:
        return np.array([[self.tau * (1 - self.tau)]])

    def gradient_range(self) -> tuple[float, float]:
        return (-self.tau, 1.0 - self.tau)

    def l2_sensitivity(self) -> float:
        # g takes the two values -tau and 1 - tau.
        return 1.0

    def l1_sensitivity(self) -> float:
        return 1.0
