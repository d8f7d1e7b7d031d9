"""The Dask task: chunks of replicates, each of one grid point (runs on a worker)."""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ldpsim.pipeline.store.handoff import Handoff, hand_off
from ldpsim.tasks.chunk import compute_chunk
from ldpsim.tasks.grid_point import GridPointSetup, setup_of


def batch_job_id() -> int:
    """The SLURM or PBS job id this worker runs under, 0 outside a batch job: PBS's
    ``NUMBER.SERVER`` and an array job's ``NUMBER[INDEX].SERVER`` record the NUMBER."""
    raw = os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID") or "0"
    digits = re.match(r"\d+", raw)
    return int(digits.group()) if digits else 0


def cuda_problem() -> str | None:
    """Why numba cannot launch on a CUDA device in this worker, or None when it can.

    Run by ``client.run`` on each GPU worker before a GPU sweep's store is made (the
    driver never initializes CUDA itself): a worker may declare the resource "GPU" on a
    machine without a driver, a device or numba's NVVM.
    """
    from numba import cuda

    try:
        devices = len(cuda.gpus)
    except Exception as exc:  # numba's CudaSupportError: no driver, or it fails to start
        return " ".join(f"{type(exc).__name__}: {exc}".split())
    if devices == 0:
        return "the CUDA driver lists no device"
    if not cuda.is_available():
        return "numba finds the driver but not the rest of CUDA it needs (NVVM)"
    return None


def run_task(
    chunks: list[tuple[dict[str, Any], list[int], str]],
    methods: list[str],
    d: int,
    key: str,
    units: dict[str, dict[str, str]] | None = None,
    launched: list[Launch | Exception] | None = None,
    handoff: Handoff | None = None,
) -> list[dict[str, Any] | Exception]:
    """Run several chunks, each (grid point spec, replicates, chunk key): one Dask task
    (its key ``key``).

    A chunk whose grid point cannot be set up gives its exception in its place (the
    runner records its replicates as failed); the others are computed. ``units``: the
    source hash of every unit as the client read it ("kind:name" -> SHA-256); a chunk
    whose units this process imported in another version fails
    (:func:`ldpsim.pipeline.store.code_identity.check_running_units`). ``launched``: on the
    GPU backend, each chunk's kernel outputs (:func:`launch_gpu`, run on a GPU worker),
    on which this task runs the interval methods. ``handoff``: the task computes whole
    write blocks of the store, whose files this worker encodes when it can
    (:func:`ldpsim.pipeline.store.handoff.hand_off`): the results then carry the files'
    names in place of their arrays.
    """

    def compute(i: int, spec: dict[str, Any], reps: list[int], key: str) -> dict[str, Any]:
        launch = None if launched is None else launched[i]
        return run_chunk(spec, reps, methods, d, key, units, launch)

    results = each_chunk(chunks, compute)
    return results if handoff is None else hand_off(handoff, results)


def each_chunk(chunks: list[tuple[dict[str, Any], list[int], str]], compute: Callable) -> list:
    """``compute(i, spec, reps, key)`` of each chunk (grid point spec, replicates, chunk
    key) of a task, in order; a chunk whose computation raises gives its exception in its
    place (the runner records that chunk's replicates as failed), the others are kept."""
    out: list = []
    for i, (spec, reps, key) in enumerate(chunks):
        try:
            out.append(compute(i, spec, reps, key))
        except Exception as exc:
            out.append(exc)
    return out


@dataclasses.dataclass(frozen=True)
class Launch:
    """One chunk's GPU launch: the kernel's stacked outputs and the launch's seconds
    (:meth:`ldpsim.tasks.grid_point.GridPointSetup.run_gpu`)."""

    outputs: tuple[np.ndarray, ...]
    seconds: float


def launch_gpu(
    chunks: list[tuple[dict[str, Any], list[int], str]],
    units: dict[str, dict[str, str]] | None = None,
) -> list[Launch | Exception]:
    """The GPU backend's half of a task, on a worker that holds a GPU (resource "GPU"):
    each chunk's replicates in one kernel launch.

    A chunk whose launch fails gives its exception in its place; :func:`run_task` then
    records its replicates as failed, with that error.
    """

    def launch(i: int, spec: dict[str, Any], reps: list[int], key: str) -> Launch:
        setup = checked_setup(spec, units)
        start = time.perf_counter()
        outputs = setup.run_gpu(list(reps))
        return Launch(outputs, time.perf_counter() - start)

    return each_chunk(chunks, launch)


def checked_setup(spec: dict[str, Any], units: dict[str, dict[str, str]] | None) -> GridPointSetup:
    """The grid point ``spec`` set up (once per process), its units checked against the
    client's (:func:`ldpsim.pipeline.store.code_identity.check_running_units`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = setup_of(spec)  # once per grid point and process, not per replicate
    if units:
        from ldpsim.pipeline.store.code_identity import check_running_units

        check_running_units(setup.spec, units)
    return setup


def chunk_shape(checkpoints: Any, d: int) -> tuple[int, ...]:
    """A replicate's value shape in a chunk's arrays: (K, d) with K checkpoints, else (d,)."""
    return (len(checkpoints), d) if checkpoints else (d,)


def replicate_arrays(n_reps: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """A chunk's per-replicate arrays before any replicate is computed: ``estimate``,
    ``last`` and ``projected`` (R, *shape) and ``seconds`` (R,) NaN, ``failed`` False."""
    return {
        "estimate": np.full((n_reps, *shape), np.nan),
        "last": np.full((n_reps, *shape), np.nan),
        "projected": np.full((n_reps, *shape), np.nan),
        "failed": np.zeros(n_reps, dtype=bool),
        "seconds": np.full(n_reps, np.nan),
    }


def method_arrays(n_methods: int, n_reps: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """A chunk's per-method arrays before any method is computed: ``lower``, ``upper``
    and ``method_estimate`` (M, R, *shape) and ``method_seconds`` (M, R, *shape[:-1])
    NaN, ``method_failed`` (M, R, *shape[:-1]) False."""
    return {
        "lower": np.full((n_methods, n_reps, *shape), np.nan),
        "upper": np.full((n_methods, n_reps, *shape), np.nan),
        "method_estimate": np.full((n_methods, n_reps, *shape), np.nan),
        "method_seconds": np.full((n_methods, n_reps, *shape[:-1]), np.nan),
        "method_failed": np.zeros((n_methods, n_reps, *shape[:-1]), dtype=bool),
    }


def timed_setup(
    spec: dict[str, Any], units: dict[str, dict[str, str]] | None
) -> tuple[GridPointSetup, float]:
    """:func:`checked_setup` and its seconds (in a new process it compiles or loads the
    kernel: part of the chunk's ``warm_up_seconds``)."""
    start = time.perf_counter()
    setup = checked_setup(spec, units)
    return setup, time.perf_counter() - start


def run_chunk(
    spec: dict[str, Any],
    reps: list[int],
    methods: list[str],
    d: int,
    key: str,
    units: dict[str, dict[str, str]] | None = None,
    launched: Launch | Exception | None = None,
) -> dict[str, Any]:
    """Run replicates ``reps`` of the grid point ``spec``; never raises for a replicate.

    The chunk is computed whole (:func:`ldpsim.tasks.chunk.compute_chunk`: the chains,
    then each method on the chunk's stacked statistics), with no Python loop over its
    replicates for the methods that have a batched path. ``launched``: the GPU
    backend's launch of these replicates (:func:`launch_gpu`), or its error; the
    methods run on its outputs.

    Returns arrays shaped for the store: estimate, last and projected (R, [K,] d; the
    last NaN for a model without an l1 ball), lower, upper and method_estimate
    (M, R, [K,] d), method_failed and method_seconds (M, R, [K]) (per checkpoint: a
    method that fails at an early checkpoint still counts at the later ones), failed
    (R,), seconds (R,), job_id (R,), ``warm_up_seconds`` (the grid point's set-up and
    the methods' first calls in this process, in no replicate's seconds:
    :mod:`ldpsim.tasks.warm_up`), and an error record per failed replicate (traceback,
    parameters, seed) or per replicate with failed methods (each method's reason and
    traceback). ``seconds`` is the chunk's time divided evenly among its replicates
    (on the GPU backend plus each one's share of the launch), and a batched method's
    ``method_seconds`` its chunk's time divided so.
    """
    setup, setup_seconds = timed_setup(spec, units)
    rs = setup.spec
    shape = chunk_shape(rs.checkpoints, d)
    n_reps = len(reps)
    out: dict[str, Any] = {
        "reps": list(reps),
        **replicate_arrays(n_reps, shape),
        **method_arrays(len(methods), n_reps, shape),
        "job_id": np.full(n_reps, batch_job_id(), dtype=np.int64),
        "warm_up_seconds": setup_seconds,
        "errors": {},
    }
    host = socket.gethostname()

    def record(rep: int, kind: str, error: str, **more: Any) -> dict[str, Any]:
        return {
            **{"key": key, "rep": rep, "seed": rs.seed, "spec": spec, "host": host},
            "kind": kind,
            "error": error,
            **more,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    launch = chains_of(setup, reps, launched)
    if isinstance(launch, Exception):  # the launch failed: so does every replicate
        out["failed"][:] = True
        error = f"{type(launch).__name__}: {launch}"
        text = "".join(traceback.format_exception(launch))
        for rep in reps:
            out["errors"][rep] = record(rep, "replicate", error, traceback=text)
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunk = compute_chunk(setup, reps, methods, raw=None if launch is None else launch.outputs)
    dim = rs.model.dim
    order = [chunk["methods"].index(label) for label in methods]
    for name in ("estimate", "last", "projected"):
        out[name][..., :dim] = chunk[name]
    for name in ("lower", "upper", "method_estimate"):
        out[name][..., :dim] = chunk[name][order]
    for name in ("method_failed", "method_seconds"):
        out[name][...] = chunk[name][order]
    out["failed"][:] = chunk["failed"]
    out["seconds"][:] = chunk["seconds"]
    if launch is not None:  # each replicate's share of the launch
        out["seconds"] += launch.seconds / max(n_reps, 1)
    out["warm_up_seconds"] += chunk["warm_up_seconds"]
    for rep, error in chunk["errors"].items():
        more = {name: value for name, value in error.items() if name not in ("kind", "error")}
        out["errors"][rep] = record(rep, error["kind"], error["error"], **more)
    return out


def chains_of(
    setup: GridPointSetup, reps: list[int], launched: Launch | Exception | None = None
) -> Launch | Exception | None:
    """Where the chunk's chains come from: None on the CPU backend (the chunk runs
    them); on the GPU backend the launch of all ``reps`` (``launched``, or made here
    when None), or the exception that failed it."""
    if setup.spec.backend == "cpu":
        return None
    if launched is None:  # the kernel and the methods in one task
        start = time.perf_counter()
        try:
            launched = Launch(setup.run_gpu(list(reps)), time.perf_counter() - start)
        except Exception as exc:
            launched = exc
    return launched
