"""Why a replicate's theta_bar is not finite: its run replayed with every step checked."""

from __future__ import annotations

import functools

import numpy as np

from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.grid_point import GridPointSetup, kernel_key
from ldpsim.tasks.kernel import checked_loop
from ldpsim.tasks.kernel.cache import compile_template, pin_template
from ldpsim.tasks.kernel.checked_loop import GRADIENT, ITERATE, PROJECTION, REPORT
from ldpsim.tasks.kernel.sgd import callback_bindings
from ldpsim.tasks.streams.rng import as_state

# The template this process compiles, read now with the rest of its code.
pin_template(checked_loop)


class NonFiniteRun(FloatingPointError):
    """A replicate's SGD run gave a non-finite theta_bar; the message says where and why
    (:func:`diagnose_nonfinite`). It fails the replicate: no interval can be computed
    from such a run."""


#: |theta| beyond which the iterates are said to have diverged before a non-finite
#: gradient (no model of the project lives there; 1e308 overflows).
DIVERGED = 1e100


@functools.cache
def compile_checked(
    function, sample_gradient, privatize, d, n_model_params, n_mech_params, project
):
    """:mod:`ldpsim.tasks.kernel.checked_loop`'s ``function`` ("probe" or "checked_loop") with
    one model's and one mechanism's callbacks compiled in, as the kernel has them.

    Cached on disk like the kernel (:func:`ldpsim.tasks.kernel.cache.compile_template`)
    and compiled on its first call.
    """
    bindings = callback_bindings(
        sample_gradient, privatize, d, n_model_params, n_mech_params, project
    )
    return compile_template(checked_loop, function, bindings)


def checked_function(key: tuple, function: str):
    """:func:`compile_checked` for a grid point's kernel key
    (:func:`ldpsim.tasks.grid_point.kernel_key`)."""
    sample_gradient, privatize, d, n_model, n_mech, project, _ = key
    return compile_checked(function, sample_gradient, privatize, d, n_model, n_mech, project)


def _vector(values: np.ndarray) -> str:
    return np.array2string(
        np.asarray(values), precision=4, threshold=6, edgeitems=2, max_line_width=10**6
    )


def diagnose_nonfinite(setup: GridPointSetup, start_state) -> str:
    """Where a run whose theta_bar is not finite went wrong, in one line.

    Replays the run of ``setup`` from ``start_state`` with the kernel's callbacks and
    arithmetic, checking every gradient, report and iterate (the kernel checks none,
    to stay fast), and names the first that is not finite.

    Parameters
    ----------
    setup : GridPointSetup
        The replicate's grid point.
    start_state : sequence of 4 ints or ndarray of uint64, shape (4,)
        The PCG64 state of the data-and-noise stream before the run (a copy: the
        kernel advances the array it is given); it is not changed.

    Returns
    -------
    str
        E.g. ``"huber_regression: non-finite gradient at step 31,416 (gradient = [nan],
        theta = [1.02])"``, ``"laplace: non-finite privatized gradient at step 7 (...)"``
        or ``"the iterates overflowed at step 812 (largest |theta| 3.1e+307 at step 811,
        step size 0.021): lower c (1e+06) or raise gamma (0.51; eta_i = c i^-gamma)"``.
    """
    rs = setup.spec
    model_params, mech_params, theta0, c, gamma = setup.kernel_args
    state = np.array(as_state(start_state), dtype=np.uint64)
    found = np.full(theta0.size, np.nan)
    loop = in_turn(checked_function(kernel_key(rs), "checked_loop"))
    kind, step, draw, eta, before, gradient, largest, largest_step = loop(
        model_params, mech_params, theta0, c, gamma, int(rs.batch), int(rs.n), state, found
    )
    lower = f"lower c ({c:g}) or raise gamma ({gamma:g}; the step size is eta_i = c i^-gamma)"
    draw_text = f", draw {draw + 1} of the mini-batch" if rs.batch > 1 else ""
    if kind == GRADIENT:
        message = (
            f"{rs.model.name}: non-finite gradient at step {step:,}{draw_text} "
            f"(gradient = {_vector(found)}, theta = {_vector(before)})"
        )
        if np.max(np.abs(before)) > DIVERGED:
            message += f"; the iterates had diverged before it: {lower}"
        return message
    if kind == REPORT:
        return (
            f"{rs.mechanism.name}: non-finite privatized gradient at step {step:,}{draw_text} "
            f"(the gradient {_vector(gradient)} was reported as {_vector(found)}; "
            f"theta = {_vector(before)})"
        )
    if kind == PROJECTION:
        return (
            f"{rs.model.name}: its projection gave a non-finite iterate at step {step:,} "
            f"({_vector(found)} from theta = {_vector(before)})"
        )
    where = f"at step {largest_step:,}" if largest_step else "at the start"
    if kind == ITERATE:
        return (
            f"the iterates overflowed at step {step:,} (largest |theta| {largest:.3g} "
            f"{where}, step size {eta:.3g}): {lower}"
        )
    if largest > DIVERGED:
        return (
            f"the iterates stayed finite but their sums overflowed (largest |theta| "
            f"{largest:.3g} {where}): {lower}"
        )
    return (
        f"replaying the run found no non-finite gradient, report or iterate in "
        f"{rs.n:,} steps (largest |theta| {largest:.3g} {where})"
    )
