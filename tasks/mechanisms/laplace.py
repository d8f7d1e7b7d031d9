"""The Laplace mechanism on the whole gradient vector (Dwork et al. 2006)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ldpsim.tasks.mechanisms.base import (
    Calibration,
    Mechanism,
    calibrated_sensitivity,
    check_calibrated_model,
    check_calibration,
    draw_budget,
)
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import laplace
from ldpsim.tasks.validation import Constants


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def _add_laplace(d, g, scale, s):
    # Add iid Laplace(0, scale) to every coordinate (nothing for scale 0: eps = inf).
    if scale > 0.0:
        for j in range(d):
            noise, s = laplace(s, 0.0, scale)
            g[j] += noise
    return s


@njit(inline="always")
def _laplace(d, g, params, s):
    # params = (scale,): scale = Delta1 / eps.
    return _add_laplace(d, g, params[0], s)


@njit(inline="always")
def _laplace_per_user(d, g, params, s):
    # params = (Delta1, low, high - low): the user's eps ~ Uniform(low, high) first,
    # then Laplace(0, Delta1 / eps) noise.
    eps, s = draw_budget(params[1], params[2], s)
    return _add_laplace(d, g, params[0] / eps, s)


@dataclass(frozen=True, kw_only=True)
class Laplace(Mechanism):
    """Add iid Laplace(0, Delta1 / eps) noise to each gradient coordinate.

    Delta1 is the model's l1-sensitivity (the l1-diameter of the set of gradients a
    user can have), so the density ratio of any report under two users' gradients is
    at most exp(eps ||g - g'||_1 / Delta1) <= e^eps: the mechanism is eps-LDP. The
    models of SPEC 3 state their own Delta1; a model that states only its
    l2-sensitivity Delta2 gets Delta1 = sqrt(p) Delta2, the scale of Example 1 of Shi,
    Xie, Jiang, Kong & He (seed 004): b = sqrt(p) Delta2 / eps.

    Each noise coordinate is a random sign times a standard exponential
    (:func:`ldpsim.tasks.streams.rng.laplace`), an exact Laplace sampler that is cheaper
    than numpy's
    inverse-CDF ``Generator.laplace``; the privacy audits test the compiled mechanism.

    Parameters
    ----------
    eps : float or None
        Privacy parameter, in (0, inf]; ``inf`` adds no noise. An eps below about
        1.06e-154 Delta1, where the noise variance 2 (Delta1 / eps)^2 overflows float64,
        is refused for the model (:meth:`check_constants`; so is a ``budget_range``
        whose low end is). None (the default): 1, unless ``budget_range`` is given.
    budget_range : list of 2 floats, optional
        ``[low, high]`` with 0 < low <= high < inf: user i's eps_i is drawn iid
        Uniform(low, high) and gets Laplace(0, Delta1 / eps_i) noise. The noise
        covariance averaged over users is 2 Delta1^2 E[eps^-2] I = 2 Delta1^2 / (low high) I.
    calibration : {'sparse', 'dense'} or None
        Only for a model that declares a gradient sparsity s (SPEC 11): 'sparse' (the
        default for such a model) calibrates to Delta1 = 2 M s, 'dense' to 2 M d, the
        bound that ignores the sparsity. The noise still goes on all d coordinates.

    References
    ----------
    Dwork, C., McSherry, F., Nissim, K. & Smith, A. (2006). Calibrating noise to
    sensitivity in private data analysis. TCC.
    Shi, Xie, Jiang, Kong & He (seed 004), Example 1 and section 3 (per-user budgets).
    Seed 003, the sparsity-aware sensitivity (``calibration``).
    """

    name = "laplace"
    privatize = _laplace
    privatize_per_user = _laplace_per_user

    eps: float | None = None
    calibration: Calibration | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "calibration", check_calibration(self.calibration, self.name))

    def check_model(self, model: Model) -> None:
        check_calibrated_model(self.calibration, model, self.name)

    def scale(self, model: Model) -> float:
        """Laplace scale b = Delta1 / eps (0 for eps = inf); needs a fixed eps."""
        if self.budget_range is not None:
            raise ValueError(
                "The Laplace scale Delta1 / eps_i differs between users when "
                "'budget_range' is given; there is no single scale."
            )
        return 0.0 if not self.is_private else self.sensitivity(model) / self.eps

    def params(self, model: Model) -> np.ndarray:
        if self.budget_range is not None:
            low, high = self.budget_range
            return np.array([self.sensitivity(model), low, high - low], dtype=np.float64)
        return np.array([self.scale(model)], dtype=np.float64)

    def sensitivity(self, model: Model) -> float:
        return calibrated_sensitivity(model, self.calibration, 1)

    def noise_variance(self, model: Model) -> float:
        """The noise variance of each coordinate, 2 b^2 with b = Delta1 / eps, averaged over
        eps's law when ``budget_range`` is given (2 Delta1^2 / (low high))."""
        if self.budget_range is None:
            return 2.0 * self.scale(model) ** 2
        return 2.0 * self.sensitivity(model) ** 2 * self.mean_inverse_square_budget()

    def constants(self, model: Model) -> Constants:
        return self.noise_constants(
            model,
            "the noise scale Delta1 / eps",
            lambda: self.scale(model),
            "the noise variance 2 (Delta1 / eps)^2",
        )
