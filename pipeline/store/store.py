"""The Zarr v3 store of a sweep: creation, extension, chunk writes, error records.

Its layout (dimensions, chunks, attributes) is in :mod:`ldpsim.pipeline.store.layout`, reading
and damage checks in :mod:`ldpsim.pipeline.store.reading`, the identity check of a requested
sweep in :mod:`ldpsim.pipeline.store.identity` and the check of a --store path in
:mod:`ldpsim.pipeline.store.store_path`.

The store is the registry of what is done: a replicate's ``done`` flag is written
only after its values, by the driver, which is the only writer of its data files
(a worker may encode whole shards, which the driver moves into place:
:mod:`ldpsim.pipeline.store.handoff`). Every write covers whole chunks (one grid point x
``rep_chunk`` replicates).
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import zarr

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.store.chunk_writes import (
    Result,
    chunk_writes,
    placed_blocks,
    replicate_positions,
    variables_of,
)
from ldpsim.pipeline.store.code_identity import UNITS_ATTR, plan_units
from ldpsim.pipeline.store.digests import (
    DETERMINED,
    FOLDER,
    Planned,
    Write,
    determined_manifest,
    determined_names,
    has_digests,
    recording,
    writing,
)
from ldpsim.pipeline.store.handoff import HANDED, expected_places
from ldpsim.pipeline.store.identity import (
    added_methods,
    check_added_streams,
    check_streams,
    identity_diff,
)
from ldpsim.pipeline.store.integrity import damaged, is_sealed, seal
from ldpsim.pipeline.store.layout import (
    ADDED_DATA_TYPES,
    ADDED_VARIABLES,
    EXTENSION_JOURNAL,
    META_GROUP,
    VARIABLE_ATTRS,
    Layout,
    axis_contains,
    coord_array,
    layout_for,
    read_journal,
    store_index,
    truth_array,
)
from ldpsim.pipeline.store.provenance import RUNS_FOLDER
from ldpsim.pipeline.store.reading import (
    error_record_place,
    missing_variables,
    read_attrs,
    read_sweep,
    stored_layout,
)
from ldpsim.pipeline.store.store_path import check_store_path
from ldpsim.pipeline.store.template import template, write_template
from ldpsim.pipeline.sweep import CASE_AXIS, GridPoint, Sweep, grown_description


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
        # A store of an older ldpsim lacks the ADDED_VARIABLES until a run adds them.
        self._arrays = variables_of(self.group)
        #: The ``code_version`` the replicates written now get, and the unit changes
        #: this run accepted (:func:`ldpsim.pipeline.store.code_identity.plan_units`).
        self.code_version = 0
        self.code_changes: list[dict[str, Any]] = []
        #: Whether its files have digests (:mod:`ldpsim.pipeline.store.digests`), kept by
        #: its writes.
        self.digests = has_digests(dict(self.group.attrs))

    # -- creation and extension ------------------------------------------------------
    @classmethod
    def open_or_create(
        cls,
        path: str | Path,
        sweep: Sweep,
        before_write: Callable[[Path], None] | None = None,
        *,
        accept_code_change: bool = False,
        units: dict[str, dict[str, Any]] | None = None,
    ) -> tuple[Store, Changes]:
        """Open the store for ``sweep``, creating or extending it; report what changed.

        ``before_write(path)`` (taking the run lock) is called once the store exists and
        matches ``sweep``, before anything in it is changed other than its creation. A
        store created meanwhile by another run is opened like any existing store.
        ``accept_code_change``: a unit whose source changed since the store was written
        is recorded as a new generation of its ``units`` (the commit of the extension)
        instead of refused (:func:`ldpsim.pipeline.store.code_identity.plan_units`).
        ``units``: the sweep's unit origins as the run read them (read here if None).

        Raises
        ------
        InputError
            The path is not a directory, not writable, not an ldpsim store, or was made
            from a different specification (the message shows the difference); a unit's
            source changed (without ``accept_code_change``); the extension would change
            array shapes; a write failed (the store is unchanged).
        """
        path = Path(path)
        changes = inspect_store(path, sweep)
        _remove_abandoned_creations(path)
        if changes.created:
            layout = layout_for(sweep)
            try:
                created = _create_atomically(path, sweep, layout, units)
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
            plan = plan_units(path, read_attrs(path), sweep, accept_code_change, units)
            stored = read_sweep(path)
            layout = stored_layout(path)
            if changes:
                layout = _extend(path, stored, sweep, layout, changes, plan.attr)
            elif missing_variables(path) or not is_sealed(path) or plan.write:
                # A store of an older ldpsim, or units new to the store or changed.
                _commit(path, _extension_files(path, layout, stored, plan.attr))
        except OSError as exc:
            raise InputError(
                f"Cannot extend the store {str(path)!r}: {_describe(exc)}; the store is "
                "unchanged. Free some space or make it writable, then run again."
            ) from None
        store = cls(path, layout)
        store.code_version, store.code_changes = plan.code_version, plan.changes
        return store, changes

    @property
    def arrays(self) -> dict[str, zarr.Array]:
        """The store's variables with a value per replicate or grid point, by name."""
        return self._arrays

    # -- chunk writes ---------------------------------------------------------------------
    def index_of(self, point: GridPoint) -> tuple[int, ...]:
        return store_index(self.layout, point)

    def done_mask(self) -> np.ndarray:
        return np.asarray(self._arrays["done"][...], dtype=bool)

    def write_chunk(self, index: tuple[int, ...], chunk: int, result: dict[str, Any]) -> None:
        """Write one chunk's values, then its ``done`` flags (see :meth:`write_chunks`)."""
        self.write_chunks([(index, chunk, result)])

    def write_chunks(self, results: list[Result]) -> None:
        """Write the values of several chunks, then their ``done`` flags.

        ``results`` holds (grid index, chunk, result) with arrays for the replicates in
        ``result['reps']`` (a subset of the chunk's replicates); replicates not in it
        keep their stored values. Every shard (a chunk, in an unsharded store) that they
        touch is read and written once, whole: every write covers whole shards and never
        loses a finished result. Each variable is written for all shards before the
        next, ``done`` last, so ``done`` never vouches for a value not yet on disk.
        """
        values, done = chunk_writes(
            self._arrays,
            self.layout,
            self.code_version,
            results,
            read=lambda array, where: np.asarray(array[where]),
        )
        with self._recorded([*values, *done]):
            # Each variable for all blocks before the next, ``done`` last.
            for each in values:
                each.array[each.region] = each.values
            self._write_errors(results)
            for each in done:
                each.array[each.region] = each.values

    def write_handed(self, results: list[Result]) -> None:
        """Move the files that workers encoded for ``results`` into place
        (:mod:`ldpsim.pipeline.store.handoff`): the same record, order and digests as
        :meth:`write_chunks`, with the values already encoded.

        Raises
        ------
        NotWhole
            The chunks do not cover their write blocks (from
            :func:`~ldpsim.pipeline.store.handoff.expected_places`, a ValueError).
        RuntimeError
            The files are not the whole files of the blocks these chunks fill, or one is
            not in the store.

        Either way nothing of them is recorded or moved. A worker encodes only for the
        store whose lock holds the run's token, so either is a bug.
        """
        files = [result[HANDED] for _, _, result in results if result.get(HANDED) is not None]
        values, done = expected_places(self._arrays, self.layout, results)
        partials: dict[str, str | None] = {}
        planned: Planned = {}
        for handed in files:
            if partials.keys() & handed.partials.keys():
                raise RuntimeError("Two tasks encoded the same file of the store.")
            partials.update(handed.partials)
            for manifest, places in handed.planned.items():
                planned.setdefault(manifest, {}).update(places)
        handed_values = [place for handed in files for place in handed.values]
        handed_done = [place for handed in files for place in handed.done]
        missing = [p for p in partials.values() if p is not None and not (self.path / p).is_file()]
        recorded = {place for places in planned.values() for place in places}
        expected = values | done
        if (
            set(handed_values) != values
            or set(handed_done) != done
            or partials.keys() != expected
            or recorded != expected
            or missing
        ):
            raise RuntimeError(
                f"The files that workers encoded for the store {str(self.path)!r} are not "
                "those of the chunks they computed"
                + (f" ({missing[0]!r} is not in the store)" if missing else "")
                + "; nothing of them was moved into the store. Run again to compute them."
            )
        record = (
            recording(self.path, planned, self._arrays)
            if self.digests
            else contextlib.nullcontext()
        )
        with record:
            # Every block's values, then the failure records, ``done`` last.
            for place in handed_values:
                self._move(partials[place], place)
            self._write_errors(results)
            for place in handed_done:
                self._move(partials[place], place)

    def _move(self, partial: str | None, place: str) -> None:
        """The encoded file ``partial`` to ``place``; None: remove the file there."""
        if partial is None:
            (self.path / place).unlink(missing_ok=True)
        else:
            os.replace(self.path / partial, self.path / place)

    def _recorded(self, writes: list[Write]) -> contextlib.AbstractContextManager:
        """The writes' digests recorded around them (:func:`ldpsim.pipeline.store.digests.
        writing`), in a store whose files have digests."""
        if not self.digests:
            return contextlib.nullcontext()
        return writing(self.path, writes)

    def _write_errors(self, results: list[tuple[tuple[int, ...], int, dict[str, Any]]]) -> None:
        """Write the failure records of the results' failed replicates, and remove the
        records of replicates that failed before and are done now.

        The folder is listed once; the work grows with the failures, recorded or new,
        never with the replicates written.
        """
        folder = self.path / META_GROUP / "errors"
        recorded: dict[str, list[int]] = {}  # grid index's label -> replicates recorded
        for name in os.listdir(folder) if folder.is_dir() else ():
            place = error_record_place(name)
            if place is not None:
                recorded.setdefault(_index_label(place[0]), []).append(place[1])
        for index, _, result in results:
            errors = result.get("errors") or {}
            held = recorded.get(_index_label(index), ()) if recorded else ()
            if not errors and not held:
                continue  # none failed, now or before (most results: 28 us each saved)
            reps = replicate_positions(result)
            failed = np.fromiter(errors, dtype=np.int64, count=len(errors))
            failed = failed[np.isin(failed, reps)]
            for rep in failed.tolist():
                self.write_error(index, rep, errors[rep])
            before = np.asarray(held, dtype=np.int64)
            for rep in before[np.isin(before, reps) & ~np.isin(before, failed)].tolist():
                self.clear_error(index, rep)

    def write_methods(
        self, results: list[tuple[tuple[int, ...], int, dict[str, Any]]], first: int
    ) -> None:
        """Write the values of interval methods added to finished replicates.

        ``results`` holds (grid index, chunk, result) as for :meth:`write_chunks`, with
        the method arrays of the labels ``layout.methods[first:]`` only
        (:func:`ldpsim.pipeline.compute.added_methods.run_methods_chunk`). Only the region of
        those methods is read and written: the files of the methods the store was made
        with are never rewritten, and nothing else of the replicates is touched.
        ``method_seconds`` is written last: a finite value says that the method's values
        of that replicate are on disk (:func:`ldpsim.pipeline.store.pending.pending`).
        Only the cells (method, replicate) still pending are written: a replicate whose
        chain was run again for a method added later keeps the values of the methods it
        already held, even where that run failed. The replicates' failure records keep
        their other methods' entries.
        """
        a = self._arrays
        added = slice(first, len(self.layout.methods))
        placed = placed_blocks(self.layout, a["done"].shape[-1], results)
        # Per result, (methods, reps): the cells already done, read before any write
        # (``method_seconds`` is written last, so a finite one vouches for the rest).
        held: dict[int, np.ndarray] = {}
        for block in placed:
            seconds = np.asarray(a["method_seconds"][(*block.grid, added, block.reps)])
            for offset, pos, result in block.spots:
                cells = seconds[offset][:, pos]
                held[id(result)] = ~np.isnan(cells.reshape(*cells.shape[:2], -1)).all(axis=-1)

        writes: list[Write] = []

        def write(name, value_of):
            """Merge every block's results into ``name`` (read now, written below)."""
            for block in placed:
                where = (*block.grid, added, block.reps)
                old = np.asarray(a[name][where])
                for offset, pos, result in block.spots:
                    new, kept = value_of(result), held[id(result)]
                    kept = kept.reshape(kept.shape + (1,) * (new.ndim - kept.ndim))
                    old[offset][:, pos] = np.where(kept, old[offset][:, pos], new)
                writes.append(Write(name, a[name], where, old))

        write("lower", lambda r: r["lower"])
        write("upper", lambda r: r["upper"])
        write("method_estimate", lambda r: r["method_estimate"])
        per_checkpoint = "checkpoint" in (a["method_failed"].metadata.dimension_names or ())
        total = "checkpoint" not in (a["method_seconds"].metadata.dimension_names or ())

        def collapsed(values, reduce):  # a store whose method arrays lack 'checkpoint'
            return reduce(values.reshape(*values.shape[:2], -1), axis=2)

        write(
            "method_failed",
            lambda r: (
                r["method_failed"] if per_checkpoint else collapsed(r["method_failed"], np.any)
            ),
        )
        values = len(writes)
        write(
            "method_seconds",
            lambda r: collapsed(r["method_seconds"], np.sum) if total else r["method_seconds"],
        )
        with self._recorded(writes):
            for each in writes[:values]:
                each.array[each.region] = each.values
            self._merge_method_records(results, first, held)
            for each in writes[values:]:  # method_seconds last: it vouches for the rest
                each.array[each.region] = each.values

    def _merge_method_records(
        self,
        results: list[tuple[tuple[int, ...], int, dict[str, Any]]],
        first: int,
        held: dict[int, np.ndarray],
    ) -> None:
        """The failure records of the added methods' cells still pending (``held``: per
        result, the cells already done)."""
        labels = self.layout.methods[first:]
        for index, _, result in results:
            for i, rep in enumerate(result["reps"]):
                todo = [
                    label
                    for label, done in zip(labels, held[id(result)][:, i], strict=True)
                    if not done
                ]
                if not todo:
                    continue
                record = result["errors"].get(rep)
                if record is not None:
                    record = {
                        **record,
                        "methods": {k: v for k, v in record["methods"].items() if k in todo},
                        "tracebacks": {
                            k: v for k, v in (record.get("tracebacks") or {}).items() if k in todo
                        },
                    }
                    record = record if record["methods"] else None
                self._merge_method_record(index, int(rep), todo, record)

    def _merge_method_record(
        self, index: tuple[int, ...], rep: int, labels: list[str], new: dict[str, Any] | None
    ) -> None:
        """Update a replicate's failure record for the methods ``labels``: their entries
        replaced by ``new``'s (a method record; None: they did not fail), the others kept."""
        target = self.path / META_GROUP / "errors" / _error_name(index, rep)
        old = None
        if target.is_file():
            try:
                old = json.loads(target.read_bytes())
            except (ValueError, OSError):
                old = None  # unreadable: replaced by what this run knows
        if new is None and not set(labels) & set((old or {}).get("methods") or {}):
            return  # nothing recorded for these methods, nothing to record
        record = dict(new or old)
        methods = {k: v for k, v in ((old or {}).get("methods") or {}).items() if k not in labels}
        tracebacks = {
            k: v for k, v in ((old or {}).get("tracebacks") or {}).items() if k not in labels
        }
        methods.update((new or {}).get("methods") or {})
        tracebacks.update((new or {}).get("tracebacks") or {})
        if not methods:
            self.clear_error(index, rep)
            return
        record.update(
            kind="method",
            methods=methods,
            tracebacks=tracebacks,
            error="; ".join(f"{k}: {v}" for k, v in methods.items()),
        )
        self.write_error(index, rep, record)

    def write_error(self, index: tuple[int, ...], rep: int, record: dict[str, Any]) -> None:
        """Record a failure (atomically: temp file, then rename)."""
        folder = self.path / META_GROUP / "errors"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / _error_name(index, rep)
        _write_atomically(target, json.dumps(record, indent=1, default=str).encode())

    def clear_error(self, index: tuple[int, ...], rep: int) -> None:
        (self.path / META_GROUP / "errors" / _error_name(index, rep)).unlink(missing_ok=True)


def _index_label(index: tuple[int, ...]) -> str:
    """A grid index in the file names of error records: ``2_0_1`` (``0``: no grid)."""
    return "_".join(map(str, index)) or "0"


def _error_name(index: tuple[int, ...], rep: int) -> str:
    """The file name of the error record of replicate ``rep`` at grid ``index``."""
    return f"{_index_label(index)}__{rep}.json"


@dataclass(frozen=True)
class Changes:
    """What running a sweep changes in the layout of its store (false: nothing)."""

    created: bool = False
    added: dict[str, list[Any]] = field(default_factory=dict)
    replicates_added: int = 0
    #: The definitions of the case labels in ``added["case"]``.
    cases_added: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Interval methods new to the store (label -> parameters), appended to its
    #: ``method`` axis; computed for its finished replicates by
    #: :mod:`ldpsim.pipeline.compute.added_methods`.
    methods_added: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return (
            self.created
            or bool(self.added)
            or self.replicates_added > 0
            or bool(self.methods_added)
        )


def inspect_store(path: str | Path, sweep: Sweep, *, fingerprint: bool = True) -> Changes:
    """What running ``sweep`` would change in the store at ``path``; reads only.

    ``fingerprint``: check the store's numpy streams fingerprint too
    (:func:`ldpsim.pipeline.store.identity.check_streams`); a run checks it before it
    computes anything, and need not when there is nothing to compute.

    Raises
    ------
    InputError
        The path cannot hold a store, is not an ldpsim store, holds another
        specification (a stored method left out or with other parameters included) or
        other random streams, or ``sweep`` would change the shape of its arrays other
        than by adding grid values, replicates and interval methods.
    """
    path = Path(path)
    check_store_path(path)
    if not path.exists():
        return Changes(created=True)
    stored = read_sweep(path)
    if stored.backend != sweep.backend:
        raise InputError(
            f"The store {str(path)!r} holds replicates of the {stored.backend} backend and "
            f"this run asks for the {sweep.backend} backend; one store never mixes them "
            f"(their random streams differ). Run with backend = {stored.backend}, or into "
            "another --store path."
        )
    diff = identity_diff(stored, sweep)
    if diff:
        raise InputError(
            f"The store {str(path)!r} was made from a different specification; refusing "
            f"to change it. Differences (store -> requested): {'; '.join(diff)}. A store "
            "takes new grid values, replicates and interval methods, and keeps the methods "
            "it holds as they are: use another store path, or the original specification."
        )
    methods_added = added_methods(stored, sweep)
    check_streams(path, sweep, fingerprint=fingerprint)
    layout = stored_layout(path)
    added: dict[str, list[Any]] = {}
    for axis in layout.axes:
        new = [v for v in sweep.grid[axis] if not axis_contains(layout.axis_values[axis], v)]
        if new:
            added[axis] = new
            _check_fits_axis(path, axis, layout.axis_values[axis], new)
    requested = layout_for(sweep, rep_chunk=layout.rep_chunk, shards=None)
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
    changes = Changes(
        added=added,
        replicates_added=max(0, sweep.replicates - layout.replicates),
        cases_added={label: sweep.cases[label] for label in added.get(CASE_AXIS, [])},
        methods_added=methods_added,
    )
    check_added_streams(path, grown_sweep(stored, layout, changes))
    return changes


def _check_fits_axis(path: Path, axis: str, stored: list[Any], new: list[Any]) -> None:
    """Refuse new values that the axis's stored coordinate cannot hold: a value with a
    fraction on an axis of integers (its coordinate is int64: 0.5 would be stored as 0).

    Raises
    ------
    InputError
        Naming the axis, its values and the value refused.
    """
    if coord_array(axis, stored).dtype != np.int64:
        return
    for value in new:
        if not isinstance(value, int) and not (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        ):
            raise InputError(
                f"The store {str(path)!r} holds integers on its {axis!r} axis "
                f"({stored}); {value!r} cannot be added to it. Use another --store path, "
                f"or give that axis as floats from the start (e.g. {float(stored[0])!r})."
            )


def grown_sweep(stored: Sweep, layout: Layout, changes: Changes) -> Sweep:
    """The sweep a store records once ``changes`` are made to it: its own, with the new
    grid values, replicates, interval methods and cases (the stored spelling of each
    value it held already kept).

    Parameters
    ----------
    stored : Sweep
        The store's recorded sweep (:func:`read_sweep`).
    layout : Layout
        The store's layout (:func:`stored_layout`).
    changes : Changes
        What a run adds (:func:`inspect_store`).
    """
    return Sweep(
        name=stored.name,
        description=stored.description,
        replicates=layout.replicates + changes.replicates_added,
        seed=stored.seed,
        base=stored.base,
        grid={a: layout.axis_values[a] + changes.added.get(a, []) for a in layout.axes},
        methods={**stored.methods, **changes.methods_added},
        rep_chunk=stored.rep_chunk,
        cases={**stored.cases, **changes.cases_added},
    )


def _extend(
    path: Path,
    stored: Sweep,
    running: Sweep,
    layout: Layout,
    changes: Changes,
    units: str | None = None,
) -> Layout:
    """Grow the store along its grid axes, 'method' and 'rep' (all or nothing) for the
    run of ``running``; the new layout. Added methods are appended to the 'method' axis:
    the stored methods' files are never rewritten (their shards span the methods the
    store was made with). The description says what the grown store holds
    (:func:`ldpsim.pipeline.sweep.grown_description`)."""
    merged = grown_sweep(stored, layout, changes)
    grown = Layout(
        axes=layout.axes,
        axis_values=merged.grid,
        methods=[*layout.methods, *changes.methods_added],
        replicates=merged.replicates,
        d=layout.d,
        checkpoints=layout.checkpoints,
        rep_chunk=layout.rep_chunk,
        shard_reps=layout.shard_reps,
        shard_grid=layout.shard_grid,
        chunk_reps=layout.chunk_reps,
    )
    merged = replace(merged, description=grown_description(stored, running, merged))
    _commit(path, _extension_files(path, grown, merged, units))
    return grown


def _extension_files(
    path: Path, layout: Layout, merged: Sweep, units: str | None = None
) -> dict[str, bytes]:
    """The files (relative path -> content) of ``path`` that the extension changes.

    Zarr does the work on a scratch copy of the store's metadata: variables of
    :data:`ADDED_VARIABLES` that the store lacks added, arrays resized, new coordinates
    and truth written, the sweep attribute (and ``units``, the JSON of
    :func:`ldpsim.pipeline.store.code_identity.plan_units`, where given) updated, metadata
    consolidated.
    Growing an array writes only its ``zarr.json``: the new region is read as the fill
    value, never from the store's existing chunks.
    """
    sizes = {axis: len(values) for axis, values in layout.axis_values.items()}
    sizes["rep"] = layout.replicates
    sizes["method"] = len(layout.methods)
    source = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
    # A signal (Interrupted, raised here: runner.py's interruptible) may stop this while
    # zarr's I/O thread still writes into the scratch copy; its removal then fails, and
    # that OSError must not replace the signal ("Cannot extend ...: Directory not empty").
    scratch_folder = tempfile.TemporaryDirectory(
        prefix="ldpsim-extend-", ignore_cleanup_errors=True
    )
    with scratch_folder as folder:
        scratch = Path(folder)
        for node in ["", META_GROUP, *source.array_keys()]:
            (scratch / node).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path / node / "zarr.json", scratch / node / "zarr.json")
        for name in missing_variables(path):
            _add_variable(scratch, name, ADDED_VARIABLES[name])
        group = zarr.open_group(str(scratch), mode="r+", zarr_format=3, use_consolidated=False)
        for name in group.array_keys():
            array = group[name]
            dims = array.metadata.dimension_names or ()
            shape = tuple(sizes.get(dim, s) for dim, s in zip(dims, array.shape, strict=True))
            if shape != array.shape:
                array.resize(shape)
        # Every chunk of the arrays the sweep determines has its file, even one that
        # holds only the fill value: a missing file is damage (ldpsim.pipeline.store.integrity).
        with zarr.config.set({"array.write_empty_chunks": True}):
            for axis in layout.axes:
                group[axis][:] = coord_array(axis, layout.axis_values[axis])
            group["rep"][:] = np.arange(layout.replicates, dtype=np.int64)
            if group["method"].shape[0] != source["method"].shape[0]:  # methods added
                group["method"][:] = np.array(layout.methods, dtype=object)
                group.attrs["identity"] = json.dumps(
                    merged.identity(), sort_keys=True, default=str
                )
            group["truth"][...] = truth_array(merged, layout)
            if "pseudo_truth" in group.array_keys():  # absent from stores older than it
                group["pseudo_truth"][...] = truth_array(merged, layout, pseudo=True)
        group.attrs.update(
            {
                "sweep": merged.to_json(),
                "description": merged.description,
                **({UNITS_ATTR: units} if units else {}),
            }
        )
        consolidate(scratch)
        if has_digests(dict(group.attrs)):  # the determined arrays' digests, as extended
            manifest = scratch / META_GROUP / FOLDER / DETERMINED
            manifest.parent.mkdir(parents=True, exist_ok=True)
            manifest.write_bytes(determined_manifest(scratch, determined_names(scratch), path))
        files = {}
        for f in sorted(scratch.rglob("*")):
            rel = f.relative_to(scratch).as_posix()
            if f.is_file() and (
                not (path / rel).is_file() or (path / rel).read_bytes() != f.read_bytes()
            ):
                files[rel] = f.read_bytes()
    return files


def _add_variable(root: Path, name: str, like: str) -> None:
    """Add the array ``name`` with the metadata of the array ``like``, its own attributes.

    No chunk is written: every element reads as the fill value (NaN), as for the
    replicates of a new template.
    """
    metadata = json.loads((root / like / "zarr.json").read_text())
    metadata["attributes"] = {**metadata.get("attributes", {}), **VARIABLE_ATTRS[name]}
    if name in ADDED_DATA_TYPES:
        metadata["data_type"], metadata["fill_value"] = ADDED_DATA_TYPES[name]
    (root / name).mkdir()
    (root / name / "zarr.json").write_text(json.dumps(metadata, indent=2))


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
        # A run killed before it wrote its journal left its new files beside their
        # targets: the extension never happened (zarr would warn of every such file).
        for pattern in ("**/zarr.json.*.tmp", "*/c/**/*.tmp"):
            for temp in root.glob(pattern):
                temp.unlink(missing_ok=True)
        return False
    try:
        entries = read_journal(root)
    except ValueError as exc:  # bad JSON, nested too deep, or no list of pairs
        raise damaged(root, f"{META_GROUP}/{EXTENSION_JOURNAL}", exc) from None
    try:
        for temp, target in entries:
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
    """Gather every node's metadata in the root ``zarr.json`` (``xr.open_zarr(path)``),
    and record the digest of its content there (:func:`ldpsim.pipeline.store.integrity.seal`).

    Only an extension changes the metadata, and it rewrites the consolidated copy in
    the same commit, so the copy never hides data.
    """
    with warnings.catch_warnings():
        # Zarr notes that consolidation is not in the v3 spec, and that the ldpsim
        # group's records (errors/, lock.json) are no Zarr nodes: both are expected.
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not")
        warnings.filterwarnings("ignore", message="Object at .* is not recognized")
        zarr.consolidate_metadata(str(path), zarr_format=3)
    seal(path)


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


def _create_atomically(
    path: Path, sweep: Sweep, layout: Layout, units: dict[str, dict[str, Any]] | None = None
) -> bool:
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
        # The coordinates and truths are written now, every chunk of them (a missing
        # file is damage); the replicates' arrays are only allocated.
        write_template(tmp, *template(sweep, layout, units))
        zarr.open_group(str(tmp / META_GROUP), mode="w", zarr_format=3)
        consolidate(tmp)
        manifest = determined_manifest(tmp, determined_names(tmp))
        (tmp / META_GROUP / FOLDER).mkdir()
        (tmp / META_GROUP / FOLDER / DETERMINED).write_bytes(manifest)
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


def remove_partial_files(path: str | Path) -> int:
    """Delete temp files a killed writer left behind (zarr's ``*.partial``, our ``*.tmp``,
    and the ``*.partial`` files of workers' encoded shards that no run moved into place).

    Called by a run holding the lock, so no other run writes the store's data. Run
    records are written after a run releases the lock, by a run of any host: their
    folder is left to :func:`ldpsim.pipeline.store.provenance.record_run`, which removes only
    this host's abandoned ones.
    """
    records = Path(path) / META_GROUP / RUNS_FOLDER
    count = 0
    for pattern in ("*.partial", "*.tmp"):
        for f in Path(path).rglob(pattern):
            if f.parent != records:
                f.unlink(missing_ok=True)
                count += 1
    return count
