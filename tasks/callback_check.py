"""The callbacks of plugin models and mechanisms, compiled and probed before a run.

A plugin's ``sample_gradient`` or ``privatize`` passes every check that needs no
compiler (``ldpsim list``, the spec's). This module compiles the kernel of each
(model, mechanism, d) a sweep uses (:func:`ldpsim.tasks.kernel.sgd.compile_kernel`, cached on
disk for the workers) and calls each plugin callback on a few random states, so that a
broken callback is refused in one line before anything is written, not in every
replicate.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba.core.errors import NumbaError

from ldpsim.tasks import plugins
from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.diagnose import checked_function
from ldpsim.tasks.grid_point import kernel_key
from ldpsim.tasks.kernel.compile_errors import KernelCompileError, kernel_compile_error
from ldpsim.tasks.kernel.sgd import compile_kernel
from ldpsim.tasks.spec import ReplicateSpec
from ldpsim.tasks.streams.rng import state_of

#: Random states each callback is called on; its results must vary with the state if
#: it reads it at all (a two-valued report repeats with probability 2^-15).
PROBES = 16


class CallbackError(ValueError):
    """A model's or mechanism's callback cannot run in the kernel; the message is one line."""


def _states(count: int) -> np.ndarray:
    return np.array(
        [state_of(np.random.Generator(np.random.PCG64(seed))) for seed in range(count)],
        dtype=np.uint64,
    )


def reuses_state(results: np.ndarray, states: np.ndarray, states_out: np.ndarray) -> bool:
    """Whether a callback read its random state but handed it back unchanged.

    ``results[k]`` is what the callback computed from ``states[k]``, which it returned
    as ``states_out[k]``. A callback that draws nothing returns its state and computes
    the same from every state; one whose results vary with the state drew from it, and
    must then return a state that moved.
    """
    varies = len({row.tobytes() for row in np.asarray(results)}) > 1
    kept = bool(np.all(states_out == states, axis=1).any())
    return varies and kept


def _unit_name(kind: str, unit: type) -> str:
    for plugin in plugins.plugins():
        if plugin.kind == kind and plugin.unit is unit:
            return (
                f"The {kind} plugin {plugin.name!r} ({plugin.target}, from {plugin.distribution})"
            )
    return f"The {kind} {unit.name!r} ({unit.__module__}.{unit.__qualname__})"


def is_plugin(kind: str, unit: type) -> bool:
    """Whether ``unit`` is not one of ldpsim's built-in units of ``kind``."""
    return unit not in plugins.BUILTINS[kind].values()


def check_callbacks(rs: ReplicateSpec) -> None:
    """Compile the kernel of ``rs`` and probe its model's and mechanism's callbacks.

    Parameters
    ----------
    rs : ReplicateSpec
        A grid point; its kernel is compiled for its d, as the workers compile it (and
        cached on disk, so they load it).

    Raises
    ------
    CallbackError
        A callback does not compile (the message names the unit, the file and line
        where numba stopped, and its reason), or it draws random numbers but returns
        the state it was given, which would repeat every draw.
    """
    key = kernel_key(rs)
    try:
        compile_kernel(*key)
    except KernelCompileError as exc:
        raise CallbackError(f"{_culprits(exc.role, rs.model, rs.mechanism)}: {exc}.") from None
    _check_states(rs, key)


#: The unit whose callback each role is.
ROLES = {"sample_gradient": "model", "project": "model", "privatize": "mechanism"}


def _culprits(role: str | None, model: object, mechanism: object) -> str:
    """The unit that ``role``'s callback belongs to; for None, the plugins of the pair."""
    units = {"model": type(model), "mechanism": type(mechanism)}
    if role is not None:
        kinds = [ROLES[role]]
    else:  # numba stopped in the kernel's own code: a callback returns the wrong thing
        kinds = [kind for kind, unit in units.items() if is_plugin(kind, unit)] or list(units)
    return " or ".join(_unit_name(kind, units[kind]) for kind in kinds)


def _check_states(rs: ReplicateSpec, key: tuple) -> None:
    model, mechanism = rs.model, rs.mechanism
    states = _states(PROBES)
    d = key[2]
    grads, reports = np.zeros((PROBES, d)), np.zeros((PROBES, d))
    model_states, mech_states = np.zeros_like(states), np.zeros_like(states)
    callbacks = {"sample_gradient": key[0], "privatize": key[1]}
    try:
        in_turn(checked_function(key, "probe"))(
            np.ascontiguousarray(model.params(), dtype=np.float64),
            np.ascontiguousarray(mechanism.params(model), dtype=np.float64),
            np.ascontiguousarray(rs.theta0, dtype=np.float64),
            states,
            grads,
            model_states,
            reports,
            mech_states,
        )
    except NumbaError as exc:  # compiled in the kernel, so not expected
        error = kernel_compile_error(exc, callbacks, d)
        raise CallbackError(f"{_culprits(error.role, model, mechanism)}: {error}.") from None
    if reuses_state(grads, states, model_states):
        raise CallbackError(_stale_message("model", type(model), "sample_gradient"))
    if reuses_state(reports, states, mech_states):
        raise CallbackError(_stale_message("mechanism", type(mechanism), "privatize"))


def _stale_message(kind: str, unit: type, callback: str) -> str:
    return (
        f"{_unit_name(kind, unit)}: its {callback} draws random numbers but returns the "
        f"random state it was given, so every step would repeat the same draws; return "
        f"the state its last draw returned (u, s = random(s) ... return s)."
    )


def check_plugin_callbacks(specs: Iterable[ReplicateSpec]) -> int:
    """:func:`check_callbacks` once per kernel that a plugin model or mechanism takes part in.

    Built-in pairs are known good and left out; grid points with the same kernel (the
    same callbacks, d and parameter lengths) are checked once.

    Parameters
    ----------
    specs : iterable of ReplicateSpec
        The sweep's grid points.

    Returns
    -------
    int
        The number of kernels checked.

    Raises
    ------
    CallbackError
        The first problem found (see :func:`check_callbacks`).
    """
    seen = set()
    for rs in specs:
        if not (is_plugin("model", type(rs.model)) or is_plugin("mechanism", type(rs.mechanism))):
            continue
        key = kernel_key(rs)
        if key in seen:
            continue
        seen.add(key)
        check_callbacks(rs)
    return len(seen)
