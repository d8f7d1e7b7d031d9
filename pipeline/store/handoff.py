"""Write blocks a worker encodes itself, which the driver only moves into place.

One driver writing every result caps a run at what one process can encode (issue 42:
zarr's encoding, the checksums and the results' bytes arriving made up most of its
CPU). A task that computed every replicate of one or more whole write blocks (shards,
or chunks of an unsharded store) therefore encodes them on its worker:

1. :func:`hand_off` (on the worker) builds each variable's values for those blocks as
   the driver would (:func:`ldpsim.pipeline.store.chunk_writes.chunk_writes`), lets
   zarr encode each file in memory with the store's own metadata (the same bytes the
   driver's write makes), and writes it beside its place as
   ``<place>.<pid>-<random>.partial``: a name no reader takes for a data file, unique to
   this attempt of the task, and removed by the next run if left behind
   (:func:`ldpsim.pipeline.store.store.remove_partial_files`). It returns the chunks'
   flags and failure records, the files' names, and the write's record (the regions of
   every file with the digests of their values,
   :func:`ldpsim.pipeline.store.digests.planned_entries`), without the values.
2. :meth:`ldpsim.pipeline.store.store.Store.write_handed` (the driver, holding the run
   lock) checks that the files are exactly the whole files of the blocks it planned,
   records the write in the blocks' manifests, renames each file into place
   (``done`` last, after the failure records), and records the files' digests: the
   steps and the order of the driver's own writes, so a run killed at any point is
   settled by the next run as before (:func:`ldpsim.pipeline.store.digests.settle`).

Only the driver changes a store's data files: a worker's files are inert until the
driver, which holds the lock, moves them. A worker encodes only for a store whose lock
holds the run's token (so it is that store, on a file system it shares with the
driver, while that run holds it); one that cannot see or write the store (another file
system, no store yet while the driver creates it, a full disk) returns its arrays as
before, and the driver writes them.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsim.pipeline.store.chunk_writes import (
    Result,
    block_variables,
    chunk_writes,
    placed_blocks,
    variables_of,
)
from ldpsim.pipeline.store.digests import (
    Planned,
    Write,
    file_shape,
    full_region,
    planned_entries,
    split_by_file,
)
from ldpsim.pipeline.store.layout import META_GROUP, Layout
from ldpsim.pipeline.store.lock import holder_token

#: The result key of a chunk whose arrays a worker wrote: the task's
#: :class:`HandedFiles` in its first chunk's result, None in its others'.
HANDED = "handed"
#: What a handed chunk's result keeps: what the driver counts, checks and records.
KEPT = ("reps", "failed", "method_failed", "errors", "warm_up_seconds")


@dataclass(frozen=True)
class Handoff:
    """What a task needs to encode its write blocks: the store's absolute path, the token
    of the run's lock (:func:`ldpsim.pipeline.store.lock.holder_token`), the store's
    layout, the generation (``code_version``) its replicates get, and each chunk's (grid
    index, chunk along 'rep'), in the task's order."""

    path: str
    token: str
    layout: Layout
    code_version: int
    places: tuple[tuple[tuple[int, ...], int], ...]


class NotWhole(ValueError):
    """Results that do not fill the files they touch whole: the driver writes them."""


@dataclass(frozen=True)
class HandedFiles:
    """A task's encoded files: for each place (``NAME/c/...``) the name of its partial
    file under the store (None: the write leaves no file there, as zarr does for a
    shard of fill values only), the places of the values and of ``done`` (moved last),
    and the write's record."""

    partials: dict[str, str | None]
    values: list[str]
    done: list[str]
    planned: Planned


def hand_off(handoff: Handoff, results: list[Any]) -> list[Any]:
    """A task's chunk results with their arrays in encoded files (module docstring), or
    ``results`` unchanged where the worker does not write them: a chunk that raised, a
    store that this worker cannot see or write or that the run's lock does not hold
    (another file system with a store at that path; a new store not created yet), a
    block not covered whole. Any other error is raised: a bug fails the task loudly
    rather than turning the hand-off off unseen."""
    if not results or any(isinstance(result, Exception) for result in results):
        return results
    if holder_token(Path(handoff.path) / META_GROUP) != handoff.token:
        return results
    placed = [(*place, result) for place, result in zip(handoff.places, results, strict=True)]
    try:
        files = encode(handoff, placed)
    except (OSError, NotWhole):
        return results
    kept = [{key: result[key] for key in KEPT if key in result} for result in results]
    for i, result in enumerate(kept):
        result[HANDED] = files if i == 0 else None
    return kept


def encode(handoff: Handoff, results: list[Result]) -> HandedFiles:
    """Encode the writes of ``results`` into partial files beside their places.

    Raises
    ------
    NotWhole
        The results do not fill whole files.
    OSError
        The store is not there, or a file cannot be written; the files written so far
        are removed.
    """
    import zarr

    root = Path(handoff.path)
    group = zarr.open_group(str(root), mode="r", zarr_format=3, use_consolidated=False)
    arrays = variables_of(group)
    try:
        values, done = chunk_writes(arrays, handoff.layout, handoff.code_version, results)
    except ValueError as exc:  # a block the results do not cover
        raise NotWhole(str(exc)) from None
    for write in (*values, *done):
        whole_files(write.name, write.array.shape, file_shape(write.array), write.region)
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    partials: dict[str, str | None] = {}
    places: dict[str, list[str]] = {"values": [], "done": []}
    try:
        for part, writes in (("values", values), ("done", done)):
            for write in writes:
                for place, data in encoded_files(write).items():
                    places[part].append(place)
                    partial = None if data is None else f"{place}.{tag}.partial"
                    partials[place] = partial  # before the write: removed if it fails
                    if partial is not None:
                        (root / partial).parent.mkdir(parents=True, exist_ok=True)
                        (root / partial).write_bytes(data)
        planned = planned_entries([*values, *done])
    except BaseException:
        for partial in partials.values():
            if partial is not None:
                (root / partial).unlink(missing_ok=True)
        raise
    return HandedFiles(partials, places["values"], places["done"], planned)


def places_of(write: Write) -> list[str]:
    """The places (``NAME/c/...``) of the files ``write`` touches."""
    region = full_region(write.region, write.array.shape)
    return [
        f"{write.name}/{write.array.metadata.encode_chunk_key(coords)}"
        for coords, _, _ in split_by_file(region, file_shape(write.array))
    ]


def encoded_files(write: Write) -> dict[str, bytes | None]:
    """The bytes zarr writes for ``write`` in each file it touches (None: no file),
    encoded in memory with the metadata of the store's array: the same bytes as the
    store's own write of those whole files."""
    import zarr
    from zarr.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    contents = dict(write.array.metadata.to_buffer_dict(default_buffer_prototype()))
    array = zarr.open_array(MemoryStore(store_dict=contents), mode="r+", zarr_format=3)
    array[write.region] = write.values
    out: dict[str, bytes | None] = {}
    for place in places_of(write):
        data = contents.get(place.partition("/")[2])
        out[place] = None if data is None else data.to_bytes()
    return out


def whole_files(
    name: str, shape: tuple[int, ...], file: tuple[int, ...], region: tuple[Any, ...]
) -> None:
    """Check that ``region`` of array ``name`` (``shape``, files of ``file`` elements)
    covers every file it touches whole (a file at the array's end: up to its end).

    Raises
    ------
    NotWhole
        It covers part of a file: encoding that file alone would lose the rest.
    """
    bounds = full_region(region, shape)
    for coords, part, _ in split_by_file(bounds, file):
        for c, size, extent, s in zip(coords, file, shape, part, strict=True):
            if s.start != c * size or s.stop != min((c + 1) * size, extent):
                raise NotWhole(f"a write of {name} covers part of a file")


def expected_places(
    arrays: dict[str, Any], layout: Layout, results: list[Result]
) -> tuple[set[str], set[str]]:
    """The places of the values and of ``done`` that the chunks of ``results`` fill, as
    the driver plans them (:func:`ldpsim.pipeline.store.chunk_writes.placed_blocks`).

    Raises
    ------
    NotWhole
        Their blocks are not covered whole.
    """
    placed = placed_blocks(layout, arrays["done"].shape[-1], results)
    if not all(block.covered for block in placed):
        raise NotWhole("handed chunks that do not cover their write blocks")
    values: set[str] = set()
    done: set[str] = set()
    for (name, _, _), _, region in block_variables(arrays, layout, 0, placed):
        array = arrays[name]
        whole_files(name, array.shape, file_shape(array), region)
        write = Write(name, array, region, np.empty(0))
        (done if name == "done" else values).update(places_of(write))
    return values, done
