"""The tau-quantile of Uniform(low, high): a model whose every constant is exact."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random
from ldpsim.tasks.validation import check_float


@njit(inline="always")
def _uniform_quantile_gradient(d, theta, params, s, g):
    # params = (low, width, -tau, 1 - tau); g = 1{X <= theta} - tau, X ~ U(low, low + width).
    # The one convention of every callback: draw from the state s, write the gradient
    # into g[0..d), index theta and params only, and hand the advanced state back.
    u, s = random(s)
    x = params[0] + params[1] * u
    g[0] = params[3] if x <= theta[0] else params[2]
    return s


@dataclass(frozen=True, kw_only=True)
class UniformQuantile(Model):
    """The tau-quantile of X ~ Uniform(low, high), by SGD on the check loss.

    Parameters
    ----------
    tau : float
        Quantile level, in (0, 1).
    low, high : float
        The support, finite floats with low < high.

    Notes
    -----
    theta* = low + tau (high - low); G = f(theta*) = 1 / (high - low);
    S = tau (1 - tau); the gradient takes the two values -tau and 1 - tau.
    """

    name = "uniform_quantile"
    sample_gradient = _uniform_quantile_gradient
    binary_gradient = True

    tau: float = 0.5
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tau", check_float(self.tau, "tau", owner=self.name, low=0, high=1)
        )
        low = check_float(self.low, "low", owner=self.name)
        high = check_float(self.high, "high", owner=self.name, low=low)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def dim(self) -> int:
        return 1

    def params(self) -> np.ndarray:
        return np.array([self.low, self.high - self.low, -self.tau, 1.0 - self.tau])

    def truth(self) -> np.ndarray:
        return np.array([self.low + self.tau * (self.high - self.low)])

    def jacobian(self) -> np.ndarray:
        return np.array([[1.0 / (self.high - self.low)]])

    def gradient_cov(self) -> np.ndarray:
        return np.array([[self.tau * (1.0 - self.tau)]])

    def gradient_range(self) -> tuple[float, float]:
        return -self.tau, 1.0 - self.tau

    def l2_sensitivity(self) -> float:
        return 1.0  # two values 1 apart (d = 1): Delta2 = Delta1 = 1

    def l1_sensitivity(self) -> float:
        return 1.0
