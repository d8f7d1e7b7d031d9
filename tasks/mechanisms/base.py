"""Base class of the local privacy mechanisms."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tasks.models.base import Model
from tasks.validation import check_float


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """An eps-local-DP mechanism applied by each user to their own gradient.

    Subclasses set ``name`` and ``privatize`` (a numba ``njit`` function
    ``(g, params, rng) -> None`` that privatizes ``g`` in place) and implement
    ``params``, ``sensitivity`` and ``variance``.

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

    @property
    def is_private(self) -> bool:
        """Whether the mechanism adds any randomness (eps < inf)."""
        return not math.isinf(self.eps)
