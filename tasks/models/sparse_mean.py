"""Mean of sparse vectors: s random coordinates of +-M (seed 003's sparse-gradient setting)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random
from ldpsim.tasks.validation import MAX_SPARSE_DIM, check_float, check_int, check_vector


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _sparse_mean_gradient(d, theta, params, s, g):
    # params = (M, sparsity, P(R_0 = 1), ..., P(R_{d-1} = 1)). The support S is a uniform
    # subset of size s by Floyd's algorithm, marked by the non-zero entries of g:
    # X_j = M R_j on S, 0 elsewhere; then g = theta - X.
    for j in range(d):
        g[j] = 0.0
    size = int(params[1])
    for top in range(d - size, d):
        u, s = random(s)
        j = int(u * (top + 1))  # uniform on 0..top (bias below top / 2^53)
        if g[j] != 0.0:
            j = top
        u, s = random(s)
        g[j] = params[0] if u < params[2 + j] else -params[0]
    for j in range(d):
        g[j] = theta[j] - g[j]
    return s


@dataclass(frozen=True, kw_only=True)
class SparseMean(Model):
    """Mean of X in R^d with s non-zero coordinates of size M (SPEC 11).

    Parameters
    ----------
    d : int
        Dimension, in [1, 5000] (:data:`~ldpsim.tasks.validation.MAX_SPARSE_DIM`).
    sparsity : int
        s, the number of non-zero coordinates of each X, in [1, d].
    magnitude : float
        M > 0, the size of each non-zero coordinate.
    coef : float or list of float
        mu_j = E R_j, in [-1, 1]: one value for every coordinate, or d of them.

    Notes
    -----
    The support S is a uniform subset of {1..d} of size s; X_j = M R_j on S and 0
    elsewhere, with independent signs R_j = +-1, E R_j = mu_j. theta* = E X = (s/d) M mu,
    g = theta - X, G = I, Var X_j = M^2 (s/d)(1 - (s/d) mu_j^2) and
    Cov(X_j, X_k) = M^2 mu_j mu_k [s(s-1)/(d(d-1)) - s^2/d^2].

    Two users' gradients differ only in X, on at most 2s coordinates by at most 2M:
    the sparsity-aware sensitivities are Delta1 = 2 M s and Delta2 = 2 M sqrt(s), both
    attained (one support, opposite signs); a calibration that ignores the sparsity
    (``calibration = "dense"``) uses the box [-M, M]^d, Delta1 = 2 M d and
    Delta2 = 2 M sqrt(d). theta* lies in the l1 ball of radius M s.

    References
    ----------
    Seed 003 (``shared/seeds/003_*.txt``), its sparse-gradient sensitivity and
    Lemma 3.1; Floyd, R. W. & Bentley, J. (1987). Programming pearls: a sample of
    brilliance. Commun. ACM 30, 754-757 (the subset sampler).
    """

    name = "sparse_mean"
    sample_gradient = _sparse_mean_gradient

    d: int = 1000
    sparsity: int = 4
    magnitude: float = 1.0
    coef: float | tuple[float, ...] = 0.0

    def __post_init__(self) -> None:
        d = check_int(self.d, "d", owner=self.name, low=1, high=MAX_SPARSE_DIM)
        object.__setattr__(self, "d", d)
        object.__setattr__(
            self, "sparsity", check_int(self.sparsity, "sparsity", owner=self.name, low=1, high=d)
        )
        object.__setattr__(
            self, "magnitude", check_float(self.magnitude, "magnitude", owner=self.name, low=0)
        )
        coef = check_vector(self.coef, "coef", d, owner=self.name)
        if any(abs(v) > 1.0 for v in coef):
            raise ValueError(
                f"The 'coef' parameter of {self.name} (E R_j of the signs) must lie in "
                f"[-1, 1]. Got {max(coef, key=abs)!r}."
            )
        # A scalar stays a scalar: it keys the data stream as given.
        object.__setattr__(self, "coef", coef[0] if np.ndim(self.coef) == 0 else coef)

    @property
    def dim(self) -> int:
        return self.d

    def sign_means(self) -> np.ndarray:
        """mu = (E R_1, ..., E R_d)."""
        return np.broadcast_to(np.asarray(self.coef, dtype=np.float64), (self.d,)).copy()

    def params(self) -> np.ndarray:
        head = [self.magnitude, float(self.sparsity)]
        return np.concatenate([head, (1.0 + self.sign_means()) / 2.0])

    def truth(self) -> np.ndarray:
        return self.sparsity / self.d * self.magnitude * self.sign_means()

    def jacobian(self) -> np.ndarray:
        return np.eye(self.d)

    def gradient_cov(self) -> np.ndarray:
        d, s, m = self.d, self.sparsity, self.magnitude
        mu = self.sign_means()
        pair = s * (s - 1) / (d * (d - 1)) if d > 1 else 0.0
        cov = m * m * (pair - (s / d) ** 2) * np.outer(mu, mu)
        np.fill_diagonal(cov, m * m * (s / d) * (1.0 - (s / d) * mu * mu))
        return cov

    def asymptotic_cov(self, noise_cov: np.ndarray, batch: int = 1) -> np.ndarray:
        # G = I: Sigma = (S + noise) / batch, without the d x d inverse of the base class.
        sigma = (self.gradient_cov() + noise_cov) / batch
        return (sigma + sigma.T) / 2

    def gradient_sparsity(self) -> int:
        return self.sparsity

    def l1_sensitivity(self) -> float:
        return 2.0 * self.magnitude * self.sparsity

    def l2_sensitivity(self) -> float:
        return 2.0 * self.magnitude * math.sqrt(self.sparsity)

    def dense_l1_sensitivity(self) -> float:
        return 2.0 * self.magnitude * self.d

    def dense_l2_sensitivity(self) -> float:
        return 2.0 * self.magnitude * math.sqrt(self.d)

    def constraint_radius(self) -> float:
        return self.magnitude * self.sparsity
