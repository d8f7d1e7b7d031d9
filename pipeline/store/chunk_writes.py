"""What a write of finished chunks puts where: each variable's region and values.

A run's results arrive chunk by chunk, each ``(grid index, chunk, result)`` with arrays
for the replicates in ``result['reps']``. :func:`placed_blocks` finds the write blocks
(shards, or chunks of an unsharded store) they touch, and :func:`chunk_writes` the
region and the merged values of every variable there, ``done`` apart: the driver
writes them into the store (:meth:`ldpsim.pipeline.store.store.Store.write_chunks`), and
a worker that computed whole blocks encodes them itself
(:mod:`ldpsim.pipeline.store.handoff`). Array operations per result: nothing here runs
once per replicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpsim.pipeline.store.digests import Write, full_region
from ldpsim.pipeline.store.layout import VARIABLE_ATTRS, Layout

#: A chunk's result where it goes: (grid index, chunk along 'rep', the worker's arrays).
Result = tuple[tuple[int, ...], int, dict[str, Any]]


def variables_of(group: Any) -> dict[str, Any]:
    """The variables a run writes, by name, of a store's root ``group`` (opened with the
    arrays' own metadata); a store of an older ldpsim opened without a run lacks some of
    :data:`ldpsim.pipeline.store.layout.ADDED_VARIABLES`."""
    present = set(group.array_keys())
    return {name: group[name] for name in VARIABLE_ATTRS if name in present}


def replicate_positions(result: dict[str, Any]) -> np.ndarray:
    """A chunk's ``result['reps']`` (a list or a range from the worker) as an int64 array."""
    reps = result["reps"]
    if isinstance(reps, range):
        return np.arange(reps.start, reps.stop, reps.step, dtype=np.int64)
    return np.asarray(reps, dtype=np.int64)


def as_slice(positions: np.ndarray) -> slice | np.ndarray:
    """``positions`` (ascending, distinct) as a slice when they are consecutive: numpy
    copies into a slice without an index array."""
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


@dataclass(frozen=True)
class Placed:
    """One write block of a write (:func:`placed_blocks`): its grid points, its region
    along 'rep', each result's (grid offset, positions in the region, result), and
    whether the results cover every replicate of the region at every grid point."""

    grid: tuple[slice, ...]
    reps: slice
    spots: list[tuple[tuple[int, ...], slice | np.ndarray, dict[str, Any]]]
    covered: bool


def placed_blocks(layout: Layout, replicates: int, results: list[Result]) -> list[Placed]:
    """Where each write block's results go, worked out once for all the variables.

    Per block: the shard's grid points, the chunks along 'rep' that the results touch
    (zarr re-encodes those and keeps the shard's others as they are), each result's grid
    offset and replicate positions inside that region (a slice when they are
    consecutive), and whether the results cover the whole region. ``replicates``: the
    length of the store's 'rep' axis.
    """
    blocks: dict[tuple, list[tuple[tuple[int, ...], dict[str, Any], np.ndarray]]] = {}
    for index, chunk, result in results:
        key = layout.block_of(index, chunk)
        positions = replicate_positions(result)
        if len(positions):
            blocks.setdefault(key, []).append((index, result, positions))
    rep_chunk = layout.zarr_chunk_reps
    placed = []
    for key, members in blocks.items():
        grid, block_reps = layout.block_slices(key)
        first = min(int(reps.min()) for _, _, reps in members)
        last = max(int(reps.max()) for _, _, reps in members)
        first = first // rep_chunk * rep_chunk
        last = (last // rep_chunk + 1) * rep_chunk
        reps = slice(max(first, block_reps.start), min(last, replicates))
        covered = np.zeros((*(g.stop - g.start for g in grid), reps.stop - reps.start), bool)
        spots = []
        for index, result, positions in members:
            offset = tuple(i - g.start for i, g in zip(index, grid, strict=True))
            where = as_slice(positions - reps.start)
            covered[offset][where] = True
            spots.append((offset, where, result))
        placed.append(Placed(grid, reps, spots, bool(covered.all())))
    return placed


#: A variable a chunk write fills: (name, whether it has the 'method' axis after the grid
#: axes, the values of one result for it).
Variable = tuple[str, bool, Callable[[dict[str, Any]], Any]]


def written_variables(arrays: dict[str, Any], methods: int, code_version: int) -> list[Variable]:
    """The variables a chunk write fills in a store with ``arrays`` (name -> zarr array),
    in the order they are written, ``done`` last (``~failed``): those of a store of an
    older ldpsim opened without a run are left out, and its method arrays without the
    'checkpoint' axis get the checkpoints collapsed. ``code_version``: the store's
    generation, which the written replicates get."""
    m = methods
    per_checkpoint = "checkpoint" in (arrays["method_failed"].metadata.dimension_names or ())

    def method_failed(r):
        if per_checkpoint:
            return r["method_failed"]
        # A store written before method_failed had the checkpoint axis.
        return r["method_failed"].reshape(*r["method_failed"].shape[:2], -1).any(axis=2)

    total = "method_seconds" in arrays and "checkpoint" not in (
        arrays["method_seconds"].metadata.dimension_names or ()
    )

    def method_seconds(r):
        if total:  # added beside a method_failed without the checkpoint axis
            return r["method_seconds"][:m].reshape(*r["method_seconds"].shape[:2], -1).sum(axis=2)
        return r["method_seconds"][:m]

    candidates: list[Variable] = [
        ("estimate", False, lambda r: r["estimate"]),
        ("last", False, lambda r: r["last"]),
        ("projected", False, lambda r: r["projected"]),
        ("lower", True, lambda r: r["lower"][:m]),
        ("upper", True, lambda r: r["upper"][:m]),
        ("method_failed", True, method_failed),
        ("seconds", False, lambda r: r["seconds"]),
        ("method_estimate", True, lambda r: r["method_estimate"][:m]),
        ("method_seconds", True, method_seconds),
        ("job_id", False, lambda r: r["job_id"]),
        ("code_version", False, lambda r: code_version),
        ("failed", False, lambda r: r["failed"]),
        ("done", False, lambda r: ~r["failed"]),
    ]
    # Absent from a store of an older ldpsim opened without a run: last, projected,
    # method_estimate, method_seconds, code_version.
    return [variable for variable in candidates if variable[0] in arrays]


def block_region(block: Placed, method_axis: bool) -> tuple[slice, ...]:
    """A write block's region of a variable (the grid points, all methods, the replicates)."""
    return (*block.grid, *([slice(None)] if method_axis else []), block.reps)


def block_variables(
    arrays: dict[str, Any], layout: Layout, code_version: int, placed: list[Placed]
) -> Iterator[tuple[Variable, Placed, tuple[slice, ...]]]:
    """Each variable of :func:`written_variables`, in order, with each block and its
    region of that variable."""
    for variable in written_variables(arrays, len(layout.methods), code_version):
        for block in placed:
            yield variable, block, block_region(block, variable[1])


def chunk_writes(
    arrays: dict[str, Any],
    layout: Layout,
    code_version: int,
    results: list[Result],
    read: Callable[[Any, tuple[Any, ...]], np.ndarray] | None = None,
) -> tuple[list[Write], list[Write]]:
    """The writes of ``results`` into the store's ``arrays`` (name -> zarr array): every
    variable's values for every block (:func:`written_variables`), then ``done``'s.

    A block whose results cover its whole region starts from an empty array: nothing of
    what is stored there survives the write. Another is first read with
    ``read(array, region)``; None refuses it (ValueError): a worker encodes whole
    blocks only.
    """
    placed = placed_blocks(layout, arrays["done"].shape[-1], results)
    writes: list[Write] = []
    for (name, method_axis, value_of), block, where in block_variables(
        arrays, layout, code_version, placed
    ):
        array = arrays[name]
        if block.covered:
            shape = tuple(s.stop - s.start for s in full_region(where, array.shape))
            merged = np.empty(shape, dtype=array.dtype)
        elif read is None:
            raise ValueError("the results do not cover their write blocks whole")
        else:
            merged = read(array, where)
        for offset, positions, result in block.spots:
            view = merged[offset]
            view[(slice(None),) * method_axis + (positions,)] = value_of(result)
        writes.append(Write(name, array, where, merged))
    done = [write for write in writes if write.name == "done"]
    return writes[: len(writes) - len(done)], done
