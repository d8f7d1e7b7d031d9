"""No privacy: the identity mechanism (eps = inf)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _identity(d, g, params, s):
    return s


@dataclass(frozen=True, kw_only=True)
class NoPrivacy(Mechanism):
    """The non-private baseline: gradients are used as they are.

    Parameters
    ----------
    eps : float
        Must be ``inf`` (the default).
    budget_range : None
        Must be left out: there is no budget to draw.
    """

    name = "none"
    privatize = _identity
    privatize_per_user = _identity

    eps: float = math.inf

    def __post_init__(self) -> None:
        if self.budget_range is not None:
            raise ValueError(
                f"The 'budget_range' parameter of none must be left out (no privacy, no "
                f"budget to draw). Got {self.budget_range!r}."
            )
        super().__post_init__()
        if not math.isinf(self.eps):
            raise ValueError(f"The 'eps' parameter of none must be inf. Got {self.eps!r}.")

    def params(self, model: Model) -> np.ndarray:
        return np.zeros(1, dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        return model.l1_sensitivity()

    def variance(self, model: Model) -> np.ndarray:
        return np.zeros((model.dim, model.dim))
