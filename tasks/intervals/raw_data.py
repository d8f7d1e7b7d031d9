"""What the competitors compute on raw data: the statistic, its public range, the memory cap."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ldpsim.tasks.intervals.base import IntervalMethod
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.validation import check_int

#: Default of ``max_n``: the largest n a method that holds the raw data accepts.
DEFAULT_MAX_N = 10**7
#: The models whose statistic the competitors know how to compute on raw data.
RAW_MODELS = ("mean", "quantile")
#: Default public range of the quantile model's data, [loc - 6, loc + 10]: off centre
#: on purpose, so that it is not symmetric about the truth (loc at tau = 0.5), which
#: a curator would not know; the exponential mechanism's output is pulled towards the
#: range's centre when eps n is small. P(N(0, 1) < -6) = 1e-9: a point clipped at the
#: bottom stays the smallest, so no quantile of the data changes.
QUANTILE_RANGE = (-6.0, 10.0)


def check_raw_model(model: Model, owner: str) -> None:
    """Raise ValueError unless ``model`` is one whose statistic ``owner`` can compute."""
    if model.name not in RAW_MODELS or type(model).sample_observation is None:
        raise ValueError(
            f"The method {owner!r} works for the models {', '.join(map(repr, RAW_MODELS))} "
            f"(it computes their statistic on the users' raw data). Got {model.name!r}."
        )


def check_max_n(n_users: int, max_n: int, owner: str) -> None:
    """Raise ValueError when ``owner`` would hold more than ``max_n`` users' raw data.

    Called when the spec is normalized, so a sweep is refused before any work.
    """
    if n_users > max_n:
        raise ValueError(
            f"The method {owner!r} holds the raw data of all n x batch users in memory; "
            f"{n_users} users is above its 'max_n' = {max_n}. Use a smaller n, or raise "
            f"max_n (methods.{owner}.max_n) on a machine with the memory (at least 8 bytes "
            "per user and coordinate, times a few)."
        )


def public_range(model: Model) -> tuple[float, float]:
    """Default public range [L, U] of one data coordinate.

    mean: the box [loc - 1, loc + 1] the data lie in (the bound the local mechanisms are
    calibrated with, so both models of privacy know the same); quantile:
    [loc - 6, loc + 10] (:data:`QUANTILE_RANGE`: not symmetric about the truth).
    """
    loc = float(model.loc)
    below, above = (-1.0, 1.0) if model.name == "mean" else QUANTILE_RANGE
    return loc + below, loc + above


def quantile_level(model: Model) -> float | None:
    """tau for the quantile model, None for the mean."""
    return float(model.tau) if model.name == "quantile" else None


def sample_statistic(x: np.ndarray, tau: float | None) -> np.ndarray:
    """The mean (tau None) or the tau-quantile x_(ceil(tau m)) of each column of x (m, d)."""
    if tau is None:
        return x.mean(axis=0)
    m = x.shape[0]
    rank = min(max(math.ceil(tau * m), 1), m)
    return np.partition(x, rank - 1, axis=0)[rank - 1]


@dataclass(frozen=True, kw_only=True)
class RawDataMethod(IntervalMethod):
    """Base of the methods that hold every user's raw data (np_boot, cdp_blb_*).

    They work for :data:`RAW_MODELS` only and refuse, when the spec is checked, more
    users than ``max_n``.

    Parameters
    ----------
    max_n : int
        Largest number of users (n x batch) accepted, >= 2 (default 1e7): the method
        holds all raw data in memory; a larger n is refused when the spec is checked.
    """

    max_n: int = DEFAULT_MAX_N

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_n", check_int(self.max_n, "max_n", owner=self.name, low=2))

    def check_setup(self, model: Model, mechanism: Mechanism, n: int, batch: int) -> None:
        check_raw_model(model, self.name)
        check_max_n(n * batch, self.max_n, self.name)
