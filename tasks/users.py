"""A replicate's users, as competitor methods see them: the LDP run's stream, replayed."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ldpsim.tasks.kernel import users_loop
from ldpsim.tasks.kernel.cache import compile_template, pin_template
from ldpsim.tasks.mechanisms.base import Mechanism
from ldpsim.tasks.models.base import Model

# The template this process compiles, read now with the rest of its code.
pin_template(users_loop)


@functools.cache
def compile_users_loop(
    function, sample_gradient, sample_observation, privatize, project, d, n_model, n_mech
):
    """``function`` of :mod:`ldpsim.tasks.kernel.users_loop` with one model and mechanism
    compiled in."""
    bindings = {
        "sample_gradient": sample_gradient,
        "sample_observation": sample_observation,
        "privatize": privatize,
        "project": project,
        "d": int(d),
        "n_model_params": int(n_model),
        "n_mech_params": int(n_mech),
    }
    return compile_template(users_loop, function, bindings)


@dataclass(frozen=True, kw_only=True)
class Users:
    """The users of one replicate: who they are and the stream their data came from.

    Competitor methods (``fang``, ``np_boot``, ``cdp_blb_*``) get this instead of the
    LDP run's streaming statistics. ``start`` is the PCG64 state of the replicate's
    data-and-noise stream before the LDP run drew from it, so every replay sees the
    same n x batch users, observation for observation, as the LDP run did (SPEC 10).

    Parameters
    ----------
    model, mechanism : Model, Mechanism
        The replicate's model and local mechanism (its eps is the budget the
        competitors spend).
    n : int
        Number of SGD steps, >= 2.
    batch : int
        Users per step, >= 1: the run has n x batch users.
    c, gamma : float
        Step sizes eta_i = c i^-gamma of the LDP run.
    theta0 : tuple of float
        The LDP run's start.
    start : tuple of 4 uint64
        The data stream's state before the run (:func:`ldpsim.tasks.streams.rng.state_of`).
    """

    model: Model
    mechanism: Mechanism
    n: int
    batch: int
    c: float
    gamma: float
    theta0: tuple[float, ...]
    start: tuple

    @property
    def count(self) -> int:
        """Number of users, n x batch."""
        return self.n * self.batch

    def stream(self) -> np.ndarray:
        """A fresh copy of the start state, uint64 (4,), for a compiled replay."""
        return np.array(self.start, dtype=np.uint64)

    def loop_key(self) -> tuple:
        """What the compiled replays of these users depend on: the arguments of
        :func:`compile_users_loop` but the function (the model's and the mechanism's
        callbacks, d and the lengths of their parameter vectors)."""
        model, mechanism = self.model, self.mechanism
        return (
            type(model).sample_gradient,
            type(model).sample_observation,
            mechanism.callback(),
            type(model).project,
            model.dim,
            model.params().size,
            mechanism.params(model).size,
        )

    def loop(self, function: str):
        """The compiled ``function`` of :mod:`ldpsim.tasks.kernel.users_loop` for these users."""
        return compile_users_loop(function, *self.loop_key())

    def observations(self) -> np.ndarray:
        """The raw data of every user, shape (n x batch, d), in the order they arrived.

        Replayed once per :class:`Users` (the first call; the competitors that use raw
        data share it) and returned read-only thereafter.

        Raises
        ------
        ValueError
            The model has no ``sample_observation`` (no raw data to replay).
        """
        if type(self.model).sample_observation is None:
            raise ValueError(
                f"The model {self.model.name!r} offers no raw data (no sample_observation)."
            )
        replayed = self.__dict__.get("replayed_observations")
        if replayed is None:
            replayed = self.loop("observations")(
                self.model.params(),
                np.ascontiguousarray(self.mechanism.params(self.model), dtype=np.float64),
                self.count,
                self.stream(),
            )
            replayed.flags.writeable = False
            object.__setattr__(self, "replayed_observations", replayed)  # frozen: a cache
        return replayed
