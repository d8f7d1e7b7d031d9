"""Quantile model (d = 1): theta* = F^-1(tau) of X ~ N(loc, 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy import stats

from tasks.models.base import Model
from tasks.validation import check_float


@njit(cache=True)
def _quantile_gradient(theta, params, rng, g):
    # params = (tau, loc); g = 1{X <= theta} - tau with X ~ N(loc, 1).
    # Branch-free (the branch would be a coin flip): select between the two values.
    x = params[1] + rng.standard_normal()
    g_1 = 1.0 - params[0]
    g_0 = 0.0 - params[0]
    g[0] = g_1 if x <= theta[0] else g_0


@dataclass(frozen=True, kw_only=True)
class Quantile(Model):
    """The tau-quantile of X ~ N(loc, 1), estimated by SGD on the check loss.

    Parameters
    ----------
    tau : float
        Quantile level, in (0, 1).
    loc : float
        Location of the data, any finite float (shifts theta* by ``loc``; used by the
        location-equivariance checks).

    Notes
    -----
    g(X, theta) = 1{X <= theta} - tau takes two values, so randomized response on the
    bit applies. G = f(theta*), S = tau (1 - tau).

    References
    ----------
    Dette, H. & Graw, C. Uncertainty quantification by block bootstrap for
    differentially private stochastic gradient descent, section 4.
    """

    name = "quantile"
    sample_gradient = _quantile_gradient
    binary_gradient = True

    tau: float = 0.5
    loc: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tau", check_float(self.tau, "tau", owner=self.name, low=0, high=1)
        )
        object.__setattr__(self, "loc", check_float(self.loc, "loc", owner=self.name))

    @property
    def dim(self) -> int:
        return 1

    def params(self) -> np.ndarray:
        return np.array([self.tau, self.loc], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.array([self.loc + stats.norm.ppf(self.tau)])

    def jacobian(self) -> np.ndarray:
        return np.array([[stats.norm.pdf(stats.norm.ppf(self.tau))]])

    def gradient_cov(self) -> np.ndarray:
        return np.array([[self.tau * (1 - self.tau)]])

    def gradient_range(self) -> tuple[float, float]:
        return (-self.tau, 1.0 - self.tau)

    def l1_sensitivity(self) -> float:
        return 1.0
