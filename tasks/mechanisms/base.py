"""Base class of the local privacy mechanisms."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.rng import state_of
from ldpsim.tasks.validation import check_float


@njit
def _privatize_rows(privatize, params, g0, s, out):
    # Row k of ``out`` is a privatized copy of g0, the state kept compiled.
    for k in range(out.shape[0]):
        for j in range(g0.shape[0]):
            out[k, j] = g0[j]
        s = privatize(g0.shape[0], out[k], params, s)
    return s


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """An eps-local-DP mechanism applied by each user to their own gradient.

    Subclasses set ``name`` and ``privatize`` (a numba ``njit`` function
    ``(d, g, params, s) -> s`` that privatizes ``g`` (length ``d``) in place, drawing
    from the PCG64 state ``s`` of :mod:`ldpsim.tasks.rng` and returning the advanced state)
    and implement ``params``, ``sensitivity`` and ``variance``. Like the model's, the
    callback is inlined into the kernel and only indexes ``g`` and ``params``.

    Parameters
    ----------
    eps : float
        Privacy parameter, in (0, inf]; ``inf`` means no privacy (no noise).
    """

    name: ClassVar[str]
    privatize: ClassVar[object]

    eps: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "eps", check_float(self.eps, "eps", owner=self.name, low=0, allow_inf=True)
        )

    def check_model(self, model: Model) -> None:
        """Raise ValueError if this mechanism cannot privatize ``model``'s gradients."""

    def params(self, model: Model) -> np.ndarray:
        """Float64 parameter vector passed to ``privatize`` for ``model``."""
        raise NotImplementedError

    def sensitivity(self, model: Model) -> float:
        """The sensitivity the noise is calibrated to (l1 for Laplace, range for RR)."""
        raise NotImplementedError

    def variance(self, model: Model) -> np.ndarray:
        """Closed-form covariance the mechanism adds to the gradient at theta*, (d, d)."""
        raise NotImplementedError

    def privatize_copies(
        self, params: np.ndarray, g0: np.ndarray, n_samples: int, seed: int
    ) -> np.ndarray:
        """``n_samples`` independent privatized reports of the fixed gradient ``g0``.

        Runs the compiled ``privatize`` callback, as the kernel does; used by the tests
        and the privacy audits.

        Parameters
        ----------
        params : ndarray
            Parameter vector for ``privatize`` (normally :meth:`params`, or one
            calibrated differently by an audit's power check).
        g0 : array_like, shape (d,)
            The gradient every report starts from.
        n_samples : int
            Number of reports, >= 1.
        seed : int
            Seed of the PCG64 stream the reports are drawn from, >= 0.

        Returns
        -------
        ndarray, shape (n_samples, d)
        """
        g0 = np.asarray(g0, dtype=np.float64)
        out = np.empty((n_samples, g0.shape[0]))
        s = state_of(np.random.Generator(np.random.PCG64(seed)))
        _privatize_rows(type(self).privatize, np.asarray(params, dtype=np.float64), g0, s, out)
        return out

    @property
    def is_private(self) -> bool:
        """Whether the mechanism adds any randomness (eps < inf)."""
        return not math.isinf(self.eps)
