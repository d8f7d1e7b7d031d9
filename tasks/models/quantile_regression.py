"""Linear quantile regression with covariates truncated to [-1, 1]."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.normal import normal_cdf, normal_pdf, normal_ppf
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import check_float, check_int, check_vector


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _qr_gradient(d, theta, params, s, g):
    # params = (tau, Phi^-1(tau), coef_0..coef_{d-1}).
    tau = params[0]
    resid = 0.0  # y - x'theta, accumulated below
    # x_0 = 1 (intercept), x_j ~ N(0,1) truncated to [-1, 1] by rejection.
    g[0] = 1.0
    for j in range(1, d):
        z, s = standard_normal(s)
        while abs(z) > 1.0:
            z, s = standard_normal(s)
        g[j] = z
    xi, s = standard_normal(s)
    e = xi - params[1]
    for j in range(d):
        resid += g[j] * (params[2 + j] - theta[j])
    resid += e
    w = (1.0 if resid <= 0.0 else 0.0) - tau
    for j in range(d):
        g[j] *= w
    return s


def truncated_variance() -> float:
    """E[Z^2] of Z ~ N(0, 1) truncated to [-1, 1]: 1 - 2 phi(1) / (2 Phi(1) - 1).

    A function, not a constant of the module: Phi imports scipy.special (half a second),
    which a process that never builds this model does not need."""
    return 1.0 - 2.0 * normal_pdf(1.0) / (2.0 * normal_cdf(1.0) - 1.0)


@dataclass(frozen=True, kw_only=True)
class QuantileRegression(Model):
    """Linear tau-quantile regression y = x'coef + e, the paper's second model.

    Parameters
    ----------
    tau : float
        Quantile level, in (0, 1).
    coef : list of float
        beta_tau in the paper, finite, length d >= 1 (intercept first); the paper uses
        (0, 0, 1, -1).

    Notes
    -----
    x = (1, Z_1, ..., Z_{d-1}), Z_j iid N(0, 1) truncated to [-1, 1];
    e = xi - Phi^-1(tau), xi ~ N(0, 1), so the tau-quantile of e is 0.
    g(x, y, theta) = (1{y - x'theta <= 0} - tau) x; G = phi(Phi^-1(tau)) Sigma_X,
    S = tau (1 - tau) Sigma_X with Sigma_X = diag(1, v, ..., v).
    Sensitivities: Delta1 = 2 max(tau, 1 - tau) d (SPEC 3.2, an upper bound) and
    Delta2 = max(sqrt(d), 2 max(tau, 1 - tau) sqrt(d - 1)) (exact).

    References
    ----------
    Dette, H. & Graw, C. Uncertainty quantification by block bootstrap for
    differentially private stochastic gradient descent, section 4.
    """

    name = "quantile_regression"
    sample_gradient = _qr_gradient

    tau: float = 0.5
    coef: tuple[float, ...] = (0.0, 0.0, 1.0, -1.0)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tau", check_float(self.tau, "tau", owner=self.name, low=0, high=1)
        )
        coef = self.coef
        if isinstance(coef, list | tuple | np.ndarray):
            check_int(len(coef), "len(coef)", owner=self.name, low=1, high=64)
            coef = check_vector(coef, "coef", len(coef), owner=self.name)
        else:
            raise TypeError(
                f"The 'coef' parameter of {self.name} must be a list of 1 to 64 finite "
                f"floats. Got {coef!r}."
            )
        object.__setattr__(self, "coef", coef)

    @property
    def dim(self) -> int:
        return len(self.coef)

    def params(self) -> np.ndarray:
        return np.array([self.tau, normal_ppf(self.tau), *self.coef], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.array(self.coef, dtype=np.float64)

    def covariate_cov(self) -> np.ndarray:
        """Sigma_X = E[x x'] = diag(1, v, ..., v)."""
        return np.diag([1.0] + [truncated_variance()] * (self.dim - 1))

    def jacobian(self) -> np.ndarray:
        return normal_pdf(normal_ppf(self.tau)) * self.covariate_cov()

    def gradient_cov(self) -> np.ndarray:
        return self.tau * (1 - self.tau) * self.covariate_cov()

    def l2_sensitivity(self) -> float:
        # g - g' = w x - w' x' with w, w' in {-tau, 1 - tau}, x_0 = 1, |x_j| <= 1. If
        # w != w': |w - w'| = 1 on the intercept and |w x_j - w' x'_j| <= |w| + |w'| = 1
        # on each slope, sqrt(d) in all; if w = w': 0 and 2 |w| on each slope. The sup is
        # attained at x_j = +-1 (the corners; tests/tasks/test_models.py enumerates them).
        m = max(self.tau, 1.0 - self.tau)
        return max(math.sqrt(self.dim), 2.0 * m * math.sqrt(self.dim - 1))

    def l1_sensitivity(self) -> float:
        # SPEC 3.2: Delta = 2 max(tau, 1 - tau) * m * d with m = max |x_j| = 1.
        return 2.0 * max(self.tau, 1.0 - self.tau) * self.dim
