"""Compute times of a store's replicates and interval methods: medians and totals."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

#: What the timings read of a store (``method_seconds`` is absent in older stores).
TIMING_VARIABLES = ["done", "seconds", "method_seconds"]


def _median(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def replicate_seconds(ds: xr.Dataset) -> np.ndarray:
    """The compute seconds of the done replicates, flattened (finite values only)."""
    if "seconds" not in ds:
        return np.empty(0)
    seconds = ds["seconds"].where(ds["done"].astype(bool)).values.ravel()
    return seconds[np.isfinite(seconds)]


def timing_summary(ds: xr.Dataset) -> dict[str, Any]:
    """Median compute seconds per replicate and per interval method, and their totals.

    Parameters
    ----------
    ds : xarray.Dataset
        A store's Dataset with ``done`` and ``seconds`` and, in stores written since it
        exists, ``method_seconds`` (per method and replicate, with the ``checkpoint``
        axis when the sweep has one: the seconds of a replicate are summed over it).

    Returns
    -------
    dict
        ``replicates`` (done replicates with a time), ``median`` (s per replicate; NaN
        without any), ``total`` (summed compute seconds), ``per_method`` (method label ->
        median s per replicate over the done replicates, NaN where not recorded) and
        ``per_method_total``.
    """
    seconds = replicate_seconds(ds)
    per_method: dict[str, float] = {}
    per_method_total: dict[str, float] = {}
    if "method_seconds" in ds:
        method_seconds = ds["method_seconds"]
        if "checkpoint" in method_seconds.dims:
            method_seconds = method_seconds.sum("checkpoint", min_count=1)
        method_seconds = method_seconds.where(ds["done"].astype(bool))
        for label in ds["method"].values:
            values = method_seconds.sel({"method": label}).values.ravel()
            per_method[str(label)] = _median(values)
            per_method_total[str(label)] = float(np.nansum(values))
    return {
        "replicates": int(seconds.size),
        "median": _median(seconds),
        "total": float(seconds.sum()),
        "per_method": per_method,
        "per_method_total": per_method_total,
    }


def format_seconds(value: float) -> str:
    """Seconds with three significant digits ('n/a' for NaN): 0.0123, 1.5, 250."""
    if not np.isfinite(value):
        return "n/a"
    return f"{value:.3g}"


def timing_line(ds: xr.Dataset) -> str:
    """One line: median seconds per replicate and per method (what status and summarize show)."""
    timing = timing_summary(ds)
    if not timing["replicates"]:
        return "median seconds per replicate: no replicate done"
    line = (
        f"median seconds per replicate: {format_seconds(timing['median'])} "
        f"({timing['replicates']} replicate{'s' if timing['replicates'] != 1 else ''}, "
        f"{format_seconds(timing['total'])} s in all)"
    )
    if timing["per_method"]:
        methods = ", ".join(
            f"{label} {format_seconds(value)}" for label, value in timing["per_method"].items()
        )
        line += f"; per method: {methods}"
    else:
        line += "; per method: not recorded in this store"
    return line


def median_per_point(ds: xr.Dataset) -> np.ndarray:
    """Median compute seconds of the done replicates of each grid point (NaN: none)."""
    seconds = ds["seconds"].where(ds["done"].astype(bool)).values
    out = np.full(seconds.shape[:-1], np.nan)
    for index in np.ndindex(*out.shape):
        out[index] = _median(seconds[index])
    return out
