"""The keys of a replicate spec besides its units' own parameters, and a unit's parameters:
what a plugin's parameters may not be named (:mod:`ldpsim.tasks.plugins`) and how a spec
is read (:mod:`ldpsim.tasks.spec`)."""

from __future__ import annotations

import dataclasses
import functools

#: Keys of a replicate spec besides the model's own parameters.
SPEC_KEYS = (
    "model",
    "mechanism",
    "n",
    "c",
    "gamma",
    "theta0",
    "batch",
    "methods",
    "level",
    "seed",
    "checkpoints",
    "backend",
)


def unit_params(cls: type) -> list[str]:
    """Constructor parameters of a unit dataclass."""
    return list(unit_param_names(cls))


@functools.cache
def unit_param_names(cls: type) -> tuple[str, ...]:
    """:func:`unit_params` as a tuple, worked out once per class (its fields never change;
    a sweep normalizes every point)."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)
