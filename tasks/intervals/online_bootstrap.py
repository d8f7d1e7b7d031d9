"""Online multiplier bootstrap with a split privacy budget (Fang, Xu & Yang 2018)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from ldpsim.tasks.intervals.base import IntervalMethod, smallest_b
from ldpsim.tasks.intervals.bootstrap import basic_interval
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model
from ldpsim.tasks.streams.rng import set_state, state_of
from ldpsim.tasks.users import Users
from ldpsim.tasks.validation import check_choice, check_int

WeightLaw = Literal["exponential"]


def split_mechanism(mechanism: Mechanism, parts: int) -> Mechanism:
    """``mechanism`` with its budget eps divided by ``parts`` (sequential composition).

    Raises
    ------
    ValueError
        The mechanism's budget is not a single pure eps (mu of gdp, (eps, delta) of
        gaussian, per-user budgets), for which eps / parts is not the split.
    """
    if mechanism.budget_param != "eps" or mechanism.budget_range is not None:
        raise ValueError(
            "fang splits a pure eps-LDP budget over its chains (eps / (B + 1) per answer); "
            f"the mechanism must be laplace, randomized_response or none with a fixed eps. "
            f"Got {mechanism.name!r}"
            + (" with budget_range" if mechanism.budget_range is not None else "")
            + "."
        )
    if any(f.name == "delta" for f in dataclasses.fields(mechanism)):
        raise ValueError(
            f"fang splits a pure eps-LDP budget; the (eps, delta) mechanism {mechanism.name!r} "
            "would need delta split too. Use laplace or randomized_response."
        )
    return dataclasses.replace(mechanism, eps=mechanism.eps / parts)


@dataclass(frozen=True, kw_only=True)
class OnlineBootstrap(IntervalMethod):
    """B + 1 LDP-SGD chains over the same users, each answer at eps / (B + 1) (SPEC 10.1).

    Chain 0 is plain LDP-SGD; chain b = 1..B steps theta*_i = theta*_(i-1) -
    eta_i W_(i,b) ghat_(i,b) with iid multipliers W of mean 1 and variance 1. Every user
    answers all B + 1 chains (a gradient at each chain's iterate, privatized by the
    replicate's mechanism at eps / (B + 1)), so by sequential composition each user
    spends eps in total, as in the LDP run. The users are the LDP run's (the same
    observations, replayed from the replicate's data stream; :class:`Users`); the
    chains' privacy noise and multipliers come from the method's own stream.

    Estimate: theta_bar_0, the average of chain 0; interval (basic):
    [theta_bar_0 - q_(1-a/2), theta_bar_0 - q_(a/2)], q the quantiles of
    theta_bar*_b - theta_bar_0. The chains run in one compiled loop
    (:func:`ldpsim.tasks.kernel.users_loop.chains`): n (B + 1) privatized gradients.

    Parameters
    ----------
    B : int
        Number of bootstrap chains, in [2, 10**4] (default 50; one has no spread).
    weights : {'exponential'}
        Law of the multipliers W: Exp(1).

    References
    ----------
    Fang, Y., Xu, J. & Yang, L. (2018). Online bootstrap confidence intervals for the
    stochastic gradient descent estimator. JMLR 19(78), 1-21.
    Dette, H. & Graw, C. (seed 000), section 3: why the split budget fails under LDP.
    """

    name = "fang"
    uses_rng: ClassVar[bool] = True
    own_estimate: ClassVar[bool] = True

    B: int = 50
    weights: WeightLaw = "exponential"

    def __post_init__(self) -> None:
        draws = check_int(self.B, "B", owner=self.name, low=smallest_b(), high=10**4)
        object.__setattr__(self, "B", draws)
        check_choice(self.weights, "weights", ("exponential",), owner=self.name)

    def check_setup(self, model: Model, mechanism: Mechanism, n: int, batch: int) -> None:
        parts = self.B + 1
        try:
            split_mechanism(mechanism, parts).check_constants(model)
        except ValueError as error:
            if mechanism.budget_param != "eps" or mechanism.budget_range is not None:
                raise
            raise ValueError(
                f"fang answers each of its B + 1 = {parts} chains at eps / (B + 1) = "
                f"{mechanism.eps:g} / {parts} = {mechanism.eps / parts:g}, which "
                f"{mechanism.name} refuses; raise eps or lower B. {error}"
            ) from None

    def chain_mechanism(self, mechanism: Mechanism) -> Mechanism:
        """The mechanism each chain's answers go through: eps / (B + 1)."""
        return split_mechanism(mechanism, self.B + 1)

    def chain_averages(self, users: Users, rng: np.random.Generator) -> np.ndarray:
        """theta_bar of the B + 1 chains, shape (B + 1, d); chain 0 first."""
        model = users.model
        chain_params = self.chain_mechanism(users.mechanism).params(model)
        noise = np.array(state_of(rng), dtype=np.uint64)
        averages = users.loop("chains")(
            model.params(),
            np.ascontiguousarray(users.mechanism.params(model), dtype=np.float64),
            np.ascontiguousarray(chain_params, dtype=np.float64),
            np.array(users.theta0, dtype=np.float64),
            float(users.c),
            float(users.gamma),
            int(users.batch),
            int(users.n),
            self.B + 1,
            users.stream(),
            noise,
        )
        set_state(rng, noise)
        return averages

    def estimate_interval(
        self, users: Users, level: float, rng: np.random.Generator | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        averages = self.chain_averages(users, rng)
        estimate = averages[0]
        if not np.all(np.isfinite(averages)):
            raise FloatingPointError("non-finite chain average (the iterates overflowed)")
        return basic_interval(estimate, averages[1:] - estimate, level)
