"""Classical batch means: equal batches and a t quantile (Schmeiser 1982)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.stats import StackedStats, StreamingStats
from ldpsim.tasks.validation import check_int


@dataclass(frozen=True, kw_only=True)
class BatchMeansT(IntervalMethod):
    """theta_bar_n +- t_{K-1, 1-a/2} s / sqrt(K), s the sd of K equal batch means.

    Parameters
    ----------
    n_batches : int
        K, in [2, 1000]; the batches are the iterates (n (k-1) / K, n k / K].

    References
    ----------
    Schmeiser, B. (1982). Batch size effects in the analysis of simulation output.
    Operations Research 30, 556-568.
    """

    name = "bm_t"

    n_batches: int = 20

    def __post_init__(self) -> None:
        check = check_int(self.n_batches, "n_batches", owner=self.name, low=2, high=1000)
        object.__setattr__(self, "n_batches", check)

    def cuts(self, n: int, gamma: float) -> np.ndarray:
        return np.unique(np.arange(1, self.n_batches + 1) * n // self.n_batches)

    def check(self, n: int, gamma: float) -> None:
        if n < self.n_batches:
            raise ValueError(f"bm_t needs n >= n_batches = {self.n_batches}; got n = {n}.")

    def interval(
        self, stats: StreamingStats, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray]:
        ends = self.cuts(stats.n, stats.gamma)
        bounds = np.concatenate([[0], ends])
        centre = stats.theta_bar
        sums = stats.deviation_sums(bounds, centre)  # (K, d): sums of theta_i - centre
        means = sums / np.diff(bounds)[:, None]
        half = sps.t.ppf(0.5 + level / 2, len(ends) - 1) * means.std(axis=0, ddof=1)
        half = half / np.sqrt(len(ends))
        return centre - half, centre + half

    def intervals_batch(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The intervals of a whole chunk of replicates at once: (R, d) each."""
        ends = self.cuts(stats.n, stats.gamma)
        bounds = np.concatenate([[0], ends])
        centre = stats.theta_bar  # (R, d)
        sums = stats.deviation_sums(bounds, centre)  # (R, K, d)
        means = sums / np.diff(bounds)[:, None]
        half = sps.t.ppf(0.5 + level / 2, len(ends) - 1) * means.std(axis=1, ddof=1)
        half = half / np.sqrt(len(ends))
        return centre - half, centre + half
