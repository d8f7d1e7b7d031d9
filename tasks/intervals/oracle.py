"""Oracle interval from the model's exact asymptotic covariance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.critical_values import normal_quantile
from ldpsim.tasks.stats import StackedStats, StreamingStats


@dataclass(frozen=True, kw_only=True)
class Oracle(IntervalMethod):
    """theta_bar_n +- z_{1-a/2} sqrt(Sigma_jj / n) with the exact Sigma = G^-1 S G^-1.

    A reference only: a user does not know Sigma. No parameters.

    References
    ----------
    Polyak, B. T. & Juditsky, A. B. (1992). Acceleration of stochastic approximation
    by averaging. SIAM J. Control Optim. 30, 838-855.
    """

    name = "oracle"

    def interval(
        self, stats: StreamingStats, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray]:
        return oracle_bounds(stats, level)

    def intervals_batch(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        return oracle_bounds(stats, level)


def oracle_bounds(
    stats: StreamingStats | StackedStats, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's interval of one replicate (d,), or of each of a chunk's (R, d): one
    half-length for all, the same bits either way."""
    half = normal_quantile(0.5 + level / 2) * np.sqrt(np.diag(stats.asymptotic_cov) / stats.n)
    return stats.theta_bar - half, stats.theta_bar + half
