"""NPRR: finite-sample locally private intervals for a bounded mean (Waudby-Smith et al.)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

import numpy as np

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.intervals.raw_data import DEFAULT_MAX_N, check_max_n
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.mechanisms.nprr import nprr_keep_probability, nprr_privatize
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import check_choice, check_int

Bound = Literal["hoeffding", "hoeffding_plus", "hoeffding_cs"]


def data_range(model: Model) -> tuple[float, float] | None:
    """The public range [L, U] of a one-dimensional model's data; None if it has none.

    bounded_mean: [0, 1]; mean with d = 1: [loc - 1, loc + 1] (its truncation box).
    """
    if model.name == "bounded_mean":
        return 0.0, 1.0
    if model.name == "mean" and model.dim == 1:
        loc = float(model.loc)
        return loc - 1.0, loc + 1.0
    return None


def pure_eps(mechanism: Mechanism, owner: str) -> float:
    """The replicate's eps, which NPRR spends instead of the LDP run's mechanism.

    Raises
    ------
    ValueError
        The mechanism's budget is not one finite pure eps (gdp's mu, gaussian's
        (eps, delta), per-user budgets, or no privacy).
    """
    eps = getattr(mechanism, "eps", None) if mechanism.budget_param == "eps" else None
    pure = not any(f.name == "delta" for f in dataclasses.fields(mechanism))
    if mechanism.budget_range is not None or eps is None or not math.isfinite(eps) or not pure:
        raise ValueError(
            f"The method {owner!r} gives each user the replicate's eps (pure eps-LDP); it "
            "needs a mechanism with one finite eps and no delta (laplace, "
            f"randomized_response). Got mechanism {mechanism.name!r}."
        )
    return float(eps)


def hoeffding_interval(z: np.ndarray, keep: float, level: float) -> tuple[float, float, float]:
    """NPRR-H: the private Hoeffding interval for the mean of x from reports z.

    mu_hat = (Zbar - (1 - r) / 2) / r and mu_hat +- sqrt(log(2 / alpha) / (2 n)) / r,
    alpha = 1 - level, clipped to [0, 1].

    Parameters
    ----------
    z : ndarray, shape (n,)
        NPRR reports, in [0, 1], n >= 1.
    keep : float
        r in (0, 1].
    level : float
        1 - alpha, in (0, 1).

    Returns
    -------
    (estimate, lower, upper) : floats
        The estimate is mu_hat, unclipped (unbiased).

    Notes
    -----
    The paper's one-sided bound uses log(1 / alpha); the two-sided interval is the
    intersection of two one-sided bounds at alpha / 2 each, hence log(2 / alpha)
    (SPEC 12.2). Valid at every n (Hoeffding's inequality for the Z_i, bounded in
    [0, 1], whose mean is r mu + (1 - r) / 2).

    References
    ----------
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023). Nonparametric extensions of
    randomized response for private confidence sets. ICML (arXiv:2202.08728),
    section 3, the NPRR-Hoeffding confidence interval.
    """
    n = z.shape[0]
    log_term = math.log(2.0 / (1.0 - level))
    estimate = (float(np.mean(z)) - (1.0 - keep) / 2.0) / keep
    half = math.sqrt(log_term / (2.0 * n)) / keep
    return estimate, max(estimate - half, 0.0), min(estimate + half, 1.0)


def hoeffding_plus_interval(
    z: np.ndarray, keep: float, level: float
) -> tuple[float, float, float]:
    """NPRR-H+: the intersection over t <= n of the running Hoeffding bounds.

    With lambda = sqrt(8 log(2 / alpha) / n) fixed in advance,
    c_t = sum_{i<=t} (Z_i - (1 - r) / 2) / (r t) and
    B_t = (log(2 / alpha) + t lambda^2 / 8) / (r t lambda), the interval is
    [max_t (c_t - B_t), min_t (c_t + B_t)], clipped to [0, 1]; at t = n the bound is
    NPRR-H's, so it is never longer. It can be empty (lower > upper): such a replicate
    does not cover.

    Parameters
    ----------
    z, keep, level
        As for :func:`hoeffding_interval`.

    Returns
    -------
    (estimate, lower, upper) : floats
        The estimate is NPRR-H's mu_hat.

    References
    ----------
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023), section 3 (the Hoeffding process
    with a fixed lambda is a nonnegative supermartingale; Ville's inequality gives the
    bound for all t <= n at once, SPEC 12.2).
    """
    n = z.shape[0]
    log_term = math.log(2.0 / (1.0 - level))
    lam = math.sqrt(8.0 * log_term / n)
    t = np.arange(1, n + 1, dtype=np.float64)
    centre = np.cumsum(z - (1.0 - keep) / 2.0) / (keep * t)
    radius = (log_term + t * lam**2 / 8.0) / (keep * t * lam)
    estimate = (float(np.mean(z)) - (1.0 - keep) / 2.0) / keep
    lower = max(float(np.max(centre - radius)), 0.0)
    upper = min(float(np.min(centre + radius)), 1.0)
    return estimate, lower, upper


def hoeffding_cs_sequence(
    z: np.ndarray, keep: float, level: float, points: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """NPRR-H-CS: the time-uniform Hoeffding confidence sequence C_t for the mean of x.

    lambda_t = min(1, sqrt(8 log(2 / alpha) / (t log(t + 1)))) (predictable: fixed in
    advance); C_t = sum_{i<=t} lambda_i (Z_i - (1 - r) / 2) / (r sum_{i<=t} lambda_i) +-
    (log(2 / alpha) + sum_{i<=t} lambda_i^2 / 8) / (r sum_{i<=t} lambda_i), clipped to
    [0, 1]. P(mu in C_t for all t >= 1) >= level.

    Parameters
    ----------
    z : ndarray, shape (n,)
        NPRR reports in arrival order, in [0, 1], n >= 1.
    keep : float
        r in (0, 1].
    level : float
        1 - alpha, in (0, 1).
    points : ndarray of int, optional
        Times t in [1, n] at which to report C_t (e.g. a sweep's checkpoints); default
        every t = 1..n.

    Returns
    -------
    (lower, upper) : ndarrays, shape (len(points),) (or (n,))

    References
    ----------
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023), section 3, the NPRR-Hoeffding
    confidence sequence (SPEC 12.3).
    """
    n = z.shape[0]
    log_term = math.log(2.0 / (1.0 - level))
    t = np.arange(1, n + 1, dtype=np.float64)
    lam = np.minimum(1.0, np.sqrt(8.0 * log_term / (t * np.log1p(t))))
    index = np.arange(n) if points is None else np.asarray(points, dtype=np.int64) - 1
    weight = np.cumsum(lam)[index]
    centre = np.cumsum(lam * (z - (1.0 - keep) / 2.0))[index] / (keep * weight)
    radius = (log_term + np.cumsum(lam**2)[index] / 8.0) / (keep * weight)
    return np.maximum(centre - radius, 0.0), np.minimum(centre + radius, 1.0)


def hoeffding_cs(z: np.ndarray, keep: float, level: float) -> tuple[float, float, float]:
    """NPRR-H-CS at t = n: the confidence sequence's interval (:func:`hoeffding_cs_sequence`).

    Valid at any n, including one chosen after looking at the data; the price is its
    length (a log log n factor).

    Parameters
    ----------
    z, keep, level
        As for :func:`hoeffding_interval`.

    Returns
    -------
    (estimate, lower, upper) : floats
        The estimate is NPRR-H's mu_hat.
    """
    n = z.shape[0]
    lower, upper = hoeffding_cs_sequence(z, keep, level, np.array([n]))
    estimate = (float(np.mean(z)) - (1.0 - keep) / 2.0) / keep
    return estimate, float(lower[0]), float(upper[0])


_BOUNDS = {
    "hoeffding": hoeffding_interval,
    "hoeffding_plus": hoeffding_plus_interval,
    "hoeffding_cs": hoeffding_cs,
}


@dataclass(frozen=True, kw_only=True)
class NonparametricRandomizedResponse(IntervalMethod):
    """NPRR: each user reports its data point by nonparametric randomized response at the
    replicate's eps; a finite-sample interval for the mean from the reports.

    A competitor that spends the privacy budget differently (SPEC 10, 12): the users
    are the LDP run's (their raw points, replayed from the replicate's data stream;
    :class:`ldpsim.tasks.users.Users`), each privatized once by NPRR at the replicate's
    eps (:func:`ldpsim.tasks.mechanisms.nprr.nprr_privatize`, noise from the method's
    own stream), instead of answering a gradient. The mean's data are mapped onto
    [0, 1] by their public range (bounded_mean: [0, 1]; mean, d = 1:
    [loc - 1, loc + 1]) and the interval is mapped back.

    Unlike every other method its coverage holds at every n, not only as n grows: it
    is the yardstick for small n and strong privacy.

    Parameters
    ----------
    bound : {'hoeffding', 'hoeffding_plus', 'hoeffding_cs'}
        'hoeffding' (default): NPRR-H, mu_hat +- sqrt(log(2/alpha) / (2n)) / r
        (:func:`hoeffding_interval`); 'hoeffding_plus': its running form, never longer
        (:func:`hoeffding_plus_interval`); 'hoeffding_cs': the time-uniform
        confidence sequence at n (:func:`hoeffding_cs`).
    grid : int
        G, in [1, 10**6]: reports on {0, 1/G, ..., 1}, r = (e^eps - 1) / (e^eps + G).
        The Hoeffding bounds scale as 1 / r, so G = 1 (default) is best for them.
    max_n : int
        Largest number of users (n x batch) accepted, >= 2 (default 1e7): the method
        holds every user's point in memory.

    References
    ----------
    Waudby-Smith, I., Wu, Z. S. & Ramdas, A. (2023). Nonparametric extensions of
    randomized response for private confidence sets. ICML, PMLR 202
    (arXiv:2202.08728): Algorithm 2 (NPRR) and the NPRR-Hoeffding interval and
    confidence sequence of its section 3.
    """

    name = "nprr"
    uses_rng: ClassVar[bool] = True
    own_estimate: ClassVar[bool] = True

    bound: Bound = "hoeffding"
    grid: int = 1
    max_n: int = DEFAULT_MAX_N

    def __post_init__(self) -> None:
        check_choice(self.bound, "bound", get_args(Bound), owner=self.name)
        object.__setattr__(
            self, "grid", check_int(self.grid, "grid", owner=self.name, low=1, high=10**6)
        )
        object.__setattr__(self, "max_n", check_int(self.max_n, "max_n", owner=self.name, low=2))

    def check_setup(self, model: Model, mechanism: Mechanism, n: int, batch: int) -> None:
        if data_range(model) is None or type(model).sample_observation is None:
            raise ValueError(
                f"The method {self.name!r} covers the mean of bounded one-dimensional data: "
                f"model 'bounded_mean', or 'mean' with d = 1. Got {model.name!r} with "
                f"d = {model.dim}."
            )
        pure_eps(mechanism, self.name)
        check_max_n(n * batch, self.max_n, self.name)

    def estimate_interval(
        self, users: Users, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        low, high = data_range(users.model)
        width = high - low
        x = np.clip((users.observations()[:, 0] - low) / width, 0.0, 1.0)
        eps = pure_eps(users.mechanism, self.name)
        keep = nprr_keep_probability(eps, self.grid)
        z = nprr_privatize(x, eps=eps, grid=self.grid, rng=rng)
        estimate, lower, upper = _BOUNDS[self.bound](z, keep, level)
        return tuple(np.array([low + width * v]) for v in (estimate, lower, upper))
