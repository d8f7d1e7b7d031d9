"""A store's own facts checked: a hash of its metadata, its layout attributes, and the
arrays its sweep determines (coordinates, truths) compared with their recomputation.

Only the replicate arrays hold results that a run cannot know before it computes them;
their chunks carry a CRC-32C each (:mod:`ldpsim.pipeline.store.damage`). Everything else in a
store follows from its root attributes: the coordinates from the sweep's grid, methods,
replicates and checkpoints, ``truth`` and ``pseudo_truth`` from its models. The root
``zarr.json`` (the attributes and the consolidated copy of every array's metadata)
records the SHA-256 of its own content (:data:`DIGEST_ATTR`), so that a changed bit
there is found, and the determined arrays are recomputed and compared, so that a
changed bit in them is found in stores made before they had checksums too.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.errors import InputError, StoreDamage, os_error_text

if TYPE_CHECKING:
    from ldpsim.pipeline.store.layout import Layout
    from ldpsim.pipeline.sweep import Sweep

#: Root attribute: the SHA-256 (hex) of the root ``zarr.json``'s attributes (but this
#: one) and consolidated metadata, as canonical JSON (:func:`metadata_digest`).
DIGEST_ATTR = "metadata_sha256"
#: Every root attribute an ldpsim store holds. A store sealed with a digest may hold no
#: other (a changed bit in a name changes the digest anyway); an older store without
#: one holds none other, so that a changed bit in the digest's own name is found.
KNOWN_ATTRS = frozenset(
    {
        "title",
        "description",
        "sweep",
        "identity",
        "level",
        "rep_chunk",
        "shard_reps",
        "shard_grid",
        "chunk_reps",
        "versions",
        "streams_version",
        "streams_fingerprint",
        "gpu_streams",
        "units",
        "chunk_digests",
        "created",
        "conventions",
        DIGEST_ATTR,
    }
)
#: The keys of a Zarr v3 group's ``zarr.json`` (the root of a store).
ROOT_KEYS = frozenset({"zarr_format", "node_type", "attributes", "consolidated_metadata"})
#: How a message tells what to do with damaged metadata: a run cannot rebuild them.
METADATA_REMEDY = "Restore it from a copy, or run the sweep into a new --store path."
#: Relative difference allowed between a stored truth and its recomputation.
TRUTH_RTOL = 1e-9
#: How a message tells what to do with a determined array that differs.
DETERMINED_REMEDY = "`ldpsim run` writes it again from the store's sweep"


def metadata_digest(root: dict[str, Any]) -> str:
    """SHA-256 (hex) of a root ``zarr.json``'s content, but :data:`DIGEST_ATTR`.

    Canonical JSON (sorted keys, no spaces) of the attributes and the consolidated
    metadata: the digest follows what the file means, not how it is spaced.
    """
    attributes = {k: v for k, v in root.get("attributes", {}).items() if k != DIGEST_ATTR}
    body = {"attributes": attributes, "consolidated": root.get("consolidated_metadata")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(path: str | Path) -> None:
    """Record the digest of the root ``zarr.json`` in it (after its consolidation).

    Written through a temp file and a rename: the file is whole, old or new.
    """
    target = Path(path) / "zarr.json"
    root = json.loads(target.read_text())
    root.setdefault("attributes", {})[DIGEST_ATTR] = metadata_digest(root)
    temp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(json.dumps(root, indent=2, ensure_ascii=False))
        os.replace(temp, target)
    except OSError:
        temp.unlink(missing_ok=True)
        raise


def is_sealed(path: str | Path) -> bool:
    """Whether the root ``zarr.json`` records its digest (stores of ldpsim <= 0.2 do not)."""
    root = json.loads((Path(path) / "zarr.json").read_text())
    return DIGEST_ATTR in root.get("attributes", {})


def damaged(
    path: str | Path, part: str, reason: object, remedy: str = METADATA_REMEDY
) -> StoreDamage:
    """The one-line error of a damaged store (exit code 4): what, why, and what to do."""
    text = str(reason).splitlines()[0] if str(reason) else type(reason).__name__
    return StoreDamage(
        f"The store {str(path)!r} is damaged: {part} cannot be read ({text}); nothing was "
        f"changed. {remedy}"
    )


def read_root(path: str | Path) -> dict[str, Any]:
    """The root ``zarr.json`` of a store, parsed and checked against its digest.

    Raises
    ------
    StoreDamage
        The file is no JSON object, holds a key a Zarr group never has, its attributes
        do not match their recorded digest, or (a store without one) hold an attribute
        that ldpsim never writes.
    """
    file = Path(path) / "zarr.json"
    try:
        text = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{str(file)!r} cannot be read: {os_error_text(exc, file)}.") from None
    try:
        root = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # nested too deep
        raise damaged(path, "zarr.json", f"not JSON: {exc}") from None
    if not isinstance(root, dict) or not isinstance(root.get("attributes", {}), dict):
        raise damaged(path, "zarr.json", "not a JSON object with attributes")
    attributes = root.get("attributes", {})
    ours = "sweep" in attributes or b'"sweep"' in text  # a changed bit in "attributes"
    if not ours:  # not an ldpsim store (another Zarr node): the caller says so
        return root
    unknown = sorted(set(root) - ROOT_KEYS)
    if unknown:
        raise damaged(path, "zarr.json", f"unknown key(s) {', '.join(unknown)}")
    recorded = attributes.get(DIGEST_ATTR)
    if recorded is None:
        strange = sorted(set(attributes) - KNOWN_ATTRS)
        if strange:
            raise damaged(
                path, "zarr.json", f"unknown attribute(s) {', '.join(map(repr, strange))}"
            )
    elif recorded != metadata_digest(root):
        raise damaged(path, "zarr.json", f"its content does not match its recorded {DIGEST_ATTR}")
    return root


def has_consolidated_metadata(path: Path) -> bool:
    """Whether the root ``zarr.json`` holds a consolidated copy of every node's metadata."""
    root = json.loads((path / "zarr.json").read_text())
    return bool(root.get("consolidated_metadata"))


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_layout_attrs(path: str | Path, attrs: dict[str, Any], axes: int) -> None:
    """Refuse layout attributes that no ldpsim writes (a chunk size of 0, -5 or "x").

    ``rep_chunk`` (replicates of a task) is a positive integer; in a sharded store,
    ``chunk_reps`` is a multiple of it, ``shard_reps`` a multiple of ``chunk_reps``,
    and ``shard_grid`` holds a positive integer per grid axis (``axes`` of them).

    Raises
    ------
    StoreDamage
        Naming the attribute and what it must be.
    """

    def bad(name: str, allowed: str) -> StoreDamage:
        return damaged(
            path, "zarr.json", f"attribute {name!r} is {attrs.get(name)!r}, not {allowed}"
        )

    if not _positive_int(attrs.get("rep_chunk")):
        raise bad("rep_chunk", "a positive integer")
    sharded = [name for name in ("shard_reps", "shard_grid", "chunk_reps") if name in attrs]
    if not sharded:
        return
    if len(sharded) < 3:
        missing = {"shard_reps", "shard_grid", "chunk_reps"} - set(sharded)
        raise bad(sorted(missing)[0], "present beside the other shard attributes")
    if not _positive_int(attrs["chunk_reps"]) or attrs["chunk_reps"] % attrs["rep_chunk"]:
        raise bad("chunk_reps", "a positive multiple of rep_chunk")
    if not _positive_int(attrs["shard_reps"]) or attrs["shard_reps"] % attrs["chunk_reps"]:
        raise bad("shard_reps", "a positive multiple of chunk_reps")
    grid = attrs["shard_grid"]
    if not (isinstance(grid, list) and len(grid) == axes and all(map(_positive_int, grid))):
        raise bad("shard_grid", f"a list of {axes} positive integer(s), one per grid axis")


def check_array_layout(
    path: str | Path,
    attrs: dict[str, Any],
    axes: int,
    chunks: tuple[int, ...],
    shards: tuple[int, ...] | None,
) -> None:
    """Refuse shard attributes that disagree with ``done``'s own chunks and shards.

    ``chunks`` and ``shards`` are the ``done`` array's (zarr's ``chunks`` and
    ``shards``; None unsharded): a chunk holds ``chunk_reps`` replicates of
    ``shard_grid`` grid points, in a shard of ``shard_reps``. A run writes whole shards
    by these numbers. A store without shards (ldpsim <= 0.2) is written a chunk at a
    time through zarr, which merges a write that covers part of a chunk: only its
    ``rep_chunk`` is checked (:func:`check_layout_attrs`). ``axes``: grid axes.
    """
    if "shard_reps" not in attrs and shards is None:
        return
    expected = (*attrs.get("shard_grid", ()), attrs.get("chunk_reps"))
    expected_shards = (*attrs.get("shard_grid", ()), attrs.get("shard_reps"))
    if (
        len(chunks) != axes + 1
        or tuple(chunks) != expected
        or tuple(shards or ()) != expected_shards
    ):
        stated = ", ".join(
            f"{name} {attrs[name]}"
            for name in ("rep_chunk", "chunk_reps", "shard_reps", "shard_grid")
            if name in attrs
        )
        raise damaged(
            path,
            "zarr.json",
            f"its layout attributes ({stated}) disagree with done/zarr.json (chunks "
            f"{list(chunks)}, shards {list(shards or ())})",
        )


def determined_arrays(sweep: Sweep, layout: Layout) -> dict[str, np.ndarray]:
    """The arrays of a store that its sweep determines, as a run writes them.

    The grid axes' coordinates, ``method``, ``rep``, ``coord``, ``checkpoint`` (a
    store with checkpoints), ``truth`` and ``pseudo_truth``.
    """
    from ldpsim.pipeline.store.layout import coord_array, truth_array

    out = {axis: coord_array(axis, layout.axis_values[axis]) for axis in layout.axes}
    out["method"] = np.array(layout.methods, dtype=object)
    out["rep"] = np.arange(layout.replicates, dtype=np.int64)
    out["coord"] = np.arange(layout.d, dtype=np.int64)
    if layout.checkpoints is not None:
        out["checkpoint"] = np.array(layout.checkpoints, dtype=np.int64)
    out["truth"] = truth_array(sweep, layout)
    out["pseudo_truth"] = truth_array(sweep, layout, pseudo=True)
    return out


def _same(stored: np.ndarray, expected: np.ndarray, rtol: float = 0.0) -> bool:
    """Whether a stored array holds the expected values: exactly, or for a truth to
    ``rtol`` (relative; NaN where NaN)."""
    if stored.shape != expected.shape:
        return False
    if expected.dtype == object:
        return [str(v) for v in stored.ravel()] == [str(v) for v in expected.ravel()]
    if stored.dtype.kind not in "iuf":
        return False
    if expected.dtype.kind != "f":
        return bool(np.array_equal(stored, expected))
    # A truth computed numerically (a clipped model's pseudo-truth) may differ in its
    # last bits between machines and library versions; a changed bit that matters is
    # far larger than TRUTH_RTOL (and a new store's CRC-32C finds any changed bit).
    return bool(np.allclose(stored, expected, rtol=rtol, atol=0.0, equal_nan=True))


#: The names of the determined arrays besides the grid axes' coordinates.
DETERMINED_NAMES = ("method", "rep", "coord", "checkpoint", "truth", "pseudo_truth")


def _checksummed(array: Any) -> bool:
    """Whether every chunk of a zarr array ends with a CRC-32C (a store of today's)."""
    return any(type(codec).__name__ == "Crc32cCodec" for codec in array.compressors)


def _chunk_files(path: str | Path, name: str, array: Any) -> Iterator[Path]:
    """The path of each chunk's file of the (unsharded) array ``name``, there or not."""
    counts = [-(-size // chunk) for size, chunk in zip(array.shape, array.chunks, strict=True)]
    for coords in itertools.product(*(range(count) for count in counts)):
        yield Path(path) / name / array.metadata.encode_chunk_key(coords)


def _every_chunk_stored(path: str | Path, name: str, array: Any) -> bool:
    """Whether every chunk of the (unsharded) array ``name`` has its file."""
    return all(file.is_file() for file in _chunk_files(path, name, array))


#: numcodecs' vlen-utf8 encoding: a chunk starts with its count of strings (uint32 LE).
VLEN_COUNT_BYTES = 4


def _strings_fit(path: str | Path, name: str, array: Any) -> bool:
    """Whether each chunk file of ``array`` (``name``), if it holds vlen-utf8 strings
    without a checksum (a store made before they had one), declares as many strings as
    a chunk holds.

    zarr's vlen-utf8 decoder allocates the declared count before it reads a string: a
    flipped bit in that count (bit 4 of byte 12 of an old store's ``method`` file made
    it 2**28 + 4) cost 2 GB and 8 CPU-seconds before the decoder failed. A checksummed
    array, another serializer, or a compressor other than zstd (the old layout's) is
    left to the decoder.
    """
    if type(array.serializer).__name__ != "VLenUTF8Codec" or _checksummed(array):
        return True
    if any(type(codec).__name__ != "ZstdCodec" for codec in array.compressors):
        return True
    from numcodecs import Zstd

    per_chunk = int(np.prod(array.chunks))
    for file in _chunk_files(path, name, array):
        if file.is_file():
            head = bytes(Zstd().decode(file.read_bytes()))[:VLEN_COUNT_BYTES]
            if int.from_bytes(head, "little") != per_chunk:
                return False
    return True


def determined_damage(
    path: str | Path,
    sweep: Sweep,
    determined: Callable[[], tuple[Sweep, Layout]],
    *,
    recompute: bool = True,
) -> tuple[str, ...]:
    """The determined arrays whose stored values differ from their recomputation.

    An array that cannot be decoded (a CRC-32C that does not match, a truncated file)
    differs too. Arrays a store lacks (``pseudo_truth`` in a store older than it) are
    not compared: the next run adds them. Without ``recompute``, arrays that carry a
    checksum are only decoded (which checks it): recomputing the truths needs the
    models, a quarter of a second of imports for a command that only reads; arrays
    without one (a store made before they had it) are recomputed all the same.
    ``sweep`` (the store's, as read) names the grid axes; ``determined`` is called only
    when the arrays are recomputed, for the sweep normalized for that and the store's
    layout (normalizing imports every model, mechanism and method).
    """
    import zarr

    # As every reader: the consolidated metadata, which an extension being committed
    # replaces last (the arrays' own are a mix until then).
    consolidated = has_consolidated_metadata(Path(path))
    group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=consolidated)
    present = set(group.array_keys())
    names = [n for n in (*sweep.grid, *DETERMINED_NAMES) if n in present]
    out, stored = [], {}
    for name in names:
        try:
            array = group[name]
            if not _strings_fit(path, name, array):
                raise ValueError(f"a chunk of {name} declares another count of strings")
            stored[name] = np.asarray(array[...])
        except Exception:  # a codec's own exception (checksum: ValueError; zstd: RuntimeError)
            out.append(name)
    # Zarr reads a missing chunk file as the fill value, checksum or not: a store of
    # today's has every chunk of these arrays written (write_empty_chunks), so one
    # that lacks a file is recomputed.
    whole = all(_checksummed(group[n]) and _every_chunk_stored(path, n, group[n]) for n in names)
    if recompute or not whole:
        expected = determined_arrays(*determined())
        for name, values in stored.items():
            rtol = TRUTH_RTOL if name in ("truth", "pseudo_truth") else 0.0
            if name not in expected or not _same(values, expected[name], rtol):
                out.append(name)
    return tuple(n for n in names if n in out)


def rewrite_determined(
    path: str | Path, sweep: Sweep, layout: Layout, names: tuple[str, ...]
) -> None:
    """Write the determined arrays ``names`` again from ``sweep`` (a run, under the lock).

    The whole array at once: no damaged chunk is read.
    """
    import zarr

    group = zarr.open_group(str(path), mode="r+", zarr_format=3, use_consolidated=False)
    arrays = determined_arrays(sweep, layout)
    with zarr.config.set({"array.write_empty_chunks": True}):  # every chunk has its file
        for name in names:
            group[name][...] = arrays[name]
