"""Batch-means covariance estimator for averaged SGD (Chen, Lee, Tong & Zhang 2020)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.bootstrap import DEFAULT_BETA, BlockBootstrap, block_partition
from ldpsim.tasks.intervals.critical_values import normal_quantile
from ldpsim.tasks.stats import StackedStats, StreamingStats, floor_power
from ldpsim.tasks.validation import check_float, check_int


@functools.lru_cache(maxsize=256)
def batch_bounds(m: int, n: int, gamma: float) -> np.ndarray:
    """bm's batch boundaries e_0 < ... < e_M = n for M = ``m`` batches (read-only; cached).

    Raises
    ------
    ValueError
        gamma >= 1, or the boundaries do not increase from e_0 >= 1.
    """
    if not gamma < 1.0:
        raise ValueError(f"The 'gamma' parameter must be < 1 for bm. Got {gamma}.")
    big_n = n ** (1.0 - gamma) / (m + 1)
    e = np.array(
        [floor_power((k + 1) * big_n, 1.0 / (1.0 - gamma)) for k in range(m + 1)],
        dtype=np.int64,
    )
    e[-1] = n
    if m < 2 or e[0] < 1 or np.any(np.diff(e) < 1):
        raise ValueError(
            f"The 'n_batches' parameter of bm must give increasing batch boundaries "
            f"with e_0 >= 1 (n = {n}, gamma = {gamma}); got M = {m}, e = "
            f"{e[:4].tolist()}... Use fewer batches or a larger n."
        )
    e.flags.writeable = False
    return e


@functools.lru_cache(maxsize=256)
def batch_sizes(m: int, n: int, gamma: float) -> np.ndarray:
    """n_k = e_k - e_(k-1), k = 1..M, as float64 (read-only; cached)."""
    sizes = np.diff(batch_bounds(m, n, gamma)).astype(np.float64)
    sizes.flags.writeable = False
    return sizes


@dataclass(frozen=True, kw_only=True)
class BatchMeans(IntervalMethod):
    """Batch means with increasing batch sizes after a discarded burn-in batch.

    Boundaries e_k = floor(((k + 1) N)^(1/(1-gamma))), k = 0..M, N = n^(1-gamma)/(M+1),
    e_M = n; batch k = (e_{k-1}, e_k]. SigmaHat = (1/M) sum_k n_k (theta_bar_(k) -
    theta_bar_M)(...)'; interval theta_bar_n +- z_{1-a/2} sqrt(SigmaHat_jj / n).

    Parameters
    ----------
    n_batches : int or None
        M, in [2, 10**6]; ``None`` (default): the bootstrap's block count
        floor(n / floor(n^beta)) (SPEC 5.2, "default M = m").
    beta : float or None
        Block-length exponent of that default, in (0, 1). ``None`` (default): the beta
        of the replicate's bb, set by :func:`follow_bootstrap` (0.75, bb's default, when
        there is no bb).

    References
    ----------
    Chen, X., Lee, J. D., Tong, X. T. & Zhang, Y. (2020). Statistical inference for
    model parameters in stochastic gradient descent. Ann. Statist. 48, 251-273.
    """

    name = "bm"

    n_batches: int | None = None
    beta: float | None = None

    def __post_init__(self) -> None:
        if self.n_batches is not None:
            object.__setattr__(
                self,
                "n_batches",
                check_int(self.n_batches, "n_batches", owner=self.name, low=2, high=10**6),
            )
        if self.beta is not None:
            object.__setattr__(
                self, "beta", check_float(self.beta, "beta", owner=self.name, low=0, high=1)
            )

    def batches(self, n: int) -> int:
        """M for a run of n steps."""
        if self.n_batches is not None:
            return self.n_batches
        return block_partition(n, DEFAULT_BETA if self.beta is None else self.beta)[1]

    def bounds(self, n: int, gamma: float) -> np.ndarray:
        """e_0 < e_1 < ... < e_M = n; raises ValueError when they do not increase."""
        return batch_bounds(self.batches(n), n, gamma)

    def check(self, n: int, gamma: float) -> None:
        self.bounds(n, gamma)

    def cuts(self, n: int, gamma: float) -> np.ndarray:
        return self.bounds(n, gamma)

    def interval(
        self, stats: StreamingStats, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray]:
        lower, upper = self.intervals_batch(stats.stacked(), level, None)
        return lower[0], upper[0]

    def intervals_batch(
        self, stats: StackedStats, level: float, rngs: Sequence[np.random.Generator] | None
    ) -> tuple[np.ndarray, np.ndarray]:
        n = stats.n
        e = self.bounds(n, stats.gamma)
        theta_bar = stats.theta_bar
        sizes = batch_sizes(self.batches(n), n, stats.gamma)
        variances = batch_means_variances(
            stats.deviation_sums(e, theta_bar), sizes, float(n - e[0])
        )
        half = normal_quantile(0.5 + level / 2) * np.sqrt(variances / n)
        return theta_bar - half, theta_bar + half


@cached_njit()
def batch_means_variances(sums, sizes, pooled_steps):
    """The diagonal of bm's SigmaHat for each replicate, (R, d), from its deviation sums
    over the batches (R, M, d) (sums of theta_i - theta_bar), the batch sizes n_k (M,)
    and ``pooled_steps`` = n - e_0.

    dev_k = sums_k / n_k = theta_bar_(k) - theta_bar; pooled = sum_k n_k dev_k /
    (n - e_0) = theta_bar_M - theta_bar; SigmaHat_jj = sum_k n_k (dev_kj - pooled_j)^2 / M.
    Sums over k in order, from 0: the same bits on every machine (no BLAS product), and
    only the diagonal, O(M d) (the interval needs no more).
    """
    n_reps, n_batches, d = sums.shape
    out = np.empty((n_reps, d))
    dev = np.empty(n_batches)
    for r in range(n_reps):
        for j in range(d):
            pooled = 0.0
            for k in range(n_batches):
                dev[k] = sums[r, k, j] / sizes[k]
                pooled += sizes[k] * dev[k]
            pooled /= pooled_steps
            total = 0.0
            for k in range(n_batches):
                centred = dev[k] - pooled
                total += (centred * sizes[k]) * centred
            out[r, j] = total / n_batches
    return out


def follow_bootstrap(methods: Mapping[str, IntervalMethod]) -> dict[str, IntervalMethod]:
    """``methods`` with every bm that sets neither n_batches nor beta given bb's beta.

    So bm's default batch count M is the block count m of the bb it is compared with
    (SPEC 5.2). Without a bb that bm keeps bb's default beta; several bb methods with
    one beta (e.g. two multiplier laws) give one block count.

    Raises
    ------
    ValueError
        Such a bm sits next to bb methods with different betas: its M is ambiguous.
    """
    followers = [
        label
        for label, method in methods.items()
        if isinstance(method, BatchMeans) and method.n_batches is None and method.beta is None
    ]
    betas = {
        label: method.beta
        for label, method in methods.items()
        if isinstance(method, BlockBootstrap)
    }
    if not followers or not betas:
        return dict(methods)
    if len(set(betas.values())) > 1:
        listed = ", ".join(f"{label} beta = {beta}" for label, beta in betas.items())
        raise ValueError(
            f"The default 'n_batches' of bm is the block count of the spec's bb, but its bb "
            f"methods have different block lengths ({listed}). Set 'n_batches' or 'beta' "
            f"of {', '.join(repr(label) for label in followers)}."
        )
    beta = next(iter(betas.values()))
    return {
        label: dataclasses.replace(method, beta=beta) if label in followers else method
        for label, method in methods.items()
    }
