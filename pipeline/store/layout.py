"""The layout of a sweep's Zarr store: dimensions, chunks, variables and attributes."""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.sweep import GridPoint, Sweep, at_grid_point

#: Sub-group of the store holding ldpsim's own records (error reports, the run lock).
META_GROUP = "ldpsim"
#: Inside META_GROUP: the renames of an extension being committed
#: (:func:`ldpsim.pipeline.store.store.finish_extension` completes them).
EXTENSION_JOURNAL = "extension.json"


def read_journal(root: Path) -> list[tuple[str, str]]:
    """The renames (new file, target; relative to the store ``root``) that an
    extension's journal lists.

    Raises
    ------
    OSError
        It cannot be read (FileNotFoundError: no extension is being committed).
    ValueError
        It is no JSON list of [new file, target] pairs of strings, or nested too deep.
    """
    try:
        entries = json.loads((root / META_GROUP / EXTENSION_JOURNAL).read_text())
    except RecursionError as exc:  # nested too deep: as bad JSON
        raise ValueError(str(exc)) from None
    if not isinstance(entries, list) or not all(
        isinstance(e, list) and len(e) == 2 and all(isinstance(p, str) for p in e) for e in entries
    ):
        raise ValueError("not a list of [new file, target] pairs")
    return [(temp, target) for temp, target in entries]


VARIABLE_ATTRS: dict[str, dict[str, str]] = {
    "estimate": {
        "long_name": "Polyak-Ruppert average theta_bar_n of LDP-SGD",
        "units": "parameter units",
    },
    "last": {"long_name": "last iterate theta_n of LDP-SGD", "units": "parameter units"},
    "projected": {
        "long_name": (
            "projection of theta_bar_n onto the l1 ball of radius r around theta* "
            "(SPEC 11; NaN: the model states no ball)"
        ),
        "units": "parameter units",
    },
    "lower": {"long_name": "lower confidence bound", "units": "parameter units"},
    "upper": {"long_name": "upper confidence bound", "units": "parameter units"},
    "truth": {"long_name": "true parameter theta*", "units": "parameter units"},
    "pseudo_truth": {
        "long_name": "limit theta_C of SGD with a clipped gradient (NaN: theta*, no clipping)",
        "units": "parameter units",
    },
    "done": {"long_name": "replicate durably written", "units": "1"},
    "failed": {"long_name": "replicate raised an error (see `ldpsim errors`)", "units": "1"},
    "method_failed": {
        "long_name": "interval method could not be computed there (see `ldpsim errors`)",
        "units": "1",
    },
    "method_estimate": {
        "long_name": "point estimate of the method (theta_bar_n but for the competitors)",
        "units": "parameter units",
    },
    "seconds": {"long_name": "compute time of the replicate", "units": "s"},
    "method_seconds": {
        "long_name": "compute time of the method (a competitor's: all its work)",
        "units": "s",
    },
    "job_id": {"long_name": "batch-system job id of the worker (0: none)", "units": "1"},
    "code_version": {
        "long_name": "generation of the 'units' attribute whose code computed the replicate "
        "(-1: not recorded)",
        "units": "1",
    },
}

#: Variables that stores of older ldpsim versions lack, each with the variable whose
#: dimensions, chunks and encoding it shares. Such a store is whole without them
#: (readers treat them as optional); a run that writes to it adds them, filled with NaN
#: (``pseudo_truth`` is then computed, like ``truth``, for every grid point).
ADDED_VARIABLES: dict[str, str] = {
    "last": "estimate",
    "pseudo_truth": "truth",
    "method_estimate": "lower",
    "method_seconds": "method_failed",
    "projected": "estimate",
    "code_version": "done",
}
#: The added variables whose data type differs from the one they share the layout with:
#: (zarr data type, fill value as zarr's metadata writes it).
ADDED_DATA_TYPES: dict[str, tuple[str, object]] = {
    "method_seconds": ("float64", "NaN"),
    "code_version": ("int16", -1),
}


COORD_ATTRS = {
    "rep": {"long_name": "replicate index"},
    "coord": {"long_name": "coordinate j of theta"},
    "method": {"long_name": "interval method label"},
    "checkpoint": {"long_name": "number of SGD steps at which the interval is taken"},
    "n": {"long_name": "number of SGD steps (sample size)"},
    "tau": {"long_name": "quantile level"},
    "eps": {"long_name": "local differential privacy parameter"},
    "case": {"long_name": "label of a sweep case (spec values that vary together)"},
    "delta": {"long_name": "local differential privacy parameter delta (gaussian)"},
    "mu": {"long_name": "Gaussian differential privacy parameter (gdp)"},
    "level": {"long_name": "nominal coverage 1 - alpha of the intervals"},
    "c": {"long_name": "step-size constant c (eta_i = c i^-gamma)"},
    "gamma": {"long_name": "step-size exponent gamma (eta_i = c i^-gamma)"},
    "theta0": {"long_name": "starting point theta_0 of LDP-SGD"},
    "batch": {"long_name": "mini-batch size s (users per SGD step)"},
    "model": {"long_name": "model (data generator and loss)"},
    "mechanism": {"long_name": "local privacy mechanism"},
}


def coord_attrs(name: str) -> dict[str, str]:
    """The attributes of the coordinate ``name`` of a new store: its own long_name, or,
    for a grid axis without one (a model's or mechanism's parameter), a long_name that
    says which spec key it is, so that every coordinate explains itself (SPEC section 7)."""
    return dict(COORD_ATTRS.get(name, {"long_name": f"spec value {name!r} (a grid axis)"}))


#: Core-seconds a task aims at (its replicates' estimated cost, :mod:`ldpsim.pipeline.cost`):
#: long enough that scheduling and a write cost little beside it, short enough to
#: spread a sweep over many workers and to lose little when one dies. The driver's work
#: for a task does not grow with its replicates (docs/performance.md), so a second of
#: cheap replicates is one task however many they are, up to :data:`MAX_REP_CHUNK`.
TASK_SECONDS = 1.0
#: Most replicates in a task (and a chunk along 'rep') on the CPU backend: a second of
#: replicates that cost 10 us each.
MAX_REP_CHUNK = 100_000
#: Most replicates in a chunk on the GPU backend: one kernel launch.
GPU_REP_CHUNK = 10_000
#: Most bytes of a chunk's result (:func:`result_bytes`), which the worker sends and
#: the driver holds until it writes them.
TASK_BYTES = 32 * 2**20
#: Uncompressed bytes a chunk of the largest variable aims at: what a write re-encodes
#: and a read decodes at a time (zarr's cost per chunk is fixed: few large chunks read
#: fast).
CHUNK_BYTES = 256 * 2**10
#: zstd's level for the replicates' arrays: its fastest. The floats of a replicate are
#: noise to a compressor (the default level 3 saved 6% of their bytes at 7 times the
#: CPU, most of the client's work per replicate); runs of fill values and the flags
#: still shrink to almost nothing.
ZSTD_LEVEL = -1
#: The same for a shard, one file: a write rewrites the shards it touches.
SHARD_BYTES = 2 * 2**20


def result_bytes(methods: int, checkpoints: int, d: int) -> int:
    """Bytes of one replicate in a chunk's result (``run_chunk``): estimate, last and
    projected (K d floats), lower, upper and method_estimate (M K d), method_seconds
    (M K floats) and method_failed (M K flags), seconds, job_id and failed."""
    return 8 * checkpoints * d * (3 + 3 * methods) + 9 * methods * checkpoints + 17


def default_rep_chunk(sweep: Sweep) -> int:
    """Replicates per chunk (= per task): about :data:`TASK_SECONDS` of the sweep's most
    expensive grid point, in [1, :data:`MAX_REP_CHUNK`], at most :data:`TASK_BYTES` of
    results and at most the replicates; on the GPU backend as many as allowed, up to
    :data:`GPU_REP_CHUNK` (a chunk is one kernel launch)."""
    from ldpsim.pipeline.cost import replicate_seconds

    if sweep.rep_chunk is not None:
        return sweep.rep_chunk
    if sweep.backend == "gpu":  # one launch holds a chunk: as many threads as can be
        return min(GPU_REP_CHUNK, sweep.replicates)
    points = sweep.points()
    seconds = max(replicate_seconds(p.normalized) for p in points)
    checkpoints = len(points[0].normalized.checkpoints or ()) or 1
    d = max(p.normalized.model.dim for p in points)
    fits = TASK_BYTES // result_bytes(len(sweep.methods), checkpoints, d)
    most = min(MAX_REP_CHUNK, sweep.replicates, max(1, fits))
    return int(min(most, max(1, TASK_SECONDS // seconds)))


def _multiple(unit: int, target_bytes: int, unit_bytes: int, most: int) -> int:
    """``unit`` times as many as fit in ``target_bytes`` (at least 1, at most ``most``)."""
    return unit * max(1, min(most, target_bytes // max(1, unit_bytes)))


def shard_shape(
    grid_shape: tuple[int, ...], rep_chunk: int, replicates: int, rep_bytes: int
) -> tuple[tuple[int, ...], int, int]:
    """Shard and chunk extents: (grid points of a shard, replicates of a chunk, of a shard).

    Along 'rep' a chunk holds whole tasks (``rep_chunk`` replicates), about
    :data:`CHUNK_BYTES` of a grid point (one task when a task holds a quarter of that or
    more), and a shard whole chunks, about
    :data:`SHARD_BYTES`; then a shard (and each of its chunks) takes grid points,
    from the last grid axis backwards, so that a sweep of many small grid points ends
    up in a few files. ``rep_bytes``: bytes of one replicate of one grid point in the
    largest variable.
    """
    tasks = math.ceil(replicates / rep_chunk)
    chunk_reps = _multiple(rep_chunk, CHUNK_BYTES, rep_bytes * rep_chunk, tasks)
    if rep_bytes * rep_chunk >= CHUNK_BYTES // 4:
        # A task's result then fills whole chunks, and the client writes them without
        # reading or re-encoding a chunk that other tasks fill later (docs/performance.md).
        chunk_reps = rep_chunk
    chunks = math.ceil(replicates / chunk_reps)
    shard_reps = _multiple(chunk_reps, SHARD_BYTES, rep_bytes * chunk_reps, chunks)
    points = max(1, SHARD_BYTES // max(1, rep_bytes * shard_reps))
    grid: list[int] = []
    for size in reversed(grid_shape):
        take = max(1, min(size, points))
        grid.insert(0, take)
        points //= take
    return tuple(grid), chunk_reps, shard_reps


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
    """Dimension names and sizes of a sweep's store, its chunks and shards.

    A task computes ``rep_chunk`` replicates of a grid point at most. A shard (Zarr v3
    sharding), one file, covers ``shard_grid`` grid points x ``shard_reps``
    replicates, in chunks of ``shard_grid`` x ``chunk_reps`` (whole tasks). A store of
    ldpsim <= 0.2 has no shards (``shard_reps`` None): a file per chunk of one grid
    point x ``rep_chunk`` replicates.
    """

    axes: list[str]
    axis_values: dict[str, list[Any]]
    methods: list[str]
    replicates: int
    d: int
    checkpoints: list[int] | None
    rep_chunk: int
    shard_reps: int | None = None
    shard_grid: tuple[int, ...] | None = None
    chunk_reps: int | None = None

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(len(self.axis_values[a]) for a in self.axes)

    @property
    def sharded(self) -> bool:
        return self.shard_reps is not None

    def extra(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        if self.checkpoints is None:
            return ("coord",), (self.d,)
        return ("checkpoint", "coord"), (len(self.checkpoints), self.d)

    def write_block(self) -> tuple[tuple[int, ...], int]:
        """The unit a write covers: a shard (grid extent, replicates), or a chunk."""
        if self.shard_reps is None or self.shard_grid is None:
            return (1,) * len(self.axes), self.rep_chunk
        return self.shard_grid, self.shard_reps

    def block_of(self, index: tuple[int, ...], chunk: int) -> tuple[int, ...]:
        """The write block (:meth:`write_block`) holding task chunk ``chunk`` of the grid
        point at ``index``: its position along each grid axis, then along 'rep'."""
        g_block, rep_block = self.write_block()
        rep0 = self.task_chunk_reps(chunk).start
        return (*(i // b for i, b in zip(index, g_block, strict=True)), rep0 // rep_block)

    def block_slices(self, block: tuple[int, ...]) -> tuple[tuple[slice, ...], slice]:
        """The grid points (a slice along each grid axis) and the replicates of write
        block ``block`` (:meth:`block_of`), cut at the grid's and the replicates' ends."""
        g_block, rep_block = self.write_block()
        grid = tuple(
            slice(k * b, min((k + 1) * b, size))
            for k, b, size in zip(block[:-1], g_block, self.grid_shape, strict=True)
        )
        rep0 = block[-1] * rep_block
        return grid, slice(rep0, min(rep0 + rep_block, self.replicates))

    def task_chunks(self) -> int:
        """How many chunks of at most ``rep_chunk`` replicates a grid point has."""
        return math.ceil(self.replicates / self.rep_chunk)

    def task_chunk_reps(self, chunk: int) -> range:
        """The replicates of task chunk ``chunk`` (0 <= chunk < :meth:`task_chunks`)."""
        rc = self.rep_chunk
        return range(chunk * rc, min((chunk + 1) * rc, self.replicates))

    @property
    def zarr_chunk_reps(self) -> int:
        """Replicates of a Zarr chunk (of a shard's chunk when sharded)."""
        return self.chunk_reps or self.rep_chunk


def layout_for(
    sweep: Sweep,
    rep_chunk: int | None = None,
    shards: tuple[tuple[int, ...], int, int] | bool | None = True,
) -> Layout:
    """The layout of a new store for ``sweep``; ``rep_chunk`` and ``shards`` (grid extent,
    chunk replicates, shard replicates; None: unsharded) of an existing store are passed
    to keep them."""
    points = sweep.points()
    checkpoints = points[0].normalized.checkpoints
    axis_values = {a: list(v) for a, v in sweep.grid.items()}
    layout = Layout(
        axes=list(sweep.grid),
        axis_values=axis_values,
        methods=list(sweep.methods),
        replicates=sweep.replicates,
        d=max(p.normalized.model.dim for p in points),
        checkpoints=list(checkpoints) if checkpoints else None,
        rep_chunk=rep_chunk or default_rep_chunk(sweep),
    )
    if shards is True:
        rep_bytes = 8 * len(layout.methods) * math.prod(layout.extra()[1])
        shards = shard_shape(layout.grid_shape, layout.rep_chunk, layout.replicates, rep_bytes)
    if shards:
        layout.shard_grid = tuple(shards[0])
        layout.chunk_reps, layout.shard_reps = int(shards[1]), int(shards[2])
    return layout


#: An extension is slow to write where its store's shards along 'rep' would be this many
#: times as many as a new store's for the same sweep, and at least :data:`MANY_SHARDS`.
SMALL_SHARDS_FACTOR = 16
MANY_SHARDS = 64


def small_shards_warning(stored: Layout, sweep: Sweep) -> str | None:
    """The line to print before a run grows ``stored`` to ``sweep``'s replicates, where
    the store's shards, sized when it was made for fewer, would make many more files
    than a new store of ``sweep`` (None: nothing to say).

    A shard holds ``shard_reps`` replicates for good (no stored file moves when a store
    grows), so a store made for 3 replicates and grown to 2,000 writes 667 files per
    variable and grid point where a new store writes one: on the 2-core machine that
    run took 110 s, a new store's 3.8 s (2 grid points, 3 checkpoints, bm / sn /
    oracle, n = 1e4; 2026-12-01).
    """
    if sweep.replicates <= stored.replicates or stored.shard_reps is None:
        return None
    fresh = layout_for(sweep)
    if fresh.shard_reps is None:
        return None
    shards = math.ceil(sweep.replicates / stored.shard_reps)
    fresh_shards = math.ceil(sweep.replicates / fresh.shard_reps)
    if shards < max(MANY_SHARDS, SMALL_SHARDS_FACTOR * fresh_shards):
        return None
    return (
        f"the store's shards hold {stored.shard_reps} replicates each (sized when it was "
        f"made for fewer), so {sweep.replicates} replicates take {shards} files per "
        f"variable and grid point, where a new store takes {fresh_shards}: writing them is "
        "slow. For a run this much larger, a new store (--store NEW) is faster."
    )


def coord_array(name: str, values: list[Any]) -> np.ndarray:
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=object)  # variable-length strings in Zarr v3
    if name == "n" or all(isinstance(v, int) for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=np.float64)


def gpu_streams_attr(sweep: Sweep) -> dict[str, str]:
    """The ``gpu_streams`` root attribute of a GPU sweep's store: the version of its
    Philox streams (:data:`ldpsim.tasks.streams.philox.STREAMS_VERSION`); none for the CPU."""
    if sweep.backend != "gpu":
        return {}
    from ldpsim.tasks.streams.philox import STREAMS_VERSION as GPU_STREAMS

    return {"gpu_streams": GPU_STREAMS}


def truth_array(sweep: Sweep, layout: Layout, *, pseudo: bool = False) -> np.ndarray:
    """theta* for every grid point, NaN-padded to the store's d.

    With ``pseudo``: the model's pseudo-truth theta_C (SPEC 9.5), all NaN at grid
    points whose model converges to theta* (no clipping).
    """
    out = np.full((*layout.grid_shape, layout.d), np.nan)
    for point in sweep.points():
        index = store_index(layout, point)
        model = point.normalized.model
        try:
            truth = model.pseudo_truth() if pseudo else model.truth()
        except ValueError as error:  # a limit its model cannot find (a small clip)
            raise InputError(f"{str(error).rstrip('.')}{at_grid_point(point.values)}.") from None
        if truth is not None:
            out[index][: model.dim] = _checked_truth(model, truth, pseudo, point)
    return out


def _checked_truth(model: Any, truth: Any, pseudo: bool, point: GridPoint) -> np.ndarray:
    """``truth`` as d finite floats, or a one-line InputError naming the model.

    A plugin's truth of another length crashed the store's creation with a traceback
    (longer) or was NaN-padded, its missing coordinates then left out of every table as
    if the model had none (shorter, or NaN), exit code 0 (a hunt, 2026-12-02).
    """
    try:
        values = np.asarray(truth, dtype=np.float64)
    except (TypeError, ValueError):
        values = None
    if values is not None and values.shape == (model.dim,) and np.isfinite(values).all():
        return values
    what = "pseudo_truth()" if pseudo else "truth()"
    shape = "a value that is not numbers" if values is None else f"shape {values.shape}"
    if values is not None and values.shape == (model.dim,):
        # The first value that is not finite, not all d of them (d = 1000: a line of
        # kilobytes).
        bad = np.flatnonzero(~np.isfinite(values))
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        shape = f"{values[bad[0]]} at coordinate {bad[0]}{more}"
    raise InputError(
        f"The {what} of model {model.name!r} must be d = {model.dim} finite floats "
        f"(docs/extending.md). Got {shape}{at_grid_point(point.values)}."
    )


def store_index(layout: Layout, point: GridPoint) -> tuple[int, ...]:
    """The position of ``point`` along each grid axis of the store."""
    # An exact (type, value) lookup, built once per layout; axis_position for the rest.
    lookup = layout.__dict__.get("_positions")
    if lookup is None:
        lookup = {
            a: {_exact(v): i for i, v in reversed(list(enumerate(layout.axis_values[a])))}
            for a in layout.axes
        }
        layout.__dict__["_positions"] = lookup
    out = []
    for a in layout.axes:
        value = point.values[a]
        try:
            out.append(lookup[a][_exact(value)])
        except (KeyError, TypeError):
            out.append(axis_position(layout.axis_values[a], value))
    return tuple(out)


def _exact(value: Any) -> tuple[type, Any]:
    return type(value), value


def axis_position(values: list[Any], value: Any) -> int:
    for i, v in enumerate(values):
        if (type(v) is type(value) and v == value) or (
            isinstance(v, float) and isinstance(value, float) and math.isinf(v) and v == value
        ):
            return i
    for i, v in enumerate(values):
        if v == value:
            return i
    raise KeyError(value)


def axis_contains(values: list[Any], value: Any) -> bool:
    try:
        axis_position(values, value)
    except KeyError:
        return False
    return True
