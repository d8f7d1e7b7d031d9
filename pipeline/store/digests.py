"""Digests of a store's data files, each bound to its array and place.

Zarr's CRC-32C of a chunk covers that chunk's bytes only: a chunk file moved to another
array or another position (a copy tool, a sync gone wrong, a hand edit) still decodes,
and its numbers are read as another variable's or another grid point's. So a store of
today's ldpsim records, for every file of every array, a SHA-256 of the file's bytes
seeded by the file's place (``lower/c/0/1/0/0/0``): :func:`file_digest`. A file that is
not the one written at its place, a file that appeared where none was written and a
file gone from where one was written are all found by reading the files' bytes, without
decoding them.

The digests are kept in manifests in the store's ``ldpsim/digests/`` folder, one per
*write block* (the grid points and replicates of a shard, :meth:`Layout.write_block`),
for every variable's files there, and one for the arrays the sweep determines
(coordinates and truths), written with them when a store is created or extended. A
write rewrites the manifests of the blocks it touches only: its cost does not grow with
the store.

A write is crash-safe. Before any file of a block changes, its manifest records the
regions about to be written with a digest of their values (:meth:`Digests.writing`);
after the files are written, the files' new digests replace that record. A file read
while its record is there (a run in progress, or one killed between the two steps) is
the one at its place when its digest is the recorded one, or when the regions decoded
from it have the recorded digests; anything else is damage. The next run settles such
records (:func:`settle`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.store.layout import read_journal

if TYPE_CHECKING:
    import zarr

#: Root attribute of a store whose files have digests: the version of their scheme.
#: Stores made before have none, and are checked as before (module docstring of
#: :mod:`ldpsim.pipeline.store.damage`).
DIGESTS_ATTR = "chunk_digests"
DIGESTS_VERSION = 1
#: Inside the store's ``ldpsim`` group: the manifests.
FOLDER = "digests"
#: The manifest of the arrays the sweep determines (written with the store's metadata).
DETERMINED = "determined.json"
#: The names of the manifests ldpsim writes: :data:`DETERMINED` and a write block's
#: (:func:`block_manifest`). Anything else in the folder is none: a sync tool's copy of a
#: manifest (``block-0-0 (conflicted copy 2026-12-02).json``,
#: ``block-0-0.sync-conflict-20261202-123456-ABCDEFG.json``), an older one perhaps,
#: would otherwise be merged into the digests and call the files of its block damaged.
MANIFEST_NAME = re.compile(r"(determined|block(-[0-9]+)+)\.json")
#: Suffixes of files a writer is still writing (zarr's, ldpsim's): not a store's files.
TEMPORARY = (".partial", ".tmp")
#: Times a reader reads the manifests again when a file does not match them: a run
#: writing the store meanwhile changes both, in that order.
REREADS = 5


def fingerprint(file: Path, array: zarr.Array) -> bytes | None:
    """What identifies the content of a data file of ``array``, read without decoding it:
    the CRC-32C that Zarr ends each of its chunks with, and a shard's index; None when
    there is no file (a folder in its place is none).

    A shard (Zarr v3's sharding codec, its index at the end or the start) is its chunks
    and an index of their offsets and sizes with a CRC-32C of its own: the fingerprint is
    the index and the last 4 bytes of every chunk it lists. A file of one chunk: its size
    and its last 4 bytes. A changed byte inside a chunk leaves its CRC as it was (Zarr
    finds it when it decodes the chunk); a file of other content has other CRCs.
    """
    try:
        handle = open(file, "rb")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):  # no file there
        return None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if array.shards is None:
            handle.seek(max(0, size - 4))
            return size.to_bytes(8, "little") + handle.read(4)
        chunks = math.prod(s // c for s, c in zip(array.shards, array.chunks, strict=True))
        index_size = 16 * chunks + 4  # (offset, size) as two uint64 per chunk, a CRC-32C
        at_end = _index_at_end(array)
        if size < index_size:
            return b"short:" + handle.read()
        handle.seek(size - index_size if at_end else 0)
        index = handle.read(index_size)
        parts = [index]
        for offset, nbytes in struct.iter_unpack("<QQ", index[:-4]):
            if offset == EMPTY_CHUNK and nbytes == EMPTY_CHUNK:
                continue
            if nbytes < 4 or offset + nbytes > size:
                return b"bad index:" + index
            handle.seek(offset + nbytes - 4)
            parts.append(handle.read(4))
        return b"".join(parts)


#: A shard index's entry for a chunk that is not stored (offset and size both).
EMPTY_CHUNK = 2**64 - 1


def _index_at_end(array: zarr.Array) -> bool:
    location = getattr(array.metadata.codecs[0], "index_location", "end")
    return getattr(location, "value", location) == "end"


def file_digest(place: str, identity: bytes | None) -> str | None:
    """SHA-256 (hex, its first 128 bits) of a file's place and :func:`fingerprint`; None
    for no file."""
    if identity is None:
        return None
    return hashlib.sha256(f"{place}\n".encode() + identity).hexdigest()[:32]


def place_digest(root: Path, place: str, array: zarr.Array) -> str | None:
    """The digest of the file at ``place`` (``NAME/c/...``) under ``root`` as it is now."""
    return file_digest(place, fingerprint(root / place, array))


def region_digest(place: str, region: tuple[slice, ...], values: np.ndarray) -> str:
    """CRC-32 (hex) of values written into ``region`` of the file at ``place``.

    The region (global indices of the array) and the data type are part of it: the same
    numbers elsewhere, or of another type, have another digest. Decoded values end with
    no checksum of their own, so a CRC suits them (a file's bytes would not: see
    :func:`fingerprint`); it costs about a millisecond a megabyte, on a write's path.
    """
    bounds = ",".join(f"{s.start}:{s.stop}" for s in region)
    crc = zlib.crc32(f"{place}\n{bounds}\n{values.dtype.str}\n".encode())
    crc = zlib.crc32(memoryview(np.ascontiguousarray(values)).cast("B"), crc)
    return f"{crc:08x}"


def file_shape(array: zarr.Array) -> tuple[int, ...]:
    """Elements of one file along each axis: a shard, or a chunk when unsharded."""
    return tuple(array.shards or array.chunks)


def array_files(path: Path, name: str, ndim: int) -> set[str]:
    """The data files of array ``name`` (of ``ndim`` >= 1 dimensions), as
    ``NAME/c/i/j/...``, from one listing of its folder.

    Only files at a chunk key's place count: ``ndim`` levels of decimal numbers below
    ``c``. Anything else there (a writer's temporary file, ending in one of
    :data:`TEMPORARY`; a ``.DS_Store`` that a file browser left; a backup copy) is no
    data file: Zarr never reads it, no manifest records it, and it is no damage.
    """
    return chunk_places(path, name, ndim)[0]


def chunk_places(path: Path, name: str, ndim: int) -> tuple[set[str], set[str]]:
    """The files and the folders at a chunk key's place of array ``name`` (of ``ndim``
    >= 1 dimensions), as ``NAME/c/i/j/...``, from one listing of its folder.

    The files are :func:`array_files`; a folder at such a place is damage: Zarr can
    neither read nor write the file there.
    """
    root = path / name / "c"
    files, folders = set(), set()
    for folder, subfolders, names in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        if depth < ndim - 1:
            subfolders[:] = [f for f in subfolders if _is_index(f)]
            continue
        rel = Path(folder).relative_to(path).as_posix()
        files.update(f"{rel}/{f}" for f in names if _is_index(f))
        folders.update(f"{rel}/{f}" for f in subfolders if _is_index(f))
        subfolders.clear()
    return files, folders


def _is_index(name: str) -> bool:
    """Whether a file or folder name is a chunk index (a decimal number, as Zarr writes)."""
    return name.isascii() and name.isdigit()


def has_digests(attrs: dict[str, Any]) -> bool:
    """Whether a store's root attributes say that its files have digests."""
    return attrs.get(DIGESTS_ATTR) == DIGESTS_VERSION


def block_manifest(array: zarr.Array, coords: tuple[int, ...]) -> str:
    """The manifest of the write block holding the file at ``coords`` of a replicate
    array: the file's position along the grid axes and 'rep'."""
    dims = list(array.metadata.dimension_names or ())
    rep = dims.index("rep")
    # The grid axes come first, then 'method' (some arrays), 'rep', the others.
    grid = [c for c, dim in zip(coords[:rep], dims[:rep], strict=True) if dim != "method"]
    return "block-" + "-".join(map(str, [*grid, coords[rep]])) + ".json"


def split_by_file(
    region: tuple[slice, ...], shape: tuple[int, ...]
) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
    """The parts of ``region`` (slices with start and stop) in each file of an array whose
    files hold ``shape`` elements: (file coordinates, the part's global slices, its
    slices inside the region)."""
    per_axis = []
    for bounds, step in zip(region, shape, strict=True):
        parts, start = [], bounds.start
        while start < bounds.stop:
            index = start // step
            stop = min(bounds.stop, (index + 1) * step)
            local = slice(start - bounds.start, stop - bounds.start)
            parts.append((index, slice(start, stop), local))
            start = stop
        per_axis.append(parts)
    for combination in itertools.product(*per_axis):
        yield (
            tuple(part[0] for part in combination),
            tuple(part[1] for part in combination),
            tuple(part[2] for part in combination),
        )


def full_region(region: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """``region`` (slices, some open-ended, fewer than the axes) with start and stop on
    every axis of an array of ``shape``."""
    region = tuple(region) + (slice(None),) * (len(shape) - len(region))
    out = []
    for bounds, size in zip(region, shape, strict=True):
        start, stop, step = bounds.indices(size)
        if step != 1:
            raise ValueError(f"a written region has unit steps, not {step}")
        out.append(slice(start, stop))
    return tuple(out)


class Manifests:
    """The manifests of a store's ``ldpsim/digests/`` folder, read and written whole."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.folder = self.path / "ldpsim" / FOLDER

    def read(self, name: str) -> dict[str, Any]:
        """One manifest (``{"files": {place: digest}, "writing": {place: [...]}}``).

        Raises
        ------
        ValueError
            It is not a manifest (no JSON object with a ``files`` object).
        """
        try:
            data = json.loads((self.folder / name).read_bytes())
        except FileNotFoundError:
            return {"files": {}}
        except (OSError, UnicodeDecodeError, RecursionError) as exc:  # or nested too deep
            raise ValueError(str(exc)) from None
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            raise ValueError("not a manifest of digests")
        if not isinstance(data.get("writing", {}), dict):
            raise ValueError("its 'writing' entry is not an object")
        return data

    def names(self) -> list[str]:
        """The manifests of the folder (:data:`MANIFEST_NAME`), sorted by name."""
        try:
            return sorted(n for n in os.listdir(self.folder) if MANIFEST_NAME.fullmatch(n))
        except FileNotFoundError:
            return []

    def write(self, name: str, manifest: dict[str, Any]) -> None:
        """Replace one manifest (a temp file, then a rename: readers see old or new)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / name
        temp = target.with_name(f"{name}.{os.getpid()}.tmp")
        body = {"files": dict(sorted(manifest["files"].items()))}
        if manifest.get("writing"):
            body["writing"] = manifest["writing"]
        try:
            temp.write_text(json.dumps(body, separators=(",", ":")))
            os.replace(temp, target)
        except OSError:
            temp.unlink(missing_ok=True)
            raise


def determined_names(root: Path) -> list[str]:
    """The arrays of the store at ``root`` that its sweep determines: those without a
    replicate axis (coordinates, truths) and the 'rep' coordinate itself."""
    out = []
    for entry in sorted(os.listdir(root)):
        try:
            metadata = json.loads((root / entry / "zarr.json").read_bytes())
        except (OSError, ValueError, RecursionError):
            continue
        if metadata.get("node_type") != "array":
            continue
        dims = metadata.get("dimension_names") or []
        if "rep" not in dims or list(dims) == ["rep"]:
            out.append(entry)
    return out


def determined_manifest(root: Path, names: Iterable[str], source: Path | None = None) -> bytes:
    """The content of the manifest of the arrays ``names`` (the determined arrays) whose
    files lie under ``root``; an array without files there is read from ``source`` (the
    store an extension's scratch copy stands for) where given."""
    import zarr

    files: dict[str, str | None] = {}
    for name in names:
        where = root
        if source is not None and not (root / name / "c").exists():
            where = source
        array = zarr.open_array(str(where / name), mode="r", zarr_format=3)
        for place in array_files(where, name, array.ndim):
            files[place] = place_digest(where, place, array)
    return json.dumps({"files": dict(sorted(files.items()))}, separators=(",", ":")).encode()


def write_determined(path: Path, names: Iterable[str]) -> None:
    """Record the digests of the determined arrays ``names`` as they are now in the store
    (after a run wrote them again from its sweep)."""
    manifests = Manifests(path)
    manifests.write(DETERMINED, json.loads(determined_manifest(path, names)))


@dataclass
class Write:
    """One region of one array about to be written: ``values`` into ``region``."""

    name: str
    array: zarr.Array
    region: tuple[Any, ...]
    values: np.ndarray


#: What a write records before it changes any file: manifest name -> the file's place ->
#: its regions about to be written, each ``[[[start, stop], ...], region digest]``.
Planned = dict[str, dict[str, list[list[Any]]]]


def planned_entries(writes: list[Write]) -> Planned:
    """The record of ``writes`` (:data:`Planned`): every region of every file they touch,
    with the digest of its values (:func:`region_digest`), under its block's manifest."""
    planned: Planned = {}
    for write in writes:
        region = full_region(write.region, write.array.shape)
        values = np.broadcast_to(np.asarray(write.values), tuple(s.stop - s.start for s in region))
        for coords, part, local in split_by_file(region, file_shape(write.array)):
            place = f"{write.name}/{write.array.metadata.encode_chunk_key(coords)}"
            entry = [[[s.start, s.stop] for s in part], region_digest(place, part, values[local])]
            manifest = block_manifest(write.array, coords)
            planned.setdefault(manifest, {}).setdefault(place, []).append(entry)
    return planned


@contextlib.contextmanager
def writing(path: Path, writes: list[Write]) -> Iterator[None]:
    """Record the writes about to be made, let the caller make them, then record the
    digests of the files they changed (:func:`recording` of :func:`planned_entries`)."""
    arrays = {write.name: write.array for write in writes}
    with recording(path, planned_entries(writes), arrays):
        yield


@contextlib.contextmanager
def recording(path: Path, planned: Planned, arrays: dict[str, zarr.Array]) -> Iterator[None]:
    """Record ``planned`` writes, let the caller make them, then record the digests of the
    files they changed. ``arrays``: the store's arrays by name (a place's first part).

    Before: each touched file's manifest gets, under ``writing``, every region of the
    file about to be written and the digest of its values (:func:`region_digest`).
    After the caller's block: each touched file's digest (:func:`file_digest`; None if
    the write left no file: zarr deletes a shard of fill values only) and no ``writing``.
    If the block raises, the record stays, and the next run settles it (:func:`settle`).
    """
    manifests = Manifests(path)
    contents = {}
    for name, places in planned.items():
        manifest = manifests.read(name)
        manifest.setdefault("writing", {}).update(places)
        manifests.write(name, manifest)
        contents[name] = manifest
    yield
    for name, places in planned.items():
        manifest = contents[name]
        for place in places:
            array = arrays[place.partition("/")[0]]
            manifest["files"][place] = place_digest(path, place, array)
            manifest["writing"].pop(place, None)
        manifests.write(name, manifest)


def _in_flight_matches(array: zarr.Array, place: str, entries: list[list[Any]]) -> bool:
    """Whether the file at ``place`` holds what an interrupted (or running) write put
    into its regions: every recorded region decodes to values with the recorded digest."""
    try:
        for bounds, digest in entries:
            region = tuple(slice(int(start), int(stop)) for start, stop in bounds)
            if region_digest(place, region, np.asarray(array[region])) != digest:
                return False
    except Exception:  # a codec's own exception (checksum, zstd), a malformed entry
        return False
    return True


@dataclass(frozen=True)
class FileDamage:
    """Files of a store that are not the ones its manifests record.

    ``missing``: recorded, absent. ``corrupt``: present with another digest, present
    where none was written, or unreadable. ``manifests``: manifests that cannot be read
    (every file they record, and every file of their block, counts as corrupt).
    """

    missing: tuple[str, ...] = ()
    corrupt: tuple[str, ...] = ()
    manifests: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.corrupt or self.manifests)


def _expected(manifests: Manifests) -> tuple[dict, dict, list[str]]:
    """All manifests merged: place -> digest, place -> writing entries; unreadable ones."""
    files: dict[str, str | None] = {}
    writing: dict[str, list] = {}
    bad = []
    for name in manifests.names():
        try:
            manifest = manifests.read(name)
        except ValueError:
            bad.append(name)
            continue
        files.update(manifest["files"])
        writing.update(manifest.get("writing", {}))
    return files, writing, bad


def check_files(path: str | Path, arrays: dict[str, zarr.Array]) -> FileDamage:
    """The files of ``arrays`` (name -> array of the store at ``path``) that are not the
    ones the store's manifests record.

    Reads every file's bytes (not decoded), and decodes only the regions of files that a
    write in progress or an interrupted one recorded (:func:`writing`). A file that does
    not match is checked again once the manifests are read again, up to
    :data:`REREADS` times while they change: a run writing meanwhile changes a file and
    then its manifest.
    """
    path = Path(path)
    manifests = Manifests(path)
    expected, writing, bad = _expected(manifests)
    present = set().union(*(array_files(path, name, arrays[name].ndim) for name in arrays))
    # An extension being committed, or one whose run was killed committing it: the
    # places its journal renames into are new files of the determined arrays (outside
    # the old layout that readers read) and the manifest that records them is renamed
    # among them, so until the renames end either may be there without the other. The
    # run that completes the renames checks them.
    renaming = _journal_targets(path)
    places = sorted((present | {p for p in expected if p.split("/", 1)[0] in arrays}) - renaming)

    def mismatched(places: list[str]) -> list[str]:
        out = []
        for place in places:
            if place_digest(path, place, arrays[place.split("/", 1)[0]]) == expected.get(place):
                continue
            entries = writing.get(place)
            if entries and _in_flight_matches(arrays[place.split("/", 1)[0]], place, entries):
                continue
            out.append(place)
        return out

    wrong = mismatched(places)
    for _ in range(REREADS):
        if not wrong:
            break
        again = _expected(manifests)
        if again[:2] == (expected, writing):
            break
        expected, writing, bad = again
        time.sleep(0.05)
        wrong = mismatched(wrong)
    missing = tuple(p for p in wrong if not (path / p).is_file())
    corrupt = tuple(p for p in wrong if (path / p).is_file())
    return FileDamage(missing=missing, corrupt=corrupt, manifests=tuple(bad))


def _journal_targets(path: Path) -> set[str]:
    """The places (``NAME/c/...``) that an extension's journal renames files into; empty
    when no extension is being committed (or its journal cannot be read: the run that
    completes it says so)."""
    try:
        return {target for _, target in read_journal(path) if "/c/" in target}
    except (OSError, ValueError):
        return set()


def settle(path: str | Path, arrays: dict[str, zarr.Array]) -> int:
    """Complete the records of writes that a killed run left (called holding the lock).

    A file whose recorded regions hold the recorded values gets its digest; one that
    holds neither those nor its old digest is left as it is, for the damage check to
    report and the run to repair. Returns the files settled.
    """
    path = Path(path)
    manifests = Manifests(path)
    count = 0
    for name in manifests.names():
        try:
            manifest = manifests.read(name)
        except ValueError:
            continue  # damage: reported and repaired by the run
        writing = manifest.get("writing") or {}
        if not writing:
            continue
        for place, entries in list(writing.items()):
            array = arrays.get(place.split("/", 1)[0])
            if array is None:
                continue
            digest = place_digest(path, place, array)
            if digest == manifest["files"].get(place) or (
                array is not None and _in_flight_matches(array, place, entries)
            ):
                manifest["files"][place] = digest
                del writing[place]
                count += 1
        manifests.write(name, manifest)
    return count


def forget(path: str | Path, places: Iterable[str], unreadable: Iterable[str] = ()) -> None:
    """Record that the files at ``places`` were deleted (a run repairing them), and
    replace the manifests ``unreadable`` by empty ones (every file they recorded is
    deleted by the repair)."""
    manifests = Manifests(path)
    places = set(places)
    for name in manifests.names():
        if name in unreadable:
            manifests.write(name, {"files": {}})
            continue
        try:
            manifest = manifests.read(name)
        except ValueError:
            continue  # found by the next check, and replaced by its repair
        changed = False
        for place in places:
            if place in manifest["files"] or place in manifest.get("writing", {}):
                manifest["files"][place] = None
                manifest.get("writing", {}).pop(place, None)
                changed = True
        if changed:
            manifests.write(name, manifest)
