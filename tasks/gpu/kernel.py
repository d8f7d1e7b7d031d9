"""The GPU backend's LDP-SGD kernel: a grid point's replicates in one launch.

One CUDA thread runs one replicate's chain, from its own Philox stream
(:mod:`ldpsim.tasks.streams.philox`: the grid point's key, the replicate's number as the
counter's upper words, made on the device), and records what the interval methods read
of what the CPU kernel records (:func:`ldpsim.tasks.kernel.sgd.ldp_sgd`): at every cut
the centre and T_s, and at the evaluation points (the last step and the checkpoints)
b_s, A_s (its lower triangle, or its diagonal) and the iterate. The recentring at
powers of two is the CPU kernel's, operation for operation, so the interval methods
(bb in both forms, bm, sn, the oracle) run unchanged on the output.

The outputs of a launch are one float64 array of (rows, replicates), row-major: thread
r writes column r, so the 32 threads of a warp write 32 neighbouring doubles (coalesced),
and the whole array comes back in one copy into page-locked (pinned) memory. The host
then lays it out as the CPU kernel's tuple, stacked along a first axis of replicates
(:func:`run_gpu_replicates`).

The model's gradient and the mechanism's privatization are the device callbacks of
:mod:`ldpsim.tasks.gpu.units`, compiled into the kernel with d a constant; all sums
are float64. The kernel is compiled with at most :data:`MAX_REGISTERS` registers a
thread, so that 1,024 threads are resident on each multiprocessor of an H100/H200.
The kernel's source is the template :mod:`ldpsim.tasks.gpu.kernel_loop`, compiled as the
CPU kernels are (:mod:`ldpsim.tasks.kernel.cache`): a module generated per model,
mechanism, d, parameter lengths, mini-batch and matrix form, whose file name is a hash of
all the code it reaches, and which numba-cuda caches on disk. A process compiles each
kernel at its first launch, or loads it compiled by an earlier process (on a GPU: not
measured yet; numba's simulator ignores the cache).

Reference: Dette, H. & Graw, C., Uncertainty quantification by block bootstrap for
differentially private stochastic gradient descent (the statistics the kernel keeps);
SPEC section 4 (the recentring).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from importlib.metadata import PackageNotFoundError, version

import numba
import numpy as np
from numba import cuda
from numba.core import config

from ldpsim.tasks.compiled import settings_of
from ldpsim.tasks.gpu import kernel_loop
from ldpsim.tasks.gpu.units import GPU_MECHANISMS, GPU_MODELS
from ldpsim.tasks.kernel.cache import compile_template, pin_template

# The template as this process first read it: kernels compiled later keep to it.
pin_template(kernel_loop)

#: Threads per block of a launch (fewer for a launch of fewer replicates). A
#: replicate's numbers do not depend on it.
THREADS_PER_BLOCK = 128
#: The kernel's register budget a thread for d = 1 (ptxas's ``maxrregcount``, see
#: :func:`register_budget`). 65,536 registers of a multiprocessor then hold 8 blocks of
#: 128 threads; at 94 (the first kernel's count) only 5 fit. The offline check
#: (benchmarks/gpu_sass.py) shows that the step loop spills nothing at this budget.
MAX_REGISTERS = 64
#: numba's CUDA simulator swaps the ``cuda`` module of a kernel's globals while the
#: kernel runs: two launches from two threads of one process would see each other's
#: swap. There, launches are taken one at a time (on a GPU they run side by side).
_SIMULATOR_LOCK = threading.Lock()
#: numba's first CUDA call in a process initializes the driver; a second thread that
#: calls meanwhile gets CUDA_ERROR_NOT_INITIALIZED (seen on an H100 with 4 launches
#: side by side). Each thread's first call is taken under this lock.
_CONTEXT_LOCK = threading.Lock()
_thread_state = threading.local()
#: numba-cuda's settings that change a kernel's machine code, which its own disk cache
#: does not key (its key holds the signature, numba-cuda's and CUDA's versions and the
#: device's compute capability): part of each kernel's key, as its compiler reads them
#: (``NUMBA_CUDA_DEBUGINFO``, ``NUMBA_FORCE_CUDA_CC``, ``NUMBA_OPT``, from the
#: environment or a ``.numba_config.yaml``: :func:`cuda_settings`).
CUDA_CODEGEN_SETTINGS = ("CUDA_DEBUGINFO_DEFAULT", "FORCE_CUDA_CC", "OPT")


#: The kernels launched once in this process (their modules loaded), and the lock their
#: first launches take (:func:`_launch`).
_LOADED: set[int] = set()
_LOADING = threading.Lock()


def register_budget(d: int) -> int | None:
    """The register budget of the kernel of dimension ``d``: :data:`MAX_REGISTERS` for
    d = 1; none above, where the chain's own state (eight vectors of d doubles) would
    spill to local memory inside the step loop."""
    return MAX_REGISTERS if d == 1 else None


def a_size(d: int, full_matrix: bool) -> int:
    """How many entries of A a point records: its lower triangle, or its diagonal."""
    return d * (d + 1) // 2 if full_matrix else d


@dataclasses.dataclass(frozen=True)
class OutputRows:
    """Where each statistic lies among the rows of a launch's output array.

    ``K`` cuts, ``P`` points (cuts where b, A and the iterate are recorded), dimension
    ``d``: the centre at each cut (K d rows, cut by cut, coordinate by coordinate), T at
    each cut (K d), b at each point (P d), A at each point (P times :func:`a_size`: row
    j's entries m <= j in turn, or the diagonal), the iterate at each point (P d).
    """

    n_cuts: int
    n_points: int
    d: int
    full_matrix: bool

    @property
    def shift(self) -> int:
        return 0

    @property
    def t(self) -> int:
        return self.n_cuts * self.d

    @property
    def b(self) -> int:
        return 2 * self.n_cuts * self.d

    @property
    def a(self) -> int:
        return self.b + self.n_points * self.d

    @property
    def theta(self) -> int:
        return self.a + self.n_points * a_size(self.d, self.full_matrix)

    @property
    def total(self) -> int:
        return self.theta + self.n_points * self.d


@functools.cache
def compile_gpu_kernel(
    model: str,
    mechanism: str,
    d: int,
    n_model_params: int,
    n_mech_params: int,
    full_matrix: bool,
    batch: int = 1,
):
    """The CUDA kernel of one model and mechanism (by name), dimension d, parameter
    vector lengths, whether A is kept in full (else its diagonal) and the mini-batch
    size (a constant: with 1, the step has no inner loop).

    Returns the ``numba.cuda`` kernel; at its first launch in a process it is loaded
    from the disk cache, or compiled and written there where no earlier process did
    (:mod:`ldpsim.tasks.kernel.cache`; in memory where the cache folder cannot be
    written). Call it through :func:`run_gpu_replicates`.
    """
    # The register budget is a ptxas option at link time; the simulator has none.
    simulated = bool(config.ENABLE_CUDASIM)
    bindings = {
        "sample_gradient": GPU_MODELS[model],
        "privatize": GPU_MECHANISMS[mechanism],
        "d": int(d),
        "n_model": int(n_model_params),
        "n_mech": int(n_mech_params),
        "batch": int(batch),
        "a_cols": int(d) if full_matrix else 1,
        "a_entries": a_size(int(d), bool(full_matrix)),
        "full_matrix": bool(full_matrix),
        "max_registers": None if simulated else register_budget(int(d)),
        "numba_cuda_version": _numba_cuda_version(),
        "cuda_settings": cuda_settings(),
    }
    return compile_template(kernel_loop, "kernel", bindings)


def cuda_settings() -> tuple[tuple[str, str], ...]:
    """:data:`CUDA_CODEGEN_SETTINGS` as numba-cuda's compiler reads them: numba-cuda's
    own configuration (``numba.cuda.core.config``: its ``NUMBA_*`` variables, or a
    ``.numba_config.yaml`` in the working folder), or numba's where its own CUDA target
    is the one installed."""
    try:
        from numba.cuda.core import config as cuda_config
    except ImportError:  # numba's own CUDA target, before numba-cuda: numba's settings
        cuda_config = config
    return tuple(settings_of(cuda_config, CUDA_CODEGEN_SETTINGS).items())


def _numba_cuda_version() -> str:
    """numba-cuda's version, part of a GPU kernel's key: its modules are named
    ``numba.cuda``, which the key's walk of the code counts as numba's. (numba-cuda 0.30
    keys its own cache by its version too; an older one may not.)"""
    try:
        return version("numba-cuda")
    except PackageNotFoundError:  # numba's own CUDA target, before numba-cuda
        return f"numba {numba.__version__}"


@dataclasses.dataclass
class LaunchTimes:
    """Where a launch's seconds went (:func:`run_gpu_replicates`'s ``times``).

    Attributes
    ----------
    seeding : float
        The launch's inputs on the host: the replicates' numbers and the points (the
        key words of each replicate are made on the device, from its number).
    allocation : float
        The device's output array and the pinned host buffer (kept per thread and
        grown when a launch needs more), and the inputs copied to the device.
    kernel : float
        The kernel alone, between two CUDA events around it (in numba's simulator,
        whose events keep no time, the host's clock around it).
    copies : float
        The output array to the pinned buffer, one transfer.
    unpacking : float
        The pinned buffer laid out as the kernel's tuple (new arrays).
    """

    seeding: float = 0.0
    allocation: float = 0.0
    kernel: float = 0.0
    copies: float = 0.0
    unpacking: float = 0.0


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
    points: np.ndarray,
    key: tuple[int, int],
    reps: np.ndarray,
    full_matrix: bool,
    times: LaunchTimes | None = None,
) -> tuple[np.ndarray, ...]:
    """Run one replicate per entry of ``reps`` in one launch; the kernel's outputs.

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
    points : ndarray of int64 (P,)
        Increasing positions among the cuts where b, A and the iterate are recorded; the
        last cut (n) among them.
    key : tuple of 2 int
        The grid point's Philox key (:func:`ldpsim.tasks.streams.philox.grid_point_key`).
    reps : ndarray of int (R,)
        The replicates' numbers: replicate ``reps[i]``'s stream is the key's counters
        with upper words ``reps[i]``.
    full_matrix : bool
        Keep all of A, or its diagonal only.
    times : LaunchTimes, optional
        Filled with where the launch's seconds went.

    Returns
    -------
    tuple of ndarray
        ``theta`` (R, d), ``seg_dev``, ``seg_shift``, ``snap_t``, ``snap_b`` (R, K, d),
        ``snap_a`` (R, K, d, d or 1) and ``snap_theta`` (R, K, d), new C-contiguous
        arrays: row i is what :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` returns for
        replicate ``reps[i]``, for the statistics transferred. Those not transferred are
        NaN: ``seg_dev`` unless every cut is a point (then it is formed from T and the
        centres), and ``snap_b``, ``snap_a`` and ``snap_theta`` at cuts that are not
        points. ``theta`` is the iterate at the last cut.
    """
    args = (model, mechanism, model_params, mech_params, theta0, c, gamma, batch, cuts)
    args += (points, key, reps, full_matrix, times or LaunchTimes())
    if config.ENABLE_CUDASIM:
        with _SIMULATOR_LOCK:
            return _launch(*args)
    if not getattr(_thread_state, "context", False):
        with _CONTEXT_LOCK:
            cuda.current_context()  # the driver, and this thread's context
        _thread_state.context = True
    return _launch(*args)


def launch_shape(n_reps: int) -> tuple[int, int]:
    """(blocks, threads per block) of a launch of ``n_reps`` replicates."""
    threads = max(1, min(THREADS_PER_BLOCK, n_reps))
    return (n_reps + threads - 1) // threads, threads


def replicates_per_wave(registers: int, multiprocessors: int, threads: int = THREADS_PER_BLOCK):
    """How many threads of a kernel using ``registers`` a thread are resident at once on
    a GPU of ``multiprocessors`` (compute capability 9.0: 65,536 registers, 2,048
    threads and 32 blocks a multiprocessor, registers allotted per warp in 256s).

    A launch of a multiple of this many replicates runs in whole waves: its last wave
    is as full as the others.
    """
    per_warp = -(-registers * 32 // 256) * 256
    warps = threads // 32
    blocks = min(65_536 // (per_warp * warps), 2_048 // threads, 32)
    return int(multiprocessors * blocks * threads)


def _buffers(rows: int, n_reps: int):
    """This thread's device output array and pinned host buffer, shaped (rows, n_reps):
    views of buffers kept per thread, grown (never shrunk) when a launch needs more."""
    size = rows * n_reps
    kept = getattr(_thread_state, "buffers", None)
    if kept is None or kept[0].size < size:
        capacity = max(size, 1)
        kept = (cuda.device_array(capacity, dtype=np.float64), cuda.pinned_array(capacity))
        _thread_state.buffers = kept
    device, host = kept
    return device[:size].reshape(rows, n_reps), host[:size].reshape(rows, n_reps)


def _device_inputs(arrays: tuple[np.ndarray, ...], stream) -> list:
    """This thread's device copies of the launch's 1-d input ``arrays``, copied on
    ``stream``: views of buffers kept per thread (one per input), grown (never shrunk)
    when a launch needs more.

    Once they are large enough, a launch allocates nothing on the device and so frees
    nothing: numba frees arrays in batches, with ``cuMemFree``, which may wait for every
    stream of the device, and so for the kernel of another thread's launch.
    """
    kept = getattr(_thread_state, "inputs", None)
    if kept is None:
        kept = _thread_state.inputs = [None] * len(arrays)
    views = []
    for i, array in enumerate(arrays):
        if array.size == 0:  # numba allocates nothing for an empty array
            views.append(cuda.to_device(array, stream=stream))
            continue
        buffer = kept[i]
        if buffer is None or buffer.size < array.size or buffer.dtype != array.dtype:
            buffer = kept[i] = cuda.device_array(array.size, dtype=array.dtype)
        view = buffer[: array.size]
        view.copy_to_device(array, stream=stream)
        views.append(view)
    return views


def _launch(
    model, mechanism, model_params, mech_params, theta0, c, gamma, batch, cuts, points,
    key, reps, full_matrix, times,
) -> tuple[np.ndarray, ...]:  # fmt: skip
    start = time.perf_counter()
    model_params = np.ascontiguousarray(model_params, dtype=np.float64)
    mech_params = np.ascontiguousarray(mech_params, dtype=np.float64)
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    cuts = np.ascontiguousarray(cuts, dtype=np.int64)
    points = np.ascontiguousarray(points, dtype=np.int64)
    reps = np.ascontiguousarray(reps, dtype=np.int64)
    d, n_reps, n_cuts = theta0.size, reps.size, cuts.size
    point_of = np.full(n_cuts, -1, dtype=np.int64)
    point_of[points] = np.arange(points.size)
    rows = OutputRows(n_cuts, points.size, d, bool(full_matrix))
    kernel = compile_gpu_kernel(
        model, mechanism, d, model_params.size, mech_params.size, bool(full_matrix), int(batch)
    )
    allocated = time.perf_counter()
    times.seeding = allocated - start
    out, host = _buffers(rows.total, n_reps)
    # The thread's own default stream, for the inputs, the events, the kernel and the
    # copy alike: the launches of a GPU worker's threads then run side by side. Named,
    # because numba-cuda's ``default_stream`` is the legacy stream, which serializes
    # every thread's work, whatever NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM says under its
    # NVIDIA bindings. The simulator has one stream.
    stream = 0 if config.ENABLE_CUDASIM else cuda.per_thread_default_stream()
    inputs = _device_inputs((model_params, mech_params, theta0, cuts, point_of, reps), stream)
    before, after = cuda.event(), cuda.event()
    blocks, threads = launch_shape(n_reps)
    launch = kernel[blocks, threads] if config.ENABLE_CUDASIM else kernel[blocks, threads, stream]
    before.record(stream)
    times.allocation = time.perf_counter() - allocated
    arguments = (
        *inputs[:3], float(c), float(gamma), inputs[3], inputs[4],
        np.uint64(key[0]), np.uint64(key[1]), inputs[5], out,
    )  # fmt: skip
    if id(kernel) in _LOADED:
        launch(*arguments)
    else:
        # A kernel's first launch in this process loads its module into the context;
        # numba-cuda's loading is not thread-safe: two of a GPU worker's launch threads
        # loading one kernel at once failed with "AssertionError: key already in
        # dictionary: <CUlibrary ...>" (an H200, 2026-12-04: 3 of `scale`'s 41 tasks).
        with _LOADING:
            launch(*arguments)
            _LOADED.add(id(kernel))
    after.record(stream)
    after.synchronize()
    copying = time.perf_counter()
    elapsed = before.elapsed_time(after)  # ms; -1 in the simulator, which has no clock
    times.kernel = elapsed / 1e3 if elapsed > 0 else copying - allocated - times.allocation
    out.copy_to_host(host, stream=stream)
    if not config.ENABLE_CUDASIM:
        stream.synchronize()
    unpacking = time.perf_counter()
    times.copies = unpacking - copying
    outputs = unpack(host, rows, cuts, points, n_reps)
    times.unpacking = time.perf_counter() - unpacking
    return outputs


def unpack(
    host: np.ndarray, rows: OutputRows, cuts: np.ndarray, points: np.ndarray, n_reps: int
) -> tuple[np.ndarray, ...]:
    """A launch's output array (rows, R) as the kernel's tuple, stacked by replicate (see
    :func:`run_gpu_replicates`)."""
    d, n_cuts, n_points = rows.d, rows.n_cuts, rows.n_points

    def block(first: int, count: int, shape: tuple[int, ...]) -> np.ndarray:
        # (count, R) -> (R, *shape), a new C-contiguous array: always a copy, as the host
        # buffer is the thread's next launch's too (a transposed (count, 1) or (1, R) is
        # C-contiguous already, and ascontiguousarray would return a view of it).
        return host[first : first + count].T.copy().reshape(n_reps, *shape)

    seg_shift = block(rows.shift, n_cuts * d, (n_cuts, d))
    snap_t = block(rows.t, n_cuts * d, (n_cuts, d))
    every_cut = n_points == n_cuts
    a_cols = d if rows.full_matrix else 1

    def at_points(recorded: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if every_cut:
            return recorded
        full = np.full((n_reps, n_cuts, *shape), np.nan)
        full[:, points] = recorded
        return full

    snap_b = at_points(block(rows.b, n_points * d, (n_points, d)), (d,))
    snap_theta = at_points(block(rows.theta, n_points * d, (n_points, d)), (d,))
    entries = block(rows.a, n_points * a_size(d, rows.full_matrix), (n_points, -1))
    if rows.full_matrix:
        lower, column = np.tril_indices(d)
        recorded = np.empty((n_reps, n_points, d, d))
        recorded[:, :, lower, column] = entries
        recorded[:, :, column, lower] = entries
    else:
        recorded = entries.reshape(n_reps, n_points, d, 1)
    snap_a = at_points(recorded, (d, a_cols))
    theta = snap_theta[:, -1].copy()
    if every_cut:
        seg_dev = segment_sums(snap_t, seg_shift, cuts)
    else:
        seg_dev = np.full((n_reps, n_cuts, d), np.nan)
    return theta, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta


def segment_sums(snap_t: np.ndarray, seg_shift: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Each segment's sum of (theta_i - its centre), from T and the centres (R, K, d).

    T just after cut k is T at k, recentred when k is a power of two (T -> T - s delta,
    delta the change of centre); a segment's sum is T at its end less T just after
    its start: the kernel's ``seg_dev`` to the last bits of the recentring.
    """
    after = snap_t.copy()
    powers = np.flatnonzero((cuts[:-1] & (cuts[:-1] - 1)) == 0)
    scale = cuts[powers].astype(np.float64)[None, :, None]
    after[:, powers] -= scale * (seg_shift[:, powers + 1] - seg_shift[:, powers])
    seg_dev = snap_t.copy()
    seg_dev[:, 1:] -= after[:, :-1]
    return seg_dev
