"""The LDP-SGD loop: the source of every compiled kernel module.

This file is a template. :func:`ldpsim.tasks.kernel.sgd.compile_kernel` copies it, with the
lines between the ``<bindings>`` markers replaced by one model's ``sample_gradient``,
one mechanism's ``privatize``, the dimension d, the lengths of their parameter
vectors and ``full_matrix`` (whether A = sum_r T_r T_r' is kept in full or only its
diagonal), into a module of its own (:mod:`ldpsim.tasks.kernel.cache`), where numba can
cache the compiled loop on disk. Its placeholder :func:`kernel` is never called.

The compiled :func:`kernel` runs a batch of chains, one after another: a grid point's
chunk of replicates, each seeded in the same call from the seed's words and its
replicate (numpy's SeedSequence -> PCG64, :mod:`ldpsim.tasks.streams.seed_sequence`),
or a single chain from a given state (:func:`ldpsim.tasks.kernel.sgd.run_one`). Each
chain is the loop of one run on working arrays of its own (fresh arrays: the compiler
knows they alias nothing, which keeps the d = 1 loop in registers), written into its
row of the batch's outputs at each cut; its numbers do not depend on the batch.

The model's ``project`` callback maps each coordinate of the new iterate onto the
parameter space (a positivity floor on a scale); for every model without constraints
it is :func:`ldpsim.tasks.kernel.sgd.no_projection`, which returns its argument and
compiles to nothing: their loops are the same machine code as without the hook.

One loop serves every model and mechanism. The callbacks are inlined into it, so the
loop is compiled once per (callbacks, d, full_matrix) for d up to
:data:`ldpsim.tasks.kernel.sgd.CONSTANT_D_MAX`, d a constant (for d = 1 also per length
of the parameter vectors), and once per (callbacks, full_matrix) for every larger d,
with the binding ``d = 0``: d is then read from ``theta0``. With ``full_matrix`` False
(no requested method reads an off-diagonal entry of A) every statistic is per
coordinate: a step costs O(d) beyond the callbacks and the memory is O(K d) for K
cuts, instead of O(d^2) and O(K d^2). The diagonal is computed by the same operations
in the same order either way, so it is bit-identical.

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
from ldpsim.tasks.kernel.step_sizes import (
    ETA_EXACT_BELOW,
    ETA_RESYNC_MASK,
    eta_series,
    fill_exact,
    next_eta,
)
from ldpsim.tasks.streams.seed_sequence import replicate_entropy, state_of_entropy

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
def kernel(model_params, mech_params, theta0, c, gamma, batch, cuts, prefix, reps, states):
    """LDP-SGD runs, one per row of ``states``: the batched form of
    :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` (one run is a batch of one).

    Parameters
    ----------
    model_params, mech_params, theta0, c, gamma, batch, cuts
        As :func:`ldpsim.tasks.kernel.sgd.ldp_sgd`'s, shared by every run.
    prefix : ndarray of uint32
        The words of the seed sequence's values before the replicate's (the seed's and
        the path key's), when ``reps`` is not empty.
    reps : ndarray of int64
        Replicates whose data streams the runs use, R of them: row r of ``states`` is
        first set to the start of ``PCG64(SeedSequence([*values, reps[r]]))``, seeded
        here (:func:`ldpsim.tasks.streams.seed_sequence.replicate_states`). Empty: the
        runs start from ``states`` as given.
    states : ndarray of uint64, shape (R, 4)
        PCG64 states; each is advanced in place to where its run leaves it.

    Returns
    -------
    tuple of ndarray
        ``theta`` (R, d), ``seg_dev``, ``seg_shift``, ``snap_t``, ``snap_b`` (R, K, d),
        ``snap_a`` (R, K, d, d or 1) and ``snap_theta`` (R, K, d): row r is run r's
        outputs, as :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` describes them. A run's
        numbers do not depend on the other runs of the call.
    """
    n_chains = states.shape[0]
    n_cuts = cuts.shape[0]
    dim = d if d else theta0.shape[0]  # a constant unless the binding leaves it open
    a_cols = dim if full_matrix else 1
    theta_out = np.empty((n_chains, dim))
    seg_dev = np.empty((n_chains, n_cuts, dim))
    seg_shift = np.empty((n_chains, n_cuts, dim))
    snap_t = np.empty((n_chains, n_cuts, dim))
    snap_b = np.empty((n_chains, n_cuts, dim))
    snap_a = np.empty((n_chains, n_cuts, dim, a_cols))
    snap_theta = np.empty((n_chains, n_cuts, dim))
    if reps.size:  # seeded first, in a loop of its own
        no_spawn_key = np.empty(0, dtype=np.uint32)
        words = np.empty(prefix.size + 2, dtype=np.uint32)
        for r in range(n_chains):
            n_words = replicate_entropy(prefix, reps[r], no_spawn_key, words)
            states[r, 0], states[r, 1], states[r, 2], states[r, 3] = state_of_entropy(
                words, n_words
            )
    model_p, mech_p = address(model_params), address(mech_params)
    model_t = to_fixed_tuple(model_params, n_model_params)  # the d = 1 loop's form
    mech_t = to_fixed_tuple(mech_params, n_mech_params)
    a1, a2, a3, a4, a5 = eta_series(gamma)
    exact = np.empty(ETA_EXACT_BELOW)  # the first steps' sizes, once for every chain
    fill_exact(c, gamma, exact)
    # The working arrays, allocated once and set afresh for each chain (fresh arrays:
    # the compiler knows they alias nothing, which keeps the d = 1 loop in registers).
    theta = np.empty(dim)
    g = np.empty(dim)
    gsum = np.empty(dim)
    shift = np.empty(dim)
    t = np.empty(dim)
    t_start = np.empty(dim)
    bvec = np.empty(dim)
    delta = np.empty(dim)
    # A = sum_r T_r T_r' in full (its lower triangle) only where a method needs the
    # matrix; else its diagonal alone, in column 0: O(d) per step and O(d) per cut.
    amat = np.empty((dim, a_cols))
    ratios = np.empty(ETA_RESYNC_MASK + 1)  # filled at step 512, before its first read
    theta_p, g_p = address(theta), address(g)
    ratios_p, exact_p = address(ratios), address(exact)
    # One chain after another, each the loop of one run, written into row r of the
    # outputs at each cut. The loop is inline here rather than a function of its own: a
    # second compiled function (its own outputs, copied into the batch's) cost about a
    # second more of every kernel's compile time (a quarter of it).
    for r in range(n_chains):
        st = states[r]
        state = (st[0], st[1], st[2], st[3])
        for j in range(dim):
            theta[j] = theta0[j]
            shift[j] = theta0[j]
            t[j] = 0.0
            bvec[j] = 0.0
            for m in range(a_cols):
                amat[j, m] = 0.0
        eta = 0.0
        i = 0
        for k in range(n_cuts):
            end = cuts[k]
            for j in range(dim):
                seg_shift[r, k, j] = shift[j]
                t_start[j] = t[j]
            if d == 1:
                # Scalar specialisation of the loop below (same operations in the same
                # order, so bit-identical): theta, T, b, A live in registers.
                theta_scalar, shift_scalar = theta[0], shift[0]
                t_scalar, b_scalar, a_scalar = t[0], bvec[0], amat[0, 0]
                fi = float(i)
                while i < end:
                    i += 1
                    fi += 1.0
                    eta = next_eta(i, fi, eta, c, gamma, exact_p, ratios_p, a1, a2, a3, a4, a5)
                    g0 = 0.0
                    for b in range(batch):  # one call site: the callbacks inline once
                        state = sample_gradient(1, (theta_scalar,), model_t, state, g_p)
                        state = privatize(1, g_p, mech_t, state)
                        g0 = g[0] if b == 0 else g0 + g[0]
                    if batch > 1:
                        g0 = g0 / batch
                    theta_scalar = project(1, 0, theta_scalar - eta * g0, model_t)
                    t_scalar += theta_scalar - shift_scalar
                    b_scalar += fi * t_scalar
                    a_scalar += t_scalar * t_scalar
                theta[0], t[0], bvec[0], amat[0, 0] = theta_scalar, t_scalar, b_scalar, a_scalar
            else:
                fi = float(i)
                while i < end:
                    i += 1
                    fi += 1.0
                    eta = next_eta(i, fi, eta, c, gamma, exact_p, ratios_p, a1, a2, a3, a4, a5)
                    for b in range(batch):
                        state = sample_gradient(dim, theta_p, model_p, state, g_p)
                        state = privatize(dim, g_p, mech_p, state)
                        if batch > 1:
                            for j in range(dim):
                                gsum[j] = g[j] if b == 0 else gsum[j] + g[j]
                    if batch > 1:
                        for j in range(dim):
                            g[j] = gsum[j] / batch
                    for j in range(dim):
                        theta[j] = project(dim, j, theta[j] - eta * g[j], model_p)
                        t[j] += theta[j] - shift[j]
                        bvec[j] += fi * t[j]
                        if not full_matrix:
                            amat[j, 0] += t[j] * t[j]
                    if full_matrix:
                        for j in range(dim):
                            for m in range(j + 1):
                                amat[j, m] += t[j] * t[m]
            for j in range(dim):
                seg_dev[r, k, j] = t[j] - t_start[j]
                snap_t[r, k, j] = t[j]
                snap_b[r, k, j] = bvec[j]
                snap_theta[r, k, j] = theta[j]
                if full_matrix:
                    for m in range(j + 1):
                        snap_a[r, k, j, m] = amat[j, m]
                        snap_a[r, k, m, j] = amat[j, m]
                else:
                    snap_a[r, k, j, 0] = amat[j, 0]
            if end & (end - 1) != 0:
                continue
            # Recentre on the running mean: T_r -> T_r - r delta for every r <= s.
            s = float(end)
            c_s = s * (s + 1.0) * (2.0 * s + 1.0) / 6.0
            for j in range(dim):
                new_shift = shift[j] + t[j] / s
                delta[j] = new_shift - shift[j]
                shift[j] = new_shift
            for j in range(dim):
                if full_matrix:
                    for m in range(j + 1):
                        amat[j, m] += (
                            -delta[j] * bvec[m] - bvec[j] * delta[m] + c_s * delta[j] * delta[m]
                        )
                else:
                    amat[j, 0] += (
                        -delta[j] * bvec[j] - bvec[j] * delta[j] + c_s * delta[j] * delta[j]
                    )
            for j in range(dim):
                bvec[j] -= c_s * delta[j]
                t[j] -= s * delta[j]
        st[0], st[1] = state[0], state[1]
        for j in range(dim):
            theta_out[r, j] = theta[j]
    keep_alive(theta, g, ratios, exact)  # the parameters are the caller's
    return theta_out, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta
