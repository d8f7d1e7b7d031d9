"""The LDP-SGD loop: the source of every compiled kernel module.

This file is a template. :func:`ldpsim.tasks.kernel.sgd.compile_kernel` copies it, with the
lines between the ``<bindings>`` markers replaced by one model's ``sample_gradient``,
one mechanism's ``privatize``, the dimension d, the lengths of their parameter
vectors and ``full_matrix`` (whether A = sum_r T_r T_r' is kept in full or only its
diagonal), into a module of its own (:mod:`ldpsim.tasks.kernel.cache`), where numba can
cache the compiled loop on disk. Its placeholder :func:`kernel` is never called.

The model's ``project`` callback maps each coordinate of the new iterate onto the
parameter space (a positivity floor on a scale); for every model without constraints
it is :func:`ldpsim.tasks.kernel.sgd.no_projection`, which returns its argument and
compiles to nothing: their loops are the same machine code as without the hook.

One loop serves every model and mechanism. The callbacks are inlined into it and d is
a constant, so the loop is compiled once per (callbacks, d, parameter lengths,
full_matrix). With ``full_matrix`` False (no requested method reads an off-diagonal
entry of A) every statistic is per coordinate: a step costs O(d) beyond the callbacks
and the memory is O(K d) for K cuts, instead of O(d^2) and O(K d^2). The diagonal is
computed by the same operations in the same order either way, so it is bit-identical.

For d = 1 the callbacks get theta and the parameters as tuples (values in registers)
and only ``g`` as a pointer: through pointers, every step would reload them from
memory (the compiler cannot tell that ``g`` does not alias them), which puts two loads
on the theta -> gradient -> theta dependency chain.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.np.unsafe.ndarray import to_fixed_tuple

from ldpsim.tasks.kernel.pointers import address, keep_alive
from ldpsim.tasks.kernel.step_sizes import ETA_RESYNC_MASK, eta_series, next_eta

# <bindings> The generated module replaces these lines (ldpsim.tasks.kernel.cache).
sample_gradient = privatize = project = None
d = n_model_params = n_mech_params = 1
full_matrix = True
cache_to_disk = False
# </bindings>


# nogil: a Dask worker's event loop must run while a replicate computes, or the
# results, heartbeats and task-finished messages of the worker wait for the task.
# error_model: no zero-division checks in the loop (none can occur).
@njit(error_model="numpy", nogil=True, cache=cache_to_disk)
def kernel(model_params, mech_params, theta0, c, gamma, batch, cuts, st):
    """One LDP-SGD run: the arguments and results of :func:`ldpsim.tasks.kernel.sgd.ldp_sgd`."""
    n_cuts = cuts.shape[0]
    theta = theta0.copy()
    g = np.empty(d)
    theta_p, g_p = address(theta), address(g)
    model_p, mech_p = address(model_params), address(mech_params)
    model_t = to_fixed_tuple(model_params, n_model_params)  # the d = 1 loop's form
    mech_t = to_fixed_tuple(mech_params, n_mech_params)
    state = (st[0], st[1], st[2], st[3])
    gsum = np.empty(d)
    shift = theta0.copy()
    t = np.zeros(d)
    bvec = np.zeros(d)
    # A = sum_r T_r T_r' in full (its lower triangle) only where a method needs the
    # matrix; else its diagonal alone, in column 0: O(d) per step and O(d) per cut.
    a_cols = d if full_matrix else 1
    amat = np.zeros((d, a_cols))
    seg_dev = np.zeros((n_cuts, d))
    seg_shift = np.empty((n_cuts, d))
    snap_t = np.empty((n_cuts, d))
    snap_b = np.empty((n_cuts, d))
    snap_a = np.empty((n_cuts, d, a_cols))
    snap_theta = np.empty((n_cuts, d))
    a1, a2, a3, a4, a5 = eta_series(gamma)
    ratios = np.empty(ETA_RESYNC_MASK + 1)
    ratios_p = address(ratios)
    eta = 0.0
    i = 0
    for k in range(n_cuts):
        end = cuts[k]
        seg_shift[k] = shift
        t_start = t.copy()
        if d == 1:
            # Scalar specialisation of the loop below (same operations in the same
            # order, so bit-identical): theta, T, b, A live in registers.
            th, sh, tt, bb, aa = theta[0], shift[0], t[0], bvec[0], amat[0, 0]
            fi = float(i)
            while i < end:
                i += 1
                fi += 1.0
                eta = next_eta(i, fi, eta, c, gamma, ratios_p, a1, a2, a3, a4, a5)
                g0 = 0.0
                for b in range(batch):  # one call site: the callbacks inline once
                    state = sample_gradient(1, (th,), model_t, state, g_p)
                    state = privatize(1, g_p, mech_t, state)
                    g0 = g[0] if b == 0 else g0 + g[0]
                if batch > 1:
                    g0 = g0 / batch
                th = project(1, 0, th - eta * g0, model_t)
                tt += th - sh
                bb += fi * tt
                aa += tt * tt
            theta[0], t[0], bvec[0], amat[0, 0] = th, tt, bb, aa
        else:
            fi = float(i)
            while i < end:
                i += 1
                fi += 1.0
                eta = next_eta(i, fi, eta, c, gamma, ratios_p, a1, a2, a3, a4, a5)
                for b in range(batch):
                    state = sample_gradient(d, theta_p, model_p, state, g_p)
                    state = privatize(d, g_p, mech_p, state)
                    if batch > 1:
                        for j in range(d):
                            gsum[j] = g[j] if b == 0 else gsum[j] + g[j]
                if batch > 1:
                    for j in range(d):
                        g[j] = gsum[j] / batch
                for j in range(d):
                    theta[j] = project(d, j, theta[j] - eta * g[j], model_p)
                    t[j] += theta[j] - shift[j]
                    bvec[j] += fi * t[j]
                    if not full_matrix:
                        amat[j, 0] += t[j] * t[j]
                if full_matrix:
                    for j in range(d):
                        for m in range(j + 1):
                            amat[j, m] += t[j] * t[m]
        for j in range(d):
            seg_dev[k, j] = t[j] - t_start[j]
            snap_t[k, j] = t[j]
            snap_b[k, j] = bvec[j]
            snap_theta[k, j] = theta[j]
            if full_matrix:
                for m in range(j + 1):
                    snap_a[k, j, m] = amat[j, m]
                    snap_a[k, m, j] = amat[j, m]
            else:
                snap_a[k, j, 0] = amat[j, 0]
        if end & (end - 1) != 0:
            continue
        # Recentre on the running mean: T_r -> T_r - r delta for every r <= s.
        s = float(end)
        c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
        delta = np.empty(d)
        for j in range(d):
            new_shift = shift[j] + t[j] / s
            delta[j] = new_shift - shift[j]
            shift[j] = new_shift
        for j in range(d):
            if full_matrix:
                for m in range(j + 1):
                    amat[j, m] += (
                        -delta[j] * bvec[m] - bvec[j] * delta[m] + c_s * delta[j] * delta[m]
                    )
            else:
                amat[j, 0] += -delta[j] * bvec[j] - bvec[j] * delta[j] + c_s * delta[j] * delta[j]
        for j in range(d):
            bvec[j] -= c_s * delta[j]
            t[j] -= s * delta[j]
    keep_alive(g, ratios)  # theta is used below; the parameters are the caller's
    st[0], st[1] = state[0], state[1]
    return theta, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta
