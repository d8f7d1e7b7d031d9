"""The Dask task: chunks of replicates, each of one grid point (runs on a worker)."""

from __future__ import annotations

import os
import socket
import time
import traceback
import warnings
from typing import Any

import numpy as np

from ldpsim.tasks import run_replicate
from ldpsim.tasks.grid_point import setup_of


def batch_job_id() -> int:
    """The SLURM or PBS job id this worker runs under, 0 outside a batch job."""
    raw = os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID") or "0"
    digits = raw.split(".")[0]
    return int(digits) if digits.isdigit() else 0


def run_task(
    chunks: list[tuple[dict[str, Any], list[int], str]], methods: list[str], d: int, key: str
) -> list[dict[str, Any] | Exception]:
    """Run several chunks, each (grid point spec, replicates, chunk key): one Dask task
    (its key ``key``).

    A chunk whose grid point cannot be set up gives its exception in its place (the
    runner records its replicates as failed); the others are computed.
    """
    out: list[dict[str, Any] | Exception] = []
    for spec, reps, chunk_key in chunks:
        try:
            out.append(run_chunk(spec, reps, methods, d, chunk_key))
        except Exception as exc:
            out.append(exc)
    return out


def run_chunk(
    spec: dict[str, Any], reps: list[int], methods: list[str], d: int, key: str
) -> dict[str, Any]:
    """Run replicates ``reps`` of the grid point ``spec``; never raises for a replicate.

    Returns arrays shaped for the store: estimate, last and projected (R, [K,] d; the
    last NaN for a model without an l1 ball), lower, upper and method_estimate
    (M, R, [K,] d), method_failed and method_seconds (M, R, [K]) (per checkpoint: a
    method that fails at an early checkpoint still counts at the later ones), failed
    (R,), seconds (R,), job_id
    (R,), and an error record per failed replicate (traceback, parameters, seed) or per
    failed method.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        setup = setup_of(spec)  # once per grid point and process, not per replicate
    rs = setup.spec
    extra = (len(rs.checkpoints), d) if rs.checkpoints else (d,)
    n_reps, n_methods = len(reps), len(methods)
    out: dict[str, Any] = {
        "reps": list(reps),
        "estimate": np.full((n_reps, *extra), np.nan),
        "last": np.full((n_reps, *extra), np.nan),
        "projected": np.full((n_reps, *extra), np.nan),
        "lower": np.full((n_methods, n_reps, *extra), np.nan),
        "upper": np.full((n_methods, n_reps, *extra), np.nan),
        "method_estimate": np.full((n_methods, n_reps, *extra), np.nan),
        "method_seconds": np.full((n_methods, n_reps, *extra[:-1]), np.nan),
        "method_failed": np.zeros((n_methods, n_reps, *extra[:-1]), dtype=bool),
        "failed": np.zeros(n_reps, dtype=bool),
        "seconds": np.full(n_reps, np.nan),
        "job_id": np.full(n_reps, batch_job_id(), dtype=np.int64),
        "errors": {},
    }
    host = socket.gethostname()
    for i, rep in enumerate(reps):
        base = {"key": key, "rep": rep, "seed": rs.seed, "spec": spec, "host": host}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = run_replicate(setup, rep)
        except Exception as exc:
            out["failed"][i] = True
            out["errors"][rep] = {
                **base,
                "kind": "replicate",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            continue
        dim = result.truth.shape[0]
        out["estimate"][i, ..., :dim] = result.estimate
        out["last"][i, ..., :dim] = result.last
        if result.projected is not None:
            out["projected"][i, ..., :dim] = result.projected
        for m, label in enumerate(methods):
            out["lower"][m, i, ..., :dim] = result.lower[label]
            out["upper"][m, i, ..., :dim] = result.upper[label]
            out["method_failed"][m, i] = result.method_failed[label]
            out["method_estimate"][m, i, ..., :dim] = result.method_estimate[label]
            out["method_seconds"][m, i] = result.method_seconds[label]
        out["seconds"][i] = result.seconds
        if result.failures:
            out["errors"][rep] = {
                **base,
                "kind": "method",
                "error": "; ".join(f"{k}: {v}" for k, v in result.failures.items()),
                "methods": result.failures,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
    return out
