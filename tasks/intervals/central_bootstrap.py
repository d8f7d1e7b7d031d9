"""Central-DP bag of little bootstraps (Chadha, Duchi & Kuditipudi, seed 002; SPEC 10.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsim.tasks.intervals.central_privacy import (
    above_threshold,
    exponential_quantile,
    n_subsets,
    private_mean,
    private_median,
    resampled_quantiles,
)
from ldpsim.tasks.intervals.critical_values import normal_quantile
from ldpsim.tasks.intervals.raw_data import RawDataMethod, public_range, quantile_level
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import check_float, check_int, check_vector


def central_eps(mechanism: Mechanism, owner: str) -> float:
    """The total central budget: the local mechanism's eps (finite, the same for all)."""
    eps = getattr(mechanism, "eps", None) if mechanism.budget_param == "eps" else None
    if mechanism.budget_range is not None or eps is None or not math.isfinite(eps):
        raise ValueError(
            f"The method {owner!r} spends the replicate's eps centrally; it needs a finite, "
            f"fixed eps (laplace, randomized_response, gaussian). Got mechanism "
            f"{mechanism.name!r} with "
            + (
                f"budget_range {mechanism.budget_range}."
                if mechanism.budget_range
                else f"eps {eps}."
            )
        )
    return float(eps)


@dataclass(frozen=True, kw_only=True)
class CentralBagOfLittleBootstraps(RawDataMethod):
    """Shared machinery of ``cdp_blb_var`` and ``cdp_blb_pct`` (SPEC 10.2).

    A trusted curator holds the raw data of the LDP run's users (replayed from the
    replicate's data stream, :class:`ldpsim.tasks.users.Users`) and spends the
    replicate's eps centrally: eps / 2 on the estimate, eps / 2 on the interval (for the
    mean with d > 1, each coordinate gets eps / (2 d) of each: basic composition).
    Estimate: the mean of the data clipped to [L, U] plus Laplace((U - L) / (n eps_est)),
    or the tau-quantile by the exponential mechanism over [L, U]
    (:mod:`ldpsim.tasks.intervals.central_privacy`).

    The bag of little bootstraps: a random partition of the n users into s = ceil(K log
    n / eps_int) subsets of b = floor(n / s) users (the n - s b left over are unused); in
    subset j, R resamples of size n (multiplicities Multinomial(n, 1/b)), and on each
    the private estimator at size n (so its privacy noise is simulated): theta*_jr. For
    the quantile only the multiplicities near rank tau n are drawn
    (:func:`ldpsim.tasks.intervals.central_privacy.resampled_quantiles`, the same
    distribution up to e^-50).
    Roots T_jr = sqrt(n) (thetahat_j - theta*_jr), thetahat_j the mean of the private
    estimator at size n on the subset's empirical law (:meth:`subset_centre`).

    Parameters
    ----------
    K : float
        Subset-count multiplier, > 0 (seed 002: 10).
    R : int
        Resamples per subset, in [2, 10**4].
    data_range : list of 2 floats, optional
        Public range [L, U] of the data, L < U. Default: the mean model's box
        [loc - 1, loc + 1] (the bound the local mechanisms use), for the quantile
        model [loc - 6, loc + 10] (:func:`ldpsim.tasks.intervals.raw_data.public_range`).
    V_max : float
        Public bound on the variance of sqrt(n) (estimate - theta*), > 0 (root units,
        so it does not depend on n). It clips the subsets' variances (cdp_blb_var)
        and sets the search range of the interval sets (cdp_blb_pct).
    max_n : int
        As for :class:`ldpsim.tasks.intervals.raw_data.RawDataMethod`.

    References
    ----------
    Chadha, K., Duchi, J. & Kuditipudi, R. (2024). Resampling methods for private
    statistical inference. arXiv:2402.07131 (seed 002).
    Kleiner, A., Talwalkar, A., Sarkar, P. & Jordan, M. I. (2014). A scalable bootstrap
    for massive data. JRSS-B 76, 795-816.
    """

    uses_rng: ClassVar[bool] = True
    own_estimate: ClassVar[bool] = True

    K: float = 10.0
    R: int = 50
    data_range: tuple[float, float] | None = None
    V_max: float = 100.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "K", check_float(self.K, "K", owner=self.name, low=0))
        object.__setattr__(self, "R", check_int(self.R, "R", owner=self.name, low=2, high=10**4))
        object.__setattr__(self, "V_max", check_float(self.V_max, "V_max", owner=self.name, low=0))
        if self.data_range is not None:
            low, high = check_vector(self.data_range, "data_range", 2, owner=self.name)
            if not low < high:
                raise ValueError(
                    f"The 'data_range' parameter of {self.name} must be [L, U] with L < U. "
                    f"Got {list(self.data_range)!r}."
                )
            object.__setattr__(self, "data_range", (low, high))

    def check_setup(self, model: Model, mechanism: Mechanism, n: int, batch: int) -> None:
        super().check_setup(model, mechanism, n, batch)
        central_eps(mechanism, self.name)

    def budgets(self, users: Users) -> tuple[float, float]:
        """(eps_est, eps_int) per coordinate: eps / (2 d) each."""
        eps = central_eps(users.mechanism, self.name)
        half = eps / (2.0 * users.model.dim)
        return half, half

    def private_statistic(
        self,
        sorted_x: np.ndarray,
        tau: float | None,
        eps: float,
        data_range: tuple[float, float],
        rng,
        counts: np.ndarray | None = None,
    ) -> np.ndarray:
        """The private mean or tau-quantile of one coordinate (per resample with ``counts``)."""
        if tau is not None:
            return exponential_quantile(sorted_x, tau, eps, data_range, rng, counts)
        clipped = np.clip(sorted_x, *data_range)
        if counts is None:
            return private_mean(
                np.array([clipped.mean()]), sorted_x.shape[0], eps, data_range, rng
            )
        n = int(counts[0].sum())
        return private_mean(counts @ clipped / n, n, eps, data_range, rng)

    @staticmethod
    def subset_centre(
        sorted_x: np.ndarray, boot: np.ndarray, tau: float | None, data_range: tuple[float, float]
    ) -> float:
        """thetahat_j: the mean of the private estimator at size n on a subset's empirical law.

        The plug-in principle of the bag of little bootstraps: thetahat_j is the
        functional theta(P) = E[private estimate of a sample of n from P] at P = the
        subset's empirical law, i.e. the mean of theta*_jr, so the roots
        sqrt(n) (thetahat_j - theta*_jr) are centred as the real estimator's root is.
        Mean: exactly the mean of the subset clipped to [L, U] (the Laplace noise has
        mean 0). Quantile: no closed form (the resample's ranks are random, and the
        gap the mechanism picks depends on them), so the mean of the R draws theta*_jr.
        Not the subset's x_(ceil(tau b)): a resample's rank count jumps by about n / b
        from one gap to the next, so the mechanism picks a gap above it and returns a
        point inside, about half a gap (s / (2 sqrt(n) f) in root units) above.

        Parameters
        ----------
        sorted_x : ndarray, shape (b,)
            One subset's data of one coordinate, sorted ascending.
        boot : ndarray, shape (R,)
            The subset's theta*_jr.
        tau : float or None
            Quantile level in (0, 1); None for the mean.
        data_range : (L, U)
            Public bounds, L < U.

        Returns
        -------
        float
        """
        if tau is None:
            return float(np.clip(sorted_x, *data_range).mean())
        return float(boot.mean())

    def little_bootstraps(
        self,
        x: np.ndarray,
        tau: float | None,
        eps_est: float,
        eps_int: float,
        rng,
        data_range: tuple[float, float],
    ) -> tuple[np.ndarray, np.ndarray]:
        """(theta*, thetahat_j) of one coordinate x (n,): shapes (s, R) and (s,)."""
        n = x.shape[0]
        s = n_subsets(n, eps_int, self.K)
        b = n // s
        subsets = rng.permutation(n)[: s * b].reshape(s, b)
        boot = np.empty((s, self.R))
        centre = np.empty(s)
        for j in range(s):
            part = np.sort(x[subsets[j]])
            if tau is None:
                counts = rng.multinomial(n, np.full(b, 1.0 / b), size=self.R)
                boot[j] = self.private_statistic(part, tau, eps_est, data_range, rng, counts)
            else:  # the same distribution, drawing only the counts near rank tau n
                boot[j] = resampled_quantiles(part, n, tau, eps_est, data_range, self.R, rng)
            centre[j] = self.subset_centre(part, boot[j], tau, data_range)
        return boot, centre

    def estimate_interval(
        self, users: Users, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = users.observations()
        tau = quantile_level(users.model)
        data_range = self.data_range or public_range(users.model)
        eps_est, eps_int = self.budgets(users)
        n, d = x.shape
        estimate, lower, upper = np.empty(d), np.empty(d), np.empty(d)
        for j in range(d):
            column = np.sort(x[:, j])
            estimate[j] = self.private_statistic(column, tau, eps_est, data_range, rng)[0]
            boot, centre = self.little_bootstraps(column, tau, eps_est, eps_int, rng, data_range)
            half = self.half_length(boot, centre, n, level, eps_int, rng)
            lower[j], upper[j] = estimate[j] - half, estimate[j] + half
        return estimate, lower, upper

    def half_length(
        self, boot: np.ndarray, centre: np.ndarray, n: int, level: float, eps_int: float, rng
    ) -> float:
        """The interval's half-length from the little bootstraps (eps_int-DP).

        Parameters
        ----------
        boot : ndarray, shape (s, R)
            theta*_jr of the s subsets.
        centre : ndarray, shape (s,)
            thetahat_j (:meth:`subset_centre`).
        n : int
            Number of users, >= 2.
        level : float
            Confidence level, in (0, 1).
        eps_int : float
            The interval's budget, in (0, inf).
        rng : numpy.random.Generator

        Returns
        -------
        float
            >= 0, in the estimate's units (not root units).
        """
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class CentralVarianceBootstrap(CentralBagOfLittleBootstraps):
    """cdp_blb_var: a normal interval with a privately aggregated bootstrap variance.

    sigma2_j = n x the variance of theta*_jr over r (root units), clipped to
    [0, V_max]; sigma2hat = the private median (eps_int) of sigma2_1..s by the
    exponential mechanism over [0, V_max] (one user changes one subset, so one
    sigma2_j); interval thetahat_priv +- z_(1-a/2) sqrt(sigma2hat / n).
    """

    name = "cdp_blb_var"

    def half_length(self, boot, centre, n, level, eps_int, rng) -> float:
        variances = np.clip(n * boot.var(axis=1, ddof=1), 0.0, self.V_max)
        sigma2 = private_median(variances, eps_int, (0.0, self.V_max), rng)
        return float(normal_quantile(0.5 + level / 2) * math.sqrt(sigma2 / n))


@dataclass(frozen=True, kw_only=True)
class CentralPercentileBootstrap(CentralBagOfLittleBootstraps):
    """cdp_blb_pct: the smallest of nested sets that most subsets' roots fill (SPEC 10.2).

    Sets A_t = [-(t + 1) h, (t + 1) h] in root units, t = 0..T-1, with
    h = z_(1-a/2) sqrt(V_max) / T (the search range comes from the public V_max, never
    from the data); count_t = #{j : the share of the roots T_jr in A_t > level}
    (sensitivity 1: one user changes one subset); AboveThreshold with threshold s / 2
    (noise Laplace(2 / eps_int), drawn once) and query noise Laplace(4 / eps_int) picks
    the first t that passes: interval thetahat_priv -+ (t + 1) h / sqrt(n). When none
    passes, the largest set.

    Parameters
    ----------
    n_sets : int
        T, the number of nested sets, in [1, 10**5] (default 400).
    """

    name = "cdp_blb_pct"

    n_sets: int = 400

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(
            self, "n_sets", check_int(self.n_sets, "n_sets", owner=self.name, low=1, high=10**5)
        )

    def half_length(self, boot, centre, n, level, eps_int, rng) -> float:
        roots = np.abs(math.sqrt(n) * (centre[:, None] - boot))  # (s, R)
        step = normal_quantile(0.5 + level / 2) * math.sqrt(self.V_max) / self.n_sets
        halves = step * np.arange(1, self.n_sets + 1)
        # share of each subset's roots inside each set: (T, s)
        ordered = np.sort(roots, axis=1)
        inside = np.stack([np.searchsorted(row, halves, side="right") for row in ordered], 1)
        counts = np.sum(inside / roots.shape[1] > level, axis=1)
        chosen = above_threshold(counts, roots.shape[0] / 2.0, eps_int, rng)
        t = self.n_sets - 1 if chosen is None else chosen
        return float(halves[t] / math.sqrt(n))
