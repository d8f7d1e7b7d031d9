"""One simulation replicate: data -> LDP-SGD -> intervals by every method."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsim.tasks.chunk import (  # noqa: F401 (MethodFailure, checkpoint_stream: their old place)
    MethodFailure,
    checkpoint_stream,
    chosen_methods,
    compute_rows,
)
from ldpsim.tasks.grid_point import (
    GridPointSetup,
    needs_full_matrix,
    setup_of,
)
from ldpsim.tasks.kernel.sgd import ldp_sgd
from ldpsim.tasks.spec import ReplicateSpec
from ldpsim.tasks.stats import StreamingStats
from ldpsim.tasks.streams.rng import set_state, state_of
from ldpsim.tasks.validation import check_int


@dataclass(frozen=True)
class ReplicateResult:
    """What one replicate returns; small and picklable.

    ``estimate`` is the average theta_bar_n, ``last`` the last iterate theta_n (each at
    every checkpoint when the spec has them). ``projected`` is the projection of
    theta_bar_n onto the l1 ball of radius r that the model states theta* lies in
    (:meth:`ldpsim.tasks.models.base.Model.constraint_radius`; SPEC 11), None for a
    model that states none. Arrays have shape (d,), or (n_checkpoints, d) when the spec
    has checkpoints. ``method_estimate`` is each method's point estimate (theta_bar_n
    for bb, bm, sn and the oracle; a competitor's own, SPEC 10) and ``method_seconds``
    the compute time of each method (shape (), or (n_checkpoints,)): its interval from
    the statistics, or for a competitor all its work (replaying the users included);
    ``seconds`` is the whole replicate's. ``warm_up_seconds``: the first calls of the
    methods in this process, made before the timed pass and counted in neither
    (:mod:`ldpsim.tasks.warm_up`); 0 but for a process's first replicate of a method,
    model and mechanism.
    A method that failed (any exception from it, of any type) has NaN bounds where it
    failed, True in ``method_failed`` there (shape (), or (n_checkpoints,)), its first
    reason in ``failures`` and that exception's traceback in ``method_tracebacks``; the
    other methods are unaffected. A run whose theta_bar is not finite gives no result:
    :func:`replicate_from_state` raises :class:`ldpsim.tasks.diagnose.NonFiniteRun`.
    """

    estimate: np.ndarray
    last: np.ndarray
    truth: np.ndarray
    lower: dict[str, np.ndarray]
    upper: dict[str, np.ndarray]
    seconds: float
    checkpoints: tuple[int, ...] | None = None
    failures: dict[str, str] = field(default_factory=dict)
    method_failed: dict[str, np.ndarray] = field(default_factory=dict)
    method_estimate: dict[str, np.ndarray] = field(default_factory=dict)
    method_seconds: dict[str, np.ndarray] = field(default_factory=dict)
    projected: np.ndarray | None = None
    method_tracebacks: dict[str, str] = field(default_factory=dict)
    warm_up_seconds: float = 0.0


def run_kernel(rs: ReplicateSpec, cuts: np.ndarray, data_rng: np.random.Generator) -> tuple:
    """Call :func:`ldpsim.tasks.kernel.sgd.ldp_sgd` for ``rs`` with segment ends ``cuts``;
    its raw output.

    The kernel draws from ``data_rng``'s PCG64 state inline
    (:mod:`ldpsim.tasks.streams.rng`) and the
    advanced state is written back, as if ``data_rng`` itself had drawn the numbers. It keeps
    all of A only where a method of ``rs`` needs it (:func:`needs_full_matrix`).
    """
    model, mechanism = rs.model, rs.mechanism
    st = np.array(state_of(data_rng), dtype=np.uint64)
    out = ldp_sgd(
        type(model).sample_gradient,
        mechanism.callback(),
        model.params(),
        mechanism.params(model),
        np.array(rs.theta0, dtype=np.float64),
        rs.c,
        rs.gamma,
        rs.batch,
        np.asarray(cuts, dtype=np.int64),
        st,
        project=type(model).project,
        full_matrix=needs_full_matrix(rs),
    )
    set_state(data_rng, st)
    return out


def stream_at_start(rng: np.random.Generator, start: dict) -> np.random.Generator:
    """``rng`` set back to the bit generator state ``start`` (3 us on the slow 2-core
    host, where a deep copy of the Generator took 117)."""
    rng.bit_generator.state = start
    return rng


def run_stats(
    rs: ReplicateSpec, data_rng: np.random.Generator, setup: GridPointSetup | None = None
) -> StreamingStats:
    """Run the LDP-SGD kernel on the stream ``data_rng``; wrap its streaming statistics.

    The statistics hold all of A, or its diagonal, as the methods of ``rs`` need
    (:func:`needs_full_matrix`). ``setup``: the grid point's set-up, if the caller has
    it (:class:`ldpsim.tasks.grid_point.GridPointSetup`; built here otherwise).
    """
    setup = GridPointSetup.of(rs) if setup is None else setup
    state = np.array(state_of(data_rng), dtype=np.uint64)
    stats = setup.stats(setup.run_kernel(setup.cuts, state))
    set_state(data_rng, state)
    return stats


def run_replicate(
    spec: Mapping[str, Any] | ReplicateSpec | GridPointSetup, rep: int
) -> ReplicateResult:
    """Run replicate ``rep`` of ``spec``: a pure function of its arguments.

    Parameters
    ----------
    spec : mapping, ReplicateSpec or GridPointSetup
        See :func:`ldpsim.tasks.spec.normalize_spec`. A mapping's set-up is kept per
        process (:func:`ldpsim.tasks.grid_point.setup_of`); a task that runs many
        replicates of one grid point passes its :class:`GridPointSetup`.
    rep : int
        Replicate index, >= 0. Together with the seed and the values of the spec it
        determines every random number (SPEC section 6).

    Returns
    -------
    ReplicateResult

    Raises
    ------
    NonFiniteRun
        The SGD run's theta_bar is not finite; the message names the model or
        mechanism and the step where a non-finite value appeared, or the step where the
        iterates overflowed and the step size to lower (:mod:`ldpsim.tasks.diagnose`).
    """
    if isinstance(spec, GridPointSetup):
        setup = spec
    elif isinstance(spec, ReplicateSpec):
        setup = GridPointSetup.of(spec)
    else:
        setup = setup_of(spec)
    rep = check_int(rep, "rep", low=0)
    state, raw = replicate_start(setup, rep)
    return replicate_from_state(setup, state, setup.method_streams(rep), raw=raw)


def replicate_start(setup: GridPointSetup, rep: int) -> tuple[np.ndarray | None, tuple | None]:
    """Where replicate ``rep`` of ``setup`` starts: ``(state, raw)`` for
    :func:`replicate_from_state`.

    On the CPU backend the PCG64 state of its data stream and None; on the GPU backend
    None and its chain's output, from a launch of this replicate alone (its numbers do
    not depend on the launch).
    """
    if setup.spec.backend == "gpu":
        from ldpsim.tasks.grid_point import gpu_row

        return None, gpu_row(setup.run_gpu([rep]), 0)
    return setup.data_state(rep), None


def compute_replicate(
    rs: ReplicateSpec,
    data_rng: np.random.Generator,
    method_rngs: Mapping[str, np.random.Generator],
    setup: GridPointSetup | None = None,
) -> ReplicateResult:
    """The replicate on given streams (:func:`run_replicate` derives them from the seed).

    Parameters
    ----------
    rs : ReplicateSpec
        Normalized specification.
    data_rng : numpy.random.Generator
        Stream of the data and the privacy noise.
    method_rngs : mapping label -> Generator
        One stream per method that draws random numbers (``uses_rng``).
    setup : GridPointSetup, optional
        The set-up of ``rs`` (:class:`ldpsim.tasks.grid_point.GridPointSetup`), shared
        by the replicates of a task; built here when not given.
    """
    setup = GridPointSetup.of(rs) if setup is None else setup
    state = np.array(state_of(data_rng), dtype=np.uint64)
    result = replicate_from_state(setup, state, method_rngs)
    set_state(data_rng, state)
    return result


def replicate_from_state(
    setup: GridPointSetup,
    state: np.ndarray,
    method_rngs: Mapping[str, np.random.Generator],
    *,
    methods: Collection[str] | None = None,
    raise_failures: bool = False,
    raw: tuple | None = None,
) -> ReplicateResult:
    """The replicate of ``setup`` whose data stream starts at the PCG64 ``state``.

    This is the one place a replicate is computed: ``ldpsim replay`` reruns a recorded
    method failure through it too (``methods``, ``raise_failures``), so that it
    computes what the task computed.

    Parameters
    ----------
    setup : GridPointSetup
        The grid point's set-up.
    state : ndarray of uint64, shape (4,), or None
        The data-and-noise stream's state (:func:`ldpsim.tasks.streams.rng.state_of`);
        advanced in place by the run. None with ``raw``.
    method_rngs : mapping label -> Generator
        One stream per method that draws random numbers (``uses_rng``).
    methods : collection of str, optional
        Labels of the spec's methods to compute; the result holds these only, in the
        spec's order. Default: every method. A method's values do not depend on which
        others run (each has its own stream).
    raise_failures : bool, default False
        Raise a method's exception, as :class:`MethodFailure`, instead of recording it
        in the result.
    raw : tuple, optional
        The kernel's output for this replicate, computed already (the GPU backend's
        launch, :meth:`ldpsim.tasks.grid_point.GridPointSetup.run_gpu`): the kernel is
        not run and ``state`` is not used (None).

    Raises
    ------
    NonFiniteRun
        The run's theta_bar is not finite (:func:`run_replicate`).
    MethodFailure
        A method raised, with ``raise_failures``; the first, in the order checkpoint,
        then method.
    ValueError
        ``methods`` names a label the spec does not have.
    """
    start = time.perf_counter()
    rs = setup.spec
    chosen = chosen_methods(rs, methods)
    # The kernel advances state in place; a diagnosis, and the competitors' users,
    # replay from its start.
    start_state = None if state is None else state.copy()
    # Each stream from its start at every call, as compute_rows asks (a cell run again
    # for its reason draws what its first run drew): the state read once here.
    starts = {
        label: rng.bit_generator.state for label, rng in method_rngs.items() if rng is not None
    }
    if raw is None:
        raw = setup.run_kernel(setup.cuts, state)
    out = compute_rows(
        setup,
        tuple(np.asarray(output)[None] for output in raw),
        chosen,
        start=start,
        start_state=lambda i: start_state,
        stream_of=lambda label, i: stream_at_start(method_rngs[label], starts[label]),
        stream_labels={label for label, rng in method_rngs.items() if rng is not None},
        per_replicate=chosen,
        raise_failures=raise_failures,
        raise_replicate_failures=True,
    )
    labels = list(chosen)
    first = 0 if rs.checkpoints is None else slice(None)  # no checkpoint axis without them
    errors = out["errors"].get(0, {})
    projected = None if setup.radius is None else out["projected"][0, first]

    def by_label(name: str) -> dict[str, np.ndarray]:
        return dict(zip(labels, out[name][:, 0, first], strict=True))

    return ReplicateResult(
        estimate=out["estimate"][0, first],
        last=out["last"][0, first],
        truth=setup.truth.copy(),  # the caller's own: the set-up is kept for later calls
        lower=by_label("lower"),
        upper=by_label("upper"),
        seconds=float(out["seconds"][0]),
        checkpoints=rs.checkpoints,
        failures=errors.get("methods", {}),
        method_failed=by_label("method_failed"),
        method_estimate=by_label("method_estimate"),
        method_seconds=by_label("method_seconds"),
        projected=projected,
        method_tracebacks=errors.get("tracebacks", {}),
        warm_up_seconds=out["warm_up_seconds"],
    )
