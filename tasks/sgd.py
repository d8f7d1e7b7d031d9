"""The one compiled LDP-SGD kernel, shared by every model and mechanism."""

from __future__ import annotations

import functools

import numpy as np
from numba import njit
from numba.np.unsafe.ndarray import to_fixed_tuple

from ldpsim.tasks.pointers import address, keep_alive
from ldpsim.tasks.rng import unlikely

#: Steps below this index use the exact step size c * i**-gamma.
ETA_EXACT_BELOW = 512
#: Above it, the exact value is recomputed whenever ``i & ETA_RESYNC_MASK == 0``.
ETA_RESYNC_MASK = 255


@njit(cache=True, inline="always")
def _eta_series(gamma):
    # Coefficients of (1 - y)^gamma = 1 + a1 y + ... + a5 y^5 + O(y^6).
    a1 = -gamma
    a2 = gamma * (gamma - 1.0) / 2.0
    a3 = -gamma * (gamma - 1.0) * (gamma - 2.0) / 6.0
    a4 = gamma * (gamma - 1.0) * (gamma - 2.0) * (gamma - 3.0) / 24.0
    a5 = -gamma * (gamma - 1.0) * (gamma - 2.0) * (gamma - 3.0) * (gamma - 4.0) / 120.0
    return a1, a2, a3, a4, a5


@njit(cache=True, error_model="numpy")  # no zero-division check: it would block SIMD
def _fill_ratios(fi0, ratios, a1, a2, a3, a4, a5):
    # ratios[m] = (1 - 1/i)^gamma = eta_i / eta_{i-1} for i = fi0 + m, m = 1..255, by a
    # 5-term series (truncation error < 1e-16 for i >= 512). The terms are independent
    # across steps, so this loop runs in SIMD lanes once per 256 steps and the kernel's
    # step needs a single multiply.
    for m in range(1, ETA_RESYNC_MASK + 1):
        y = 1.0 / (fi0 + m)
        ratios[m] = 1.0 + y * (a1 + y * (a2 + y * (a3 + y * (a4 + y * a5))))


@njit(inline="always")
def _next_eta(i, fi, eta, c, gamma, ratios, a1, a2, a3, a4, a5):
    # eta_i = c i^-gamma without a pow per step: exact below step 512 and at every
    # multiple of 256, eta_{i-1} (1 - 1/i)^gamma in between; relative error below 1e-13
    # overall. fi == float(i), carried by the caller (no int -> float conversion per
    # step); ratios is a 256-slot buffer (pointer) refilled at each multiple of 256.
    m = i & ETA_RESYNC_MASK
    if unlikely(i < ETA_EXACT_BELOW or m == 0):
        if m == 0 and i >= ETA_EXACT_BELOW:  # ratios are read from step 513 on
            _fill_ratios(fi, ratios, a1, a2, a3, a4, a5)
        return c * fi ** (-gamma)
    return eta * ratios[m]


@njit  # not cached: numba's cache would miss changes in tasks.rng's intrinsics
def eta_schedule(n, c, gamma):
    """Step sizes eta_1..eta_n exactly as the kernel computes them (for tests)."""
    a1, a2, a3, a4, a5 = _eta_series(gamma)
    ratios = np.empty(ETA_RESYNC_MASK + 1)
    ratios_p = address(ratios)
    out = np.empty(n)
    eta = 0.0
    for i in range(1, n + 1):
        eta = _next_eta(i, float(i), eta, c, gamma, ratios_p, a1, a2, a3, a4, a5)
        out[i - 1] = eta
    keep_alive(ratios)
    return out


@functools.cache
def compile_kernel(sample_gradient, privatize, d, n_model_params, n_mech_params):
    """The LDP-SGD loop with one model's and one mechanism's callbacks compiled in.

    One loop serves every model and mechanism; it is compiled once per pair, dimension
    d and length of their parameter vectors (and per process), with the callbacks
    inlined and d a constant. Call it through :func:`ldp_sgd`.

    For d = 1 the callbacks get theta and the parameters as tuples (values in
    registers) and only ``g`` as a pointer: through pointers, every step would reload
    them from memory (the compiler cannot tell that ``g`` does not alias them), which
    puts two loads on the theta -> gradient -> theta dependency chain.
    """

    # nogil: a Dask worker's event loop must run while a replicate computes, or the
    # results, heartbeats and task-finished messages of the worker wait for the task.
    # error_model: no zero-division checks in the loop (none can occur).
    @njit(error_model="numpy", nogil=True)
    def kernel(model_params, mech_params, theta0, c, gamma, batch, cuts, st):
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
        amat = np.zeros((d, d))
        seg_dev = np.zeros((n_cuts, d))
        seg_shift = np.empty((n_cuts, d))
        snap_t = np.empty((n_cuts, d))
        snap_b = np.empty((n_cuts, d))
        snap_a = np.empty((n_cuts, d, d))
        a1, a2, a3, a4, a5 = _eta_series(gamma)
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
                    eta = _next_eta(i, fi, eta, c, gamma, ratios_p, a1, a2, a3, a4, a5)
                    g0 = 0.0
                    for b in range(batch):  # one call site: the callbacks inline once
                        state = sample_gradient(1, (th,), model_t, state, g_p)
                        state = privatize(1, g_p, mech_t, state)
                        g0 = g[0] if b == 0 else g0 + g[0]
                    if batch > 1:
                        g0 = g0 / batch
                    th -= eta * g0
                    tt += th - sh
                    bb += fi * tt
                    aa += tt * tt
                theta[0], t[0], bvec[0], amat[0, 0] = th, tt, bb, aa
            else:
                fi = float(i)
                while i < end:
                    i += 1
                    fi += 1.0
                    eta = _next_eta(i, fi, eta, c, gamma, ratios_p, a1, a2, a3, a4, a5)
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
                        theta[j] -= eta * g[j]
                        t[j] += theta[j] - shift[j]
                        bvec[j] += fi * t[j]
                    for j in range(d):
                        for m in range(j + 1):
                            amat[j, m] += t[j] * t[m]
            for j in range(d):
                seg_dev[k, j] = t[j] - t_start[j]
                snap_t[k, j] = t[j]
                snap_b[k, j] = bvec[j]
                for m in range(j + 1):
                    snap_a[k, j, m] = amat[j, m]
                    snap_a[k, m, j] = amat[j, m]
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
                for m in range(j + 1):
                    amat[j, m] += (
                        -delta[j] * bvec[m] - bvec[j] * delta[m] + c_s * delta[j] * delta[m]
                    )
            for j in range(d):
                bvec[j] -= c_s * delta[j]
                t[j] -= s * delta[j]
        keep_alive(g, ratios)  # theta is used below; the parameters are the caller's
        st[0], st[1] = state[0], state[1]
        return theta, seg_dev, seg_shift, snap_t, snap_b, snap_a

    return kernel


def ldp_sgd(
    sample_gradient, privatize, model_params, mech_params, theta0, c, gamma, batch, cuts, st
):
    """Run LDP-SGD for n = cuts[-1] steps, keeping only streaming statistics.

    theta_i = theta_{i-1} - eta_i ghat_i, eta_i = c i^-gamma, where ghat_i is the mean
    of ``batch`` privatized gradients of fresh observations at theta_{i-1}.

    Parameters
    ----------
    sample_gradient, privatize : numba dispatchers
        Model and mechanism callbacks (see ``tasks.models.base``, ``tasks.mechanisms.base``),
        compiled into the loop by :func:`compile_kernel`.
    model_params, mech_params : ndarray of float64
        Their parameter vectors.
    theta0 : ndarray, shape (d,)
        Starting value.
    c : float
        Step-size constant, > 0.
    gamma : float
        Step-size exponent, in (0, 1].
    batch : int
        Mini-batch size s >= 1.
    cuts : ndarray of int64, shape (K,)
        Strictly increasing segment ends, the last one being n.
    st : ndarray of uint64, shape (4,)
        PCG64 state (state_hi, state_lo, inc_hi, inc_lo) of the data-and-privacy-noise
        stream (:func:`ldpsim.tasks.rng.state_of`); advanced in place.

    Returns
    -------
    theta : ndarray (d,)
        The last iterate theta_n.
    seg_dev : ndarray (K, d)
        sum over segment k of (theta_i - seg_shift[k]).
    seg_shift : ndarray (K, d)
        The centre in force during segment k (the running mean at the last power of two
        before it).
    snap_t, snap_b : ndarray (K, d)
        At the end of segment k: T_s = sum_{i<=s} (theta_i - seg_shift[k]) and
        b_s = sum_{r<=s} r T_r.
    snap_a : ndarray (K, d, d)
        A_s = sum_{r<=s} T_r T_r' (self-normalization, Lee et al. 2022), same centre.

    Notes
    -----
    The sums are recentred to the running mean at every cut that is a power of two,
    which keeps them free of cancellation for theta* far from theta_0 and n up to 1e9
    (SPEC section 4). Recentring only at these fixed points, never at the other cuts,
    makes every statistic independent of which other cuts were requested: adding an
    interval method or a checkpoint leaves the other results bit-identical (SPEC 6).
    Memory is O(K d^2), independent of n.

    The random numbers come from numpy's PCG64 stream, drawn inline by :mod:`ldpsim.tasks.rng`
    (numpy's normal, bit for bit; Laplace noise by its own exact sampler). The callbacks
    are inlined into the loop and get the loop's arrays as raw pointers, so a step makes
    no function call except on rare paths (a ziggurat's tail, a step-size resync).
    """
    if not (isinstance(st, np.ndarray) and st.dtype == np.uint64 and st.shape == (4,)):
        raise TypeError(
            f"The 'st' parameter of ldp_sgd must be a uint64 array of shape (4,) "
            f"(tasks.rng.state_of). Got {st!r}."
        )
    model_params = np.ascontiguousarray(model_params, dtype=np.float64)
    mech_params = np.ascontiguousarray(mech_params, dtype=np.float64)
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    kernel = compile_kernel(
        sample_gradient, privatize, theta0.size, model_params.size, mech_params.size
    )
    return kernel(
        model_params,
        mech_params,
        theta0,
        float(c),
        float(gamma),
        int(batch),
        np.ascontiguousarray(cuts, dtype=np.int64),
        st,
    )
