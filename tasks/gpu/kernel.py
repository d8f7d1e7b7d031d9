"""The GPU backend's LDP-SGD kernel: a grid point's replicates in one launch.

One CUDA thread runs one replicate's chain, from its own Philox stream
(:mod:`ldpsim.tasks.streams.philox`), and records what the CPU kernel records
(:func:`ldpsim.tasks.kernel.sgd.ldp_sgd`): the last iterate, and at every cut the segment
sums, their centre, T_s, b_s, A_s (in full or its diagonal) and the iterate. The
recentring at powers of two is the CPU kernel's, operation for operation, so the
interval methods (bb in both forms, bm, sn, the oracle) run unchanged on the output.

The model's gradient and the mechanism's privatization are the device callbacks of
:mod:`ldpsim.tasks.gpu.units`, compiled into the kernel with d a constant; all sums
are float64. Compiled kernels are kept per process (numba's own cache keys them by
their callbacks and constants).

Reference: Dette, H. & Graw, C., Uncertainty quantification by block bootstrap for
differentially private stochastic gradient descent (the statistics the kernel keeps);
SPEC section 4 (the recentring).
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np
from numba import cuda, float64

from ldpsim.tasks.gpu.units import GPU_MECHANISMS, GPU_MODELS
from ldpsim.tasks.streams.philox import start_state

#: Threads per block of a launch (fewer for a launch of fewer replicates). A
#: replicate's numbers do not depend on it.
THREADS_PER_BLOCK = 128
#: numba's CUDA simulator swaps the ``cuda`` module of a kernel's globals while the
#: kernel runs: two launches from two threads of one process would see each other's
#: swap. There, launches are taken one at a time (on a GPU they run side by side).
_SIMULATOR_LOCK = threading.Lock()
#: numba's first CUDA call in a process initializes the driver; a second thread that
#: calls meanwhile gets CUDA_ERROR_NOT_INITIALIZED (seen on an H100 with 4 launches
#: side by side). Each thread's first call is taken under this lock.
_CONTEXT_LOCK = threading.Lock()
_thread_state = threading.local()
#: Step sizes a block computes at a time, into shared memory: eta_i = c i^-gamma is the
#: same for every replicate, so a thread computes a pow every ETA_BATCH / (block size)
#: steps instead of every step.
ETA_BATCH = 256


@functools.cache
def compile_gpu_kernel(
    model: str, mechanism: str, d: int, n_model_params: int, n_mech_params: int, full_matrix: bool
):
    """The CUDA kernel of one model and mechanism (by name), dimension d, parameter
    vector lengths and whether A is kept in full (else its diagonal).

    Returns the ``numba.cuda`` kernel; it compiles at its first launch (once per
    process and key). Call it through :func:`run_gpu_replicates`.
    """
    sample_gradient = GPU_MODELS[model]
    privatize = GPU_MECHANISMS[mechanism]
    a_cols = d if full_matrix else 1
    n_model, n_mech = int(n_model_params), int(n_mech_params)

    @cuda.jit
    def kernel(
        model_in, mech_in, theta0, c, gamma, batch, cuts, streams,
        theta_out, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta,
    ):  # fmt: skip
        # Every thread of a block runs the loop (the step sizes are shared, computed
        # between barriers); one past the last replicate repeats it and writes nothing.
        n_reps = streams.shape[0]
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
        t_start = cuda.local.array(d, float64)
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
        s = start_state(streams[row, 0], streams[row, 1], streams[row, 2], streams[row, 3])
        i = 0
        fi = 0.0
        for k in range(cuts.shape[0]):
            end = cuts[k]
            for j in range(d):
                if active:
                    seg_shift[r, k, j] = shift[j]
                t_start[j] = t[j]
            while i < end:
                if i % ETA_BATCH == 0:  # eta of steps i + 1 .. i + ETA_BATCH
                    cuda.syncthreads()
                    m = cuda.threadIdx.x
                    while m < ETA_BATCH:
                        eta_table[m] = c * math.pow(float(i + 1 + m), -gamma)
                        m += cuda.blockDim.x
                    cuda.syncthreads()
                eta = eta_table[i % ETA_BATCH]
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
            for j in range(d):
                if not active:
                    break
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
                    amat[j, 0] += (
                        -delta[j] * bvec[j] - bvec[j] * delta[j] + c_s * delta[j] * delta[j]
                    )
            for j in range(d):
                bvec[j] -= c_s * delta[j]
                t[j] -= sf * delta[j]
        for j in range(d):
            if active:
                theta_out[r, j] = theta[j]

    return kernel


def run_gpu_replicates(
    model: str,
    mechanism: str,
    model_params: np.ndarray,
    mech_params: np.ndarray,
    theta0: np.ndarray,
    c: float,
    gamma: float,
    batch: int,
    cuts: np.ndarray,
    streams: np.ndarray,
    full_matrix: bool,
) -> tuple[np.ndarray, ...]:
    """Run one replicate per row of ``streams`` in one launch; the kernel's outputs.

    Parameters
    ----------
    model, mechanism : str
        Names in :data:`ldpsim.tasks.gpu.units.GPU_MODELS` and ``GPU_MECHANISMS``.
    model_params, mech_params : ndarray of float64
        ``Model.params()`` and ``Mechanism.params(model)``.
    theta0 : ndarray (d,)
        The starting value.
    c, gamma : float
        Step sizes c i^-gamma, c > 0, gamma in (0, 1].
    batch : int
        Mini-batch size, >= 1.
    cuts : ndarray of int64 (K,)
        Strictly increasing segment ends, the last one n.
    streams : ndarray of uint64 (R, 4)
        Each replicate's stream (:func:`ldpsim.tasks.streams.philox.replicate_keys`).
    full_matrix : bool
        Keep all of A, or its diagonal only.

    Returns
    -------
    tuple of ndarray
        ``theta`` (R, d), ``seg_dev``, ``seg_shift``, ``snap_t``, ``snap_b`` (R, K, d),
        ``snap_a`` (R, K, d, d or 1) and ``snap_theta`` (R, K, d): row r is what
        :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` returns for a replicate.
    """
    from numba.core import config

    args = (model, mechanism, model_params, mech_params, theta0, c, gamma, batch, cuts)
    if config.ENABLE_CUDASIM:
        with _SIMULATOR_LOCK:
            return _launch(*args, streams, full_matrix)
    if not getattr(_thread_state, "context", False):
        with _CONTEXT_LOCK:
            cuda.current_context()  # the driver, and this thread's context
        _thread_state.context = True
    return _launch(*args, streams, full_matrix)


def _launch(
    model, mechanism, model_params, mech_params, theta0, c, gamma, batch, cuts, streams,
    full_matrix,
) -> tuple[np.ndarray, ...]:  # fmt: skip
    model_params = np.ascontiguousarray(model_params, dtype=np.float64)
    mech_params = np.ascontiguousarray(mech_params, dtype=np.float64)
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    cuts = np.ascontiguousarray(cuts, dtype=np.int64)
    streams = np.ascontiguousarray(streams, dtype=np.uint64)
    d, n_reps, n_cuts = theta0.size, streams.shape[0], cuts.size
    a_cols = d if full_matrix else 1
    kernel = compile_gpu_kernel(
        model, mechanism, d, model_params.size, mech_params.size, bool(full_matrix)
    )
    shapes = {
        "theta": (n_reps, d),
        "seg_dev": (n_reps, n_cuts, d),
        "seg_shift": (n_reps, n_cuts, d),
        "snap_t": (n_reps, n_cuts, d),
        "snap_b": (n_reps, n_cuts, d),
        "snap_a": (n_reps, n_cuts, d, a_cols),
        "snap_theta": (n_reps, n_cuts, d),
    }
    outputs = {name: cuda.device_array(shape, dtype=np.float64) for name, shape in shapes.items()}
    threads = max(1, min(THREADS_PER_BLOCK, n_reps))
    blocks = (n_reps + threads - 1) // threads
    kernel[blocks, threads](
        cuda.to_device(model_params),
        cuda.to_device(mech_params),
        cuda.to_device(theta0),
        float(c),
        float(gamma),
        int(batch),
        cuda.to_device(cuts),
        cuda.to_device(streams),
        *outputs.values(),
    )
    return tuple(array.copy_to_host() for array in outputs.values())
