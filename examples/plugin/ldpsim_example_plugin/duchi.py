"""Duchi, Jordan & Wainwright's two-point mechanism for a bounded scalar gradient."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.rng import random


@njit(inline="always")
def _duchi(d, g, params, s):
    # params = (mid, half, B, a): u = (g - mid) / half in [-1, 1]; report mid + half B with
    # probability 1/2 + a u / 2, a = (e^eps - 1) / (e^eps + 1), else mid - half B.
    u, s = random(s)
    scaled = (g[0] - params[0]) / params[1]
    up = u < 0.5 + 0.5 * params[3] * scaled
    g[0] = params[0] + params[1] * params[2] if up else params[0] - params[1] * params[2]
    return s


@dataclass(frozen=True, kw_only=True)
class Duchi(Mechanism):
    """Report one of two points, mid +- half B, with a probability linear in the gradient.

    For a gradient g in [lo, hi] (d = 1), u = (g - mid) / half with mid, half the centre
    and half-width of [lo, hi]. The report is mid + half B with probability
    1/2 + a u / 2 and mid - half B otherwise, a = (e^eps - 1) / (e^eps + 1) and
    B = 1 / a, so it is unbiased. Its two probabilities differ between any two
    gradients by a factor of at most (1 + a) / (1 - a) = e^eps: eps-LDP.

    Parameters
    ----------
    eps : float
        Privacy parameter, in (0, inf).

    References
    ----------
    Duchi, J. C., Jordan, M. I. & Wainwright, M. J. (2018). Minimax optimal procedures
    for locally private estimation. JASA 113, 182-201.
    """

    name = "duchi"
    privatize = _duchi

    def check_model(self, model: Model) -> None:
        if model.dim != 1 or math.isinf(self.eps):
            raise ValueError(
                f"The 'mechanism' duchi needs a model with d = 1 and a finite eps. Got "
                f"model {model.name!r} (d = {model.dim}) and eps = {self.eps}."
            )

    def _shape(self, model: Model) -> tuple[float, float, float]:
        lo, hi = model.gradient_range()
        return 0.5 * (lo + hi), 0.5 * (hi - lo), math.tanh(self.eps / 2.0)

    def params(self, model: Model) -> np.ndarray:
        self.check_model(model)
        mid, half, a = self._shape(model)
        return np.array([mid, half, 1.0 / a, a])

    def sensitivity(self, model: Model) -> float:
        lo, hi = model.gradient_range()
        return hi - lo

    def variance(self, model: Model) -> np.ndarray:
        # Var(report | g) = half^2 B^2 - (g - mid)^2; at theta* E g = 0, so averaged over
        # the data: half^2 B^2 - E[g^2] - mid^2.
        mid, half, a = self._shape(model)
        second_moment = float(model.gradient_cov()[0, 0])
        return np.array([[(half / a) ** 2 - second_moment - mid**2]])
