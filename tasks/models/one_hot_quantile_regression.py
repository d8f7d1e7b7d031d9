"""Quantile regression on a one-hot covariate: the embedding case of seed 003 (s = 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.normal import normal_pdf, normal_ppf
from ldpsim.tasks.streams.rng import random, standard_normal
from ldpsim.tasks.validation import MAX_SPARSE_DIM, check_float, check_int, check_vector


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _one_hot_qr_gradient(d, theta, params, s, g):
    # params = (tau, Phi^-1(tau), F_0..F_{d-1}, coef_0..coef_{d-1}), F the cumulative
    # category probabilities (F_{d-1} = 1). C = the first j with u < F_j (bisection);
    # y = coef_C + xi - Phi^-1(tau); g = (1{y <= theta_C} - tau) e_C.
    u, s = random(s)
    low, high = 0, d - 1
    while low < high:
        mid = (low + high) // 2
        if u < params[2 + mid]:
            high = mid
        else:
            low = mid + 1
    xi, s = standard_normal(s)
    y = params[2 + d + low] + xi - params[1]
    for j in range(d):
        g[j] = 0.0
    g[low] = (1.0 if y <= theta[low] else 0.0) - params[0]
    return s


@dataclass(frozen=True, kw_only=True)
class OneHotQuantileRegression(Model):
    """tau-quantile regression on a one-hot covariate x = e_C (SPEC 11).

    Parameters
    ----------
    d : int
        Number of categories, in [1, 5000].
    tau : float
        Quantile level, in (0, 1).
    coef : float or list of float
        beta_tau: one finite value for every category, or d of them.
    probs : list of float or None
        pi, the law of C: d probabilities > 0 summing to 1 (within 1e-9); None (the
        default) is uniform.

    Notes
    -----
    C ~ Categorical(pi), x = e_C, y = beta_C + xi - Phi^-1(tau), xi ~ N(0, 1), so the
    tau-quantile of y given C is beta_C. g = (1{y <= x'theta} - tau) x has one non-zero
    coordinate (sparsity s = 1); G = f diag(pi) with f = phi(Phi^-1(tau)) and
    S = tau (1 - tau) diag(pi), so Sigma_jj = [tau (1 - tau) pi_j + noise variance] /
    (f pi_j)^2. The curvature f pi_j is small (1/d for uniform pi), so the step-size
    constant c must grow like d.

    Sensitivities, with m = max(tau, 1 - tau): Delta1 = 2 m (two categories, opposite
    signs) and Delta2 = max(1, sqrt(2) m) (one category: abs(1 - 0) = 1; two: sqrt(tau^2 +
    (1 - tau)^2) <= sqrt(2) m), both attained for d >= 2 (at d = 1 only abs(1 - 0) = 1 is
    possible, so Delta1 = 2 m is conservative there); seed 003's generic 2 M sqrt(s) =
    2 m bounds the second. The dense calibration (``calibration = "dense"``) ignores the
    sparsity: the box [-m, m]^d, Delta1 = 2 m d and Delta2 = 2 m sqrt(d).

    References
    ----------
    Seed 003 (``shared/seeds/003_*.txt``), the embedding example of sparse gradients;
    Koenker, R. & Bassett, G. (1978). Regression quantiles. Econometrica 46, 33-50.
    """

    name = "one_hot_quantile_regression"
    sample_gradient = _one_hot_qr_gradient

    d: int = 100
    tau: float = 0.5
    coef: float | tuple[float, ...] = 0.0
    probs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        d = check_int(self.d, "d", owner=self.name, low=1, high=MAX_SPARSE_DIM)
        object.__setattr__(self, "d", d)
        object.__setattr__(
            self, "tau", check_float(self.tau, "tau", owner=self.name, low=0, high=1)
        )
        coef = check_vector(self.coef, "coef", d, owner=self.name)
        object.__setattr__(self, "coef", coef[0] if np.ndim(self.coef) == 0 else coef)
        if self.probs is not None:
            allowed = (
                f"The 'probs' parameter of {self.name} must be a list of {d} probabilities "
                f"> 0 summing to 1 (the law of the category)"
            )
            if np.ndim(self.probs) == 0:
                raise TypeError(f"{allowed}. Got the single value {self.probs!r}.")
            probs = check_vector(self.probs, "probs", d, owner=self.name)
            if min(probs) <= 0 or abs(sum(probs) - 1.0) > 1e-9:
                raise ValueError(
                    f"{allowed}. Got minimum {min(probs):g} and sum {sum(probs):.12g}."
                )
            object.__setattr__(self, "probs", probs)

    @property
    def dim(self) -> int:
        return self.d

    def category_probs(self) -> np.ndarray:
        """pi, shape (d,)."""
        if self.probs is None:
            return np.full(self.d, 1.0 / self.d)
        return np.array(self.probs, dtype=np.float64)

    def params(self) -> np.ndarray:
        cumulative = np.cumsum(self.category_probs())
        cumulative[-1] = 1.0  # u < 1 always: the last category closes the search
        coef = np.broadcast_to(np.asarray(self.coef, dtype=np.float64), (self.d,))
        return np.concatenate([[self.tau, normal_ppf(self.tau)], cumulative, coef])

    def truth(self) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.coef, dtype=np.float64), (self.d,)).copy()

    def density_at_quantile(self) -> float:
        """f = phi(Phi^-1(tau)), the density of y - beta_C at 0."""
        return normal_pdf(normal_ppf(self.tau))

    def jacobian(self) -> np.ndarray:
        return self.density_at_quantile() * np.diag(self.category_probs())

    def gradient_cov(self) -> np.ndarray:
        return self.tau * (1.0 - self.tau) * np.diag(self.category_probs())

    def asymptotic_cov(self, noise_cov: np.ndarray, batch: int = 1) -> np.ndarray:
        # G is diagonal: G^-1 S G^-1 entry by entry, without the base class's inverse.
        scale = 1.0 / (self.density_at_quantile() * self.category_probs())
        sigma = (self.gradient_cov() + noise_cov) / batch * np.outer(scale, scale)
        return (sigma + sigma.T) / 2

    def gradient_sparsity(self) -> int:
        return 1

    def gradient_bound(self) -> float:
        """m = max(tau, 1 - tau), the largest |g_j|."""
        return max(self.tau, 1.0 - self.tau)

    def l1_sensitivity(self) -> float:
        return 2.0 * self.gradient_bound()

    def l2_sensitivity(self) -> float:
        return max(1.0, math.sqrt(2.0) * self.gradient_bound())

    def dense_l1_sensitivity(self) -> float:
        return 2.0 * self.gradient_bound() * self.d

    def dense_l2_sensitivity(self) -> float:
        return 2.0 * self.gradient_bound() * math.sqrt(self.d)
