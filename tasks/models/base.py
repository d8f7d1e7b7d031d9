"""Base class of the models: data generator, gradient callback, truth and covariance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from ldpsim.tasks.rng import state_of


@njit
def _gradient_rows(sample_gradient, theta, params, s, out):
    # One fresh observation's gradient per row of ``out``, the state kept compiled.
    for k in range(out.shape[0]):
        s = sample_gradient(theta.shape[0], theta, params, s, out[k])
    return s


@dataclass(frozen=True, kw_only=True)
class Model:
    """A stochastic-gradient model usable inside the compiled LDP-SGD kernel.

    Subclasses set ``name`` and ``sample_gradient`` (a numba ``njit`` function
    ``(d, theta, params, s, g_out) -> s`` that draws one fresh observation from the
    PCG64 state ``s`` (see :mod:`ldpsim.tasks.rng`), writes its gradient at ``theta`` into
    ``g_out`` and returns the advanced state), and implement ``params``, ``truth``,
    ``jacobian`` and ``gradient_cov``. The callback is inlined into the kernel, where
    ``g_out`` (and, for d > 1, ``theta`` and ``params``) arrive as raw pointers and,
    for d = 1, ``theta`` and ``params`` as tuples: it only indexes them, up to ``d``.
    """

    name: ClassVar[str]
    sample_gradient: ClassVar[object]
    #: True when the gradient takes only the two values of :meth:`gradient_range`
    #: (d = 1), which makes randomized response applicable.
    binary_gradient: ClassVar[bool] = False

    @property
    def dim(self) -> int:
        """Dimension d of theta."""
        raise NotImplementedError

    def params(self) -> np.ndarray:
        """Float64 parameter vector passed to ``sample_gradient``."""
        raise NotImplementedError

    def truth(self) -> np.ndarray:
        """The minimizer theta* of the risk, shape (d,)."""
        raise NotImplementedError

    def jacobian(self) -> np.ndarray:
        """G, the Jacobian of the mean gradient at theta*, shape (d, d)."""
        raise NotImplementedError

    def gradient_cov(self) -> np.ndarray:
        """Covariance of the non-private gradient at theta*, shape (d, d)."""
        raise NotImplementedError

    def gradient_range(self) -> tuple[float, float]:
        """Bounds (lo, hi) of every gradient coordinate over all data and theta.

        Only meaningful where the gradient does not depend on theta's scale
        (quantile-type models); used by randomized response.
        """
        raise NotImplementedError

    def l2_sensitivity(self) -> float:
        """Delta2 = sup ||g(x, theta) - g(x', theta)||_2 over all data x, x', at any theta.

        The Gaussian mechanisms are calibrated to it (SPEC 9.1).
        """
        raise NotImplementedError

    def l1_sensitivity(self) -> float:
        """Delta1: the l1-diameter of the gradient's range over all data, at any theta.

        The Laplace mechanism is calibrated to it. By default sqrt(d) Delta2, the
        Cauchy-Schwarz bound of Shi, Xie, Jiang, Kong & He (seed 004, Example 1);
        models that know a smaller l1 bound override it.
        """
        return math.sqrt(self.dim) * self.l2_sensitivity()

    def sample_gradients(self, theta: np.ndarray, n_samples: int, seed: int) -> np.ndarray:
        """Gradients at ``theta`` of ``n_samples`` fresh observations, shape (n_samples, d)."""
        s = state_of(np.random.Generator(np.random.PCG64(seed)))
        theta = np.asarray(theta, dtype=np.float64)
        grads = np.empty((n_samples, self.dim))
        _gradient_rows(type(self).sample_gradient, theta, self.params(), s, grads)
        return grads

    def max_l1_gradient_gap(self, theta: np.ndarray, n_samples: int, seed: int) -> float:
        """Largest l1 distance between gradients of ``n_samples`` draws at ``theta``.

        Used by audits: it must never exceed :meth:`l1_sensitivity`.
        """
        grads = self.sample_gradients(theta, n_samples, seed)
        return float(np.sum(grads.max(axis=0) - grads.min(axis=0)))

    def asymptotic_cov(self, noise_cov: np.ndarray, batch: int = 1) -> np.ndarray:
        """Sigma = G^-1 S G^-1 of sqrt(n)(theta_bar_n - theta*) (Polyak & Juditsky 1992).

        Parameters
        ----------
        noise_cov : ndarray, shape (d, d)
            Covariance that the privacy mechanism adds to the gradient at theta*.
        batch : int
            Mini-batch size s >= 1: each step averages s privatized gradients.
        """
        g_inv = np.linalg.inv(self.jacobian())
        s = (self.gradient_cov() + noise_cov) / batch
        sigma = g_inv @ s @ g_inv.T
        return (sigma + sigma.T) / 2
