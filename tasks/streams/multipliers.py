"""The multipliers of the block bootstrap: iid draws of mean 0 and variance 1 from a
replicate's own bootstrap stream (Dette & Graw), by law.

:func:`draw_multipliers` draws them with numpy's Generator; :func:`next_multiplier`
draws the same numbers, one at a time and bit for bit, in compiled code from a
stream's PCG64 state, with numpy's algorithms inlined (:mod:`ldpsim.tasks.streams.rng`):
bb's compiled path (:func:`ldpsim.tasks.intervals.bootstrap_bounds.multiplier_bounds`)
sums each replicate's draws as it makes its multipliers.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np

from ldpsim.tasks.compiled import cached_njit
from ldpsim.tasks.streams.rng import next_double, next_uint64, standard_normal

Multiplier = Literal["uniform", "rademacher", "gaussian", "mammen"]
#: The laws, in the order of their codes in compiled code (:func:`multiplier_code`).
MULTIPLIERS: tuple[str, ...] = get_args(Multiplier)

_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)
# Generator.uniform(low, high) draws low + (high - low) * next_double.
_UNIFORM_LOW = -_SQRT3
_UNIFORM_SPAN = _SQRT3 - -_SQRT3
# Mammen's two-point law: (1 - sqrt5)/2 w.p. (sqrt5 + 1)/(2 sqrt5), else (1 + sqrt5)/2.
_MAMMEN_P_LOW = (_SQRT5 + 1.0) / (2.0 * _SQRT5)
_MAMMEN_LOW = (1.0 - _SQRT5) / 2.0
_MAMMEN_HIGH = (1.0 + _SQRT5) / 2.0
_M32 = np.uint64(0xFFFFFFFF)
_U31 = np.uint64(31)
_U32 = np.uint64(32)


def draw_multipliers(kind: Multiplier, size: tuple[int, int], rng: np.random.Generator):
    """iid multipliers with mean 0 and variance 1."""
    if kind == "uniform":
        return rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), size)
    if kind == "rademacher":
        return 2.0 * rng.integers(0, 2, size) - 1.0
    if kind == "gaussian":
        return rng.standard_normal(size)
    low = rng.random(size) < _MAMMEN_P_LOW
    return np.where(low, _MAMMEN_LOW, _MAMMEN_HIGH)


def multiplier_code(kind: Multiplier) -> int:
    """The code of the law ``kind`` in compiled code: its index in :data:`MULTIPLIERS`.

    Raises
    ------
    ValueError
        ``kind`` is not one of :data:`MULTIPLIERS`.
    """
    try:
        return MULTIPLIERS.index(kind)
    except ValueError:
        raise ValueError(
            f"The multiplier law must be one of {', '.join(MULTIPLIERS)}. Got {kind!r}."
        ) from None


@cached_njit(inline="always")
def next_multiplier(code, s, held, has_held):
    """The next multiplier of law ``code`` from the PCG64 state ``s``: what
    :func:`draw_multipliers` draws next from a Generator at that state, bit for bit,
    when the draws are taken one after another in C order from a fresh state.

    numpy's algorithms: uniform is ``Generator.uniform``'s ``low + (high - low) *
    next_double``; rademacher is ``2 * integers(0, 2) - 1``, numpy's Lemire sampler on
    32-bit draws, which for the range {0, 1} is the top bit of each 32-bit half of a
    64-bit word, the low half first (its rejection step never rejects for a range of
    2); gaussian is the ziggurat of ``standard_normal``; mammen compares ``random()``
    with the law's probability.

    Parameters
    ----------
    code : int
        :func:`multiplier_code` of the law.
    s : tuple of 4 uint64
        The stream's state (:mod:`ldpsim.tasks.streams.rng`), with no 32-bit half kept
        at the first call (a fresh Generator's, as
        :func:`ldpsim.tasks.streams.seed_sequence.replicate_states` gives it).
    held, has_held : uint64, bool
        A rademacher word whose upper half is the next draw, and whether there is one:
        (0, False) at the first call, then what the previous call returned.

    Returns
    -------
    (float, tuple of 4 uint64, uint64, bool)
        The multiplier, the advanced state, and the new ``held``, ``has_held``.
    """
    if code == 0:
        u, s = next_double(s)
        return _UNIFORM_LOW + _UNIFORM_SPAN * u, s, held, has_held
    if code == 1:
        if has_held:
            return 2.0 * np.float64(held >> np.uint64(63)) - 1.0, s, held, False
        word, s = next_uint64(s)
        return 2.0 * np.float64((word & _M32) >> _U31) - 1.0, s, word, True
    if code == 2:
        z, s = standard_normal(s)
        return z, s, held, has_held
    u, s = next_double(s)
    return (_MAMMEN_LOW if u < _MAMMEN_P_LOW else _MAMMEN_HIGH), s, held, has_held
