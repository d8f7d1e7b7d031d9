"""Base class of the local privacy mechanisms."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from numba import njit

from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import random, state_of
from ldpsim.tasks.validation import (
    Constants,
    check_budget_range,
    check_choice,
    check_finite_constants,
    check_float,
)

#: The calibrations of the Laplace and Gaussian mechanisms for a model that declares a
#: gradient sparsity s (SPEC 11): to the sensitivity with s ("sparse", the default for
#: such models) or with d in its place ("dense").
CALIBRATIONS = ("sparse", "dense")
Calibration = Literal["sparse", "dense"]


@njit
def _privatize_rows(privatize, params, g0, s, out):
    # Row k of ``out`` is a privatized copy of g0, the state kept compiled.
    for k in range(out.shape[0]):
        for j in range(g0.shape[0]):
            out[k, j] = g0[j]
        s = privatize(g0.shape[0], out[k], params, s)
    return s


@njit(inline="always")  # not cached: numba would miss changes in tasks.rng
def draw_budget(low, width, s):
    """One user's privacy budget, Uniform(low, low + width): ``(budget, s)``.

    Drawn from the data-and-noise stream right before that user's noise, so that a
    configuration with fixed budgets draws exactly the numbers it drew before
    per-user budgets existed.
    """
    u, s = random(s)
    return low + width * u, s


def check_calibration(value: object, owner: str) -> Calibration | None:
    """A mechanism's ``calibration`` parameter, checked.

    Parameters
    ----------
    value : object
        None (the model's own sensitivity) or one of :data:`CALIBRATIONS`.
    owner : str
        The mechanism's name, for the message.

    Returns
    -------
    str or None
        ``value``.

    Raises
    ------
    ValueError
        ``value`` is neither None nor one of :data:`CALIBRATIONS`.
    """
    return None if value is None else check_choice(value, "calibration", CALIBRATIONS, owner=owner)


def check_calibrated_model(calibration: Calibration | None, model: Model, owner: str) -> None:
    """Refuse a ``calibration`` for a model that declares no gradient sparsity.

    Parameters
    ----------
    calibration : {'sparse', 'dense'} or None
        The mechanism's checked ``calibration``.
    model : Model
        The replicate's model; a calibration needs ``model.gradient_sparsity()``.
    owner : str
        The mechanism's name, for the message.

    Raises
    ------
    ValueError
        A calibration is set and the model declares no gradient sparsity.
    """
    if calibration is not None and model.gradient_sparsity() is None:
        raise ValueError(
            f"The 'calibration' parameter of {owner} applies only to models that declare "
            f"a gradient sparsity (their gradient_sparsity); model {model.name!r} declares "
            f"none. Leave it out. Got calibration = {calibration!r}."
        )


def calibrated_sensitivity(
    model: Model, calibration: Calibration | None, norm: Literal[1, 2]
) -> float:
    """The model's l1 or l2 sensitivity under ``calibration`` (SPEC 11; seed 003).

    Parameters
    ----------
    model : Model
        The replicate's model.
    calibration : {'sparse', 'dense'} or None
        "dense": the model's sensitivity that ignores its sparsity (s replaced by d);
        "sparse" and None: the model's own (sparsity-aware where it declares a sparsity).
    norm : {1, 2}
        1 for Delta1 (Laplace), 2 for Delta2 (Gaussian).

    Returns
    -------
    float
        The sensitivity, > 0.
    """
    if calibration == "dense":
        return model.dense_l1_sensitivity() if norm == 1 else model.dense_l2_sensitivity()
    return model.l1_sensitivity() if norm == 1 else model.l2_sensitivity()


@dataclass(frozen=True, kw_only=True)
class Mechanism:
    """A local-DP mechanism applied by each user to their own gradient.

    Subclasses set ``name``, ``budget_param`` (the name of their privacy parameter,
    ``"eps"`` or ``"mu"``, a dataclass field defaulting to None), ``privatize`` and
    ``privatize_per_user`` (numba ``njit`` functions ``(d, g, params, s) -> s`` that
    privatize ``g`` (length ``d``) in place, drawing from the PCG64 state ``s`` of
    :mod:`ldpsim.tasks.streams.rng` and returning the advanced state; the second first draws the
    user's budget with :func:`draw_budget`), and implement ``params``, ``sensitivity``
    and ``variance``. Like the model's, the callbacks are inlined into the kernel and
    only index ``g`` and ``params``.

    Parameters
    ----------
    budget_range : list of 2 floats, optional
        ``[low, high]``, 0 < low <= high < inf: each user's budget (the value of
        ``budget_param``) is drawn iid Uniform(low, high); it replaces ``budget_param``,
        which must then be left out. Each user is then eps_i-LDP (mu_i-GDP) and the run
        is (max_i eps_i)-LDP (Shi, Xie, Jiang, Kong & He, seed 004, section 3).
    """

    name: ClassVar[str]
    privatize: ClassVar[object]
    #: None: the mechanism takes no ``budget_range`` (a plugin may leave it out).
    privatize_per_user: ClassVar[object] = None
    budget_param: ClassVar[str] = "eps"

    budget_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        budget = getattr(self, self.budget_param)
        if self.budget_range is not None:
            if type(self).privatize_per_user is None:
                raise ValueError(
                    f"The mechanism {self.name!r} takes no 'budget_range' (it has no per-user "
                    f"callback); give {self.budget_param!r} instead. Got budget_range = "
                    f"{self.budget_range!r}."
                )
            if budget is not None:
                raise ValueError(
                    f"The {self.budget_param!r} parameter of {self.name} cannot be given "
                    f"together with 'budget_range' (each user's {self.budget_param} is drawn "
                    f"from it); give one of them. Got {self.budget_param} = {budget!r} and "
                    f"budget_range = {self.budget_range!r}."
                )
            budget_range = check_budget_range(self.budget_range, owner=self.name)
            object.__setattr__(self, "budget_range", budget_range)
            return
        budget = 1.0 if budget is None else budget
        budget = check_float(budget, self.budget_param, owner=self.name, low=0, allow_inf=True)
        object.__setattr__(self, self.budget_param, budget)

    def check_model(self, model: Model) -> None:
        """Raise ValueError if this mechanism cannot privatize ``model``'s gradients."""

    def outside_theory(self) -> list[str]:
        """Messages for parameters where the privacy guarantee is not proved (none here)."""
        return []

    def constants(self, model: Model) -> Constants:
        """The constants this mechanism derives from its parameters for ``model``.

        A mapping from their names, as a message shows them, to functions computing them
        (a float or an array). The built-in mechanisms name their noise scale or
        debiasing factor and their noise variance; this default is the callback's
        parameter vector (:meth:`params`).
        """
        return {"its callback parameters (params)": lambda: self.params(model)}

    def at_budget(self, budget: float) -> Mechanism:
        """This mechanism with the fixed budget ``budget`` (in (0, inf]) in place of its own
        budget or budget range, its other parameters kept."""
        return dataclasses.replace(self, budget_range=None, **{self.budget_param: budget})

    def check_constants(self, model: Model) -> None:
        """Refuse a budget at which the mechanism's :meth:`constants` for ``model`` are not
        finite (a budget so small that its noise scale or variance overflows float64).

        With ``budget_range``, the constants of the user with the smallest budget (low)
        and the averaged ones must be finite; the message gives the smallest budget, or
        low, that can be run.

        Raises
        ------
        ValueError
            A constant is infinite or NaN; the message names the budget parameter, the
            constant and the allowed range.
        """
        param = self.budget_param
        if self.budget_range is None:
            value = getattr(self, param)

            def constants(budget: float) -> Constants:
                unit = self if budget == value else self.at_budget(budget)
                return unit.constants(model)

            check_finite_constants(
                constants,
                value,
                param,
                owner=self.name,
                context=f" for model {model.name!r}",
                instead=self._sensitivity_text(model),
            )
            return
        low, high = self.budget_range

        def constants(budget: float) -> Constants:
            ranged = (
                self
                if budget == low
                else dataclasses.replace(self, budget_range=(budget, max(budget, high)))
            )
            return {**self.at_budget(budget).constants(model), **ranged.constants(model)}

        check_finite_constants(
            constants,
            low,
            "budget_range",
            owner=self.name,
            allowed="a list [low, high] of two finite floats with {low} <= low <= high",
            good=max(high, 1.0),
            context=f" for model {model.name!r} (low is the smallest user budget)",
            got=[low, high],
            instead=self._sensitivity_text(model),
        )

    def _sensitivity_text(self, model: Model) -> str:
        """The model's sensitivity as this mechanism calibrates to it, for a message: its
        value, or that it overflows float64 ("" where this mechanism has none)."""
        try:
            value = float(self.sensitivity(model))
        except ArithmeticError:
            value = math.inf
        except (ValueError, NotImplementedError):
            return ""
        shown = f"{value:.3g}" if math.isfinite(value) else "beyond float64"
        return f"the sensitivity of model {model.name!r} ({shown})"

    def callback(self) -> object:
        """The compiled callback for this instance: ``privatize``, or
        ``privatize_per_user`` when ``budget_range`` is given."""
        return type(self).privatize if self.budget_range is None else type(self).privatize_per_user

    def params(self, model: Model) -> np.ndarray:
        """Float64 parameter vector passed to :meth:`callback` for ``model``."""
        raise NotImplementedError

    def sensitivity(self, model: Model) -> float:
        """The sensitivity the noise is calibrated to (l1 for Laplace, l2 for the Gaussian
        mechanisms, the range for RR)."""
        raise NotImplementedError

    def variance(self, model: Model) -> np.ndarray:
        """Closed-form covariance the mechanism adds to the gradient at theta*, (d, d);
        averaged over the budget law when ``budget_range`` is given. This default is for
        noise drawn independently for each coordinate: :meth:`noise_variance` times the
        identity."""
        return self.noise_variance(model) * np.eye(model.dim)

    def noise_variance(self, model: Model) -> float:
        """The variance of the noise added to each coordinate, averaged over the budget
        law when ``budget_range`` is given (a mechanism of independent noise per
        coordinate: Laplace, Gaussian, GDP)."""
        raise NotImplementedError

    def noise_constants(
        self, model: Model, scale: str, scale_of: Callable[[], object], variance: str
    ) -> Constants:
        """:meth:`constants` of a mechanism of independent noise per coordinate: its noise
        scale (named ``scale``, computed by ``scale_of``) and :meth:`noise_variance`
        (named ``variance``); with ``budget_range``, the averaged variance alone."""
        if self.budget_range is not None:
            name = f"the noise variance averaged over the users' {self.budget_param}"
            return {name: lambda: self.noise_variance(model)}
        return {scale: scale_of, variance: lambda: self.noise_variance(model)}

    def key(self) -> dict[str, object]:
        """The parameters given (None left out), as they key the data stream.

        Without ``budget_range`` this is ``{budget_param: value}`` plus any other
        parameter (``delta``), so the streams of the configurations that existed before
        per-user budgets are unchanged.
        """
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def privatize_copies(
        self, params: np.ndarray, g0: np.ndarray, n_samples: int, seed: int
    ) -> np.ndarray:
        """``n_samples`` independent privatized reports of the fixed gradient ``g0``.

        Runs the compiled callback (:meth:`callback`), as the kernel does; used by the
        tests and the privacy audits.

        Parameters
        ----------
        params : ndarray
            Parameter vector for the callback (normally :meth:`params`, or one
            calibrated differently by an audit's power check).
        g0 : array_like, shape (d,)
            The gradient every report starts from.
        n_samples : int
            Number of reports, >= 1.
        seed : int
            Seed of the PCG64 stream the reports are drawn from, >= 0.

        Returns
        -------
        ndarray, shape (n_samples, d)
        """
        g0 = np.asarray(g0, dtype=np.float64)
        out = np.empty((n_samples, g0.shape[0]))
        s = state_of(np.random.Generator(np.random.PCG64(seed)))
        _privatize_rows(self.callback(), np.asarray(params, dtype=np.float64), g0, s, out)
        return out

    @property
    def is_private(self) -> bool:
        """Whether the mechanism adds any randomness (a finite budget, or a budget range)."""
        return self.budget_range is not None or not math.isinf(getattr(self, self.budget_param))

    def mean_inverse_square_budget(self) -> float:
        """E[1 / b^2] of the user's budget b: 1 / b^2 for a fixed budget, 1 / (low high)
        for Uniform(low, high) (= (1 / (high - low)) int_low^high b^-2 db).

        The noise variance of the Laplace, Gaussian and GDP mechanisms is a constant
        times 1 / b^2, so averaged over the budget law it is that constant times this.
        """
        if self.budget_range is None:
            return getattr(self, self.budget_param) ** -2.0
        low, high = self.budget_range
        return 1.0 / (low * high)
