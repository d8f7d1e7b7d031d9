"""Base class of the models: data generator, gradient callback, truth and covariance."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from ldpsim.tasks.kernel.sgd import no_projection
from ldpsim.tasks.streams.rng import state_of
from ldpsim.tasks.validation import check_float, check_square, reading_recorded

#: The largest |loc| of the location models (quantile, mean): beyond it the rounding of
#: a draw loc + Z to a multiple of ulp(loc) (1.2e-10 at 1e6) begins to change the data's
#: law (at 1e15 the variance of X - loc is 10% off, from 1e16 on every draw is loc).
LARGEST_LOC = 1e6


def check_loc(value: object, owner: str) -> float:
    """``loc`` of a location model as a float in [-1e6, 1e6] (:data:`LARGEST_LOC`; any
    finite float in a store's recorded sweep, :func:`recorded_specs`)."""
    largest = math.inf if reading_recorded() else LARGEST_LOC
    return check_float(
        value, "loc", owner=owner, low=-largest, high=largest, low_open=False, high_open=False
    )


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
    PCG64 state ``s`` (see :mod:`ldpsim.tasks.streams.rng`), writes its gradient at ``theta`` into
    ``g_out`` and returns the advanced state), and implement ``params``, ``truth``,
    ``jacobian`` and ``gradient_cov``. The callback is inlined into the kernel, where
    ``g_out`` (and, for d > 1, ``theta`` and ``params``) arrive as raw pointers and,
    for d = 1, ``theta`` and ``params`` as tuples: it only indexes them, up to ``d``.

    A model whose parameter space is not all of R^d sets ``project``, a numba ``njit``
    function ``(d, j, value, params) -> float`` that maps coordinate j of each new
    iterate onto it, coordinatewise (a box: e.g. a scale floored at a small positive
    value). It is applied after every step, before the averages are updated; it is
    post-processing of the privatized gradients, so privacy is unchanged.
    """

    name: ClassVar[str]
    sample_gradient: ClassVar[object]
    #: Coordinatewise projection of each iterate onto the parameter space (see above).
    project: ClassVar[object] = no_projection
    #: Optional: a numba ``njit`` function ``(d, params, s, x_out) -> s`` that draws one
    #: observation exactly as ``sample_gradient`` does (the same random numbers, in the
    #: same order) and writes the raw data point, d values, into ``x_out``. Competitor
    #: methods that hold the raw data (``np_boot``, ``cdp_blb_*``) replay the users of
    #: the LDP run with it; None: the model offers no raw data.
    sample_observation: ClassVar[object] = None
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

    def pseudo_truth(self) -> np.ndarray | None:
        """Where SGD converges when that is not theta*, shape (d,); None when it is theta*.

        A model whose gradient is not Fisher-consistent (a clipped gradient, SPEC 9.5)
        returns the root theta_C of its mean gradient. Coverage is still measured
        against :meth:`truth`; :meth:`jacobian` and :meth:`gradient_cov` are taken here.
        """
        return None

    def limit(self) -> np.ndarray:
        """The point SGD converges to: :meth:`pseudo_truth`, or :meth:`truth` if None."""
        pseudo = self.pseudo_truth()
        return self.truth() if pseudo is None else pseudo

    def default_theta0(self) -> np.ndarray:
        """The start theta_0 when the spec gives none: zeros, shape (d,).

        Models with a scale parameter start it at a positive value.
        """
        return np.zeros(self.dim)

    def jacobian(self) -> np.ndarray:
        """G, the Jacobian of the mean gradient at :meth:`limit`, shape (d, d)."""
        raise NotImplementedError

    def gradient_cov(self) -> np.ndarray:
        """Covariance of the non-private gradient at :meth:`limit`, shape (d, d)."""
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
        raise NotImplementedError(f"model {self.name!r} states no l2_sensitivity() (Delta2)")

    def l1_sensitivity(self) -> float:
        """Delta1: the l1-diameter of the gradient's range over all data, at any theta.

        The Laplace mechanism is calibrated to it. By default sqrt(d) Delta2, the
        Cauchy-Schwarz bound of Shi, Xie, Jiang, Kong & He (seed 004, Example 1);
        models that know a smaller l1 bound override it.
        """
        return math.sqrt(self.dim) * self.l2_sensitivity()

    def gradient_sparsity(self) -> int | None:
        """s when every gradient has at most s non-zero coordinates; None (the default)
        for a model that declares no sparsity.

        Such a model states two calibrations (SPEC 11): :meth:`l1_sensitivity` and
        :meth:`l2_sensitivity` use the sparsity, :meth:`dense_l1_sensitivity` and
        :meth:`dense_l2_sensitivity` ignore it (d in place of s); the Laplace and
        Gaussian mechanisms choose by their ``calibration``.
        """
        return None

    def dense_l1_sensitivity(self) -> float:
        """Delta1 of a calibration that ignores the sparsity (models with a sparsity)."""
        raise NotImplementedError(f"model {self.name!r} declares no gradient sparsity")

    def dense_l2_sensitivity(self) -> float:
        """Delta2 of a calibration that ignores the sparsity (models with a sparsity)."""
        raise NotImplementedError(f"model {self.name!r} declares no gradient sparsity")

    def constraint_radius(self) -> float | None:
        """r when theta* is known to lie in the l1 ball of radius r; None (the default).

        The replicate then stores the projection of the estimate onto that ball (SPEC 11).
        """
        return None

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
        """Sigma = G^-1 S G^-1 of sqrt(n)(theta_bar_n - limit) (Polyak & Juditsky 1992).

        The limit is theta* (or theta_C, :meth:`pseudo_truth`, for a clipped gradient).

        Parameters
        ----------
        noise_cov : ndarray, shape (d, d)
            Covariance that the privacy mechanism adds to the gradient at theta*.
        batch : int
            Mini-batch size s >= 1: each step averages s privatized gradients.
        """
        # A plugin's matrix of another shape broadcast silently (check_square).
        jacobian = check_square(
            self.jacobian(), self.dim, f"The jacobian() of model {self.name!r}"
        )
        gradient_cov = check_square(
            self.gradient_cov(), self.dim, f"The gradient_cov() of model {self.name!r}"
        )
        g_inv = np.linalg.inv(jacobian)
        s = (gradient_cov + noise_cov) / batch
        sigma = g_inv @ s @ g_inv.T
        return (sigma + sigma.T) / 2
