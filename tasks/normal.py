"""The standard normal distribution's quantile, density and distribution functions.

The same bits as ``scipy.stats.norm.ppf``, ``pdf`` and ``cdf`` (which evaluate
``scipy.special.ndtri``, ``exp(-x**2 / 2) / sqrt(2 pi)`` on an array, and ``ndtr``),
without importing ``scipy.stats``: that import takes most of a second, paid by every
worker process before its first replicate of a model that needs one of these.
"""

from __future__ import annotations

import numpy as np

from ldpsim.tasks.lazy_import import lazy_module

special = lazy_module("scipy.special")

#: sqrt(2 pi) as scipy.stats computes it.
SQRT_2PI = np.sqrt(2 * np.pi)


def normal_ppf(q: float) -> float:
    """z with P(Z <= z) = q for Z ~ N(0, 1); q in (0, 1) (0 and 1 give -inf and inf)."""
    return float(special.ndtri(q))


def normal_pdf(x: float) -> float:
    """The density of N(0, 1) at x (any float)."""
    # Through an array, as scipy.stats does: numpy's exp of an array and of a Python
    # float may differ in the last bit.
    return float(np.exp(-(np.asarray([x], dtype=np.float64) ** 2) / 2.0)[0] / SQRT_2PI)


def normal_cdf(x: float) -> float:
    """P(Z <= x) for Z ~ N(0, 1), x any float."""
    return float(special.ndtr(x))
