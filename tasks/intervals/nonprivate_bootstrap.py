"""The non-private bootstrap on the users' raw data: the floor that privacy raises."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsim.tasks.intervals.base import smallest_b
from ldpsim.tasks.intervals.bootstrap import basic_interval
from ldpsim.tasks.intervals.raw_data import RawDataMethod, quantile_level, sample_statistic
from ldpsim.tasks.lazy_import import lazy_module
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import check_int

sps = lazy_module("scipy.stats")


def bootstrap_quantiles(sorted_x: np.ndarray, tau: float, size: int, rng) -> np.ndarray:
    """``size`` draws of the tau-quantile of a resample of ``sorted_x`` (m,), exactly.

    A resample's quantile x*_(k), k = ceil(tau m), is sorted_x[J - 1] where
    P(J <= j) = P(#{resample <= sorted_x[j - 1]} >= k) = P(Binomial(m, j / m) >= k):
    J is drawn by inverting this distribution function (bisection on j), which costs
    O(size log m) instead of O(size m) for drawing the resamples.
    """
    m = sorted_x.shape[0]
    k = min(max(math.ceil(tau * m), 1), m)
    u = rng.random(size)
    lo = np.zeros(size, dtype=np.int64)  # P(J <= lo) < u (P(J <= 0) = 0)
    hi = np.full(size, m, dtype=np.int64)  # P(J <= hi) >= u (P(J <= m) = 1)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        below = sps.binom.sf(k - 1, m, mid / m) < u
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return sorted_x[hi - 1]


@dataclass(frozen=True, kw_only=True)
class NonprivateBootstrap(RawDataMethod):
    """Efron's bootstrap of the sample mean or quantile on the raw, unprivatized data.

    Sees the same users as the LDP run (their raw observations, replayed from the
    replicate's data stream; :class:`ldpsim.tasks.users.Users`). Estimate: the sample
    mean (per coordinate) or the tau-quantile x_(ceil(tau n)); interval (basic):
    [thetahat - q_(1-a/2), thetahat - q_(a/2)], q the quantiles of thetahat* - thetahat
    over B resamples of size n with replacement. The quantile's resamples are drawn
    exactly without materialising them (:func:`bootstrap_quantiles`).

    Parameters
    ----------
    B : int
        Number of resamples, in [2, 10**6] (one has no spread).
    max_n : int
        As for :class:`ldpsim.tasks.intervals.raw_data.RawDataMethod`.

    References
    ----------
    Efron, B. (1979). Bootstrap methods: another look at the jackknife. Ann. Statist. 7,
    1-26.
    """

    name = "np_boot"
    uses_rng: ClassVar[bool] = True
    own_estimate: ClassVar[bool] = True

    B: int = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        draws = check_int(self.B, "B", owner=self.name, low=smallest_b(), high=10**6)
        object.__setattr__(self, "B", draws)

    def estimate_interval(
        self, users: Users, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = users.observations()
        tau = quantile_level(users.model)
        estimate = sample_statistic(x, tau)
        m = x.shape[0]
        if tau is None:
            boot = np.empty((self.B, x.shape[1]))
            for r in range(self.B):
                boot[r] = x[rng.integers(0, m, m)].mean(axis=0)
        else:
            boot = bootstrap_quantiles(np.sort(x[:, 0]), tau, self.B, rng)[:, None]
        return basic_interval(estimate, boot - estimate, level)
