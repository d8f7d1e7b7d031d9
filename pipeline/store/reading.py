"""Reading a sweep's store: its attributes, its arrays and error records, checked for damage."""

from __future__ import annotations

import itertools
import json
import logging
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import zarr

from ldpsim.pipeline.errors import InputError, StoreDamage, os_error_text, path_kind
from ldpsim.pipeline.store.integrity import (
    DETERMINED_REMEDY,
    check_array_layout,
    check_layout_attrs,
    damaged,
    has_consolidated_metadata,
    read_root,
)
from ldpsim.pipeline.store.layout import (
    ADDED_VARIABLES,
    EXTENSION_JOURNAL,
    META_GROUP,
    VARIABLE_ATTRS,
    Layout,
    layout_for,
)
from ldpsim.pipeline.sweep import Sweep

if TYPE_CHECKING:  # imported when a dataset is opened
    import xarray as xr

T = TypeVar("T")

#: The name of a failure record, ``I_J__REP.json`` (``ldpsim.pipeline.store.store``'s
#: ``_error_name``). Anything else in the errors folder is none: a sync tool's copy of a
#: record (``0_0__1 (conflicted copy 2026-12-02).json``), macOS's ``._0_0__1.json``.
ERROR_RECORD = re.compile(r"(?P<index>[0-9]+(?:_[0-9]+)*)__(?P<rep>[0-9]+)\.json")


def error_record_place(name: str) -> tuple[tuple[int, ...], int] | None:
    """The grid index and the replicate that a failure record's file name names
    (:data:`ERROR_RECORD`; ``(0,)`` in a store without a grid); None for another name."""
    match = ERROR_RECORD.fullmatch(name)
    if match is None:
        return None
    return tuple(int(i) for i in match["index"].split("_")), int(match["rep"])


def missing_variables(path: str | Path) -> list[str]:
    """The variables of :data:`ADDED_VARIABLES` that the store at ``path`` lacks.

    A store written by an older ldpsim lacks them and is whole nonetheless; the next run
    that writes to it adds them (:meth:`ldpsim.pipeline.store.store.Store.open_or_create`).
    """
    return [name for name in ADDED_VARIABLES if not (Path(path) / name / "zarr.json").is_file()]


def read_attrs(path: str | Path) -> dict[str, Any]:
    """The root attributes of an ldpsim store, checked.

    Raises
    ------
    InputError
        The path is not a Zarr store, or not one made by ldpsim.
    StoreDamage
        Its ``zarr.json`` is damaged: no JSON, content that does not match its recorded
        digest, a ``sweep``, ``level`` or layout attribute that ldpsim never writes.
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
    root = read_root(path)  # parsed, and checked against its recorded digest
    if root.get("node_type") == "array" and (path.parent / "zarr.json").is_file():
        raise InputError(
            f"{str(path)!r} is an array of the Zarr store {str(path.parent)!r}, not a store; "
            "give the store's folder, the one `ldpsim run` wrote."
        )
    if root.get("node_type") != "group" or "sweep" not in root.get("attributes", {}):
        raise InputError(
            f"{str(path)!r} is a Zarr store but not one made by ldpsim (its root group has "
            "no 'sweep' attribute); give the path of a store that `ldpsim run` wrote."
        )
    attrs = dict(root["attributes"])  # what zarr reads as the group's attributes
    sweep = _sweep_from_json(path, attrs["sweep"])
    level = attrs.get("level")
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise damaged(path, "zarr.json", f"attribute 'level' is {level!r}, not in (0, 1)")
    check_layout_attrs(path, attrs, len(sweep.grid))
    return attrs


def read_sweep(path: str | Path) -> Sweep:
    """The sweep a store was made from (as last extended)."""
    return _sweep_from_json(path, read_attrs(path)["sweep"])


def stored_layout(path: str | Path, sweep: Sweep | None = None) -> Layout:
    """The layout of the store at ``path``, as last extended (attributes checked); its
    grid points normalized from ``sweep`` where given (the stored sweep by default)."""
    attrs = read_attrs(path)
    shards = None
    if "shard_reps" in attrs:  # none in a store of ldpsim <= 0.2
        shards = (tuple(attrs["shard_grid"]), attrs["chunk_reps"], attrs["shard_reps"])
    if sweep is None:
        sweep = _sweep_from_json(path, attrs["sweep"])
    return layout_for(sweep, rep_chunk=attrs["rep_chunk"], shards=shards)


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
    # The same Sweep for the same recorded text, read and checked once: its grid points
    # are normalized once (Sweep.points caches them), not once for each of the reads
    # that a run, a status or a damage check makes of the store's sweep (five to eight:
    # 2 s each at 20,000 points); Sweep.points sets them up again where a unit was
    # registered since.
    with _RECORDED_LOCK:  # a notebook's threads may read stores side by side
        sweep = _RECORDED_SWEEPS.pop(text, None) if isinstance(text, str) else None
    if sweep is None:
        sweep = _new_sweep_from_json(path, text)
    with _RECORDED_LOCK:
        _RECORDED_SWEEPS[text] = sweep  # the most recently read last
        while len(_RECORDED_SWEEPS) > RECORDED_SWEEPS_KEPT:
            del _RECORDED_SWEEPS[next(iter(_RECORDED_SWEEPS))]
    return sweep


def _new_sweep_from_json(path: str | Path, text: object) -> Sweep:
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise damaged(path, "zarr.json", f"attribute 'sweep' is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise damaged(path, "zarr.json", "attribute 'sweep' is not a JSON object")
    for key, kind in _SWEEP_FIELDS.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise damaged(
                path,
                "zarr.json",
                f"attribute 'sweep' needs {key!r} of type {kind.__name__}, has {data.get(key)!r}",
            )
    if not all(isinstance(v, list) for v in data["grid"].values()):
        raise damaged(path, "zarr.json", "attribute 'sweep' has a grid axis that is no list")
    sweep = Sweep(
        name=data["name"],
        description=data["description"],
        replicates=data["replicates"],
        seed=data["seed"],
        base=data["spec"],
        grid=data["grid"],
        methods=data["methods"],
        rep_chunk=data.get("rep_chunk"),
        cases=_cases_from_json(path, data.get("cases", {})),
    )
    # Its grid points, when asked for, under the ranges of the ldpsim that could have
    # made the store: a range narrowed since refuses a run, not the reading.
    object.__setattr__(sweep, "_recorded", True)
    return sweep


#: How many stores' recorded sweeps :func:`_sweep_from_json` keeps (by their text).
RECORDED_SWEEPS_KEPT = 4
_RECORDED_SWEEPS: dict[str, Sweep] = {}
_RECORDED_LOCK = threading.Lock()


def _cases_from_json(path: str | Path, cases: object) -> dict[str, dict[str, Any]]:
    if not isinstance(cases, dict) or not all(isinstance(v, dict) for v in cases.values()):
        raise damaged(path, "zarr.json", "attribute 'sweep' has 'cases' that are not tables")
    return cases


def quiet_pending_reads() -> None:
    """Silence what zarr's reads still in flight would print when the process exits.

    zarr 3 reads the chunks of an array concurrently, as tasks of an asyncio event loop
    in a thread of its own. When one read fails (a damaged chunk) the call raises at
    once, and the other reads of that call go on. A process that exits right away
    destroys them pending, which asyncio reports through its logger ("Task was destroyed
    but it is pending!", 4 to 16 lines, once 257 ending in "RuntimeError: Event loop is
    closed", or "coroutine ... was never awaited") after the one-line error of a damaged
    store. Called once that line is decided, it turns those reports off: the asyncio
    logger, the hook of exceptions raised where nothing can catch them
    (``sys.unraisablehook``) and RuntimeWarnings. Public interfaces only: zarr's event
    loop itself is private to zarr.
    """
    logging.getLogger("asyncio").disabled = True
    sys.unraisablehook = lambda unraisable: None
    warnings.simplefilter("ignore", RuntimeWarning)  # "coroutine ... was never awaited"


def extension_pending(path: str | Path) -> bool:
    """Whether an extension of the store is being committed, or was interrupted while it
    was: its journal exists (the next run completes it), or its new metadata were being
    written beside their targets (the next run deletes them: the extension never began).
    """
    path = Path(path)
    if (path / META_GROUP / EXTENSION_JOURNAL).exists():
        return True
    return any(path.glob("zarr.json.*.tmp")) or any(path.glob("*/zarr.json.*.tmp"))


def check_store(path: str | Path, *, read_chunks: bool | tuple[str, ...] = True) -> dict[str, Any]:
    """Refuse a damaged store before a verb prints or writes anything; return its attributes.

    Reads the root attributes (:func:`read_attrs`, which checks their digest), the
    metadata of every array (each the same as its consolidated copy), every error
    record and, with ``read_chunks``, every chunk (decoded), so that damage is
    reported once, naming the damaged file, instead of half-way through a command. A
    verb that reads every chunk anyway passes ``read_chunks=False`` and reads them
    with :func:`load_dataset`, which names a damaged chunk the same way; a run passes
    the variables it reads before it computes (``("done", "failed")``): a store of
    1e6 replicates is not decoded whole to find what is left to do.

    While an extension is committed, or after a run was killed committing it (its
    journal is there; the next run completes it), the arrays' own metadata are a mix
    of old and new and are not compared: every reader reads the consolidated copy,
    which is the old layout until the last rename.

    Raises
    ------
    InputError
        Not an ldpsim store.
    StoreDamage
        Naming the damaged file: a ``zarr.json``, a chunk, a missing variable or an
        error record. A variable of
        :data:`ldpsim.pipeline.store.layout.ADDED_VARIABLES` may be missing (a store of an
        older ldpsim).
    """
    return during_commits(path, lambda: _check_store(Path(path), read_chunks))


def during_commits(
    path: str | Path, check: Callable[[], T], found: Callable[[T], bool] = bool
) -> T:
    """``check()``, once more if it found damage while an extension was being committed.

    A check reads the root ``zarr.json`` and the arrays' files one after another; a run
    that commits an extension meanwhile (its renames take milliseconds) changes some of
    them between two reads, which would look like damage. So when ``check`` raises
    :class:`StoreDamage` or its result is ``found`` damaged, and the root ``zarr.json``
    changed since it began or a commit is in progress, it runs again (0.2 s later).
    """
    root = Path(path) / "zarr.json"

    def moved(before: bytes) -> bool:
        try:
            return root.read_bytes() != before or extension_pending(path)
        except OSError:
            return True

    try:
        before = root.read_bytes()
    except OSError:
        return check()
    try:
        result = check()
    except StoreDamage:
        if not moved(before):
            raise
        time.sleep(0.2)
        return check()
    if found(result) and moved(before):
        time.sleep(0.2)
        return check()
    return result


def _is_own_array(name: str, root: zarr.Group) -> bool:
    """Whether ``name`` is one of ldpsim's arrays: a variable, or a coordinate (an axis
    of the arrays that ``root``'s consolidated metadata names)."""
    return name in VARIABLE_ATTRS or any(
        name in map(str, array.metadata.dimension_names or ()) for _, array in root.arrays()
    )


def _check_store(path: Path, read_chunks: bool | tuple[str, ...]) -> dict[str, Any]:
    attrs = read_attrs(path)
    # Only renames mix the arrays' own metadata, and they begin once the journal is
    # written: new metadata beside their targets without it (a run killed before its
    # journal, or one writing them now) leave every array's own metadata as it was.
    pending = (path / META_GROUP / EXTENSION_JOURNAL).exists()
    # Each array's own zarr.json, not the consolidated copy in the root: that is what a
    # write reads, so a damaged one must be found here. Both are compared as zarr
    # reads them (a newer zarr may spell the same metadata otherwise).
    group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
    copies = None
    if has_consolidated_metadata(path) and not pending:
        copies = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=True)
    try:
        names = sorted(
            entry.name
            for entry in path.iterdir()
            if entry.name != META_GROUP and (entry / "zarr.json").is_file()
        )
    except OSError as exc:
        raise InputError(f"{str(path)!r} cannot be read: {os_error_text(exc, path)}.") from None
    for name in VARIABLE_ATTRS:
        if name not in names and name not in ADDED_VARIABLES:  # those: an older store
            raise damaged(path, f"{name}/", "the variable is missing")
    if copies is not None:
        for name in sorted(set(copies.array_keys()) - set(names)):
            raise damaged(path, f"{name}/zarr.json", "the array is missing")
    # The size of each axis: at most the sweep's (its grid axes and replicates; a Dataset
    # saved from a selection has fewer), and the same in every array (the first that has
    # it says): an array whose zarr.json states more (rep = 10**10 where the sweep has
    # 20) is damage here, before a reader allocates an array of that size.
    sweep = _sweep_from_json(path, attrs["sweep"])
    largest = {axis: len(values) for axis, values in sweep.grid.items()}
    largest["rep"] = sweep.replicates
    largest["method"] = len(sweep.methods)  # an extension records its added methods
    sizes: dict[str, tuple[int, str]] = {}
    for name in names:
        if copies is not None and name not in copies and not _is_own_array(name, copies):
            # Not ldpsim's (the root names its arrays, and ldpsim writes no other): a
            # file browser's or a sync tool's copy of a folder, an rsync partial folder.
            raise damaged(
                path,
                f"{name}/zarr.json",
                "a folder that is no array of this store: its root zarr.json names none "
                "such, and ldpsim writes none of that name",
                f"Move the folder {name!r} out of the store (the store's own arrays are "
                "as they were), then run the command again.",
            )
        try:
            array = group[name]
        except (ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
            raise damaged(path, f"{name}/zarr.json", exc) from None
        if not isinstance(array, zarr.Array):
            raise damaged(path, f"{name}/zarr.json", "a group where an array belongs")
        if copies is not None:
            copy = copies[name] if name in copies else None
            if copy is None or array.metadata.to_dict() != copy.metadata.to_dict():
                raise damaged(
                    path, f"{name}/zarr.json", "it differs from its copy in the root zarr.json"
                )
        axes = array.metadata.dimension_names
        for axis, size in zip(axes, array.shape, strict=True) if axes and not pending else ():
            if size > largest.get(str(axis), size):
                why = f"its axis {axis!r} has {size} entries where the sweep has "
                raise damaged(path, f"{name}/zarr.json", why + f"{largest[str(axis)]}")
            stated, where = sizes.setdefault(str(axis), (size, f"{name}/zarr.json"))
            if size != stated:
                why = f"its axis {axis!r} has {size} entries where {where} has {stated}"
                raise damaged(path, f"{name}/zarr.json", why)
        if read_chunks is True or (read_chunks and name in read_chunks):
            check_chunks(path, name, array)
    if not pending:
        done = group["done"]
        grid_axes = len(done.shape) - 1
        check_array_layout(path, attrs, grid_axes, tuple(done.chunks), done.shards)
    for _ in iter_errors(path):  # parses every record
        pass
    return attrs


def check_chunks(path: Path, name: str, array: zarr.Array) -> None:
    """Decode every chunk of ``array``; raise :class:`StoreDamage` naming the first file
    that cannot be decoded (one line)."""
    # A codec reports a damaged chunk with its own library's exception (zstd: RuntimeError,
    # a chunk of the wrong size: ValueError), hence the broad except clauses.
    try:
        array[...]
        return
    except Exception:  # located chunk by chunk below
        pass
    # Blocks and chunk keys count whole shards (files), not the chunks inside them.
    blocks = array.shards or array.chunks
    grid = (-(-size // block) for size, block in zip(array.shape, blocks, strict=True))
    for coords in itertools.product(*(range(count) for count in grid)):
        try:
            array.get_block_selection(coords)
        except Exception as exc:
            key = array.metadata.encode_chunk_key(coords)
            per_replicate = "rep" in (array.metadata.dimension_names or ())
            if name in VARIABLE_ATTRS and per_replicate:
                # A replicate's data: damage that `ldpsim run` repairs
                # (ldpsim.pipeline.store.damage).
                remedy = "`ldpsim run` recomputes the finished replicates it held."
            else:  # a coordinate or a truth: the sweep determines it, a run writes it again
                remedy = f"{DETERMINED_REMEDY}."
            raise damaged(path, f"chunk {name}/{key}", exc, remedy) from None
    raise damaged(path, f"{name}/", "its chunks cannot be read together")


def open_arrays(path: str | Path) -> dict[str, zarr.Array]:
    """Every array of the store, by name.

    Through the consolidated metadata where the store has them, as every reader: they
    are consistent while the arrays' own are briefly mixed, when a run is killed while
    committing an extension (the next run completes it before it checks).
    """
    consolidated = has_consolidated_metadata(Path(path))
    group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=consolidated)
    return {name: group[name] for name in group.array_keys()}


def replicate_arrays(
    path: str | Path, group: dict[str, zarr.Array] | None = None
) -> dict[str, zarr.Array]:
    """The store's arrays with a value per replicate (a 'rep' axis beside the grid's);
    ``group``: :func:`open_arrays` of the store, where the caller has it."""
    group = open_arrays(path) if group is None else group
    arrays = {name: group[name] for name in VARIABLE_ATTRS if name in group}
    # truth and pseudo_truth have no replicate axis: no run rewrites them (reading.py
    # refuses a store whose copy of them cannot be read).
    return {
        name: array
        for name, array in arrays.items()
        if "rep" in (array.metadata.dimension_names or ())
    }


def open_dataset(path: str | Path, chunks: str | None = "auto") -> xr.Dataset:
    """Open a store with xarray, lazily, through its consolidated metadata if it has them.

    They are always consistent (an extension replaces them in its last rename), while
    the arrays' own metadata are briefly mixed if a run is killed while committing one.
    Chunks are read when used; :func:`check_store` reads them all, and
    :func:`load_dataset` reads them into memory. ``chunks``: xarray's ``chunks`` (dask's
    ``"auto"``; None: numpy arrays read when used, what :func:`load_dataset` takes).

    Raises
    ------
    InputError
        Not an ldpsim store, or one whose metadata xarray cannot read.
    """
    return _open(path, chunks=chunks)


def load_dataset(
    path: str | Path, variables: list[str] | None = None, dataset: xr.Dataset | None = None
) -> xr.Dataset:
    """Read a store into memory (numpy arrays), each array in one zarr read.

    ``variables`` limits the data variables read (default: all); the coordinates are
    always read.

    What a summary, a plot or a status needs: every replicate is used, and reading
    once is much faster than reading lazily through dask, whose graph has a task per
    chunk (one grid point x ``rep_chunk`` replicates) and is read again for every
    statistic computed from it.

    ``dataset``: the store as :func:`open_dataset` opened it with ``chunks=None``, where
    the caller has it (not opened again).

    Raises
    ------
    InputError
        As :func:`open_dataset`, and naming the first chunk that cannot be decoded.
    """
    dataset = _open(path, chunks=None) if dataset is None else dataset
    if variables is not None:
        dataset = dataset[[name for name in variables if name in dataset]]
    try:
        return dataset.load()
    except Exception:  # a codec's own exception; located chunk by chunk below
        pass
    group = zarr.open_group(str(path), mode="r", zarr_format=3)
    for name in dataset.variables:
        check_chunks(Path(path), str(name), group[str(name)])
    raise damaged(path, "its chunks", "xarray cannot read them together")


def _open(path: str | Path, chunks: str | None) -> xr.Dataset:
    import xarray as xr

    read_attrs(path)
    consolidated = has_consolidated_metadata(Path(path))
    try:
        return xr.open_zarr(str(path), consolidated=consolidated, chunks=chunks)
    except Exception as exc:  # metadata xarray cannot read, or a coordinate's codec error
        # xarray reads the coordinates when it opens a store: a damaged chunk of one is
        # named as such (a run writes it again), not as damaged metadata.
        group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=consolidated)
        for name in group.array_keys():
            if len(group[name].shape) == 1 and group[name].metadata.dimension_names == (name,):
                check_chunks(Path(path), name, group[name])
        raise damaged(path, "its metadata", exc) from None


def iter_errors(path: str | Path) -> Iterator[dict[str, Any]]:
    """The failure records of a store, in file-name order.

    Only files named as records (:data:`ERROR_RECORD`) are read: a sync tool's copy of
    one counted its failures twice, and macOS's ``._NAME.json`` beside one (not JSON)
    called the store damaged.

    A record listed and gone when read is left out: a run writing the store removes the
    record of a failed replicate that it computed again without a failure (a worker
    killed the first time), so a reader meets it between its listing and its reading.

    Raises
    ------
    InputError
        A record that is not a JSON object (naming its file).
    """
    folder = Path(path) / META_GROUP / "errors"
    if not folder.is_dir():
        return
    for file in sorted(f for f in folder.glob("*.json") if error_record_place(f.name)):
        where = f"error record {file.relative_to(path)}"
        # The record only describes a failure: the replicate stays marked failed without it.
        remedy = "Delete that file to go on; the next run recomputes the failed replicate."
        try:
            record = json.loads(file.read_bytes())
        except FileNotFoundError:
            continue  # removed by a running run since the listing: as if never listed
        except (ValueError, OSError, RecursionError) as exc:  # bad JSON, UTF-8, too deep
            raise damaged(path, where, exc, remedy) from None
        if not isinstance(record, dict):
            raise damaged(path, where, "not a JSON object", remedy)
        yield record
