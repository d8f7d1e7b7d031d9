"""Damage to a store's finished replicates (data files missing, or failing to decode) and
to the arrays its sweep determines (coordinates and truths that differ from their
recomputation)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from ldpsim.pipeline.errors import InputError, StoreDamage
from ldpsim.pipeline.store.code_identity import register_calls, unregistered_units
from ldpsim.pipeline.store.digests import (
    FileDamage,
    Write,
    check_files,
    chunk_places,
    determined_names,
    file_shape,
    forget,
    has_digests,
    write_determined,
    writing,
)
from ldpsim.pipeline.store.integrity import (
    DETERMINED_REMEDY,
    determined_damage,
    rewrite_determined,
)
from ldpsim.pipeline.store.layout import Layout
from ldpsim.pipeline.store.pending import has_added, pending
from ldpsim.pipeline.store.reading import (
    during_commits,
    open_arrays,
    read_attrs,
    read_sweep,
    replicate_arrays,
    stored_layout,
)
from ldpsim.pipeline.sweep import Sweep

#: Variables holding a value other than their fill value for every finished replicate:
#: the file (a shard; a chunk in a store of ldpsim <= 0.2) holding a finished replicate
#: must exist. The compute time of a replicate is never NaN.
ALWAYS_WRITTEN = ("done", "seconds")
#: Variables holding a value for every finished replicate in which some interval method
#: did not fail (its bounds are finite, and so is theta_bar). The others are legitimately
#: absent where they hold only their fill value: ``failed``, ``method_failed`` and
#: ``job_id`` mostly, and the variables added to a store of an older ldpsim, NaN for the
#: replicates done before.
WRITTEN_WITH_BOUNDS = ("estimate", "lower", "upper")
#: How a command's message tells what to do.
REMEDY = "`ldpsim run` recomputes them"


#: Arrays whose missing file's replicates are counted whole, finished or not: a missing
#: done file reads as not done, so which of its replicates were finished is unknown.
WHOLE_WHEN_MISSING = ("done",)
#: Arrays whose corrupt file's replicates are counted whole: what a done or failed file
#: held is unknown, and so is what an added method's method_seconds (its done flags)
#: vouched for.
WHOLE_WHEN_CORRUPT = ("done", "failed", "method_seconds")


def _array(key: str) -> str:
    """The array of a data file's key (``done/c/0/0`` -> ``done``)."""
    return key.split("/", 1)[0]


@dataclass(frozen=True)
class Damage:
    """Damaged files of a store and the replicates they held.

    ``missing``: files that a finished replicate's data should be in (relative to the
    store, e.g. ``lower/c/0/0/0/0/0``), and every data file's place that a folder
    holds (finished or not: Zarr cannot write the file there either); ``corrupt``:
    files that cannot be decoded (a checksum mismatch, a truncated file).
    ``replicates`` (grid..., rep): the finished replicates they held, and every
    replicate a corrupt ``done`` or ``failed`` file covers (what they held is unknown).
    """

    missing: tuple[str, ...]
    corrupt: tuple[str, ...]
    replicates: np.ndarray
    #: Arrays that the sweep determines (coordinates, truths) whose stored values differ
    #: from their recomputation, or cannot be decoded (:mod:`ldpsim.pipeline.store.integrity`),
    #: or whose files are not the ones the store recorded (:mod:`ldpsim.pipeline.store.digests`).
    determined: tuple[str, ...] = ()
    #: Manifests of digests that cannot be read (every file they vouched for is corrupt).
    manifests: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing or self.corrupt or self.determined or self.manifests)

    def describe(self, remedy: str = REMEDY) -> str:
        """One line: what is damaged, how many replicates it held, then ``remedy``."""
        parts = []
        manifests = tuple(f"ldpsim/digests/{name}" for name in self.manifests)
        for files, what in (
            (self.missing, "missing"),
            (self.corrupt, "corrupt or out of place"),
            (manifests, "cannot be read"),
        ):
            if files:
                shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if files[3:] else "")
                kind = "digest" if files is manifests else "data"
                parts.append(f"{len(files)} {kind} file(s) {what} ({shown})")
        line = "damaged: "
        if self.determined:
            line += (
                f"the stored values of {', '.join(self.determined)} differ from what the "
                f"store's sweep determines ({DETERMINED_REMEDY})"
            )
            if not parts:
                return line
            line += "; "
        count = int(self.replicates.sum())
        # Where what a file held is unknown, every replicate of its region is counted,
        # finished or not (_find_damage): an upper bound.
        whole = any(_array(f) in WHOLE_WHEN_MISSING for f in self.missing) or any(
            _array(f) in WHOLE_WHEN_CORRUPT for f in self.corrupt
        )
        held = f"up to {count}" if whole else f"{count}"
        return f"{line}{'; '.join(parts)}; they held {held} finished replicate(s): {remedy}"


def _file_coords(array: zarr.Array) -> Iterator[tuple[int, ...]]:
    counts = (math.ceil(s / c) for s, c in zip(array.shape, file_shape(array), strict=True))
    return itertools.product(*(range(count) for count in counts))


def _region(array: zarr.Array, coords: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(
        slice(i * c, min((i + 1) * c, s))
        for i, c, s in zip(coords, file_shape(array), array.shape, strict=True)
    )


def _replicate_region(array: zarr.Array, coords: tuple[int, ...], grid: int) -> tuple[slice, ...]:
    """The (grid..., rep) part of the region of the file at ``coords``."""
    dims = list(array.metadata.dimension_names or ())
    region = _region(array, coords)
    return (*region[:grid], region[dims.index("rep")])


def _read(array: zarr.Array, name: str, corrupt: dict[str, tuple[slice, ...]], grid: int):
    """The whole array; a file that cannot be decoded reads as the fill value and is
    added to ``corrupt`` (key -> its (grid..., rep) region)."""
    try:
        return np.asarray(array[...])
    except Exception:  # a codec's own exception (checksum: ValueError; zstd: RuntimeError)
        pass
    out = np.full(array.shape, array.fill_value, dtype=array.dtype)
    for coords in _file_coords(array):
        region = _region(array, coords)
        try:
            out[region] = array[region]
        except Exception:
            key = f"{name}/{array.metadata.encode_chunk_key(coords)}"
            corrupt[key] = _replicate_region(array, coords, grid)
    return out


def _verify(array: zarr.Array, name: str, corrupt: dict[str, tuple[slice, ...]], grid: int):
    """Decode every file of ``array``; add those that fail to ``corrupt``."""
    for coords in _file_coords(array):
        try:
            array[_region(array, coords)]
        except Exception:  # a codec's own exception (checksum: ValueError; zstd: RuntimeError)
            key = f"{name}/{array.metadata.encode_chunk_key(coords)}"
            corrupt[key] = _replicate_region(array, coords, grid)


def find_damage(path: str | Path, *, verify: bool = True, recompute: bool = True) -> Damage:
    """The store's damaged data files and the finished replicates they held.

    In a store whose files have digests (:mod:`ldpsim.pipeline.store.digests`), every file of
    every array is compared with the digest recorded for its place (its chunks'
    checksums and its index, read without decoding): a file from another array or
    place, a file gone or one that appeared are found. In every store, ``done``,
    ``method_failed`` and an added method's ``method_seconds`` are decoded, and the data
    files of the variables that every finished replicate writes (:data:`ALWAYS_WRITTEN`,
    :data:`WRITTEN_WITH_BOUNDS`) are listed: a file that should hold a finished replicate
    and does not exist is missing (Zarr would read the fill value, silently). With
    ``verify``, every variable with a replicate axis is decoded too, a file at a time: a
    chunk whose checksum does not match (Zarr's CRC-32C per chunk) or that does not
    decode makes its file corrupt.

    Parameters
    ----------
    path : path
        An ldpsim store whose metadata are checked
        (:func:`ldpsim.pipeline.store.reading.check_store`).
    verify : bool, default True
        Decode every data file (its chunks' checksums checked: a changed byte).
    recompute : bool, default True
        Recompute the arrays the sweep determines (coordinates, truths) and compare;
        False: compare their digests, or in a store without them decode those that
        carry a checksum (:func:`ldpsim.pipeline.store.integrity.determined_damage`).

    Returns
    -------
    Damage
        False when nothing is damaged.
    """
    return during_commits(path, lambda: _find_damage(Path(path), verify, recompute))


def _place_coords(place: str) -> tuple[int, ...]:
    """The file coordinates of a data file's place (``lower/c/0/1/0/0/0``)."""
    return tuple(int(part) for part in place.split("/")[2:])


def _find_damage(path: Path, verify: bool, recompute: bool) -> Damage:
    attrs = read_attrs(path)
    digested = has_digests(attrs)
    group = open_arrays(path)
    arrays = replicate_arrays(path, group)
    grid = len(arrays["done"].shape) - 1
    corrupt: dict[str, tuple[slice, ...]] = {}
    done = _read(arrays["done"], "done", corrupt, grid).astype(bool)
    method_failed = _read(arrays["method_failed"], "method_failed", corrupt, grid)
    seconds = None
    if "method_seconds" in arrays and has_added(arrays):  # the added methods' done flags
        seconds = _read(arrays["method_seconds"], "method_seconds", corrupt, grid)
    if verify:  # a file at a time: a shard is about 2 MB decoded, a variable may be GBs.
        read = ("done", "method_failed", *(() if seconds is None else ("method_seconds",)))
        for name, array in arrays.items():
            if name not in read:
                _verify(array, name, corrupt, grid)
    files = check_files(path, group) if digested else FileDamage()
    missing: dict[str, tuple[slice, ...]] = {}
    determined_files = set()
    for place in (*files.missing, *files.corrupt):
        name = place.split("/", 1)[0]
        if name not in arrays:
            determined_files.add(name)
            continue
        region = _replicate_region(arrays[name], _place_coords(place), grid)
        (missing if place in files.missing else corrupt)[place] = region
    # (grid..., method, rep[, checkpoint]): some method has bounds at some checkpoint.
    bounded = ~method_failed.reshape(*method_failed.shape[: grid + 2], -1).all(axis=-1)
    # Per method: the finished replicates that hold its values; a method added to the
    # store holds none until its method_seconds is written (ldpsim.pipeline.compute.added_methods).
    holding = np.repeat(np.expand_dims(done, grid), bounded.shape[grid], axis=grid)
    if seconds is not None:
        first, waiting = pending(arrays, done, seconds)
        holding[(slice(None),) * grid + (slice(first, None),)] &= ~waiting
    holding &= bounded
    with_bounds = holding.any(axis=grid)
    # Each array's folder listed once: its data files and the folders at a file's place.
    listed = {name: chunk_places(path, name, array.ndim) for name, array in arrays.items()}
    for name in (*ALWAYS_WRITTEN, *WRITTEN_WITH_BOUNDS):
        array = arrays[name]
        dims = list(array.metadata.dimension_names or ())
        if name in ALWAYS_WRITTEN or "method" not in dims:
            held = done if name in ALWAYS_WRITTEN else with_bounds
            missing.update(_missing_files(listed[name][0], name, array, held, grid))
            continue
        # A file spans the methods the store was made with, or some added after.
        step = file_shape(array)[dims.index("method")]
        for column, start in enumerate(range(0, holding.shape[grid], step)):
            held = holding[(slice(None),) * grid + (slice(start, start + step),)].any(axis=grid)
            missing.update(_missing_files(listed[name][0], name, array, held, grid, column))
    # A folder where a data file belongs, whether a finished replicate's or not: Zarr can
    # neither read nor write the file there (the repair removes an empty one).
    for name, array in arrays.items():
        counts = [math.ceil(s / f) for s, f in zip(array.shape, file_shape(array), strict=True)]
        for place in listed[name][1]:
            coords = _place_coords(place)
            if all(i < count for i, count in zip(coords, counts, strict=True)):
                missing.setdefault(place, _replicate_region(array, coords, grid))
    replicates = np.zeros(done.shape, dtype=bool)
    for key, region in missing.items():
        replicates[region] |= True if _array(key) in WHOLE_WHEN_MISSING else done[region]
    for key, region in corrupt.items():
        replicates[region] |= True if _array(key) in WHOLE_WHEN_CORRUPT else done[region]
    for key in corrupt:
        missing.pop(key, None)
    # A store that a run created records its sweep's identity; a Dataset saved by hand
    # (with made-up truths) does not, and its arrays are not compared.
    # Decoded (a changed byte) or recomputed; a reader of a store with digests skips
    # them (verify False): it decodes them when it reads them, which names a damaged one.
    if "identity" in attrs and (verify or recompute or not digested):
        # The sweep as read names the arrays; it is normalized (which imports every unit)
        # only where they are computed again, never for a check of their checksums.
        recorded = read_sweep(path)

        def normalized() -> tuple[Sweep, Layout]:
            sweep, layout = _determined_by(path, attrs, recorded)
            return sweep, layout()

        found = determined_damage(path, recorded, normalized, recompute=recompute)
        determined = tuple(sorted(determined_files | set(found)))
    else:
        determined = tuple(sorted(determined_files))
    return Damage(
        tuple(sorted(missing)),
        tuple(sorted(corrupt)),
        replicates,
        determined,
        files.manifests,
    )


def _determined_by(
    path: Path, attrs: dict, recorded: Sweep | None = None
) -> tuple[Sweep, Callable[[], Layout]]:
    """The sweep and the layout (a call) that compute the determined arrays of the store
    at ``path`` again (``recorded``: its sweep, where the caller has read it already).

    Those arrays (coordinates, truths) depend on an interval method only through its
    label. A method this process cannot build (registered at run time by the code that
    ran the store, or a plugin uninstalled since) is left out of the sweep whose grid
    points are normalized, and its label kept in the layout. The model and mechanism
    are needed: one registered at run time that this process lacks is refused when the
    layout is asked for, that is, only where the arrays are computed again (``status
    --verify``, or arrays without checksums); the sweep's grid alone needs neither.

    Raises
    ------
    InputError
        From the layout's call: a model or mechanism registered at run time that this
        process has not registered.
    """
    from ldpsim.tasks import plugins

    sweep = read_sweep(path) if recorded is None else recorded
    needed = {
        key: origin
        for key, origin in unregistered_units(attrs).items()
        if not key.startswith("method:")
    }
    known = plugins.registry("method")
    kept = {
        label: params
        for label, params in sweep.methods.items()
        if isinstance(params, dict) and params.get("method", label) in known
    }
    normalized = sweep
    if len(kept) < len(sweep.methods):
        # A stand-in where no method is left: a grid point has at least one, and the
        # oracle asks nothing of the sweep. Nothing is normalized until asked for.
        normalized = dataclasses.replace(sweep, methods=kept or {"oracle": {}})
        object.__setattr__(normalized, "_recorded", True)  # as read_sweep's

    def layout() -> Layout:
        if needed:
            what, calls = register_calls(needed)
            raise InputError(
                f"Checking the coordinates and truths of the store {str(path)!r} computes "
                f"them again with its model and mechanism, and the store used {what}, "
                "registered at run time, which this process has not registered. Where "
                f"your code defines it, in Python: {calls}; then "
                f"ldpsim.pipeline.cli.main(['status', '--verify', {str(path)!r}]). "
                "`ldpsim status` without --verify checks every file against its checksum."
            )
        out = stored_layout(path, normalized)
        out.methods = list(sweep.methods)
        return out

    return normalized, layout


def refuse_damage(path: str | Path, *, decode: bool = False) -> None:
    """Refuse a store with missing data files, or coordinates and truths that are not its
    sweep's, before its values are read or shown.

    Files that cannot be decoded are found where the values are read
    (:func:`ldpsim.pipeline.store.reading.load_dataset` raises :class:`StoreDamage` too),
    or here with ``decode`` (every data file decoded, as ``ldpsim status`` does: for a
    reader that does not read them all). The coordinates and truths are decoded (their
    checksums checked), and recomputed where they have none.

    Raises
    ------
    StoreDamage
        One line naming the missing files and the replicates they held, or the arrays
        that differ from what the sweep determines.
    """
    damage = find_damage(path, verify=decode, recompute=False)
    if damage:
        raise StoreDamage(f"The store {str(path)!r} is {damage.describe()}.")


def _missing_files(
    stored: set[str],
    name: str,
    array: zarr.Array,
    held: np.ndarray,
    grid: int,
    method_file: int | None = None,
) -> dict[str, tuple[slice, ...]]:
    """The files of ``name`` that hold a replicate of ``held`` and are not among
    ``stored`` (:func:`ldpsim.pipeline.store.digests.array_files`; ``method_file``: only
    those at this position along the 'method' axis)."""
    if not held.any():
        return {}
    shape = file_shape(array)
    rep = list(array.metadata.dimension_names or ()).index("rep")
    # The files along the grid axes and 'rep' of the replicates held; along the other
    # axes (method, checkpoint, coord) a file spans the whole axis in ldpsim's layouts,
    # and every file is needed if not.
    needed = held
    for axis, step in enumerate([*shape[:grid], shape[rep]]):  # any() per file
        needed = np.logical_or.reduceat(needed, np.arange(0, needed.shape[axis], step), axis)
    needed = np.argwhere(needed)
    spans = [range(math.ceil(s / c)) for s, c in zip(array.shape, shape, strict=True)]
    if method_file is not None:
        spans[list(array.metadata.dimension_names or ()).index("method")] = range(
            method_file, method_file + 1
        )
    out = {}
    for row in needed.tolist():
        spans[:grid], spans[rep] = (
            [range(i, i + 1) for i in row[:-1]],
            range(row[-1], row[-1] + 1),
        )
        for coords in itertools.product(*spans):
            key = array.metadata.encode_chunk_key(coords)
            if f"{name}/{key}" not in stored:
                out[f"{name}/{key}"] = _replicate_region(array, coords, grid)
    return out


def repair(path: str | Path, damage: Damage) -> None:
    """Make the damaged replicates not done, so that the run recomputes them, and write
    the damaged determined arrays again from the store's sweep.

    Called by the run holding the store's lock. The ``done`` flags of the replicates
    are cleared first (a flag never vouches for missing data), then the files that are
    corrupt are deleted (the run's writes read the files they rewrite); a corrupt file
    of ``done`` is deleted first, and its replicates read as not done. In a store whose
    files have digests, the deleted files and the missing ones are recorded as absent,
    unreadable manifests are replaced by empty ones, and the determined arrays written
    again get their digests.

    A folder standing where a missing data file belongs is removed when empty (Zarr
    could not write the file in its place); a folder with something in it is refused
    (:class:`StoreDamage`) before anything is changed.
    """
    path = Path(path)
    folders = [key for key in damage.missing if (path / key).is_dir()]
    for key in folders:
        if any((path / key).iterdir()):
            raise StoreDamage(
                f"The store {str(path)!r} has a folder with files in it where the data "
                f"file {key!r} belongs; move that folder out of the store, then run again."
            )
    for key in folders:
        (path / key).rmdir()
    digested = has_digests(read_attrs(path))
    if digested and damage.manifests:  # their files are deleted below, or written again
        forget(path, (), damage.manifests)
    if damage.determined:
        rewrite_determined(path, read_sweep(path), stored_layout(path), damage.determined)
        if digested:
            write_determined(path, determined_names(path))
    for key in damage.corrupt:
        if key.startswith("done/"):
            (path / key).unlink(missing_ok=True)
    if digested:
        forget(path, [k for k in damage.corrupt if k.startswith("done/")])
    done = zarr.open_array(str(path / "done"), mode="r+", zarr_format=3)
    writes = []
    for coords in _file_coords(done):
        region = _region(done, coords)
        clear = damage.replicates[region]
        if clear.any():
            flags = np.asarray(done[region], dtype=bool)
            if (flags & clear).any():
                writes.append(Write("done", done, region, flags & ~clear))
    with writing(path, writes) if digested else contextlib.nullcontext():
        for write in writes:
            done[write.region] = write.values
    corrupt = [key for key in damage.corrupt if not key.startswith("done/")]
    for key in corrupt:
        (path / key).unlink(missing_ok=True)
    if digested:
        forget(path, [*corrupt, *damage.missing])
