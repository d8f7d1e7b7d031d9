"""Mean of bounded data: the sanity model with a linear gradient."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model, check_loc
from ldpsim.tasks.normal import normal_cdf, normal_pdf
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import check_int


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _mean_gradient(d, theta, params, s, g):
    # params = (loc, low, high): x_j ~ N(loc, 1) truncated to [low, high]; g = theta - x.
    for j in range(d):
        z, s = standard_normal(s)
        x = params[0] + z
        while x < params[1] or x > params[2]:
            z, s = standard_normal(s)
            x = params[0] + z
        g[j] = theta[j] - x
    return s


@njit(inline="always")
def _mean_observation(d, params, s, x):
    # The draws of _mean_gradient: each coordinate N(loc, 1) truncated by rejection.
    for j in range(d):
        z, s = standard_normal(s)
        value = params[0] + z
        while value < params[1] or value > params[2]:
            z, s = standard_normal(s)
            value = params[0] + z
        x[j] = value
    return s


@dataclass(frozen=True, kw_only=True)
class Mean(Model):
    """Mean of X with iid coordinates N(loc, 1) truncated to [loc - 1, loc + 1].

    Parameters
    ----------
    d : int
        Dimension, in [1, 64].
    loc : float
        Centre of the data's box [loc - 1, loc + 1]^d, in [-1e6, 1e6] (beyond it the
        draws' rounding begins to change the data's law); theta* = loc.

    Notes
    -----
    Coordinates are N(loc, 1) truncated to [loc - 1, loc + 1], so theta* = E[X] = loc
    and the box has l1-diameter Delta1 = 2d (SPEC 3.3 with the box centred at ``loc``)
    and l2-diameter Delta2 = 2 sqrt(d).
    g = theta - X is linear in theta: G = I, S = Cov(X) = v I with
    v = 1 - 2 phi(1) / (2 Phi(1) - 1). The recursion is linear, which permits exact
    finite-n checks.
    """

    name = "mean"
    sample_gradient = _mean_gradient
    sample_observation = _mean_observation

    d: int = 1
    loc: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", check_int(self.d, "d", owner=self.name, low=1, high=64))
        object.__setattr__(self, "loc", check_loc(self.loc, self.name))

    @property
    def dim(self) -> int:
        return self.d

    def params(self) -> np.ndarray:
        return np.array([self.loc, self.loc - 1.0, self.loc + 1.0], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.full(self.d, self.loc)

    def jacobian(self) -> np.ndarray:
        return np.eye(self.d)

    def gradient_cov(self) -> np.ndarray:
        v = 1.0 - 2.0 * normal_pdf(1.0) / (2.0 * normal_cdf(1.0) - 1.0)
        return v * np.eye(self.d)

    def l2_sensitivity(self) -> float:
        # g - g' = x' - x for x, x' in a box of side 2: the box's diagonal, 2 sqrt(d).
        return 2.0 * math.sqrt(self.d)

    def l1_sensitivity(self) -> float:
        return 2.0 * self.d
