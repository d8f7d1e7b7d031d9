"""The multipliers of the block bootstrap: iid draws of mean 0 and variance 1 from a
replicate's own bootstrap stream (Dette & Graw), by law."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Multiplier = Literal["uniform", "rademacher", "gaussian", "mammen"]

_SQRT5 = math.sqrt(5.0)


def draw_multipliers(kind: Multiplier, size: tuple[int, int], rng: np.random.Generator):
    """iid multipliers with mean 0 and variance 1."""
    if kind == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size)
    if kind == "rademacher":
        return 2.0 * rng.integers(0, 2, size) - 1.0
    if kind == "gaussian":
        return rng.standard_normal(size)
    # Mammen's two-point law: (1 - sqrt5)/2 w.p. (sqrt5 + 1)/(2 sqrt5), else (1 + sqrt5)/2.
    low = rng.random(size) < (_SQRT5 + 1.0) / (2.0 * _SQRT5)
    return np.where(low, (1.0 - _SQRT5) / 2.0, (1.0 + _SQRT5) / 2.0)
