"""The one compiled LDP-SGD kernel, shared by every model and mechanism."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba import njit, types
from numba.core.errors import NumbaError

from ldpsim.tasks.compile_lock import compile_signature
from ldpsim.tasks.kernel import sgd_loop
from ldpsim.tasks.kernel.cache import compile_template, pin_template
from ldpsim.tasks.kernel.compile_errors import KernelCompileError, kernel_compile_error

# The template this process compiles, read now with the rest of its code.
pin_template(sgd_loop)

_VECTOR = types.Array(types.float64, 1, "C")
#: The one signature every kernel is called with (:func:`run_one`,
#: :meth:`GridPointSetup.run_chains`): model_params, mech_params, theta0, c, gamma,
#: batch, cuts, prefix, reps, states (see :func:`compile_kernel`).
KERNEL_SIGNATURE = (
    _VECTOR,
    _VECTOR,
    _VECTOR,
    types.float64,
    types.float64,
    types.int64,
    types.Array(types.int64, 1, "C"),
    types.Array(types.uint32, 1, "C"),
    types.Array(types.int64, 1, "C"),
    types.Array(types.uint64, 2, "C"),
)
#: The largest d compiled as a constant, its loops unrolled: 3 to 8 per cent faster
#: (Shi et al.'s regressions at d = 6 and 7, a 2-core x86 machine) than a loop that
#: reads d; the built-in sweeps' regressions (d up to 12, Huber with 10 covariates)
#: keep it. Every larger d shares one kernel per model and mechanism that reads d from
#: theta0, so that the sparse sweep's d = 100 and 1000 compile once, not twice.
CONSTANT_D_MAX = 12
_NO_WORDS = np.empty(0, dtype=np.uint32)
_NO_REPS = np.empty(0, dtype=np.int64)
#: Kernels that failed to compile in this process, keyed like :func:`compile_kernel`:
#: a failure is compiled once per process and then raised again from here.
_failures: dict[tuple, KernelCompileError] = {}


@njit(inline="always")
def no_projection(d, j, value, params):
    """The projection of a model without constraints: coordinate j stays ``value``.

    Inlined into the kernel, it compiles to nothing (the loops of such models are the
    same machine code as before the hook existed).
    """
    return value


def callback_bindings(
    sample_gradient, privatize, d: int, n_model_params: int, n_mech_params: int, project
) -> dict:
    """The names a loop template (:mod:`ldpsim.tasks.kernel.sgd_loop`,
    :mod:`ldpsim.tasks.kernel.checked_loop`) binds for one model's and one mechanism's callbacks.

    Only the d = 1 loop reads the parameters as tuples; for d > 1 the tuples are dead
    code, kept at length 1 (numba refuses tuples of 1000 entries, as d = 1000 needs).
    """
    return {
        "sample_gradient": sample_gradient,
        "privatize": privatize,
        "project": project,
        "d": int(d),
        "n_model_params": int(n_model_params) if d == 1 else 1,
        "n_mech_params": int(n_mech_params) if d == 1 else 1,
    }


@functools.cache
def compile_kernel(
    sample_gradient,
    privatize,
    d,
    n_model_params,
    n_mech_params,
    project=no_projection,
    full_matrix=True,
):
    """The LDP-SGD loop with one model's and one mechanism's callbacks compiled in.

    One loop (:mod:`ldpsim.tasks.kernel.sgd_loop`) serves every model and mechanism; it is
    compiled with the callbacks inlined, once per pair and d up to
    :data:`CONSTANT_D_MAX` (d a constant; for d = 1 the scalar loop, also per length of
    their parameter vectors), and once per pair for every larger d (read from
    ``theta0``: a sweep over large d compiles one kernel). ``project`` is the model's
    projection of each new iterate's coordinate onto its parameter space
    (``Model.project``; the default changes nothing). ``full_matrix`` False keeps only
    the diagonal of A (see :func:`ldp_sgd`); at d = 1 that is all of A, and the two
    forms are one loop, compiled once.

    The compiled function runs a batch of chains: ``kernel(model_params, mech_params,
    theta0, c, gamma, batch, cuts, prefix, reps, states)`` runs one chain per row of
    ``states`` (R, 4), each seeded first from the words ``prefix`` and its replicate
    ``reps[r]`` (a replicate's data stream, seeded in compiled code), or with ``reps``
    empty from ``states`` as given; each row is advanced in place. It returns the
    outputs :func:`ldp_sgd` describes, each with a first axis of R chains; a chain's
    numbers do not depend on the others'. One chain: :func:`run_one`, or
    :func:`ldp_sgd`; a grid point's replicates:
    :meth:`ldpsim.tasks.grid_point.GridPointSetup.run_chains`.

    The compiled loop is cached on disk (:mod:`ldpsim.tasks.kernel.cache`), keyed by
    the source of every module it calls into: the first process compiles it (2 to 10
    s), later processes load it in milliseconds; within a process it is built once.
    It is compiled here, for :data:`KERNEL_SIGNATURE`, not at its first call.

    Raises
    ------
    KernelCompileError
        A callback does not compile (numba's typing error, in one line naming the
        callback, its file and line). The failure is kept: a later call with the same
        arguments in this process raises it again without compiling.
    """
    # At d = 1 the matrix is its diagonal: both forms are the same loop, compiled once.
    full_matrix = bool(full_matrix) and d != 1
    key = (sample_gradient, privatize, d, n_model_params, n_mech_params, project, full_matrix)
    failure = _failures.get(key)
    if failure is not None:
        raise failure.with_traceback(None)
    bindings = callback_bindings(
        sample_gradient, privatize, d, n_model_params, n_mech_params, project
    )
    bindings["full_matrix"] = full_matrix
    bindings["d"] = int(d) if d <= CONSTANT_D_MAX else 0  # 0: read from theta0
    kernel = _bound_kernel(tuple(bindings.items()))
    try:
        compile_signature(kernel, KERNEL_SIGNATURE)
    except NumbaError as exc:
        callbacks = {"sample_gradient": sample_gradient, "privatize": privatize}
        if project is not no_projection:
            callbacks["project"] = project
        failure = kernel_compile_error(exc, callbacks, int(d))
        _failures[key] = failure
        raise failure.with_traceback(None) from None
    return kernel


@functools.cache
def _bound_kernel(bindings: tuple[tuple[str, object], ...]) -> Any:
    # One dispatcher per bindings, so that the d above CONSTANT_D_MAX share one compile
    # also where it is compiled in memory (a callback defined in __main__).
    return compile_template(sgd_loop, "kernel", dict(bindings))


def run_one(
    kernel, model_params, mech_params, theta0, c, gamma, batch, cuts, st
) -> tuple[np.ndarray, ...]:
    """One chain of the compiled ``kernel`` (:func:`compile_kernel`) from the PCG64 state
    ``st`` (uint64, (4,), advanced in place): its outputs as :func:`ldp_sgd` returns them.

    The arguments are :func:`ldp_sgd`'s, converted already (float64 and int64 arrays,
    Python floats and int).
    """
    outputs = kernel(
        model_params, mech_params, theta0, c, gamma, batch, cuts, _NO_WORDS, _NO_REPS,
        st.reshape(1, 4),
    )  # fmt: skip
    return tuple(output[0] for output in outputs)


def ldp_sgd(
    sample_gradient,
    privatize,
    model_params,
    mech_params,
    theta0,
    c,
    gamma,
    batch,
    cuts,
    st,
    *,
    project=no_projection,
    full_matrix=True,
):
    """Run LDP-SGD for n = cuts[-1] steps, keeping only streaming statistics.

    theta_i = P(theta_{i-1} - eta_i ghat_i), eta_i = c i^-gamma, where ghat_i is the mean
    of ``batch`` privatized gradients of fresh observations at theta_{i-1} and P the
    model's coordinatewise projection ``project`` (the identity for most models).

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
        stream (:func:`ldpsim.tasks.streams.rng.state_of`); advanced in place.
    project : numba dispatcher
        The model's projection callback (``Model.project``): ``(d, j, value, params)
        -> float``, coordinate j of the new iterate on the parameter space. Default: the
        identity, :func:`ldpsim.tasks.kernel.sgd.no_projection`.
    full_matrix : bool
        Whether to accumulate all of A (O(d^2) per step) or only its diagonal (O(d)).
        Default True.

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
    snap_a : ndarray (K, d, d), or (K, d, 1) when ``full_matrix`` is False
        A_s = sum_{r<=s} T_r T_r' (self-normalization, Lee et al. 2022), same centre;
        without ``full_matrix`` only its diagonal, A_s,jj in column 0.
    snap_theta : ndarray (K, d)
        The iterate theta_s at the end of segment k (s = cuts[k]): the last iterate at
        every checkpoint. ``snap_theta[-1]`` equals ``theta``.

    Notes
    -----
    The sums are recentred to the running mean at every cut that is a power of two,
    which keeps them free of cancellation for theta* far from theta_0 and n up to 1e9
    (SPEC section 4). Recentring only at these fixed points, never at the other cuts,
    makes every statistic independent of which other cuts were requested: adding an
    interval method or a checkpoint leaves the other results bit-identical (SPEC 6).
    Memory is O(K d^2), or O(K d) without ``full_matrix``; it grows with n only
    through the number of cuts K.

    The random numbers come from numpy's PCG64 stream, drawn inline by
    :mod:`ldpsim.tasks.streams.rng`
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
        sample_gradient,
        privatize,
        theta0.size,
        model_params.size,
        mech_params.size,
        project,
        full_matrix,
    )
    return run_one(
        kernel,
        model_params,
        mech_params,
        theta0,
        float(c),
        float(gamma),
        int(batch),
        np.ascontiguousarray(cuts, dtype=np.int64),
        st,
    )
