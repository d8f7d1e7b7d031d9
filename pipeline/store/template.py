"""A new store's arrays and attributes (SPEC section 7), written with zarr alone.

:func:`template` describes every array of a sweep's store: its dimensions, shape, type,
chunks, shards, codecs and attributes, and the values of those the sweep determines
(the coordinates and truths); the replicates' arrays are only allocated.
:func:`write_template` writes them with zarr, as xarray's ``Dataset.to_zarr(...,
compute=False, zarr_format=3)`` writes the same Dataset, file for file
(``tests/pipeline/test_template.py`` builds that Dataset and compares the bytes). A
run that creates a store then imports neither xarray nor dask.array: 0.9 CPU-seconds
in a fresh process, 0.2 in a run's driver, which has imported part of them by then
(the 72,000-replicate probe's creation: 0.55 -> 0.33 CPU-seconds, spent while the
workers compute the run's first tasks).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsim.pipeline.store.layout import (
    VARIABLE_ATTRS,
    ZSTD_LEVEL,
    Layout,
    coord_array,
    coord_attrs,
    gpu_streams_attr,
    library_versions,
    truth_array,
)
from ldpsim.pipeline.sweep import Sweep


@dataclass(frozen=True)
class TemplateArray:
    """One array of a new store.

    ``data`` holds its values where the sweep determines them (written now, every chunk),
    else None (allocated only: its chunks are written by the runs, and a chunk not yet
    written reads as the fill value of :func:`write_template`). ``chunks`` None: zarr
    chooses them (the whole array for all but the largest coordinates); ``shards`` None:
    no sharding. ``zstd_level``: the zstd level of its chunks, which also carry a crc32c
    checksum.
    """

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: Any
    data: np.ndarray | None
    chunks: tuple[int, ...] | None
    shards: tuple[int, ...] | None
    zstd_level: int
    attrs: dict[str, Any]


def template(
    sweep: Sweep, layout: Layout, units: dict[str, dict[str, Any]] | None = None
) -> tuple[dict[str, TemplateArray], dict[str, Any]]:
    """Every array of the sweep's new store, by name, and the root attributes.

    ``units``: the sweep's unit origins as the run read them
    (:func:`ldpsim.pipeline.store.code_identity.sweep_units`; read here if None).
    """
    from ldpsim.pipeline.store.code_identity import UNITS_ATTR, sweep_units
    from ldpsim.pipeline.store.digests import DIGESTS_ATTR, DIGESTS_VERSION
    from ldpsim.pipeline.store.streams_record import running_fingerprint
    from ldpsim.tasks.streams.seeding import STREAMS_VERSION

    g_dims, g_shape = tuple(layout.axes), layout.grid_shape
    r, m = layout.replicates, len(layout.methods)
    x_dims, x_shape = layout.extra()
    # Written a shard (or, unsharded, a chunk) at a time.
    g_block, rep_block = layout.write_block()
    g = len(g_dims)
    per_rep = ((*g_dims, "rep", *x_dims), (*g_shape, r, *x_shape), g)
    per_method = ((*g_dims, "method", "rep", *x_dims), (*g_shape, m, r, *x_shape), g + 1)
    # Per checkpoint: a method that fails at an early checkpoint (too few blocks) still
    # counts at the later ones.
    per_method_point = (
        (*g_dims, "method", "rep", *x_dims[:-1]),
        (*g_shape, m, r, *x_shape[:-1]),
        g + 1,
    )
    flags = ((*g_dims, "rep"), (*g_shape, r), g)
    allocated = {
        "estimate": (*per_rep, np.float64),
        "last": (*per_rep, np.float64),
        "projected": (*per_rep, np.float64),
        "lower": (*per_method, np.float64),
        "upper": (*per_method, np.float64),
        "method_estimate": (*per_method, np.float64),
        "method_seconds": (*per_method_point, np.float64),
        "method_failed": (*per_method_point, np.bool_),
        "done": (*flags, np.bool_),
        "failed": (*flags, np.bool_),
        "seconds": (*flags, np.float64),
        "job_id": (*flags, np.int64),
        "code_version": (*flags, np.int16),
    }
    arrays: dict[str, TemplateArray] = {}
    for name, (dims, shape, rep_axis, dtype) in allocated.items():
        shard = [*g_block, *shape[g:]]
        shard[rep_axis] = rep_block
        # A chunk covers the shard's grid points: few chunks to encode, however many
        # grid points (unsharded, a chunk is one grid point: one writer per file).
        inner = [*(g_block if layout.sharded else (1,) * g), *shape[g:]]
        inner[rep_axis] = layout.zarr_chunk_reps
        # zarr's default compressor, then a checksum of each chunk: a damaged chunk
        # fails to decode and is reported (ldpsim.pipeline.store.damage) instead of
        # being read as other numbers. Stores made before it have no checksum.
        arrays[name] = TemplateArray(
            dims=dims,
            shape=shape,
            dtype=dtype,
            data=None,
            chunks=tuple(inner),
            shards=tuple(shard) if layout.sharded else None,
            zstd_level=ZSTD_LEVEL,
            attrs=dict(VARIABLE_ATTRS.get(name, {})),
        )
    # The arrays the sweep determines get a checksum too: a changed bit in a truth or a
    # coordinate would change every summary silently (ldpsim.pipeline.store.integrity
    # also recomputes and compares them).
    determined = {
        "truth": ((*g_dims, "coord"), truth_array(sweep, layout)),
        "pseudo_truth": ((*g_dims, "coord"), truth_array(sweep, layout, pseudo=True)),
    }
    coords: dict[str, np.ndarray] = {a: coord_array(a, layout.axis_values[a]) for a in g_dims}
    coords.update(
        method=np.array(layout.methods, dtype=object),
        rep=np.arange(r, dtype=np.int64),
        coord=np.arange(layout.d, dtype=np.int64),
    )
    if layout.checkpoints is not None:
        coords["checkpoint"] = np.array(layout.checkpoints, dtype=np.int64)
    determined.update({name: ((name,), values) for name, values in coords.items()})
    for name, (dims, values) in determined.items():
        arrays[name] = TemplateArray(
            dims=dims,
            shape=values.shape,
            dtype=values.dtype,
            data=values,
            chunks=None,
            shards=None,
            zstd_level=0,
            attrs=dict(VARIABLE_ATTRS[name]) if name in VARIABLE_ATTRS else coord_attrs(name),
        )
    attrs = {
        "title": f"ldpsim sweep {sweep.name!r}",
        "description": sweep.description,
        "sweep": sweep.to_json(),
        "identity": json.dumps(sweep.identity(), sort_keys=True, default=str),
        "level": float(sweep.points()[0].normalized.level),
        "rep_chunk": layout.rep_chunk,
        **(
            {
                "shard_reps": layout.shard_reps,
                "shard_grid": list(layout.shard_grid or ()),
                "chunk_reps": layout.chunk_reps,
            }
            if layout.sharded
            else {}
        ),
        "versions": json.dumps(library_versions(), sort_keys=True),
        "streams_version": STREAMS_VERSION,
        "streams_fingerprint": json.dumps(running_fingerprint(), sort_keys=True),
        **gpu_streams_attr(sweep),
        UNITS_ATTR: json.dumps([units or sweep_units(sweep)], sort_keys=True),
        # Every data file's digest, bound to its place (ldpsim.pipeline.store.digests).
        DIGESTS_ATTR: DIGESTS_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "conventions": "done(grid, rep) is true only after that replicate's values are written",
    }
    return arrays, attrs


def write_template(root: str | Path, arrays: dict[str, TemplateArray], attrs: dict) -> None:
    """Create the group ``root`` (which must not exist) with ``attrs`` and ``arrays``.

    Float arrays get a NaN fill value and, as xarray writes it, a ``_FillValue``
    attribute (its 8 bytes, base64); the others zarr's default fill value (0, False,
    ""), as xarray leaves them: an allocated array's fill is what it reads where no run
    has written, and every reader goes by the ``done`` flags.
    """
    import zarr
    from zarr.codecs import Crc32cCodec, ZstdCodec

    group = zarr.open_group(str(root), mode="w-", zarr_format=3)
    group.attrs.put(attrs)
    for name, array in arrays.items():
        attributes = dict(array.attrs)
        fill = None
        if np.dtype(array.dtype).kind == "f":
            fill = np.nan
            attributes["_FillValue"] = base64.standard_b64encode(
                np.array(np.nan, dtype=array.dtype).tobytes()
            ).decode()
        created = group.create(
            name,
            shape=array.shape,
            dtype=str if np.dtype(array.dtype).kind == "O" else array.dtype,
            fill_value=fill,
            chunks=array.chunks or "auto",
            shards=array.shards,
            compressors=(ZstdCodec(level=array.zstd_level), Crc32cCodec()),
            dimension_names=array.dims,
            overwrite=True,
            config={"write_empty_chunks": True},
        )
        created.attrs.put(attributes)
        if array.data is not None:
            created[...] = array.data
