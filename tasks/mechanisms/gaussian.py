"""Gaussian noise on the whole gradient vector: the (eps, delta) and the mu-GDP mechanisms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.lazy_import import lazy_module
from ldpsim.tasks.mechanisms.base import (
    Calibration,
    Mechanism,
    calibrated_sensitivity,
    check_calibrated_model,
    check_calibration,
    draw_budget,
)
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import standard_normal
from ldpsim.tasks.validation import Constants, check_finite_constants, check_float

stats = lazy_module("scipy.stats")


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _add_gaussian(d, g, sd, s):
    # Add iid N(0, sd^2) to every coordinate (nothing for sd 0: an infinite budget).
    if sd > 0.0:
        for j in range(d):
            z, s = standard_normal(s)
            g[j] += sd * z
    return s


@njit(inline="always")
def _gaussian(d, g, params, s):
    # params = (sd,).
    return _add_gaussian(d, g, params[0], s)


@njit(inline="always")
def _gaussian_per_user(d, g, params, s):
    # params = (sd_numerator, low, high - low): the user's budget b ~ Uniform(low, high)
    # first, then N(0, (sd_numerator / b)^2) noise.
    budget, s = draw_budget(params[1], params[2], s)
    return _add_gaussian(d, g, params[0] / budget, s)


def noise_factor(delta: float) -> float:
    """sqrt(2 ln(1.25 / delta)), delta in (0, 1): the classical Gaussian mechanism's noise sd
    is Delta2 times this over eps (inf below delta ~ 7e-309, where 1.25 / delta overflows)."""
    return math.sqrt(2.0 * math.log(1.25 / delta))


def gaussian_delta(eps: float, mu: float) -> float:
    """The smallest delta for which noise N(0, (Delta2 / mu)^2 I) is (eps, delta)-DP.

    delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2): the exact
    condition of Balle & Wang (2018, Theorem 8), and the (eps, delta) curve that mu-GDP
    implies (Dong, Roth & Su 2022, Corollary 2.13; seed 004, Example 3). mu = 1 gives
    delta(1) = 0.126937, delta(2) = 0.020924, delta(3) = 0.001537 (SPEC 9.1).

    Parameters
    ----------
    eps : float
        In [0, inf).
    mu : float
        In (0, inf).
    """
    a, b = -eps / mu + mu / 2, -eps / mu - mu / 2
    # e^eps Phi(b) through logs: e^eps alone overflows from eps ~ 710 on.
    return float(stats.norm.cdf(a) - math.exp(eps + stats.norm.logcdf(b)))


@dataclass(frozen=True, kw_only=True)
class Gaussian(Mechanism):
    """Add iid N(0, s^2) noise, s = Delta2 sqrt(2 ln(1.25 / delta)) / eps: (eps, delta)-LDP.

    Delta2 is the model's l2-sensitivity. Dwork & Roth (2014, Theorem A.1) prove the
    guarantee for eps in (0, 1); outside it ldpsim warns (OutsideTheoryWarning) and
    states the exact delta of this noise at eps by Balle & Wang (2018, Theorem 8)
    (:func:`gaussian_delta` with mu = eps / sqrt(2 ln(1.25 / delta))). The seed paper
    (Shi, Xie, Jiang, Kong & He, Example 2) prints the variance as
    8 log(1.25 / delta) / eps, a typo for 2 Delta2^2 ln(1.25 / delta) / eps^2 with its
    Delta2 = 2.

    Parameters
    ----------
    eps : float or None
        Privacy parameter, in (0, inf]; ``inf`` adds no noise. An eps whose noise
        variance overflows float64 (below about 7.5e-155 Delta2 sqrt(2 ln(1.25 / delta)))
        is refused for the model (:meth:`check_constants`; so is a ``budget_range``
        whose low end is). None (the default): 1, unless ``budget_range`` is given.
    delta : float
        Privacy parameter, in [6.96e-309, 1) (default 1e-5): below it 1.25 / delta, and
        the noise, overflow.
    budget_range : list of 2 floats, optional
        ``[low, high]`` with 0 < low <= high < inf: user i's eps_i is drawn iid
        Uniform(low, high) (delta is the same for all). The noise covariance averaged
        over users is 2 Delta2^2 ln(1.25 / delta) E[eps^-2] I with E[eps^-2] = 1 / (low high).
    calibration : {'sparse', 'dense'} or None
        Only for a model that declares a gradient sparsity s (SPEC 11): 'sparse' (the
        default for such a model) calibrates to Delta2 = 2 M sqrt(s), 'dense' to
        2 M sqrt(d). The noise still goes on all d coordinates.

    References
    ----------
    Dwork, C. & Roth, A. (2014). The algorithmic foundations of differential privacy.
    Found. Trends Theor. Comput. Sci. 9, 211-407, Theorem A.1.
    Balle, B. & Wang, Y.-X. (2018). Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising. ICML, Theorem 8.
    Shi, Xie, Jiang, Kong & He (seed 004), Example 2 and section 3 (per-user budgets).
    Seed 003, the sparsity-aware sensitivity (``calibration``).
    """

    name = "gaussian"
    privatize = _gaussian
    privatize_per_user = _gaussian_per_user

    eps: float | None = None
    delta: float = 1e-5
    calibration: Calibration | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        delta = check_float(self.delta, "delta", owner=self.name, low=0, high=1)
        check_finite_constants(
            lambda value: {
                "the noise factor sqrt(2 ln(1.25 / delta))": lambda: noise_factor(value)
            },
            delta,
            "delta",
            owner=self.name,
            allowed="a float in [{low}, 1)",
            good=1e-5,
        )
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "calibration", check_calibration(self.calibration, self.name))

    def check_model(self, model: Model) -> None:
        check_calibrated_model(self.calibration, model, self.name)

    def noise_factor(self) -> float:
        """sqrt(2 ln(1.25 / delta)): the noise sd is Delta2 times this over eps."""
        return noise_factor(self.delta)

    def sd(self, model: Model) -> float:
        """Noise sd s = Delta2 sqrt(2 ln(1.25 / delta)) / eps (0 for eps = inf)."""
        if self.budget_range is not None:
            raise ValueError(
                "The noise sd differs between users when 'budget_range' is given; there "
                "is no single sd."
            )
        return (
            0.0
            if not self.is_private
            else self.sensitivity(model) * self.noise_factor() / self.eps
        )

    def params(self, model: Model) -> np.ndarray:
        if self.budget_range is not None:
            low, high = self.budget_range
            numerator = self.sensitivity(model) * self.noise_factor()
            return np.array([numerator, low, high - low], dtype=np.float64)
        return np.array([self.sd(model)], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        return calibrated_sensitivity(model, self.calibration, 2)

    def noise_variance(self, model: Model) -> float:
        """The noise variance of each coordinate, s^2, averaged over eps's law when
        ``budget_range`` is given (2 Delta2^2 ln(1.25 / delta) / (low high))."""
        numerator = self.sensitivity(model) * self.noise_factor()
        return numerator**2 * self.mean_inverse_square_budget()

    def constants(self, model: Model) -> Constants:
        return self.noise_constants(
            model,
            "the noise sd Delta2 sqrt(2 ln(1.25 / delta)) / eps",
            lambda: self.sd(model),
            "the noise variance",
        )

    def outside_theory(self) -> list[str]:
        if self.budget_range is None:
            if not 1.0 <= self.eps < math.inf:
                return []
            worst_eps, where = self.eps, f"eps = {self.eps:g} is"
        else:
            low, high = self.budget_range
            if high < 1.0:
                return []
            # The exact delta at the users' eps_i in [max(low, 1), high]: its largest value.
            grid = np.linspace(max(low, 1.0), high, 101)
            worst_eps = float(grid[np.argmax([self.exact_delta(e) for e in grid])])
            where = f"budget_range = [{low:g}, {high:g}] reaches eps_i"
        exact = self.exact_delta(worst_eps)
        verdict = "within" if exact <= self.delta else "NOT within"
        return [
            f"gaussian: {where} outside (0, 1), where the classical calibration is proved "
            f"(Dwork & Roth 2014, Theorem A.1); the exact delta of its noise at eps = "
            f"{worst_eps:g} is {exact:.3g} (Balle & Wang 2018), {verdict} delta = {self.delta:g}."
        ]

    def exact_delta(self, eps: float) -> float:
        """The exact delta of this mechanism's noise at a user's budget ``eps``."""
        return gaussian_delta(eps, eps / self.noise_factor())


@dataclass(frozen=True, kw_only=True)
class GaussianDP(Mechanism):
    """Add iid N(0, (Delta2 / mu)^2) noise: mu-Gaussian differential privacy (mu-GDP).

    Distinguishing two users' reports is at least as hard as telling N(0, 1) from
    N(mu, 1) from one draw: every test's errors (alpha, beta) satisfy
    beta >= Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth & Su 2022, Theorem 2.7). mu-GDP
    implies (eps, delta(eps))-LDP for every eps >= 0 (:func:`gaussian_delta`). The seed
    paper (Shi, Xie, Jiang, Kong & He, Example 3) prints the variance as 4 / mu, a typo
    for Delta2^2 / mu^2 with its Delta2 = 2.

    Parameters
    ----------
    mu : float or None
        Privacy parameter, in (0, inf]; ``inf`` adds no noise. A mu below about
        7.5e-155 Delta2, where the noise variance (Delta2 / mu)^2 overflows float64, is
        refused for the model (:meth:`check_constants`; so is a ``budget_range`` whose
        low end is). None (the default): 1, unless ``budget_range`` is given.
    budget_range : list of 2 floats, optional
        ``[low, high]`` with 0 < low <= high < inf: user i's mu_i is drawn iid
        Uniform(low, high). The noise covariance averaged over users is
        Delta2^2 E[mu^-2] I with E[mu^-2] = 1 / (low high) (Uniform(1, 2): 1/2, as for
        mu = sqrt 2).

    References
    ----------
    Dong, J., Roth, A. & Su, W. J. (2022). Gaussian differential privacy. J. R. Stat.
    Soc. B 84, 3-37.
    Shi, Xie, Jiang, Kong & He (seed 004), Example 3 and section 3 (per-user budgets).
    """

    name = "gdp"
    privatize = _gaussian
    privatize_per_user = _gaussian_per_user
    budget_param = "mu"

    mu: float | None = None

    def sd(self, model: Model) -> float:
        """Noise sd Delta2 / mu (0 for mu = inf)."""
        if self.budget_range is not None:
            raise ValueError(
                "The noise sd differs between users when 'budget_range' is given; there "
                "is no single sd."
            )
        return 0.0 if not self.is_private else self.sensitivity(model) / self.mu

    def params(self, model: Model) -> np.ndarray:
        if self.budget_range is not None:
            low, high = self.budget_range
            return np.array([self.sensitivity(model), low, high - low], dtype=np.float64)
        return np.array([self.sd(model)], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        return model.l2_sensitivity()

    def noise_variance(self, model: Model) -> float:
        """The noise variance of each coordinate, (Delta2 / mu)^2, averaged over mu's law
        when ``budget_range`` is given (Delta2^2 / (low high))."""
        return self.sensitivity(model) ** 2 * self.mean_inverse_square_budget()

    def constants(self, model: Model) -> Constants:
        return self.noise_constants(
            model,
            "the noise sd Delta2 / mu",
            lambda: self.sd(model),
            "the noise variance (Delta2 / mu)^2",
        )
