"""The GPU backend's LDP-SGD kernel: the template of every compiled GPU kernel module.

This file is a template, as :mod:`ldpsim.tasks.kernel.sgd_loop` is for the CPU:
:func:`ldpsim.tasks.gpu.kernel.compile_gpu_kernel` copies it, with the lines between the
``<bindings>`` markers replaced by one model's ``sample_gradient`` and one mechanism's
``privatize`` (device functions of :mod:`ldpsim.tasks.gpu.units`), the dimension d, the
lengths of their parameter vectors, the mini-batch size, whether A is kept in full,
the register budget, numba-cuda's version and the settings of numba-cuda that change
the machine code (neither read by the kernel: they key the file), into a module of its
own (:mod:`ldpsim.tasks.kernel.cache`). There numba-cuda caches the compiled kernel on
disk (``cache=True``); the file's name is a hash of everything the kernel's code depends
on, so a process that finds it loads the kernel compiled by an earlier one instead of
compiling it. Its placeholder :func:`kernel` is never launched.

One CUDA thread runs one replicate's chain; :mod:`ldpsim.tasks.gpu.kernel` describes
what it records and how a launch lays it out (:class:`ldpsim.tasks.gpu.kernel.OutputRows`).

Reference: Dette, H. & Graw, C., Uncertainty quantification by block bootstrap for
differentially private stochastic gradient descent (the statistics the kernel keeps);
SPEC section 4 (the recentring).
"""

from __future__ import annotations

import math

from numba import cuda, float64

from ldpsim.tasks.streams.philox import start_state

#: Step sizes a block computes at a time, into shared memory: eta_i = c i^-gamma is the
#: same for every replicate, so a thread computes a pow every ETA_BATCH / (block size)
#: steps instead of every step.
ETA_BATCH = 256

# <bindings> The generated module replaces these lines (ldpsim.tasks.kernel.cache).
sample_gradient = privatize = None
d = n_model = n_mech = batch = a_cols = a_entries = 1
full_matrix = True
max_registers = None
numba_cuda_version = ""
cuda_settings = ()
cache_to_disk = False
# </bindings>

# ptxas's register budget (ldpsim.tasks.gpu.kernel.register_budget); None: ptxas's own.
register_options = {} if max_registers is None else {"max_registers": max_registers}


@cuda.jit(cache=cache_to_disk, **register_options)
def kernel(
    model_in, mech_in, theta0, c, gamma, cuts, point_of, key0, key1, reps, out
):  # fmt: skip
    # Every thread of a block runs the loop (the step sizes are shared, computed
    # between barriers); one past the last replicate repeats it and writes nothing.
    n_reps = reps.shape[0]
    n_cuts = cuts.shape[0]
    n_points = (out.shape[0] - 2 * n_cuts * d) // (2 * d + a_entries)
    t_rows = n_cuts * d
    b_rows = 2 * n_cuts * d
    a_rows = b_rows + n_points * d
    theta_rows = a_rows + n_points * a_entries
    r = cuda.grid(1)
    active = r < n_reps
    row = r if active else n_reps - 1
    eta_table = cuda.shared.array(ETA_BATCH, float64)
    model_params = cuda.local.array(n_model, float64)
    mech_params = cuda.local.array(n_mech, float64)
    for j in range(n_model):
        model_params[j] = model_in[j]
    for j in range(n_mech):
        mech_params[j] = mech_in[j]
    theta = cuda.local.array(d, float64)
    g = cuda.local.array(d, float64)
    gsum = cuda.local.array(d, float64)
    shift = cuda.local.array(d, float64)
    t = cuda.local.array(d, float64)
    bvec = cuda.local.array(d, float64)
    delta = cuda.local.array(d, float64)
    amat = cuda.local.array((d, a_cols), float64)
    for j in range(d):
        theta[j] = theta0[j]
        shift[j] = theta0[j]
        t[j] = 0.0
        bvec[j] = 0.0
        for m in range(a_cols):
            amat[j, m] = 0.0
    s = start_state(key0, key1, reps[row])
    i = 0
    fi = 0.0
    for k in range(n_cuts):
        end = cuts[k]
        if active:
            for j in range(d):
                out[k * d + j, r] = shift[j]
        while i < end:
            # eta of steps i + 1 .. i + ETA_BATCH, between barriers (every thread of
            # the block is at the same step i); then those steps, barrier-free.
            cuda.syncthreads()
            m = cuda.threadIdx.x
            while m < ETA_BATCH:
                eta_table[m] = c * math.pow(float(i + 1 + m), -gamma)
                m += cuda.blockDim.x
            cuda.syncthreads()
            first = i
            stop = min(end, first + ETA_BATCH)
            while i < stop:
                eta = eta_table[i - first]
                i += 1
                fi += 1.0
                for b in range(batch):
                    s = sample_gradient(d, theta, model_params, s, g)
                    s = privatize(d, g, mech_params, s)
                    for j in range(d):
                        gsum[j] = g[j] if b == 0 else gsum[j] + g[j]
                for j in range(d):
                    step = gsum[j] / batch if batch > 1 else gsum[j]
                    theta[j] = theta[j] - eta * step
                    t[j] += theta[j] - shift[j]
                    bvec[j] += fi * t[j]
                    if not full_matrix:
                        amat[j, 0] += t[j] * t[j]
                if full_matrix:
                    for j in range(d):
                        for m in range(j + 1):
                            amat[j, m] += t[j] * t[m]
        point = point_of[k]
        if active:
            for j in range(d):
                out[t_rows + k * d + j, r] = t[j]
            if point >= 0:
                entry = a_rows + point * a_entries
                for j in range(d):
                    out[b_rows + point * d + j, r] = bvec[j]
                    out[theta_rows + point * d + j, r] = theta[j]
                    if full_matrix:
                        for m in range(j + 1):
                            out[entry, r] = amat[j, m]
                            entry += 1
                    else:
                        out[entry + j, r] = amat[j, 0]
        if end & (end - 1) != 0:
            continue
        # Recentre on the running mean: T_r -> T_r - r delta for every r <= s.
        sf = float(end)
        c_s = sf * (sf + 1.0) * (2.0 * sf + 1.0) / 6.0
        for j in range(d):
            new_shift = shift[j] + t[j] / sf
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
            t[j] -= sf * delta[j]
