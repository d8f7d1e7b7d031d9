"""The Laplace mechanism on the whole gradient vector (Dwork et al. 2006)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.rng import laplace


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _laplace(d, g, params, s):
    # params = (scale,): add iid Laplace(0, Delta / eps) to every coordinate.
    scale = params[0]
    if scale > 0.0:
        for j in range(d):
            noise, s = laplace(s, 0.0, scale)
            g[j] += noise
    return s


@dataclass(frozen=True, kw_only=True)
class Laplace(Mechanism):
    """Add iid Laplace(0, Delta / eps) noise to each gradient coordinate.

    Delta is the model's l1-sensitivity (the l1-diameter of the set of gradients a
    user can have), so the density ratio of any report under two users' gradients is
    at most exp(eps ||g - g'||_1 / Delta) <= e^eps: the mechanism is eps-LDP.

    Each noise coordinate is a random sign times a standard exponential
    (:func:`ldpsim.tasks.rng.laplace`), an exact Laplace sampler that is cheaper than numpy's
    inverse-CDF ``Generator.laplace``; the privacy audits test the compiled mechanism.

    Parameters
    ----------
    eps : float
        Privacy parameter, in (0, inf]; ``inf`` adds no noise.

    References
    ----------
    Dwork, C., McSherry, F., Nissim, K. & Smith, A. (2006). Calibrating noise to
    sensitivity in private data analysis. TCC.
    """

    name = "laplace"
    privatize = _laplace

    def scale(self, model: Model) -> float:
        """Laplace scale b = Delta / eps (0 for eps = inf)."""
        return 0.0 if not self.is_private else model.l1_sensitivity() / self.eps

    def params(self, model: Model) -> np.ndarray:
        return np.array([self.scale(model)], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        return model.l1_sensitivity()

    def variance(self, model: Model) -> np.ndarray:
        return 2.0 * self.scale(model) ** 2 * np.eye(model.dim)
