"""Interval methods added to a store and not yet computed for all its finished replicates.

A store grows along its ``method`` axis when a run's sweep names a method label the store
lacks; the new labels are appended, in shards of their own (a shard spans the methods the
store was made with). A new method's ``method_seconds`` of a replicate is written after its
other values and is the method's ``done`` flag: a finished replicate whose added method has
none there is *pending* (the run computing it was stopped, or has not run yet).
:mod:`ldpsim.pipeline.compute.added_methods` computes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import xarray as xr
    import zarr


def first_added(arrays: dict[str, zarr.Array]) -> int:
    """How many methods the store was made with: the methods before this index are its
    own, those from it on were added (``arrays``: the store's arrays by name).

    A file of a method variable (a shard; a chunk in a store of ldpsim <= 0.2) spans the
    methods of the store's creation; an added method lies beyond the first file.
    """
    lower = arrays["lower"]
    axis = list(lower.metadata.dimension_names or ()).index("method")
    extent = (lower.shards or lower.chunks)[axis]
    return min(int(extent), int(lower.shape[axis]))


def has_added(arrays: dict[str, zarr.Array]) -> bool:
    """Whether the store holds methods added after its creation (:func:`first_added`)."""
    lower = arrays["lower"]
    axis = list(lower.metadata.dimension_names or ()).index("method")
    return first_added(arrays) < lower.shape[axis]


def pending(
    arrays: dict[str, zarr.Array], done: np.ndarray, seconds: np.ndarray | None = None
) -> tuple[int, np.ndarray]:
    """The finished replicates that an added method still lacks.

    Parameters
    ----------
    arrays : dict of str to zarr.Array
        The store's arrays (``lower``'s metadata, and ``method_seconds`` unless given).
    done : ndarray of bool, shape (grid..., rep)
        The store's ``done`` flags.
    seconds : ndarray, optional
        The store's whole ``method_seconds``, where the caller read it (the damage check
        reads it a file at a time, so that a corrupt file is reported, not raised).

    Returns
    -------
    first : int
        :func:`first_added`.
    mask : ndarray of bool, shape (grid..., methods - first, rep)
        True where the replicate is done and the added method has no ``method_seconds``
        (at any checkpoint): its values are not written yet.
    """
    first = first_added(arrays)
    lower = arrays["lower"]
    axis = list(lower.metadata.dimension_names or ()).index("method")
    count = int(lower.shape[axis]) - first
    if count == 0 or "method_seconds" not in arrays:
        return first, np.zeros((*done.shape[:-1], max(count, 0), done.shape[-1]), dtype=bool)
    added = (slice(None),) * axis + (slice(first, None),)
    seconds = np.asarray(arrays["method_seconds"][added] if seconds is None else seconds[added])
    missing = np.isnan(seconds.reshape(*seconds.shape[: axis + 2], -1)).all(axis=-1)
    return first, missing & np.expand_dims(done, axis)


def pending_methods(path: str | Path) -> dict[str, int]:
    """Per method added to the store at ``path``: its finished replicates that still lack
    its values (an addition interrupted, or not run yet); only methods with some."""
    from ldpsim.pipeline.store.reading import open_arrays, replicate_arrays

    group = open_arrays(path)
    arrays = replicate_arrays(path, group)
    if not has_added(arrays):
        return {}
    try:
        done = np.asarray(arrays["done"][...], dtype=bool)
        first, mask = pending(arrays, done)
    except Exception:  # a codec's own exception: located and named, one line (exit 4)
        from ldpsim.pipeline.store.reading import check_chunks

        for name in ("done", "method_seconds"):
            check_chunks(Path(path), name, arrays[name])
        raise
    grid = done.ndim - 1
    counts = mask.sum(axis=tuple(a for a in range(mask.ndim) if a != grid))
    labels = [str(label) for label in group["method"][...]]
    return {
        label: int(count) for label, count in zip(labels[first:], counts, strict=True) if count
    }


def pending_cells(ds: xr.Dataset) -> xr.DataArray:
    """Where a finished replicate lacks a method's values because they are not computed
    yet (grid..., method, rep): a method added to the store, its addition interrupted.

    Such a method has no ``method_seconds`` (at any checkpoint), no bound and no failure
    there, while every method computed with its replicate has a ``method_seconds``. In a
    store without ``method_seconds`` nothing is pending.
    """
    import xarray as xr

    done = ds["done"].astype(bool)
    if "method_seconds" not in ds:
        return xr.zeros_like(ds["lower"].isel(coord=0, drop=True), dtype=bool) & done
    extra = [d for d in ("checkpoint", "coord") if d in ds["lower"].dims]
    no_seconds = ds["method_seconds"].isnull()
    no_bounds = ds["lower"].isnull().all(extra) & ds["upper"].isnull().all(extra)
    failed = ds["method_failed"].astype(bool) if "method_failed" in ds else False
    if "checkpoint" in ds["method_seconds"].dims:
        no_seconds = no_seconds.all("checkpoint")
    if isinstance(failed, xr.DataArray) and "checkpoint" in failed.dims:
        failed = failed.any("checkpoint")
    return done & no_seconds & no_bounds & ~failed
