"""Duchi, Jordan & Wainwright's two-point mechanism for a bounded scalar gradient."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism, draw_budget
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random


@njit(inline="always")
def _two_points(g, mid, half, a, s):
    # u = (g - mid) / half in [-1, 1]; report mid + half / a with probability
    # 1/2 + a u / 2, else mid - half / a; a = tanh(eps / 2) = (e^eps - 1) / (e^eps + 1).
    u, s = random(s)
    up = u < 0.5 + 0.5 * a * (g[0] - mid) / half
    g[0] = mid + half / a if up else mid - half / a
    return s


@njit(inline="always")
def _duchi(d, g, params, s):
    # params = (mid, half, a).
    return _two_points(g, params[0], params[1], params[2], s)


@njit(inline="always")
def _duchi_per_user(d, g, params, s):
    # params = (mid, half, low, high - low): the user's eps ~ Uniform(low, high) first.
    eps, s = draw_budget(params[2], params[3], s)
    return _two_points(g, params[0], params[1], math.tanh(0.5 * eps), s)


@dataclass(frozen=True, kw_only=True)
class Duchi(Mechanism):
    """Report one of two points, mid +- half / a, with a probability linear in the gradient.

    For a gradient g in [lo, hi] (d = 1), u = (g - mid) / half with mid, half the centre
    and half-width of [lo, hi]. The report is mid + half / a with probability
    1/2 + a u / 2 and mid - half / a otherwise, a = (e^eps - 1) / (e^eps + 1), so it is
    unbiased. Its two probabilities differ between any two gradients by a factor of at
    most (1 + a) / (1 - a) = e^eps: eps-LDP.

    Parameters
    ----------
    eps : float or None
        Privacy parameter, in (0, inf). None (the default): 1, unless ``budget_range``
        is given.
    budget_range : list of 2 floats, optional
        ``[low, high]``: user i's eps_i is drawn iid Uniform(low, high).

    References
    ----------
    Duchi, J. C., Jordan, M. I. & Wainwright, M. J. (2018). Minimax optimal procedures
    for locally private estimation. JASA 113, 182-201.
    """

    name = "duchi"
    privatize = _duchi
    privatize_per_user = _duchi_per_user

    eps: float | None = None

    def check_model(self, model: Model) -> None:
        if model.dim != 1 or (self.eps is not None and math.isinf(self.eps)):
            raise ValueError(
                f"The 'mechanism' duchi needs a model with d = 1 and a finite eps. Got "
                f"model {model.name!r} (d = {model.dim}) and eps = {self.eps}."
            )

    def _centre(self, model: Model) -> tuple[float, float]:
        lo, hi = model.gradient_range()
        return 0.5 * (lo + hi), 0.5 * (hi - lo)

    def params(self, model: Model) -> np.ndarray:
        self.check_model(model)
        mid, half = self._centre(model)
        if self.budget_range is not None:
            low, high = self.budget_range
            return np.array([mid, half, low, high - low])
        return np.array([mid, half, math.tanh(0.5 * self.eps)])

    def sensitivity(self, model: Model) -> float:
        lo, hi = model.gradient_range()
        return hi - lo

    def variance(self, model: Model) -> np.ndarray:
        # Var(report | g) = half^2 / a^2 - (g - mid)^2; at theta* E g = 0, so averaged over
        # the data: half^2 E[1 / a^2] - E[g^2] - mid^2, with 1 / a^2 = coth^2(eps / 2).
        # Over eps ~ Uniform(low, high): E coth^2(eps/2) = 1 + 2 (coth(low/2) -
        # coth(high/2)) / (high - low), since the integral of coth^2(x/2) is x - 2 coth(x/2).
        mid, half = self._centre(model)
        if self.budget_range is None:
            inverse_a2 = 1.0 / math.tanh(0.5 * self.eps) ** 2
        else:
            low, high = self.budget_range
            if high - low <= 1e-6 * high:  # the difference would cancel: the midpoint
                inverse_a2 = 1.0 / math.tanh(0.25 * (low + high)) ** 2
            else:
                coth_gap = 1.0 / math.tanh(0.5 * low) - 1.0 / math.tanh(0.5 * high)
                inverse_a2 = 1.0 + 2.0 * coth_gap / (high - low)
        second_moment = float(model.gradient_cov()[0, 0])
        return np.array([[half**2 * inverse_a2 - second_moment - mid**2]])
