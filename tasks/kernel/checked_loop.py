"""The kernel's callbacks run with checks: the template of the probe and the checked loop.

This file is a template, like :mod:`ldpsim.tasks.kernel.sgd_loop`, and bound to the same
callbacks (:mod:`ldpsim.tasks.kernel.cache`); its functions get theta and the
parameters exactly as the kernel passes them (tuples for d = 1, raw pointers for
d > 1). :func:`probe` calls each callback once from each of several random states, for
the checks made before a run (:mod:`ldpsim.tasks.callback_check`). :func:`checked_loop`
replays a run step by step with the kernel's arithmetic, in the same order, and stops
at the first non-finite gradient, report or iterate (:mod:`ldpsim.tasks.diagnose`).
Neither is on the kernel's path: the kernel itself checks nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.np.unsafe.ndarray import to_fixed_tuple

from ldpsim.tasks.kernel.pointers import address, keep_alive
from ldpsim.tasks.kernel.step_sizes import (
    ETA_EXACT_BELOW,
    ETA_RESYNC_MASK,
    eta_series,
    fill_exact,
    next_eta,
)

# <bindings> The generated module replaces these lines (ldpsim.tasks.kernel.cache).
sample_gradient = privatize = project = None
d = n_model_params = n_mech_params = 1
cache_to_disk = False
# </bindings>

#: What :func:`checked_loop` found first (its ``kind``).
FINITE, GRADIENT, REPORT, PROJECTION, ITERATE = 0, 1, 2, 3, 4


@njit(error_model="numpy", cache=cache_to_disk)
def probe(model_params, mech_params, theta0, states, grads, model_states, reports, mech_states):
    """Row k: the model's gradient at ``theta0`` and the state it returns, both from
    ``states[k]``; then the mechanism's report of ``grads[0]`` from ``states[k]``."""
    g = np.empty(d)
    g_p, theta_p = address(g), address(theta0)
    model_p, mech_p = address(model_params), address(mech_params)
    model_t = to_fixed_tuple(model_params, n_model_params)
    mech_t = to_fixed_tuple(mech_params, n_mech_params)
    for k in range(states.shape[0]):
        s = (states[k, 0], states[k, 1], states[k, 2], states[k, 3])
        if d == 1:
            s = sample_gradient(1, (theta0[0],), model_t, s, g_p)
        else:
            s = sample_gradient(d, theta_p, model_p, s, g_p)
        for j in range(d):
            grads[k, j] = g[j]
        for j in range(4):
            model_states[k, j] = s[j]
    for k in range(states.shape[0]):
        for j in range(d):
            g[j] = grads[0, j]
        s = (states[k, 0], states[k, 1], states[k, 2], states[k, 3])
        if d == 1:
            s = privatize(1, g_p, mech_t, s)
        else:
            s = privatize(d, g_p, mech_p, s)
        for j in range(d):
            reports[k, j] = g[j]
        for j in range(4):
            mech_states[k, j] = s[j]
    keep_alive(g)


@njit(error_model="numpy", cache=cache_to_disk)
def checked_loop(model_params, mech_params, theta0, c, gamma, batch, n, st, found):
    """The kernel's iterates for n steps from the PCG64 state ``st``, checked at each step.

    Returns ``(kind, step, draw, eta, theta, gradient, largest, largest_step)``: what
    was non-finite first (:data:`GRADIENT`, :data:`REPORT`, :data:`PROJECTION`,
    :data:`ITERATE`, or :data:`FINITE`), at which step and mini-batch draw, the step
    size there, the iterate before that step, the model's gradient of that draw, and
    the largest finite |theta_j| seen and its step. ``found`` (d,) receives the
    offending value: the gradient, the mechanism's report, or the new iterate; or, when
    all n steps are finite, the last iterate theta_n (the kernel's, bit for bit).
    """
    theta = theta0.copy()
    g = np.empty(d)
    gsum = np.empty(d)
    raw = np.empty(d)
    before = theta0.copy()
    theta_p, g_p = address(theta), address(g)
    model_p, mech_p = address(model_params), address(mech_params)
    model_t = to_fixed_tuple(model_params, n_model_params)
    mech_t = to_fixed_tuple(mech_params, n_mech_params)
    state = (st[0], st[1], st[2], st[3])
    a1, a2, a3, a4, a5 = eta_series(gamma)
    ratios, exact = np.empty(ETA_RESYNC_MASK + 1), np.empty(ETA_EXACT_BELOW)
    fill_exact(c, gamma, exact)
    ratios_p, exact_p = address(ratios), address(exact)
    eta = 0.0
    largest = 0.0  # the largest |theta_j| so far, theta_0 included (step 0)
    for j in range(d):
        if np.isfinite(theta0[j]) and abs(theta0[j]) > largest:
            largest = abs(theta0[j])
    largest_step = 0
    kind = FINITE
    step = 0
    draw = 0
    gradient = np.full(d, np.nan)
    report = np.full(d, np.nan)
    fi = 0.0
    i = 0
    while i < n and kind == FINITE:
        i += 1
        fi += 1.0
        eta = next_eta(i, fi, eta, c, gamma, exact_p, ratios_p, a1, a2, a3, a4, a5)
        for j in range(d):
            before[j] = theta[j]
        g0 = 0.0
        for b in range(batch):
            if d == 1:
                state = sample_gradient(1, (theta[0],), model_t, state, g_p)
            else:
                state = sample_gradient(d, theta_p, model_p, state, g_p)
            for j in range(d):
                gradient[j] = g[j]
            if d == 1:
                state = privatize(1, g_p, mech_t, state)
            else:
                state = privatize(d, g_p, mech_p, state)
            for j in range(d):
                report[j] = g[j]
            if kind == FINITE:
                for j in range(d):
                    if not np.isfinite(gradient[j]):
                        kind, draw = GRADIENT, b
                for j in range(d):
                    if kind == FINITE and not np.isfinite(report[j]):
                        kind, draw = REPORT, b
                if kind != FINITE:
                    for j in range(d):
                        found[j] = gradient[j] if kind == GRADIENT else report[j]
                    break
            # The kernel's mini-batch mean, in its order (d = 1 and d > 1 alike).
            g0 = g[0] if b == 0 else g0 + g[0]
            if batch > 1:
                for j in range(d):
                    gsum[j] = g[j] if b == 0 else gsum[j] + g[j]
        if kind != FINITE:
            step = i
            break
        if d == 1:
            if batch > 1:
                g0 = g0 / batch
            raw[0] = theta[0] - eta * g0
            theta[0] = project(1, 0, raw[0], model_t)
        else:
            if batch > 1:
                for j in range(d):
                    g[j] = gsum[j] / batch
            for j in range(d):
                raw[j] = theta[j] - eta * g[j]
                theta[j] = project(d, j, raw[j], model_p)
        for j in range(d):
            if not np.isfinite(theta[j]):
                kind = PROJECTION if np.isfinite(raw[j]) else ITERATE
            elif abs(theta[j]) > largest:
                largest, largest_step = abs(theta[j]), i
        if kind != FINITE:
            step = i
            for j in range(d):
                found[j] = theta[j]
    if kind == FINITE:
        for j in range(d):
            found[j] = theta[j]
    keep_alive(g, ratios, exact)
    return kind, step, draw, eta, before, gradient, largest, largest_step
