"""Huber regression estimating location and scale jointly (Huber's proposal 2, seed 004)."""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.lazy_import import lazy_module
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.models.regression import (
    Weights,
    check_regression_params,
    clip_gradient,
    draw_covariates,
    expect,
    mallows_weight,
)
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import check_float, reading_recorded

integrate = lazy_module("scipy.integrate")
optimize = lazy_module("scipy.optimize")
stats = lazy_module("scipy.stats")

#: After every step sigma <- max(sigma, SIGMA_FLOOR) (SPEC 9.3): post-processing.
SIGMA_FLOOR = 1e-3
#: The smallest true scale sigma* accepted: ten times the floor, so that the scale's
#: iterates and their spread lie above the floor (at sigma* = 1e-4 every iterate sat on
#: it, and no interval for sigma covered, the oracle's included).
SMALLEST_SIGMA = 10 * SIGMA_FLOOR


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _huber_gradient(d, theta, params, s, g):
    # params = (c, kappa, sigma*, 1 for Mallows weights else 0, clip C or 0); d = p =
    # covariates + 2, theta = (beta, sigma). x = (1, z) into g[0:d-1], y = x'1 + e,
    # e ~ N(0, sigma*^2); u = (y - x'beta) / sigma, psi = clip(u, -c, c);
    # g_beta = -w psi x, g_sigma = w (kappa - psi^2) / 2, then clipped.
    sq, s = draw_covariates(d - 1, s, g)
    xi, s = standard_normal(s)
    e = params[2] * xi
    resid = 0.0  # y - x'beta = x'(1 - beta) + e
    for j in range(d - 1):
        resid += g[j] * (1.0 - theta[j])
    resid += e
    # The gradient at a scale below the floor is the one at the floor: only a theta0
    # given below it can get here (every later iterate is projected).
    scale = theta[d - 1] if theta[d - 1] >= SIGMA_FLOOR else SIGMA_FLOOR
    u = resid / scale
    c = params[0]
    psi = c if u > c else (-c if u < -c else u)
    w = mallows_weight(sq) if params[3] > 0.0 else 1.0
    a = w * psi
    for j in range(d - 1):
        g[j] = -a * g[j]
    g[d - 1] = 0.5 * w * (params[1] - psi * psi)
    if params[4] > 0.0:
        clip_gradient(d, g, params[4])
    return s


@njit(inline="always")
def _floor_sigma(d, j, value, params):
    # sigma, the last coordinate, is kept >= SIGMA_FLOOR; NaN passes (a failure shows).
    if j == d - 1 and value < SIGMA_FLOOR:
        return SIGMA_FLOOR
    return value


def huber_constants(c: float) -> dict[str, float]:
    """Moments of Z ~ N(0, 1) under Huber's psi_c.

    Returns P = P(|Z| <= c), E2 = E[Z^2 1{|Z| <= c}], kappa = E[min(Z^2, c^2)]
    (0.710165 at c = 1.345) and V = Var(min(Z^2, c^2)), in closed form.
    """
    p = 2.0 * stats.norm.cdf(c) - 1.0
    phi = stats.norm.pdf(c)
    e2 = p - 2.0 * c * phi
    kappa = e2 + c * c * (1.0 - p)
    e4 = 3.0 * e2 - 2.0 * c**3 * phi  # E[Z^4 1{|Z| <= c}]
    return {"P": p, "E2": e2, "kappa": kappa, "V": e4 + c**4 * (1.0 - p) - kappa**2}


def chi2_expect(f, d: int) -> float:
    """E f(r) for r ~ chi2_d, f smooth on [0, 1] and on [1, inf) (Mallows' kink at r = 1)."""
    dist = stats.chi2(d)
    return sum(
        integrate.quad(lambda r: f(r) * dist.pdf(r), lo, hi, epsabs=0.0, epsrel=1e-13)[0]
        for lo, hi in ((0.0, 1.0), (1.0, math.inf))
    )


@functools.cache
def _mallows_moments(d: int) -> tuple[float, float, float, float]:
    # E w, E[w z_1^2], E w^2, E[w^2 z_1^2] with w = min(1, 2 / (1 + r)), r = ||z||^2:
    # E[w z z'] = E[w r] / d I by symmetry.
    def w(r: float) -> float:
        return min(1.0, 2.0 / (1.0 + r))

    return (
        chi2_expect(w, d),
        chi2_expect(lambda r: w(r) * r, d) / d,
        chi2_expect(lambda r: w(r) ** 2, d),
        chi2_expect(lambda r: w(r) ** 2 * r, d) / d,
    )


@functools.cache
def _clipped_scalars(d: int, c: float, sigma_true: float, clip: float, sigma: float):
    # At theta = (1, sigma), u = sigma* xi / sigma, rho = ||z|| ~ chi_d, no weights:
    # E g_sigma, then the scalars of A_bb, A_ss, S_bb, S_ss (see huber_moments).
    kappa = huber_constants(c)["kappa"]

    def integrand(xi: float, rho: np.ndarray) -> np.ndarray:
        u = sigma_true * xi / sigma
        psi = min(max(u, -c), c)
        m = psi * psi
        sq = 1.0 + rho * rho
        g_sigma = 0.5 * (kappa - m)
        norm = np.sqrt(m * sq + g_sigma * g_sigma)
        clipped = norm > clip
        phi = np.where(clipped, clip / norm, 1.0)
        phi_prime = np.where(clipped, clip / norm**3, 0.0)
        inside = 1.0 if abs(u) <= c else 0.0
        g_dot_m = -psi * sq + u * g_sigma  # g'(x, u), |u| <= c
        k_beta = inside / sigma * (phi + phi_prime * psi * g_dot_m)
        k_sigma = inside / sigma * (phi * u * u - phi_prime * g_sigma * g_dot_m * u)
        q = rho * rho / d
        return np.stack(
            [
                phi * g_sigma,
                k_beta,
                k_beta * q,
                k_sigma,
                phi * phi * m,
                phi * phi * m * q,
                phi * phi * g_sigma * g_sigma,
            ]
        )

    def inner_kinks(xi: float) -> list[float]:
        psi = min(max(sigma_true * xi / sigma, -c), c)
        m = max(psi * psi, 1e-300)
        return [(clip**2 - 0.25 * (kappa - m) ** 2) / m - 1.0]

    edge = c * sigma / sigma_true
    return expect(integrand, d, inner_kinks, outer_points=[-edge, edge])


@functools.cache
def huber_moments(
    d: int, c: float, sigma_true: float, weights: str, clip: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(theta_lim, A, S) of the Huber model: its limit point, Jacobian and gradient cov.

    With Mallows weights theta_lim = theta* = (1, sigma*) and A, S are SPEC 9.3's
    block-diagonal sandwich, one-dimensional integrals over ||z||^2 ~ chi2_d. With the
    gradient clipped to norm C, beta_C = 1 still (g_beta is odd in the error, its norm
    even), and sigma_C solves E[clip_C(g)_sigma] = 0; A is the Jacobian of
    E[clip_C(g)] there and S = E[clip_C(g) clip_C(g)'], two-dimensional integrals over
    (e, ||z||) (:func:`ldpsim.tasks.models.regression.expect`); both stay block-diagonal
    by the same symmetry. Cached per configuration.
    """
    p = d + 2
    jac, cov = np.zeros((p, p)), np.zeros((p, p))
    const = huber_constants(c)
    if clip is None:
        sigma = sigma_true
        ew, ewz, ew2, ew2z = _mallows_moments(d)
        jac[0, 0], jac[p - 1, p - 1] = const["P"] / sigma * ew, const["E2"] / sigma * ew
        jac[np.arange(1, d + 1), np.arange(1, d + 1)] = const["P"] / sigma * ewz
        cov[0, 0], cov[p - 1, p - 1] = const["kappa"] * ew2, ew2 * const["V"] / 4.0
        cov[np.arange(1, d + 1), np.arange(1, d + 1)] = const["kappa"] * ew2z
    else:

        def mean_sigma(sigma: float) -> float:
            return float(_clipped_scalars(d, c, sigma_true, clip, sigma)[0])

        # E g_sigma < 0 for sigma << sigma* (every psi^2 = c^2 > kappa), > 0 far above.
        low, high = 0.05 * sigma_true, 20.0 * sigma_true
        sigma = optimize.brentq(mean_sigma, low, high, xtol=1e-14, rtol=1e-13)
        scalars = _clipped_scalars(d, c, sigma_true, clip, sigma)
        jac[0, 0], jac[p - 1, p - 1] = scalars[1], scalars[3]
        jac[np.arange(1, d + 1), np.arange(1, d + 1)] = scalars[2]
        cov[0, 0], cov[p - 1, p - 1] = scalars[4], scalars[6]
        cov[np.arange(1, d + 1), np.arange(1, d + 1)] = scalars[5]
    theta = np.concatenate([np.ones(d + 1), [sigma]])
    return theta, jac, cov


@dataclass(frozen=True, kw_only=True)
class HuberRegression(Model):
    """Linear regression with Huber's loss, location beta and scale sigma jointly.

    Parameters
    ----------
    d : int
        Number of covariates without the intercept, in [1, 62]; theta = (beta, sigma)
        has p = d + 2 coordinates (intercept first, sigma last).
    huber_c : float
        Huber's tuning constant c, in (0, inf) (default 1.345: 95% efficiency at the
        normal).
    sigma : float
        sd of the normal errors, the true scale sigma*, in [0.01, inf) (default 2): ten
        times the floor 1e-3 that SGD keeps the scale's iterates above.
    weights : {"mallows", "none"}
        Mallows weights w(x) = min(1, 2 / ||x||^2) (the default) or none; "none" needs
        ``clip``.
    clip : float or None
        C in (0, inf): clip the unweighted gradient to norm C (needs weights = "none").

    Notes
    -----
    x = (1, z')', z ~ N(0, I_d), y = x'1 + e, e ~ N(0, sigma^2) (SPEC 9.2, 9.3). The
    loss (sigma rho_c(u) + kappa sigma / 2) w(x), u = (y - x'beta) / sigma, is Huber's
    proposal 2: its gradient is g_beta = -w psi_c(u) x, g_sigma = w (kappa -
    min(u^2, c^2)) / 2 with kappa = E min(Z^2, c^2), so theta* = (1, sigma) at normal
    errors. With Mallows weights Delta2 = sqrt(8 c^2 + c^4 / 4) (3.910287 at c = 1.345,
    as the seed states; an upper bound: ||w psi x|| <= c sqrt 2, and g_sigma ranges over
    an interval of length c^2 / 2); with clipping Delta2 = 2C, and SGD converges to
    theta_C = (1, sigma_C) (:meth:`pseudo_truth`). Delta1 = sqrt(p) Delta2.
    After every step sigma <- max(sigma, 1e-3), post-processing that keeps the scale
    positive (privacy unchanged); SGD starts at beta = 0, sigma = 1 unless theta0 is
    given. The oracle sandwich is block-diagonal (:func:`huber_moments`); with c = 1.345,
    d = 5 and no noise the asymptotic sds are 2.308 (intercept), 2.306 (slopes) and
    1.962 (sigma).

    References
    ----------
    Huber, P. J. (1964). Robust estimation of a location parameter. Ann. Math. Statist.
    35, 73-101; Huber, P. J. (1981). Robust Statistics. Wiley, section 7.7 (proposal 2).
    Shi, Xie, Jiang, Kong & He (seed 004), section 5.2.
    Mallows, C. L. (1975). On some topics in robustness. Bell Labs memorandum.
    """

    name = "huber_regression"
    sample_gradient = _huber_gradient
    project = _floor_sigma

    d: int = 5
    huber_c: float = 1.345
    sigma: float = 2.0
    weights: Weights = "mallows"
    clip: float | None = None

    def __post_init__(self) -> None:
        d, weights, clip = check_regression_params(self.name, self.d, self.weights, self.clip)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "clip", clip)
        c = check_float(self.huber_c, "huber_c", owner=self.name, low=0)
        object.__setattr__(self, "huber_c", c)
        given = self.sigma
        real = isinstance(given, numbers.Real) and not isinstance(given, bool)
        if real and given < SMALLEST_SIGMA and not reading_recorded():  # 0, < 0 included
            raise ValueError(
                f"The 'sigma' parameter of {self.name} must be a float in "
                f"[{SMALLEST_SIGMA:g}, inf): SGD keeps the scale's iterates >= "
                f"{SIGMA_FLOOR:g}, so a true scale near it cannot be estimated (ten times "
                f"the floor is the least). Got {given!r}."
            )
        sigma = check_float(given, "sigma", owner=self.name, low=0)
        object.__setattr__(self, "sigma", sigma)

    @property
    def dim(self) -> int:
        return self.d + 2

    def kappa(self) -> float:
        """kappa = E[min(Z^2, c^2)], the consistency constant of the scale."""
        return huber_constants(self.huber_c)["kappa"]

    def params(self) -> np.ndarray:
        mallows = 1.0 if self.weights == "mallows" else 0.0
        clip = 0.0 if self.clip is None else self.clip
        return np.array([self.huber_c, self.kappa(), self.sigma, mallows, clip], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.concatenate([np.ones(self.d + 1), [self.sigma]])

    def default_theta0(self) -> np.ndarray:
        return np.concatenate([np.zeros(self.d + 1), [1.0]])

    def _moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return huber_moments(self.d, self.huber_c, self.sigma, self.weights, self.clip)

    def pseudo_truth(self) -> np.ndarray | None:
        return None if self.clip is None else self._moments()[0].copy()

    def jacobian(self) -> np.ndarray:
        return self._moments()[1].copy()

    def gradient_cov(self) -> np.ndarray:
        return self._moments()[2].copy()

    def l2_sensitivity(self) -> float:
        if self.clip is not None:
            return 2.0 * self.clip
        c = self.huber_c
        return math.sqrt(8.0 * c * c + c**4 / 4.0)
