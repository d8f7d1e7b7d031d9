"""Logistic regression with Mallows weights or a clipped gradient (seed 004, section 5.3)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.lazy_import import lazy_module
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.models.regression import (
    Weights,
    check_regression_params,
    clip_gradient,
    covariate_matrix,
    draw_covariates,
    expect,
    mallows_weight,
)
from ldpsim.tasks.streams.rng import random

optimize = lazy_module("scipy.optimize")
special = lazy_module("scipy.special")


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _logistic_gradient(d, theta, params, s, g):
    # params = (1 for Mallows weights else 0, clip C or 0). d = p = covariates + 1.
    # x = (1, z) into g, y ~ Bernoulli(s(x'1)), g = w (s(x'theta) - y) x, then clipped.
    sq, s = draw_covariates(d, s, g)
    t = 0.0
    t_true = 0.0
    for j in range(d):
        t += g[j] * theta[j]
        t_true += g[j]
    u, s = random(s)
    y = 1.0 if u < 1.0 / (1.0 + math.exp(-t_true)) else 0.0
    r = 1.0 / (1.0 + math.exp(-t)) - y
    if params[0] > 0.0:
        r = r * mallows_weight(sq)
    for j in range(d):
        g[j] *= r
    if params[1] > 0.0:
        clip_gradient(d, g, params[1])
    return s


@functools.cache
def _mean_gradient_scalars(d: int, weights: str, clip: float | None, a: float, b: float):
    # Scalars of E[g] and of A, S at theta = (a, b 1_d) (see logistic_moments).
    sqrt_d = math.sqrt(d)

    def integrand(v: float, rho: np.ndarray) -> np.ndarray:
        sq = 1.0 + v * v + rho * rho
        p_star = special.expit(1.0 + sqrt_d * v)
        s = special.expit(a + b * sqrt_d * v)
        r1, r0 = s - 1.0, s
        if clip is None:
            w = np.minimum(1.0, 2.0 / sq)
            h1, h0, om1, om0 = w * r1, w * r0, w, w
        else:
            # abs(r1), not -r1: where s rounds to 1 (a + b sqrt(d) v above about 37, as
            # at d >= 5 in the tails) r1 is +0.0, and -r1 = -0.0 made the factor
            # min(1, C / -0.0) = -inf and the clipped residual 0 x -inf = NaN (no root
            # found). Elsewhere r1 < 0 and abs(r1) = -r1: the same numbers.
            norm = np.sqrt(sq)
            with np.errstate(divide="ignore"):  # a zero residual: factor 1 (C / 0 = inf)
                h1 = r1 * np.minimum(1.0, clip / (abs(r1) * norm))
                h0 = r0 * np.minimum(1.0, clip / (r0 * norm))
            om1 = (abs(r1) * norm <= clip).astype(float)
            om0 = (r0 * norm <= clip).astype(float)
        mean = p_star * h1 + (1 - p_star) * h0
        jac = s * (1 - s) * (p_star * om1 + (1 - p_star) * om0)
        second = p_star * h1 * h1 + (1 - p_star) * h0 * h0
        q = rho * rho
        ones = np.ones_like(rho)
        return np.stack(
            [
                mean,
                mean * v,
                *(k * f for k in (jac, second) for f in (ones, v * ones, v * v * ones, q)),
            ]
        )

    def inner_kinks(v: float) -> list[float]:
        if clip is None:
            return [1.0 - v * v]
        s = special.expit(a + b * sqrt_d * v)
        with np.errstate(divide="ignore"):  # s rounded to 0 or 1: no kink (inf)
            return [clip**2 / (1.0 - s) ** 2 - 1.0 - v * v, clip**2 / s**2 - 1.0 - v * v]

    return expect(integrand, d - 1, inner_kinks)


@functools.cache
def logistic_moments(
    d: int, weights: str, clip: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(theta_lim, A, S) of the logistic model: its limit point, Jacobian and gradient cov.

    theta_lim is theta* = 1 unless clipped, then theta_C, the root of E[clip_C(g)] = 0.
    By exchangeability of the slopes theta_lim = (a, b 1_d), so every expectation is
    over (v, q) with v = z'1 / sqrt(d) ~ N(0, 1) and q = ||z||^2 - v^2 ~ chi2_(d-1)
    independent (:func:`ldpsim.tasks.models.regression.expect`): to about 1e-10
    relative. Cached per configuration (a few seconds the first time).
    """
    if clip is None:
        a = b = 1.0
    else:

        def equations(ab: np.ndarray) -> np.ndarray:
            return _mean_gradient_scalars(d, weights, clip, float(ab[0]), float(ab[1]))[:2]

        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # its far steps
            sol = optimize.root(equations, np.array([1.0, 1.0]), method="hybr", tol=1e-13)
        if not sol.success:  # small C: theta_C far out, the search stalls (C = 0.03, d = 2)
            raise ValueError(
                f"The 'clip' parameter of logistic_regression gives a limit theta_C that "
                f"the root search of E[clip_C(g)] = 0 did not find (d = {d}, "
                f"{' '.join(str(sol.message).split())}); use a larger clip (Shi et al. use "
                f"C = 1). Got {clip!r}."
            )
        a, b = (float(v) for v in sol.x)
    scalars = _mean_gradient_scalars(d, weights, clip, a, b)
    mq_a = scalars[5] / (d - 1) if d > 1 else 0.0
    mq_s = scalars[9] / (d - 1) if d > 1 else 0.0
    jac = covariate_matrix(d, scalars[2], scalars[3], scalars[4], mq_a)
    cov = covariate_matrix(d, scalars[6], scalars[7], scalars[8], mq_s)
    theta = np.concatenate([[a], np.full(d, b)])
    return theta, jac, cov


@dataclass(frozen=True, kw_only=True)
class LogisticRegression(Model):
    """Logistic regression y ~ Bernoulli(s(x'beta*)), beta* = 1, with bounded gradients.

    Parameters
    ----------
    d : int
        Number of covariates without the intercept, in [1, 62]; theta has p = d + 1
        coordinates (intercept first).
    weights : {"mallows", "none"}
        Mallows weights w(x) = min(1, 2 / ||x||^2) (the default) or none; "none" needs
        ``clip``.
    clip : float or None
        C in (0, inf): clip the unweighted gradient to norm C (needs weights = "none").

    Notes
    -----
    x = (1, z')', z ~ N(0, I_d); g = w(x) (s(x'beta) - y) x with s(t) = 1 / (1 + e^-t)
    (SPEC 9.2, 9.4). With Mallows weights ||w x|| <= sqrt 2 and abs(s - y) < 1, so
    Delta2 = 2 sqrt 2; theta* = 1 exactly (w depends on x only), A = E[w s(1 - s) x x'],
    S = E[w^2 s(1 - s) x x']. Without weights the gradient is unbounded, so weights =
    "none" requires clipping: g <- g min(1, C / ||g||), Delta2 = 2C (SPEC 9.5). Then SGD
    converges to theta_C (:meth:`pseudo_truth`), the root of E[clip_C(g)] = 0, and the
    oracle sandwich is taken there: A = E[1{||g|| <= C} s(1 - s) x x'] (a clipped
    gradient C sign(r) x / ||x|| does not move with theta), S = E[clip_C(g) clip_C(g)'].
    A and S have no closed form; they are computed by quadrature (:func:`logistic_moments`).
    Delta1 = sqrt(p) Delta2 (seed 004, Example 1).

    References
    ----------
    Shi, Xie, Jiang, Kong & He (seed 004), section 5.3 and Figure 1.
    Mallows, C. L. (1975). On some topics in robustness. Bell Labs memorandum; weights as
    in Loh, P.-L. (2017), Statistical consistency and asymptotic normality for
    high-dimensional robust M-estimators, Ann. Statist. 45, 866-896.
    Abadi, M. et al. (2016). Deep learning with differential privacy. CCS (clipping).
    """

    name = "logistic_regression"
    sample_gradient = _logistic_gradient

    d: int = 5
    weights: Weights = "mallows"
    clip: float | None = None

    def __post_init__(self) -> None:
        d, weights, clip = check_regression_params(self.name, self.d, self.weights, self.clip)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "clip", clip)

    @property
    def dim(self) -> int:
        return self.d + 1

    def params(self) -> np.ndarray:
        mallows = 1.0 if self.weights == "mallows" else 0.0
        return np.array([mallows, 0.0 if self.clip is None else self.clip], dtype=np.float64)

    def truth(self) -> np.ndarray:
        return np.ones(self.dim)

    def pseudo_truth(self) -> np.ndarray | None:
        if self.clip is None:
            return None
        return logistic_moments(self.d, self.weights, self.clip)[0].copy()

    def jacobian(self) -> np.ndarray:
        return logistic_moments(self.d, self.weights, self.clip)[1].copy()

    def gradient_cov(self) -> np.ndarray:
        return logistic_moments(self.d, self.weights, self.clip)[2].copy()

    def l2_sensitivity(self) -> float:
        # Mallows: ||w x|| <= sqrt 2 and |s - y| < 1, so ||g - g'|| < 2 sqrt 2 (the sup).
        return 2.0 * math.sqrt(2.0) if self.clip is None else 2.0 * self.clip
