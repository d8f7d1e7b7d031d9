"""Mean of Beta(a, b) data on [0, 1]: the bounded mean that NPRR covers at every n."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random, standard_normal
from ldpsim.tasks.validation import check_float

#: Below this a gamma draw is also kept as its logarithm: U^(1 / shape) underflows for
#: small shapes (at shape = 1e-3 to 0 whenever U < e^-0.745), and G_a / (G_a + G_b) then
#: loses its digits, or is 0 / 0. 2^-969: where the larger draw is at least this, the
#: ratio keeps the digits a double can hold, and is computed as before.
_TINY = 2.0**-969
#: The smallest normal double: where both draws are at least this, the ratio is exact to
#: rounding, as before.
_NORMAL = 2.0**-1022


@njit(inline="always")
def _standard_gamma(shape, s):
    # Marsaglia & Tsang (2000) for shape >= 1; for shape < 1 a Gamma(shape + 1) draw
    # times U^(1 / shape) (their section 6). Returns (g, log g or 0, s): log g is
    # computed only where g < _TINY (-inf where U = 0).
    boosted = shape < 1.0
    a = shape + 1.0 if boosted else shape
    dd = a - 1.0 / 3.0
    cc = 1.0 / math.sqrt(9.0 * dd)
    while True:
        z, s = standard_normal(s)
        v = 1.0 + cc * z
        if v <= 0.0:
            continue
        v = v * v * v
        u, s = random(s)
        if u < 1.0 - 0.0331 * z * z * z * z:
            break
        if math.log(u) < 0.5 * z * z + dd * (1.0 - v + math.log(v)):
            break
    g = dd * v
    u = 1.0
    if boosted:
        u, s = random(s)
        g *= u ** (1.0 / shape)
    log_g = 0.0
    if g < _TINY:
        log_g = math.log(dd * v) + (math.log(u) / shape if u > 0.0 else -math.inf)
    return g, log_g, s


@njit(inline="always")
def _beta(a, b, s):
    # X = G_a / (G_a + G_b) ~ Beta(a, b), as before wherever both draws are normal
    # doubles or the larger is at least _TINY. Else (both tiny: shapes < 1) from the
    # logarithms, X = 1 / (1 + e^(log G_b - log G_a)). Both U = 0 (probability 2^-106)
    # gives no ratio: such a point is resolved to the mean.
    ga, log_a, s = _standard_gamma(a, s)
    gb, log_b, s = _standard_gamma(b, s)
    if min(ga, gb) >= _NORMAL or max(ga, gb) >= _TINY:
        return ga / (ga + gb), s
    gap = log_b - log_a  # both below _TINY here: both logarithms kept
    if math.isnan(gap):
        return a / (a + b), s
    if gap > 0.0:  # X = e^-gap / (1 + e^-gap): tiny, down to the subnormals
        tail = math.exp(-gap)
        return tail / (1.0 + tail), s
    return 1.0 / (1.0 + math.exp(gap)), s


@njit(inline="always")
def _bounded_mean_gradient(d, theta, params, s, g):
    # params = (a, b): x ~ Beta(a, b); g = theta - x (d = 1).
    x, s = _beta(params[0], params[1], s)
    g[0] = theta[0] - x
    return s


@njit(inline="always")
def _bounded_mean_observation(d, params, s, x):
    # The draws of _bounded_mean_gradient, in the same order.
    value, s = _beta(params[0], params[1], s)
    x[0] = value
    return s


@dataclass(frozen=True, kw_only=True)
class BoundedMean(Model):
    """Mean of X ~ Beta(a, b), a bounded variable on [0, 1] (d = 1).

    The model on which NPRR's finite-sample intervals (``nprr``) and the LDP-SGD
    intervals are compared on the same users. g = theta - X, so SGD's average is the
    mean of a linear recursion, as for ``mean``.

    Parameters
    ----------
    a, b : float
        Shape parameters of the Beta law, each in (0, 1000] (defaults 2 and 5, the law of
        Waudby-Smith, Wu & Ramdas's simulations).

    Notes
    -----
    theta* = a / (a + b); G = 1; S = Var X = a b / ((a + b)^2 (a + b + 1)). Since
    X is in [0, 1], g - g' = x' - x lies in [-1, 1]: Delta1 = Delta2 = 1.
    The Beta draws are Gamma(a) / (Gamma(a) + Gamma(b)) by Marsaglia & Tsang's method
    from the replicate's stream.

    References
    ----------
    Marsaglia, G. & Tsang, W. W. (2000). A simple method for generating gamma variables.
    ACM Trans. Math. Softw. 26, 363-372.
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023). Nonparametric extensions of
    randomized response for private confidence sets. ICML (arXiv:2202.08728).
    """

    name = "bounded_mean"
    sample_gradient = _bounded_mean_gradient
    sample_observation = _bounded_mean_observation

    a: float = 2.0
    b: float = 5.0

    def __post_init__(self) -> None:
        for key in ("a", "b"):
            value = check_float(
                getattr(self, key), key, owner=self.name, low=0, high=1000, high_open=False
            )
            object.__setattr__(self, key, value)

    @property
    def dim(self) -> int:
        return 1

    def params(self) -> np.ndarray:
        return np.array([self.a, self.b], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.array([self.a / (self.a + self.b)])

    def jacobian(self) -> np.ndarray:
        return np.eye(1)

    def gradient_cov(self) -> np.ndarray:
        total = self.a + self.b
        return np.array([[self.a * self.b / (total**2 * (total + 1.0))]])

    def l2_sensitivity(self) -> float:
        return 1.0

    def l1_sensitivity(self) -> float:
        return 1.0
