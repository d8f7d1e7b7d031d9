"""The Zarr v3 store of a sweep: template, extension, chunk writes, error records.

The store is the registry of what is done: a replicate's ``done`` flag is written
only after its values, by the client, which is the only writer. Every write covers
whole chunks (one grid point x ``rep_chunk`` replicates).
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import platform
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import psutil
import xarray as xr
import zarr

from ldpsim.pipeline.errors import InputError, os_error_text, path_kind, unwritable_reason
from ldpsim.pipeline.sweep import GridPoint, Sweep
from ldpsim.tasks.intervals.batch_means import BatchMeans
from ldpsim.tasks.intervals.bootstrap import DEFAULT_BETA, BlockBootstrap
from ldpsim.tasks.seeding import STREAMS_VERSION, streams_changed_since, streams_fingerprint

#: Sub-group of the store holding ldpsim's own records (error reports, the run lock).
META_GROUP = "ldpsim"
VARIABLE_ATTRS: dict[str, dict[str, str]] = {
    "estimate": {
        "long_name": "Polyak-Ruppert average theta_bar_n of LDP-SGD",
        "units": "parameter units",
    },
    "lower": {"long_name": "lower confidence bound", "units": "parameter units"},
    "upper": {"long_name": "upper confidence bound", "units": "parameter units"},
    "truth": {"long_name": "true parameter theta*", "units": "parameter units"},
    "done": {"long_name": "replicate durably written", "units": "1"},
    "failed": {"long_name": "replicate raised an error (see `ldpsim errors`)", "units": "1"},
    "method_failed": {
        "long_name": "interval method could not be computed there (see `ldpsim errors`)",
        "units": "1",
    },
    "seconds": {"long_name": "compute time of the replicate", "units": "s"},
    "job_id": {"long_name": "batch-system job id of the worker (0: none)", "units": "1"},
}
COORD_ATTRS = {
    "rep": {"long_name": "replicate index"},
    "coord": {"long_name": "coordinate j of theta"},
    "method": {"long_name": "interval method label"},
    "checkpoint": {"long_name": "number of SGD steps at which the interval is taken"},
    "n": {"long_name": "number of SGD steps (sample size)"},
    "tau": {"long_name": "quantile level"},
    "eps": {"long_name": "local differential privacy parameter"},
}


def default_rep_chunk(sweep: Sweep) -> int:
    """Replicates per chunk (= per task): about 5e7 SGD steps per task, in [1, 100]."""
    if sweep.rep_chunk is not None:
        return sweep.rep_chunk
    max_n = max(p.normalized.n for p in sweep.points())
    return int(min(100, max(1, 5e7 // max_n)))


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("ldpsim", "numpy", "scipy", "numba", "dask", "distributed", "xarray", "zarr"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


@dataclass
class Layout:
    """Dimension names and sizes of a sweep's store."""

    axes: list[str]
    axis_values: dict[str, list[Any]]
    methods: list[str]
    replicates: int
    d: int
    checkpoints: list[int] | None
    rep_chunk: int

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(len(self.axis_values[a]) for a in self.axes)

    def extra(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        if self.checkpoints is None:
            return ("coord",), (self.d,)
        return ("checkpoint", "coord"), (len(self.checkpoints), self.d)


def layout_for(sweep: Sweep, rep_chunk: int | None = None) -> Layout:
    points = sweep.points()
    checkpoints = points[0].normalized.checkpoints
    return Layout(
        axes=list(sweep.grid),
        axis_values={a: list(v) for a, v in sweep.grid.items()},
        methods=list(sweep.methods),
        replicates=sweep.replicates,
        d=max(p.normalized.model.dim for p in points),
        checkpoints=list(checkpoints) if checkpoints else None,
        rep_chunk=rep_chunk or default_rep_chunk(sweep),
    )


def _coord_array(name: str, values: list[Any]) -> np.ndarray:
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=object)  # variable-length strings in Zarr v3
    if name == "n" or all(isinstance(v, int) for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=np.float64)


def template(sweep: Sweep, layout: Layout) -> xr.Dataset:
    """The lazily allocated Dataset of the SPEC section 7 layout (no data computed)."""
    g_dims, g_shape = tuple(layout.axes), layout.grid_shape
    g_chunks = (1,) * len(g_dims)
    r, rc, m = layout.replicates, layout.rep_chunk, len(layout.methods)
    x_dims, x_shape = layout.extra()

    def lazy(shape, chunks, dtype, fill):
        return da.full(shape, fill, dtype=dtype, chunks=chunks)

    variables = {
        "estimate": (
            (*g_dims, "rep", *x_dims),
            lazy((*g_shape, r, *x_shape), (*g_chunks, rc, *x_shape), np.float64, np.nan),
        ),
        "lower": (
            (*g_dims, "method", "rep", *x_dims),
            lazy((*g_shape, m, r, *x_shape), (*g_chunks, m, rc, *x_shape), np.float64, np.nan),
        ),
        "upper": (
            (*g_dims, "method", "rep", *x_dims),
            lazy((*g_shape, m, r, *x_shape), (*g_chunks, m, rc, *x_shape), np.float64, np.nan),
        ),
        # Per checkpoint: a method that fails at an early checkpoint (too few blocks)
        # still counts at the later ones.
        "method_failed": (
            (*g_dims, "method", "rep", *x_dims[:-1]),
            lazy((*g_shape, m, r, *x_shape[:-1]), (*g_chunks, m, rc, *x_shape[:-1]), bool, False),
        ),
        "done": ((*g_dims, "rep"), lazy((*g_shape, r), (*g_chunks, rc), bool, False)),
        "failed": ((*g_dims, "rep"), lazy((*g_shape, r), (*g_chunks, rc), bool, False)),
        "seconds": ((*g_dims, "rep"), lazy((*g_shape, r), (*g_chunks, rc), np.float64, np.nan)),
        "job_id": ((*g_dims, "rep"), lazy((*g_shape, r), (*g_chunks, rc), np.int64, 0)),
        "truth": ((*g_dims, "coord"), truth_array(sweep, layout)),
    }
    coords: dict[str, Any] = {a: _coord_array(a, layout.axis_values[a]) for a in layout.axes}
    coords.update(
        method=np.array(layout.methods, dtype=object),
        rep=np.arange(r, dtype=np.int64),
        coord=np.arange(layout.d, dtype=np.int64),
    )
    if layout.checkpoints is not None:
        coords["checkpoint"] = np.array(layout.checkpoints, dtype=np.int64)
    ds = xr.Dataset(variables, coords=coords)
    for name, attrs in VARIABLE_ATTRS.items():
        ds[name].attrs.update(attrs)
    for name, attrs in COORD_ATTRS.items():
        if name in ds.coords:
            ds[name].attrs.update(attrs)
    ds.attrs.update(
        title=f"ldpsim sweep {sweep.name!r}",
        description=sweep.description,
        sweep=sweep.to_json(),
        identity=json.dumps(sweep.identity(), sort_keys=True, default=str),
        level=float(sweep.points()[0].normalized.level),
        rep_chunk=layout.rep_chunk,
        versions=json.dumps(library_versions(), sort_keys=True),
        streams_version=STREAMS_VERSION,
        streams_fingerprint=json.dumps(streams_fingerprint(), sort_keys=True),
        created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        conventions="done(grid, rep) is true only after that replicate's values are written",
    )
    return ds


def truth_array(sweep: Sweep, layout: Layout) -> np.ndarray:
    """theta* for every grid point, NaN-padded to the store's d."""
    out = np.full((*layout.grid_shape, layout.d), np.nan)
    for point in sweep.points():
        index = _store_index(layout, point)
        truth = point.normalized.model.truth()
        out[index][: len(truth)] = truth
    return out


def _store_index(layout: Layout, point: GridPoint) -> tuple[int, ...]:
    return tuple(_position(layout.axis_values[a], point.values[a]) for a in layout.axes)


def _position(values: list[Any], value: Any) -> int:
    for i, v in enumerate(values):
        if (type(v) is type(value) and v == value) or (
            isinstance(v, float) and isinstance(value, float) and math.isinf(v) and v == value
        ):
            return i
    for i, v in enumerate(values):
        if v == value:
            return i
    raise KeyError(value)


class Store:
    """A sweep's Zarr store, opened for writing by the (single) client (``mode="r"``: reading)."""

    def __init__(self, path: Path, layout: Layout, mode: str = "r+") -> None:
        self.path = Path(path)
        self.layout = layout
        # The arrays' own metadata, never the consolidated copy in the root (a run that
        # committed an extension rewrote both, but only the arrays' metadata is read back).
        self.group = zarr.open_group(
            str(self.path), mode=mode, zarr_format=3, use_consolidated=False
        )
        self._arrays = {name: self.group[name] for name in VARIABLE_ATTRS}

    # -- creation and extension ------------------------------------------------------
    @classmethod
    def open_or_create(
        cls, path: str | Path, sweep: Sweep, before_write: Callable[[Path], None] | None = None
    ) -> tuple[Store, Changes]:
        """Open the store for ``sweep``, creating or extending it; report what changed.

        ``before_write(path)`` (taking the run lock) is called once the store exists and
        matches ``sweep``, before anything in it is changed other than its creation. A
        store created meanwhile by another run is opened like any existing store.

        Raises
        ------
        InputError
            The path is not a directory, not writable, not an ldpsim store, or was made
            from a different specification (the message shows the difference); the
            extension would change array shapes; a write failed (the store is unchanged).
        """
        path = Path(path)
        changes = inspect_store(path, sweep)
        _remove_abandoned_creations(path)
        if changes.created:
            layout = layout_for(sweep)
            try:
                created = _create_atomically(path, sweep, layout)
            except OSError as exc:  # e.g. /proc, a full or read-only file system
                raise InputError(
                    f"Cannot create the store {str(path)!r}: {_describe(exc)}. Choose a "
                    "writable --store path with free space."
                ) from None
            if created:
                if before_write is not None:
                    before_write(path)
                return cls(path, layout), changes
        if before_write is not None:
            before_write(path)
        try:
            finish_extension(path)
            # Under the lock: another run may have grown the store since the check above.
            changes = inspect_store(path, sweep)
            stored = read_sweep(path)
            layout = stored_layout(path)
            if changes:
                layout = _extend(path, stored, layout, changes)
            elif not _has_consolidated_metadata(path):  # a store of ldpsim <= 0.2
                consolidate(path)
        except OSError as exc:
            raise InputError(
                f"Cannot extend the store {str(path)!r}: {_describe(exc)}; the store is "
                "unchanged. Free some space or make it writable, then run again."
            ) from None
        return cls(path, layout), changes

    # -- chunk writes ---------------------------------------------------------------------
    def chunk_reps(self, chunk: int) -> range:
        rc = self.layout.rep_chunk
        return range(chunk * rc, min((chunk + 1) * rc, self.layout.replicates))

    def n_chunks(self) -> int:
        return math.ceil(self.layout.replicates / self.layout.rep_chunk)

    def index_of(self, point: GridPoint) -> tuple[int, ...]:
        return _store_index(self.layout, point)

    def done_mask(self) -> np.ndarray:
        return np.asarray(self._arrays["done"][...], dtype=bool)

    def write_chunk(self, index: tuple[int, ...], chunk: int, result: dict[str, Any]) -> None:
        """Write one chunk's values, then its ``done`` flags (never the other way round).

        ``result`` holds arrays for the replicates in ``result['reps']`` (a subset of
        the chunk's replicates); replicates of the chunk not in it keep their stored
        values, so every write covers whole chunks and never loses a finished result.
        """
        reps = self.chunk_reps(chunk)
        sel_rep = slice(reps.start, reps.stop)
        pos = [r - reps.start for r in result["reps"]]
        a = self._arrays
        m = len(self.layout.methods)

        def merge(name, rep_axis, new):
            key = (*index, *([slice(None)] * rep_axis), sel_rep)
            old = np.asarray(a[name][key])
            old[(slice(None),) * rep_axis + (pos,)] = new
            a[name][key] = old

        merge("estimate", 0, result["estimate"])
        merge("lower", 1, result["lower"][:m])
        merge("upper", 1, result["upper"][:m])
        method_failed = result["method_failed"]
        if "checkpoint" not in (a["method_failed"].metadata.dimension_names or ()):
            # A store written before method_failed had the checkpoint axis.
            method_failed = method_failed.reshape(*method_failed.shape[:2], -1).any(axis=2)
        merge("method_failed", 1, method_failed)
        merge("seconds", 0, result["seconds"])
        merge("job_id", 0, result["job_id"])
        merge("failed", 0, result["failed"])
        errors = result.get("errors", {})
        for rep in result["reps"]:
            if rep in errors:
                self.write_error(index, int(rep), errors[rep])
            else:
                self.clear_error(index, int(rep))
        merge("done", 0, ~result["failed"])

    def write_error(self, index: tuple[int, ...], rep: int, record: dict[str, Any]) -> None:
        """Record a failure (atomically: temp file, then rename)."""
        folder = self.path / META_GROUP / "errors"
        folder.mkdir(parents=True, exist_ok=True)
        name = "_".join(map(str, index)) or "0"
        target = folder / f"{name}__{rep}.json"
        _write_atomically(target, json.dumps(record, indent=1, default=str).encode())

    def clear_error(self, index: tuple[int, ...], rep: int) -> None:
        name = "_".join(map(str, index)) or "0"
        (self.path / META_GROUP / "errors" / f"{name}__{rep}.json").unlink(missing_ok=True)


#: Inside META_GROUP: the renames of an extension being committed (see _commit).
EXTENSION_JOURNAL = "extension.json"


@dataclass(frozen=True)
class Changes:
    """What running a sweep changes in the layout of its store (false: nothing)."""

    created: bool = False
    added: dict[str, list[Any]] = field(default_factory=dict)
    replicates_added: int = 0

    def __bool__(self) -> bool:
        return self.created or bool(self.added) or self.replicates_added > 0


def inspect_store(path: str | Path, sweep: Sweep) -> Changes:
    """What running ``sweep`` would change in the store at ``path``; reads only.

    Raises
    ------
    InputError
        The path cannot hold a store, is not an ldpsim store, holds another
        specification or other random streams, or ``sweep`` would change the shape of
        its arrays other than by adding grid values and replicates.
    """
    path = Path(path)
    check_store_path(path)
    if not path.exists():
        return Changes(created=True)
    stored = read_sweep(path)
    diff = identity_diff(stored, sweep)
    if diff:
        raise InputError(
            f"The store {str(path)!r} was made from a different specification; refusing "
            f"to change it. Differences (store -> requested): {'; '.join(diff)}. Use "
            f"another --store path, or the original specification."
        )
    check_streams(path, sweep)
    layout = stored_layout(path)
    added: dict[str, list[Any]] = {}
    for axis in layout.axes:
        new = [v for v in sweep.grid[axis] if not _contains(layout.axis_values[axis], v)]
        if new:
            added[axis] = new
    requested = layout_for(sweep, rep_chunk=layout.rep_chunk)
    what = "; ".join(f"{axis} = {values}" for axis, values in added.items())
    if requested.d > layout.d:
        raise InputError(
            f"Adding {what} to the store {str(path)!r} would change the number of "
            f"coordinates of theta (the 'coord' dimension) from {layout.d} to "
            f"{requested.d}; a store grows only along its grid axes and 'rep'. Use "
            "another --store path for these values."
        )
    if requested.checkpoints != layout.checkpoints:
        raise InputError(
            f"The sweep's checkpoints {requested.checkpoints} differ from the store's "
            f"{layout.checkpoints} ({str(path)!r}); a store grows only along its grid axes "
            "and 'rep'. Use another --store path."
        )
    return Changes(added=added, replicates_added=max(0, sweep.replicates - layout.replicates))


def stored_layout(path: str | Path) -> Layout:
    """The layout of the store at ``path``, as last extended."""
    return layout_for(read_sweep(path), rep_chunk=int(read_attrs(path)["rep_chunk"]))


def _extend(path: Path, stored: Sweep, layout: Layout, changes: Changes) -> Layout:
    """Grow the store along its grid axes and 'rep' (all or nothing); the new layout."""
    values = {a: layout.axis_values[a] + changes.added.get(a, []) for a in layout.axes}
    grown = Layout(
        axes=layout.axes,
        axis_values=values,
        methods=layout.methods,
        replicates=layout.replicates + changes.replicates_added,
        d=layout.d,
        checkpoints=layout.checkpoints,
        rep_chunk=layout.rep_chunk,
    )
    merged = Sweep(
        name=stored.name,
        description=stored.description,
        replicates=grown.replicates,
        seed=stored.seed,
        base=stored.base,
        grid=values,
        methods=stored.methods,
        rep_chunk=stored.rep_chunk,
    )
    _commit(path, _extension_files(path, grown, merged))
    return grown


def _extension_files(path: Path, layout: Layout, merged: Sweep) -> dict[str, bytes]:
    """The files (relative path -> content) of ``path`` that the extension changes.

    Zarr does the work on a scratch copy of the store's metadata: arrays resized, new
    coordinates and truth written, the sweep attribute updated, metadata consolidated.
    Growing an array writes only its ``zarr.json``: the new region is read as the fill
    value, never from the store's existing chunks.
    """
    sizes = {axis: len(values) for axis, values in layout.axis_values.items()}
    sizes["rep"] = layout.replicates
    source = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
    with tempfile.TemporaryDirectory(prefix="ldpsim-extend-") as folder:
        scratch = Path(folder)
        for node in ["", META_GROUP, *source.array_keys()]:
            (scratch / node).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path / node / "zarr.json", scratch / node / "zarr.json")
        group = zarr.open_group(str(scratch), mode="r+", zarr_format=3, use_consolidated=False)
        for name in group.array_keys():
            array = group[name]
            dims = array.metadata.dimension_names or ()
            shape = tuple(sizes.get(dim, s) for dim, s in zip(dims, array.shape, strict=True))
            if shape != array.shape:
                array.resize(shape)
        for axis in layout.axes:
            group[axis][:] = _coord_array(axis, layout.axis_values[axis])
        group["rep"][:] = np.arange(layout.replicates, dtype=np.int64)
        group["truth"][...] = truth_array(merged, layout)
        group.attrs.update({"sweep": merged.to_json()})
        consolidate(scratch)
        files = {}
        for f in sorted(scratch.rglob("*")):
            rel = f.relative_to(scratch).as_posix()
            if f.is_file() and (
                not (path / rel).is_file() or (path / rel).read_bytes() != f.read_bytes()
            ):
                files[rel] = f.read_bytes()
    return files


def _commit(root: Path, files: dict[str, bytes]) -> None:
    """Replace ``files`` (relative to the store ``root``) all or nothing.

    Every new file is first written beside its target, so a full disk or a read-only
    folder fails here and leaves the store as it was. Then a journal lists the renames,
    and the renames follow, the root ``zarr.json`` last: a reader of the consolidated
    metadata sees the old layout or the new one, never a mix. A run killed during the
    renames leaves the journal; the next run completes them (:func:`finish_extension`).
    """
    journal = root / META_GROUP / EXTENSION_JOURNAL
    pending: list[tuple[Path, Path]] = []
    made: list[Path] = []
    try:
        for rel in sorted(files, key=lambda rel: rel == "zarr.json"):  # root metadata last
            target = root / rel
            for folder in reversed([target.parent, *target.parent.parents]):
                if not folder.exists():
                    folder.mkdir()
                    made.append(folder)
            temp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            pending.append((temp, target))
            temp.write_bytes(files[rel])
        entries = [[str(t.relative_to(root)), str(g.relative_to(root))] for t, g in pending]
        _write_atomically(journal, json.dumps(entries).encode())
    except OSError:
        for temp, _ in pending:
            temp.unlink(missing_ok=True)
        for folder in reversed(made):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finish_extension(root)


def finish_extension(path: str | Path) -> bool:
    """Complete the renames of an extension whose run was killed while committing it.

    Returns whether there was one. Called by a run holding the lock before it reads
    the layout.

    Raises
    ------
    InputError
        A rename failed (the journal stays, and the next run tries again).
    """
    root = Path(path)
    journal = root / META_GROUP / EXTENSION_JOURNAL
    if not journal.exists():
        return False
    try:
        for temp, target in json.loads(journal.read_text()):
            if (root / temp).exists():  # renamed already otherwise
                os.replace(root / temp, root / target)
        journal.unlink()
    except OSError as exc:
        raise InputError(
            f"Cannot complete the extension of the store {str(root)!r}: {_describe(exc)}. "
            "Make it writable and run again, which completes it."
        ) from None
    return True


def consolidate(path: str | Path) -> None:
    """Gather every node's metadata in the root ``zarr.json`` (``xr.open_zarr(path)``).

    Only an extension changes the metadata, and it rewrites the consolidated copy in
    the same commit, so the copy never hides data.
    """
    with warnings.catch_warnings():
        # Zarr notes that consolidation is not in the v3 spec, and that the ldpsim
        # group's records (errors/, lock.json) are no Zarr nodes: both are expected.
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not")
        warnings.filterwarnings("ignore", message="Object at .* is not recognized")
        zarr.consolidate_metadata(str(path), zarr_format=3)


def _has_consolidated_metadata(path: Path) -> bool:
    root = json.loads((path / "zarr.json").read_text())
    return bool(root.get("consolidated_metadata"))


def _write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temp file: readers see old or new, whole."""
    temp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, target)
    except OSError:
        temp.unlink(missing_ok=True)
        raise


def _describe(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def _create_atomically(path: Path, sweep: Sweep, layout: Layout) -> bool:
    """Write the template in a hidden folder beside ``path``, then rename it into place.

    Returns False if another run created ``path`` meanwhile (its store is kept). A run
    interrupted while creating removes its folder; a killed one leaves it, and the next
    run removes it (:func:`_remove_abandoned_creations`), so there is never a
    half-written store.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.creating-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        template(sweep, layout).to_zarr(
            str(tmp), compute=False, mode="w-", consolidated=False, zarr_format=3
        )
        zarr.open_group(str(tmp / META_GROUP), mode="w", zarr_format=3)
        consolidate(tmp)
        try:
            os.rename(tmp, path)
        except OSError:
            if (path / "zarr.json").exists():  # lost the race (ENOTEMPTY) to another run
                return False
            raise
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_abandoned_creations(path: Path) -> None:
    """Delete ``.NAME.creating-PID`` folders left by killed runs that created ``path``.

    A folder is abandoned if its process is gone, or if that pid now belongs to a
    process started after the folder was last written (the pid was reused).
    """
    for folder in path.parent.glob(f".{glob.escape(path.name)}.creating-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        try:
            process = psutil.Process(int(pid))
            alive = process.create_time() <= folder.stat().st_mtime + 1.0
        except (ValueError, OSError, psutil.Error):  # not a pid, no such process, gone
            alive = False
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)


def _contains(values: list[Any], value: Any) -> bool:
    try:
        _position(values, value)
    except KeyError:
        return False
    return True


def check_store_path(path: Path) -> None:
    """Refuse a path that cannot hold this run's store, before anything is written.

    Allowed: a new path below a writable folder, an empty folder (replaced by the
    store), or an undamaged, writable ldpsim store (see :func:`check_store`).

    Raises
    ------
    InputError
        The path is not a folder, a non-empty folder that is not a store, the current
        folder or one above it, on a read-only file system or otherwise not writable,
        unreadable (e.g. a name longer than the file system allows), or a damaged store.
    """
    try:
        kind = path_kind(path)
        if kind is None:
            parent = _existing_parent(path)
            parent_kind = path_kind(parent)
        elif kind == "folder" and not (path / "zarr.json").exists():
            empty = not any(path.iterdir())
    except OSError as exc:
        raise InputError(
            f"The store path {str(path)!r} cannot be used: {os_error_text(exc, path)}."
        ) from None
    if kind is None:
        if parent_kind != "folder":
            raise InputError(
                f"The store path {str(path)!r} lies below {str(parent)!r}, which is a "
                f"{parent_kind}, not a folder; choose a path inside a folder."
            )
        _check_writable(path, parent)
        return
    if kind != "folder":
        raise InputError(
            f"The store path {str(path)!r} is a {kind}; a store is a folder (a new path "
            "such as outputs/NAME.zarr, or an existing ldpsim store)."
        )
    if (path / "zarr.json").exists():
        check_store(path)
        _check_writable(path, path)
        return
    if not empty:
        raise InputError(
            f"The store path {str(path)!r} is a non-empty folder that is not a Zarr store; "
            "choose a new path."
        )
    here = Path.cwd().resolve()
    if path.resolve() in (here, *here.parents):
        # The store replaces an empty folder by a rename, which cannot be done to the
        # folder a process works in.
        raise InputError(
            f"The store path {str(path)!r} is the current folder or one above it; a store "
            "is a folder of its own: give a new path such as ./NAME.zarr."
        )
    _check_writable(path, path.parent)
    try:
        path.rmdir()  # creation renames the finished store into place
    except OSError as exc:
        raise InputError(
            f"The store path {str(path)!r} cannot be used: {os_error_text(exc, path)}."
        ) from None


def _check_writable(path: Path, folder: Path) -> None:
    """Refuse ``path`` when ``folder`` (where its files are written) is not writable."""
    why = unwritable_reason(folder)
    if why is None:
        return
    raise InputError(
        f"The store path {str(path)!r} is not writable ({why}: {str(folder)!r}); choose "
        "a --store path in a writable folder."
    )


def _existing_parent(path: Path) -> Path:
    for parent in [path.parent, *path.parent.parents]:
        if path_kind(parent) is not None:
            return parent
    return Path("/")


def read_attrs(path: str | Path) -> dict[str, Any]:
    """The root attributes of an ldpsim store, checked.

    Raises
    ------
    InputError
        The path is not a Zarr store, not one made by ldpsim, or its ``zarr.json`` or
        its ``sweep`` or ``level`` attribute is damaged.
    """
    path = Path(path)
    try:
        is_store = path_kind(path) == "folder" and (path / "zarr.json").is_file()
    except OSError as exc:
        raise InputError(f"{str(path)!r} cannot be read: {os_error_text(exc, path)}.") from None
    if not is_store:
        raise InputError(
            f"{str(path)!r} is not an ldpsim store (no folder with a zarr.json); give the "
            "path of a store that `ldpsim run` wrote."
        )
    try:
        attrs = dict(zarr.open_group(str(path), mode="r", zarr_format=3).attrs)
    except (ValueError, KeyError, TypeError, OSError) as exc:  # JSON or metadata errors
        raise _damaged(path, "zarr.json", exc) from None
    if "sweep" not in attrs:
        raise InputError(f"{str(path)!r} is a Zarr store but not one made by ldpsim.")
    _sweep_from_json(path, attrs["sweep"])
    level = attrs.get("level")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise _damaged(path, "zarr.json", f"attribute 'level' is {level!r}, not in (0, 1)")
    return attrs


def read_sweep(path: str | Path) -> Sweep:
    """The sweep a store was made from (as last extended)."""
    return _sweep_from_json(path, read_attrs(path)["sweep"])


#: Fields of the ``sweep`` attribute and the JSON types they must have.
_SWEEP_FIELDS = {
    "name": str,
    "description": str,
    "replicates": int,
    "seed": int,
    "spec": dict,
    "grid": dict,
    "methods": dict,
}


def _sweep_from_json(path: str | Path, text: object) -> Sweep:
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError as exc:
        raise _damaged(path, "zarr.json", f"attribute 'sweep' is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _damaged(path, "zarr.json", "attribute 'sweep' is not a JSON object")
    for key, kind in _SWEEP_FIELDS.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise _damaged(
                path,
                "zarr.json",
                f"attribute 'sweep' needs {key!r} of type {kind.__name__}, has {data.get(key)!r}",
            )
    if not all(isinstance(v, list) for v in data["grid"].values()):
        raise _damaged(path, "zarr.json", "attribute 'sweep' has a grid axis that is no list")
    return Sweep(
        name=data["name"],
        description=data["description"],
        replicates=data["replicates"],
        seed=data["seed"],
        base=data["spec"],
        grid=data["grid"],
        methods=data["methods"],
        rep_chunk=data.get("rep_chunk"),
    )


def _damaged(
    path: str | Path,
    part: str,
    reason: object,
    remedy: str = "Restore it from a copy, or run the sweep into a new --store path.",
) -> InputError:
    text = str(reason).splitlines()[0] if str(reason) else type(reason).__name__
    return InputError(
        f"The store {str(path)!r} is damaged: {part} cannot be read ({text}); nothing was "
        f"changed. {remedy}"
    )


def check_streams(path: Path, sweep: Sweep) -> None:
    """Refuse a store whose random streams differ from this ldpsim's for ``sweep``.

    Stores written before the ``streams_version`` attribute existed drew version 1. A
    newer version changes the numbers of some mechanisms or methods only
    (``STREAMS_CHANGED``); a store that uses none of them gets the same numbers and may
    be resumed or extended.

    The ``streams_fingerprint`` attribute holds hashes of numpy's numbers as the
    store's creator drew them (:func:`ldpsim.tasks.seeding.streams_fingerprint`); a part
    that the sweep uses (the data stream, its multiplier laws) and that differs under
    the running numpy is refused. A store without the attribute (made before it
    existed) is accepted, and the attribute is not added: nobody can tell which numpy
    drew its replicates.
    """
    attrs = read_attrs(path)
    raw = attrs.get("streams_version", 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= STREAMS_VERSION:
        raise InputError(
            f"The store {str(path)!r} has an invalid 'streams_version' attribute {raw!r} "
            f"(an integer in [1, {STREAMS_VERSION}] is allowed); refusing to change it."
        )
    points = sweep.points()
    changed = streams_changed_since(raw)
    clash = [
        f"the mechanism {name}"
        for name in sorted({point.normalized.mechanism.name for point in points} & changed)
    ]
    # Version 3 changed bm only where its default batch count follows a bb whose beta
    # is not the 0.75 that bm used before.
    for label, params in sweep.methods.items():
        method = points[0].normalized.methods[label]
        if (
            isinstance(method, BatchMeans)
            and method.name in changed
            and not {"n_batches", "beta"} & set(params)
            and method.beta != DEFAULT_BETA
        ):
            clash.append(f"the method {label} (its default n_batches)")
    if clash:
        raise InputError(
            f"The store {str(path)!r} was written with random streams of version {raw}, "
            f"and this ldpsim (streams version {STREAMS_VERSION}) computes different numbers "
            f"for {', '.join(clash)}; refusing to compute into it. Use another --store "
            f"path, or the ldpsim release that wrote it."
        )
    _check_fingerprint(path, attrs, sweep)


def _check_fingerprint(path: Path, attrs: dict[str, Any], sweep: Sweep) -> None:
    """Refuse a store whose recorded numpy draws differ from the running numpy's."""
    if "streams_fingerprint" not in attrs:
        return  # made before the fingerprint existed; see check_streams
    raw = attrs["streams_fingerprint"]
    try:
        recorded = json.loads(raw)
        if not isinstance(recorded, dict) or not all(
            isinstance(v, str) for v in recorded.values()
        ):
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(
            f"The store {str(path)!r} has an invalid 'streams_fingerprint' attribute "
            f"{raw!r} (a JSON object of part -> hash is allowed); refusing to change it."
        ) from None
    used = {"data"} | {
        method.multiplier
        for point in sweep.points()
        for method in point.normalized.methods.values()
        if isinstance(method, BlockBootstrap)
    }
    running = streams_fingerprint()
    differ = sorted(
        part for part in used if part in recorded and recorded[part] != running.get(part)
    )
    if differ:
        try:
            written = json.loads(attrs.get("versions", "{}")).get("numpy", "unknown")
        except (TypeError, ValueError, AttributeError):
            written = "unknown"
        raise InputError(
            f"The store {str(path)!r} was written with numpy {written}, whose random "
            f"numbers differ from this numpy {np.__version__}'s for "
            f"{', '.join(_fingerprint_label(part) for part in differ)} (streams "
            f"fingerprint); refusing to compute into it, new replicates would not be "
            f"comparable. Use another --store path, or the numpy that wrote it ({written})."
        )


def _fingerprint_label(part: str) -> str:
    return "the data stream" if part == "data" else f"the {part} multipliers"


def identity_diff(stored: Sweep, requested: Sweep) -> list[str]:
    """Human-readable differences that forbid extending ``stored`` with ``requested``."""
    a = json.loads(json.dumps(stored.identity(), sort_keys=True, default=str))
    b = json.loads(json.dumps(requested.identity(), sort_keys=True, default=str))
    out = []
    for key in ("seed", "axes"):
        if a[key] != b[key]:
            out.append(f"{key}: {a[key]!r} -> {b[key]!r}")
    for section in ("base", "methods"):
        for k in sorted(set(a[section]) | set(b[section])):
            va, vb = a[section].get(k, "<absent>"), b[section].get(k, "<absent>")
            if not _same(va, vb):
                label = "spec" if section == "base" else "methods"
                out.append(f"{label}.{k}: {va!r} -> {vb!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    """Equality that treats 1 and 1.0 alike, recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return a == b


def check_store(path: str | Path) -> dict[str, Any]:
    """Refuse a damaged store before a verb prints or writes anything; return its attributes.

    Reads the root attributes (:func:`read_attrs`), the metadata of every array, every
    chunk (decoded) and every error record, so that damage is reported once, naming
    the damaged file, instead of half-way through a command.

    Raises
    ------
    InputError
        Naming the damaged file: a ``zarr.json``, a chunk, a missing variable or an
        error record.
    """
    path = Path(path)
    attrs = read_attrs(path)
    # Each array's own zarr.json, not the consolidated copy in the root: that is what a
    # write reads, so a damaged one must be found here.
    group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
    names = sorted(
        entry.name
        for entry in path.iterdir()
        if entry.name != META_GROUP and (entry / "zarr.json").is_file()
    )
    for name in VARIABLE_ATTRS:
        if name not in names:
            raise _damaged(path, f"{name}/", "the variable is missing")
    for name in names:
        try:
            array = group[name]
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise _damaged(path, f"{name}/zarr.json", exc) from None
        if not isinstance(array, zarr.Array):
            raise _damaged(path, f"{name}/zarr.json", "a group where an array belongs")
        _check_chunks(path, name, array)
    for _ in iter_errors(path):  # parses every record
        pass
    return attrs


def _check_chunks(path: Path, name: str, array: zarr.Array) -> None:
    # A codec reports a damaged chunk with its own library's exception (zstd: RuntimeError,
    # a chunk of the wrong size: ValueError), hence the broad except clauses.
    try:
        array[...]
        return
    except Exception:  # located chunk by chunk below
        pass
    for coords in itertools.product(*(range(count) for count in array.cdata_shape)):
        try:
            array.get_block_selection(coords)
        except Exception as exc:
            key = array.metadata.encode_chunk_key(coords)
            raise _damaged(path, f"chunk {name}/{key}", exc) from None
    raise _damaged(path, f"{name}/", "its chunks cannot be read together")


def open_dataset(path: str | Path) -> xr.Dataset:
    """Open a store with xarray, lazily, through its consolidated metadata if it has them.

    They are always consistent (an extension replaces them in its last rename), while
    the arrays' own metadata are briefly mixed if a run is killed while committing one.
    Chunks are read when used; :func:`check_store` reads them all.

    Raises
    ------
    InputError
        Not an ldpsim store, or one whose metadata xarray cannot read.
    """
    read_attrs(path)
    try:
        return xr.open_zarr(str(path), consolidated=_has_consolidated_metadata(Path(path)))
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise _damaged(path, "its metadata", exc) from None


def iter_errors(path: str | Path) -> Iterator[dict[str, Any]]:
    """The failure records of a store, in file-name order.

    Raises
    ------
    InputError
        A record that is not a JSON object (naming its file).
    """
    folder = Path(path) / META_GROUP / "errors"
    if not folder.is_dir():
        return
    for file in sorted(folder.glob("*.json")):
        where = f"error record {file.relative_to(path)}"
        # The record only describes a failure: the replicate stays marked failed without it.
        remedy = "Delete that file to go on; the next run recomputes the failed replicate."
        try:
            record = json.loads(file.read_bytes())
        except (ValueError, OSError) as exc:  # bad JSON, bad UTF-8, unreadable
            raise _damaged(path, where, exc, remedy) from None
        if not isinstance(record, dict):
            raise _damaged(path, where, "not a JSON object", remedy)
        yield record


def remove_partial_files(path: str | Path) -> int:
    """Delete temp files a killed writer left behind (zarr's ``*.partial``, our ``*.tmp``)."""
    count = 0
    for pattern in ("*.partial", "*.tmp"):
        for f in Path(path).rglob(pattern):
            f.unlink(missing_ok=True)
            count += 1
    return count
