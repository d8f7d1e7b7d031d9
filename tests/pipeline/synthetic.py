"""Hand-made stores with the SPEC section 7 layout and known summaries (test helpers)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr
from scipy.stats import norm

LEVEL = 0.9
Z = float(norm.ppf(0.95))
REPS = 40
#: Replicates 0..DONE-1 are done (in every cell but the empty one).
DONE = 36
#: The bb method failed for this replicate (NaN bounds, method_failed).
BB_FAILED_REP = 3
#: A replicate that is not done but holds finite values (they must be ignored).
GARBAGE_REP = 38
#: Oracle sd sqrt(Sigma_jj) and the sd of sqrt(n)(theta_bar - theta*) over done replicates.
ORACLE_SD = 2.0
EMPIRICAL_SD = 3.0
TAUS = [0.5, 0.9]
NS = [100, 10_000]
METHODS = ["bb", "oracle"]
D = 2
#: The (tau, n) cell without any done replicate.
EMPTY_CELL = {"tau": 0.9, "n": 10_000}


def last_error(r: int, j: int) -> float:
    """theta_n - theta* of replicate r, coordinate j (the last iterate is noisier)."""
    return 0.05 * (j + 1) * math.sin(1.3 * r + j) + 0.02


def bias(j: int) -> float:
    return 0.01 * (j + 1)


def truth_value(tau: float, j: int) -> float:
    return tau if j == 0 else -tau


def bb_length(r: int, j: int) -> float:
    return 0.1 * (1 + j) + 0.01 * r


def bb_covers(r: int, j: int) -> bool:
    return r % 7 != j


def oracle_covers(r: int, j: int) -> bool:
    return not (j == 0 and r % 10 == 9)


def standardized_noise() -> np.ndarray:
    """e_r with mean 0 and sample sd 1 over the done replicates."""
    e = np.sin(np.arange(DONE) * 1.7) + 0.3 * np.arange(DONE) / DONE
    return (e - e.mean()) / e.std(ddof=1)


def sweep_attr(
    grid: dict[str, list[Any]], spec: dict[str, Any], methods: list[str], replicates: int = REPS
) -> str:
    return json.dumps(
        {
            "name": "synthetic",
            "description": "hand-made store",
            "replicates": replicates,
            "seed": 0,
            "spec": {"model": "quantile", "level": LEVEL, **spec},
            "grid": grid,
            "methods": {m: {} for m in methods},
            "rep_chunk": None,
        }
    )


def _interval(truth: float, length: float, covers: bool) -> tuple[float, float]:
    lower = truth - 0.4 * length if covers else truth + 0.01
    return lower, lower + length


def grid_store() -> xr.Dataset:
    """Grid tau x n, methods bb and oracle, 40 replicates, d = 2 (see module constants)."""
    shape_g = (len(TAUS), len(NS))
    m, r_all = len(METHODS), REPS
    estimate = np.full((*shape_g, r_all, D), np.nan)
    last = np.full_like(estimate, np.nan)
    lower = np.full((*shape_g, m, r_all, D), np.nan)
    upper = np.full_like(lower, np.nan)
    truth = np.full((*shape_g, D), np.nan)
    done = np.zeros((*shape_g, r_all), dtype=bool)
    method_failed = np.zeros((*shape_g, m, r_all), dtype=bool)
    e = standardized_noise()
    for a, tau in enumerate(TAUS):
        for b, n in enumerate(NS):
            for j in range(D):
                truth[a, b, j] = truth_value(tau, j)
            if {"tau": tau, "n": n} == EMPTY_CELL:
                continue
            done[a, b, :DONE] = True
            for r in [*range(DONE), GARBAGE_REP]:
                for j in range(D):
                    t = truth[a, b, j]
                    noise = e[r] if r < DONE else 100.0
                    estimate[a, b, r, j] = t + bias(j) + EMPIRICAL_SD * noise / np.sqrt(n)
                    last[a, b, r, j] = t + last_error(r, j) * (1.0 if r < DONE else 1e3)
                    oracle_len = 2 * Z * ORACLE_SD / np.sqrt(n)
                    lower[a, b, 1, r, j], upper[a, b, 1, r, j] = _interval(
                        t, oracle_len, oracle_covers(r, j)
                    )
                    if r != BB_FAILED_REP:
                        lower[a, b, 0, r, j], upper[a, b, 0, r, j] = _interval(
                            t, bb_length(r, j), bb_covers(r, j)
                        )
            method_failed[a, b, 0, BB_FAILED_REP] = True
    g, gm = ("tau", "n"), ("tau", "n", "method")
    ds = xr.Dataset(
        {
            "estimate": ((*g, "rep", "coord"), estimate),
            "last": ((*g, "rep", "coord"), last),
            "lower": ((*gm, "rep", "coord"), lower),
            "upper": ((*gm, "rep", "coord"), upper),
            "truth": ((*g, "coord"), truth),
            "done": ((*g, "rep"), done),
            "failed": ((*g, "rep"), np.zeros_like(done)),
            "method_failed": ((*gm, "rep"), method_failed),
            "seconds": ((*g, "rep"), np.where(done, 0.5, np.nan)),
            "job_id": ((*g, "rep"), np.zeros(done.shape, dtype=np.int64)),
        },
        coords={
            "tau": np.array(TAUS),
            "n": np.array(NS, dtype=np.int64),
            "method": np.array(METHODS, dtype=object),
            "rep": np.arange(REPS),
            "coord": np.arange(D),
        },
    )
    ds.attrs.update(
        level=LEVEL,
        sweep=sweep_attr({"tau": TAUS, "n": NS}, {"eps": 1.0}, METHODS),
        rep_chunk=10,
        versions="{}",
    )
    return ds


CHECKPOINTS = [10, 100, 1_000, 10_000, 100_000, 200_000, 500_000, 1_000_000]
RUN_METHODS = ["bb", "bm", "sn", "oracle"]
HALF_WIDTH = {"bb": 1.8, "bm": 1.5, "sn": 2.4, "oracle": Z * ORACLE_SD}


def checkpoint_store(reps: int = 1) -> xr.Dataset:
    """A figure-1 store: no grid axes, checkpoints, methods bb/bm/sn/oracle, d = 1.

    The last iterate's error decays as k^-1/4, the average's as k^-1/2.
    """
    k = np.array(CHECKPOINTS, dtype=np.float64)
    rng = np.random.default_rng(0)
    walk = np.cumsum(rng.standard_normal((reps, len(k))), axis=1) / np.arange(1, len(k) + 1)
    estimate = (0.1 * walk * 40 / np.sqrt(k))[..., None]
    last = (4.0 * walk / k**0.25)[..., None]  # slower than the average's 1 / sqrt(k)
    half = np.array([HALF_WIDTH[m] for m in RUN_METHODS])[:, None, None, None]
    half = half / np.sqrt(k)[None, None, :, None]
    ds = xr.Dataset(
        {
            "estimate": (("rep", "checkpoint", "coord"), estimate),
            "last": (("rep", "checkpoint", "coord"), last),
            "lower": (("method", "rep", "checkpoint", "coord"), estimate[None] - half),
            "upper": (("method", "rep", "checkpoint", "coord"), estimate[None] + half),
            "truth": (("coord",), np.array([0.0])),
            "done": (("rep",), np.ones(reps, dtype=bool)),
            "failed": (("rep",), np.zeros(reps, dtype=bool)),
            "method_failed": (
                ("method", "rep", "checkpoint"),
                np.zeros((len(RUN_METHODS), reps, len(CHECKPOINTS)), bool),
            ),
            "seconds": (("rep",), np.ones(reps)),
            "job_id": (("rep",), np.zeros(reps, dtype=np.int64)),
        },
        coords={
            "method": np.array(RUN_METHODS, dtype=object),
            "rep": np.arange(reps),
            "checkpoint": np.array(CHECKPOINTS, dtype=np.int64),
            "coord": np.arange(1),
        },
    )
    spec = {"tau": 0.5, "n": CHECKPOINTS[-1], "checkpoints": CHECKPOINTS}
    ds.attrs.update(level=LEVEL, sweep=sweep_attr({}, spec, RUN_METHODS, reps), rep_chunk=1)
    return ds


def point_store() -> xr.Dataset:
    """No grid axes, no checkpoints: the (0.5, 100) cell of :func:`grid_store`."""
    ds = grid_store().sel(tau=0.5, n=100, drop=True)
    ds.attrs["sweep"] = sweep_attr({}, {"tau": 0.5, "n": 100}, METHODS)
    return ds


#: :func:`early_failure_store`: bm fails at the first checkpoint for replicates 0..3.
EARLY_CHECKPOINTS = [10, 100, 1_000]
EARLY_REPS = 8
EARLY_FAILED_REPS = range(4)


def early_covers(r: int) -> bool:
    """Replicates 0..3 (those bm fails for early) and the even ones cover theta*."""
    return r < 4 or r % 2 == 0


def early_failure_store(per_checkpoint: bool = True) -> xr.Dataset:
    """Methods bb and bm at checkpoints 10, 100, 1000, 8 replicates, d = 1, theta* = 0.5.

    Both methods give the same intervals, covering theta* for the replicates of
    :func:`early_covers` (6 of 8), except that bm failed at checkpoint 10 for replicates
    0..3 (NaN bounds there). ``per_checkpoint`` False writes ``method_failed`` without
    the checkpoint axis, as stores did before it had one (True for those replicates).
    """
    k, r_all = len(EARLY_CHECKPOINTS), EARLY_REPS
    truth = 0.5
    lower = np.empty((2, r_all, k, 1))
    for r in range(r_all):
        lower[:, r] = truth - 0.1 if early_covers(r) else truth + 0.01
    upper = lower + 0.2
    failed = list(EARLY_FAILED_REPS)
    lower[1, failed, 0] = upper[1, failed, 0] = np.nan
    if per_checkpoint:
        method_failed = np.zeros((2, r_all, k), dtype=bool)
        method_failed[1, failed, 0] = True
        failed_dims: tuple[str, ...] = ("method", "rep", "checkpoint")
    else:
        method_failed = np.zeros((2, r_all), dtype=bool)
        method_failed[1, failed] = True
        failed_dims = ("method", "rep")
    ds = xr.Dataset(
        {
            "estimate": (("rep", "checkpoint", "coord"), np.full((r_all, k, 1), truth)),
            "lower": (("method", "rep", "checkpoint", "coord"), lower),
            "upper": (("method", "rep", "checkpoint", "coord"), upper),
            "truth": (("coord",), np.array([truth])),
            "done": (("rep",), np.ones(r_all, dtype=bool)),
            "failed": (("rep",), np.zeros(r_all, dtype=bool)),
            "method_failed": (failed_dims, method_failed),
        },
        coords={
            "method": np.array(["bb", "bm"], dtype=object),
            "rep": np.arange(r_all),
            "checkpoint": np.array(EARLY_CHECKPOINTS, dtype=np.int64),
            "coord": np.arange(1),
        },
    )
    spec = {"tau": 0.5, "n": EARLY_CHECKPOINTS[-1], "checkpoints": EARLY_CHECKPOINTS}
    ds.attrs.update(level=LEVEL, sweep=sweep_attr({}, spec, ["bb", "bm"], r_all), rep_chunk=r_all)
    return ds


#: :func:`wide_store`: grid n, methods bb (failing for one replicate) and oracle.
WIDE_NS = [100, 10_000]
WIDE_METHODS = ["bb", "oracle"]
WIDE_FAILED_REP = 2


def wide_store(d: int, reps: int = 40, correlated: bool = False, seed: int = 0) -> xr.Dataset:
    """d coordinates, grid n, ``reps`` replicates, all done, theta* = 0.

    Each replicate covers coordinate j with probability 0.8 (bb) and 0.9 (oracle):
    with ``correlated`` one draw per replicate decides for all its coordinates (perfectly
    correlated coordinates), otherwise one draw per coordinate (independent ones). The
    lengths are 0.1 (1 + j / d) + 0.01 r for bb and half that for the oracle. bb failed
    for replicate :data:`WIDE_FAILED_REP` (NaN bounds at every coordinate).
    """
    rng = np.random.default_rng(seed)
    shape = (len(WIDE_NS), len(WIDE_METHODS), reps, d)
    draws = rng.random((*shape[:-1], 1) if correlated else shape)
    covers = np.broadcast_to(draws < np.array([0.8, 0.9])[None, :, None, None], shape)
    r, j = np.arange(reps)[:, None], np.arange(d)[None, :]
    length = (0.1 * (1 + j / d) + 0.01 * r) * np.array([1.0, 0.5])[None, :, None, None]
    lower = np.where(covers, -0.4 * length, 0.01)
    upper = lower + length
    lower[:, 0, WIDE_FAILED_REP] = upper[:, 0, WIDE_FAILED_REP] = np.nan
    method_failed = np.zeros(shape[:-1], dtype=bool)
    method_failed[:, 0, WIDE_FAILED_REP] = True
    estimate = 0.01 * rng.standard_normal((len(WIDE_NS), reps, d))
    done = np.ones((len(WIDE_NS), reps), dtype=bool)
    ds = xr.Dataset(
        {
            "estimate": (("n", "rep", "coord"), estimate),
            "last": (("n", "rep", "coord"), 2 * estimate),
            "lower": (("n", "method", "rep", "coord"), lower),
            "upper": (("n", "method", "rep", "coord"), upper),
            "truth": (("n", "coord"), np.zeros((len(WIDE_NS), d))),
            "done": (("n", "rep"), done),
            "failed": (("n", "rep"), np.zeros_like(done)),
            "method_failed": (("n", "method", "rep"), method_failed),
            "seconds": (("n", "rep"), np.full(done.shape, 0.5)),
            "job_id": (("n", "rep"), np.zeros(done.shape, dtype=np.int64)),
        },
        coords={
            "n": np.array(WIDE_NS, dtype=np.int64),
            "method": np.array(WIDE_METHODS, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(d),
        },
    )
    ds.attrs.update(
        level=LEVEL,
        sweep=sweep_attr({"n": WIDE_NS}, {"eps": 1.0, "d": d}, WIDE_METHODS, reps),
        rep_chunk=reps,
        versions="{}",
    )
    return ds


#: :func:`sparse_shaped_store`'s methods: the ``sparse`` sweep's, two of them simultaneous
#: bands (their claim is the joint coverage), the rest per-coordinate intervals.
SPARSE_METHODS = {
    "bb": {"form": "basic"},
    "band": {"method": "bb", "simultaneous": True, "band": "sup-t"},
    "band_sidak": {"method": "bb", "simultaneous": True, "band": "sidak"},
    "bm": {},
    "sn": {},
    "oracle": {},
}
#: The ``sparse`` sweep's noise families (case parameters other than d and s).
SPARSE_NOISES = {
    "laplace-sparse": {"mechanism": "laplace", "calibration": "sparse"},
    "laplace-dense": {"mechanism": "laplace", "calibration": "dense"},
    "gaussian-sparse": {"mechanism": "gaussian", "calibration": "sparse", "delta": 1e-6},
}


def sparse_shaped_store(
    dims: tuple[int, ...] = (10, 100, 1000),
    sparsities: tuple[int, ...] = (1, 4, 16),
    reps: int = REPS,
    n: float = 5e4,
    seed: int = 0,
) -> xr.Dataset:
    """A store of the ``sparse`` sweep's shape, at exactly nominal coverage.

    Grid axis ``case`` only: every d x s (s <= d) x noise family, labelled as the sweep
    labels them (``d10-s1-laplace-sparse``); the methods of :data:`SPARSE_METHODS`; the
    spec's n a float (``--set n=5e4`` stores 50000.0). A per-coordinate interval covers
    each coordinate in each replicate independently with probability :data:`LEVEL`; a
    band covers all coordinates of a replicate with probability :data:`LEVEL` and
    otherwise misses one, so its joint coverage is nominal and its coordinate coverage
    above it. theta* = 0; a smaller d is NaN-padded to the largest; lengths 0.1 s
    (sparse calibration) or 0.1 d (dense).
    """
    rng = np.random.default_rng(seed)
    cases: dict[str, dict[str, Any]] = {}
    for d in dims:
        for s in sparsities:
            if s > d:
                continue
            for noise, params in SPARSE_NOISES.items():
                cases[f"d{d}-s{s}-{noise}"] = {"d": d, "sparsity": s, **params}
    labels, methods, width = list(cases), list(SPARSE_METHODS), max(dims)
    bands = [m for m, p in SPARSE_METHODS.items() if p.get("simultaneous")]
    shape = (len(labels), len(methods), reps, width)
    truth = np.zeros((len(labels), width))
    covers = rng.random(shape) < LEVEL
    for c, label in enumerate(labels):
        d = cases[label]["d"]
        truth[c, d:] = np.nan
        for m, method in enumerate(methods):
            if method in bands:
                band_covers = rng.random(reps) < LEVEL
                missed = rng.integers(0, d, reps)
                covers[c, m] = True
                covers[c, m, ~band_covers, missed[~band_covers]] = False
    half = np.zeros(shape)
    for c, label in enumerate(labels):
        case = cases[label]
        size = case["sparsity"] if case["calibration"] == "sparse" else case["d"]
        half[c] = 0.05 * size
    lower = np.where(covers, -half, 0.01)
    upper = np.where(covers, half, 0.01 + 2 * half)
    padded = np.isnan(truth)[:, None, None, :]
    lower, upper = np.where(padded, np.nan, lower), np.where(padded, np.nan, upper)
    estimate = np.where(np.isnan(truth)[:, None, :], np.nan, 0.0) + np.zeros((1, reps, 1))
    done_shape = (len(labels), reps)
    sweep = {
        "name": "sparse",
        "description": "a hand-made store of the sparse sweep's shape",
        "replicates": reps,
        "seed": 0,
        "spec": {"model": "sparse_mean", "level": LEVEL, "eps": 1.0, "n": float(n)},
        "grid": {"case": labels},
        "cases": cases,
        "methods": SPARSE_METHODS,
        "rep_chunk": None,
    }
    ds = xr.Dataset(
        {
            "estimate": (("case", "rep", "coord"), estimate),
            "lower": (("case", "method", "rep", "coord"), lower),
            "upper": (("case", "method", "rep", "coord"), upper),
            "truth": (("case", "coord"), truth),
            "done": (("case", "rep"), np.ones(done_shape, dtype=bool)),
            "failed": (("case", "rep"), np.zeros(done_shape, dtype=bool)),
            "method_failed": (("case", "method", "rep"), np.zeros(shape[:3], dtype=bool)),
            "seconds": (("case", "rep"), np.full(done_shape, 0.1)),
            "job_id": (("case", "rep"), np.zeros(done_shape, dtype=np.int64)),
        },
        coords={
            "case": np.array(labels, dtype=object),
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(width),
        },
    )
    ds.attrs.update(level=LEVEL, sweep=json.dumps(sweep), rep_chunk=reps, versions="{}")
    return ds


def save_store(ds: xr.Dataset, store: Path) -> Path:
    """Write a hand-made store as ldpsim lays one out (its metadata group) at ``store``."""
    ds.to_zarr(store, zarr_format=3, consolidated=False)
    zarr.open_group(str(store / "ldpsim"), mode="w", zarr_format=3)  # as a real store has
    return store


def failing_store(folder: Path) -> Path:
    """``folder``/s.zarr: grid_store written as a store, with bb's failure records (more
    than a report lists) and a failed replicate (test_report.py and conftest's
    failing_report)."""
    from ldpsim.pipeline.report.report import MAX_FAILURES_SHOWN

    store = folder / "s.zarr"
    ds = grid_store()
    ds["method_seconds"] = (("tau", "n", "method", "rep"), np.full((2, 2, 2, REPS), 0.25))
    save_store(ds, store)
    errors = store / "ldpsim" / "errors"
    errors.mkdir()
    for rep in range(MAX_FAILURES_SHOWN + 3):
        record = {
            "key": "tau=0.5,n=100",
            "rep": rep,
            "seed": 1000 + rep,
            "spec": {"model": "quantile", "tau": 0.5, "n": 100, "seed": 0},
            "kind": "method",
            "error": "bb: LinAlgError: singular <matrix>",
            "methods": {"bb": "LinAlgError: singular <matrix>"},
        }
        (errors / f"0_0__{rep}.json").write_text(json.dumps(record))
    return store
