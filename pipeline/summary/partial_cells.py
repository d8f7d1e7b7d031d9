"""Partial cells: summary statistics computed on fewer than all of a grid point's replicates.

A replicate that failed, an interval method that failed in a replicate, or a replicate not
computed yet leaves a cell of the summary with fewer replicates than its grid point has.
Averaging over the replicates that happened to succeed is a selection, and it can be a
biased one (a method that fails exactly where its interval would be wide). So every such
cell is *marked* in the tables: a marker after its value and a footnote with the counts;
``csv`` and ``json`` carry the counts of every cell (``n_done``, ``n_failed``,
``n_replicates``); ``ldpsim summarize --strict`` exits 1 when any cell is marked.

A cell whose replicates were computed by more than one version of the code of its units
(a plugin edited between two runs, accepted with ``--accept-code-change``; the summary's
``code_versions``, :mod:`ldpsim.pipeline.store.code_identity`) is marked too, and the footnote
says how many versions it mixes.

A cell that no replicate can fill, though some are done and no method failed there (a
statistic the store has no values for, e.g. the last iterate in a store older than
``last``), is ``n/a`` and not marked.
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from ldpsim.pipeline.formatting import latex_escape
from ldpsim.pipeline.summary.variables import with_coords

#: Statistic -> (its count of replicates used, its count of replicates lost to failures).
#: The counts are summary variables (:func:`ldpsim.pipeline.summary.summary.summarize`).
COUNTS: dict[str, tuple[str, str]] = {
    "coverage": ("n_done", "n_failed"),
    "length": ("n_done", "n_failed"),
    "predicted_coverage": ("n_done", "n_failed"),
    "bias_over_sd": ("n_done", "n_failed"),
    "variance_ratio": ("n_done", "n_failed"),
    "replicates_needed": ("n_done", "n_failed"),
    "coord_mean_coverage": ("coord_mean_n_done", "coord_mean_n_failed"),
    "coord_mean_length": ("coord_mean_n_done", "coord_mean_n_failed"),
    "coord_mean_replicates_needed": ("coord_mean_n_done", "coord_mean_n_failed"),
    "joint_coverage": ("joint_n_done", "coord_mean_n_failed"),
    "joint_replicates_needed": ("joint_n_done", "coord_mean_n_failed"),
    "mse": ("mse_n_done", "replicates_failed"),
    "mse_last": ("mse_last_n_done", "replicates_failed"),
    # A comparison of two methods (compare.py): the replicates where both have bounds.
    "coverage_diff": ("n_paired", "n_unpaired"),
    "length_ratio": ("n_paired", "n_unpaired"),
    "coord_mean_coverage_diff": ("coord_mean_n_paired", "coord_mean_n_unpaired"),
    "coord_mean_length_ratio": ("coord_mean_n_paired", "coord_mean_n_unpaired"),
}

#: The marker after a partial cell's value, per table format.
MARKERS = {"text": "*", "markdown": "\\*", "latex": "$^{*}$"}


#: The attribute of a summary of some of a grid point's replicates (``ds.isel(rep=...)``):
#: how many it holds.
SELECTED_ATTR = "replicates_selected"


def replicates_per_point(ds: xr.Dataset) -> int:
    """The replicates per grid point that a summary counts a cell's replicates against.

    The sweep's (its ``sweep`` attribute), or the Dataset's ``rep`` size where that is
    larger or the Dataset has no sweep: a selection of some of a store's replicates
    (``ds.isel(rep=...)``) then shows as partial in every cell ("5 of 6"), never as
    complete. :func:`ldpsim.pipeline.accessor.sweep_part` gives a run's part its own
    sweep, so that the part is whole.
    """
    raw = ds.attrs.get("sweep")
    stated = json.loads(raw).get("replicates") if isinstance(raw, str) and raw else None
    held = int(ds.sizes["rep"])
    return max(held, stated) if isinstance(stated, int) else held


def replicates_attrs(ds: xr.Dataset) -> dict[str, int]:
    """A summary's attributes of its replicates: ``replicates``
    (:func:`replicates_per_point`) and, for a selection of some of them,
    :data:`SELECTED_ATTR` (the ``rep`` size), which the partial cells' footnote
    counts apart from the replicates not computed yet."""
    total = replicates_per_point(ds)
    held = int(ds.sizes["rep"])
    return {"replicates": total} | ({SELECTED_ATTR: held} if held < total else {})


def replicates(summary: xr.Dataset) -> int | None:
    """The replicates per grid point of the summary (None for a summary without them)."""
    value = summary.attrs.get("replicates")
    return None if value is None else int(value)


def partial(summary: xr.Dataset, stat: str) -> xr.DataArray:
    """Where the cells of ``stat`` are marked: partial (:func:`fewer`) or mixing code
    versions (the summary's ``code_versions`` above 1).

    Parameters
    ----------
    summary : xarray.Dataset
        From :func:`ldpsim.pipeline.summary.summary.summarize`.
    stat : str
        A key of :data:`COUNTS`.
    """
    return with_coords(_partial(summary, stat), summary)


# The masks are worked out as variables (xarray.Variable: named dimensions, no
# coordinates), read by position: the summary's variables share one layout, and
# DataArrays would align their indexes at every operation, which was nearly all of a
# small table's time.


def _partial(summary: xr.Dataset, stat: str) -> xr.Variable:
    mask = _fewer(summary, stat)
    return mask | mixed(summary, mask)


def partials(summary: xr.Dataset, stats: dict[str, str]) -> dict[str, xr.Variable]:
    """:func:`partial` of each key of ``stats`` (a table's statistic), counted as the
    statistic its value names (a key of :data:`COUNTS`): worked out once per pair of
    counts, which many statistics share. Variables (no coordinates): a table reads them
    by position."""
    masks: dict[tuple[str, str], xr.Variable] = {}
    out = {}
    for name, counted in stats.items():
        key = COUNTS[counted]
        if key not in masks:
            masks[key] = _partial(summary, counted)
        out[name] = masks[key]
    return out


def mixed(summary: xr.Dataset, like: xr.Variable) -> xr.Variable:
    """Where the cells shaped ``like`` mix replicates of several code versions."""
    if "code_versions" not in summary:
        return xr.zeros_like(like, dtype=bool)
    return _versions_like(summary, like) > 1


def _versions_like(summary: xr.Dataset, like: xr.Variable) -> xr.Variable:
    """The cells' code versions shaped ``like`` (a statistic without a method axis: the
    most versions of any method of its grid point)."""
    versions = summary.variables["code_versions"]
    if "method" in versions.dims and "method" not in like.dims:
        versions = versions.max("method")
    return _shaped(versions, like)


def _shaped(values: xr.Variable, like: xr.Variable) -> xr.Variable:
    """``values`` broadcast to the dimensions of ``like``, in its order."""
    return values.set_dims(dict(like.sizes)).transpose(*like.dims)


def fewer(summary: xr.Dataset, stat: str) -> xr.DataArray:
    """Where the cells of ``stat`` are partial: True where they count fewer replicates than
    their grid point has, or where a method failed in one of them (a mean over the
    coordinates counts a replicate whose method failed at some coordinates, over the
    others), except where none counts by design (no method failed there and some
    replicate of the grid point is done: a statistic the store has no values for).

    Parameters
    ----------
    summary : xarray.Dataset
        From :func:`ldpsim.pipeline.summary.summary.summarize`.
    stat : str
        A key of :data:`COUNTS`.
    """
    return with_coords(_fewer(summary, stat), summary)


def _fewer(summary: xr.Dataset, stat: str) -> xr.Variable:
    count_name, failed_name = COUNTS[stat]
    count = summary.variables[count_name]
    total = replicates(summary)
    if total is None or "replicates_done" not in summary:  # a summary of an older ldpsim
        return xr.zeros_like(count, dtype=bool)
    method_failures = summary.variables[failed_name] - summary.variables["replicates_failed"]
    by_design = (count == 0) & (method_failures == 0) & (summary.variables["replicates_done"] > 0)
    if "methods_pending" in summary:  # a method added to the store, not computed yet
        by_design &= _pending_like(summary, count) == 0
    return ((count < total) | (method_failures > 0)) & ~by_design


def _pending_like(summary: xr.Dataset, like: xr.Variable) -> xr.Variable:
    """The replicates that lack a cell's method (:func:`ldpsim.pipeline.store.pending.
    pending_cells`) shaped ``like``; none for a statistic without a method axis (the mean
    squared errors of the estimate: no interval method computes them)."""
    pending = summary.variables["methods_pending"]
    if "method" not in like.dims and "method" in pending.dims:  # a comparison's has none
        return xr.zeros_like(like)
    return _shaped(pending, like)


def any_partial(summary: xr.Dataset) -> bool:
    """Whether any cell of a table statistic (:data:`COUNTS`) is partial, at the
    coordinates each grid point has."""
    return any(bool(_shown_partial(summary, stat).any()) for stat in COUNTS if stat in summary)


def _shown_partial(summary: xr.Dataset, stat: str) -> xr.Variable:
    """:func:`partial` at the coordinates each grid point has (the cells tables show)."""
    mask = _partial(summary, stat)
    if "coord" in mask.dims and "coord_exists" in summary:
        mask = _shaped(mask & summary.variables["coord_exists"], mask)
    return mask


def footnote(summary: xr.Dataset, stats: list[str], fmt: str) -> str:
    """The footnote under a table whose cells of ``stats`` may be marked; '' if none is.

    It says what the marker means, the range of the counts over the marked cells and how
    to see each cell's counts and the failures.
    """
    total = replicates(summary)
    used: list[np.ndarray] = []
    lost: list[np.ndarray] = []
    done: list[np.ndarray] = []  # replicates of the grid point done, and failed
    failed: list[np.ndarray] = []
    pending: list[np.ndarray] = []  # done, but for the cell's method (added, not computed)
    versions: list[np.ndarray] = []  # code versions of the cells that mix them
    # Statistics that share their counts share their marked cells: each pair once.
    by_counts = {COUNTS[stat]: stat for stat in stats if stat in COUNTS and stat in summary}
    for stat in by_counts.values():
        shown = _shown_partial(summary, stat)
        mix = mixed(summary, shown) & shown
        if mix.any():
            versions.append(_versions_like(summary, mix).values[mix.values])
        mask = shown & _fewer(summary, stat)
        if not mask.any():  # none (a summary without the counts: an older ldpsim's)
            continue
        count_name, failed_name = COUNTS[stat]
        names = (
            (used, count_name),
            (lost, failed_name),
            (done, "replicates_done"),
            (failed, "replicates_failed"),
        )
        for values, name in names:
            values.append(_shaped(summary.variables[name], mask).values[mask.values])
        if "methods_pending" in summary:
            pending.append(_pending_like(summary, mask).values[mask.values])
    counts = np.concatenate(used) if used else np.array([], dtype=int)
    mixes = np.concatenate(versions) if versions else np.array([], dtype=int)
    if total is None or counts.size + mixes.size == 0:
        return ""
    mix_text = (
        f"mixes replicates of {span(mixes)} code versions (a unit's source changed "
        "between runs, accepted with --accept-code-change; ldpsim report STORE lists them)"
        if mixes.size
        else ""
    )
    if counts.size == 0:
        return _marked(f"{mix_text}.", fmt)
    failures = np.concatenate(lost)
    # A selection of some replicates (ds.isel(rep=...)): the others are not in it.
    unselected = total - int(summary.attrs.get(SELECTED_ATTR, total))
    # Neither done nor failed, or done but for a method added since: not computed yet.
    missing = total - unselected - np.concatenate(done) - np.concatenate(failed)
    if pending:
        missing = missing + np.concatenate(pending)

    # The counts a table's csv holds: a summary's, or a comparison's (compare.py).
    paired = any(count.endswith("n_paired") for count, _ in by_counts)
    shown_counts = "n_paired and n_unpaired" if paired else "n_done and n_failed"
    # A mean over the coordinates may count every replicate, some of them over fewer
    # than all their coordinates.
    some = " (or on fewer than all coordinates of some)" if (counts == total).any() else ""
    text = (
        f"computed on fewer than all {total} replicates of its grid point{some}: "
        f"{span(counts)} counted, {span(failures)} lost to a failure of the replicate or "
        f"of the method (ldpsim errors STORE), {span(missing)} not computed "
        "yet (ldpsim run resumes them)"
        f"{f', {unselected} not in the selection of replicates' if unselected else ''}; "
        "a selection by failure can bias the cell. "
        f"--format csv gives each cell's {shown_counts}."
    )
    return _marked(f"{text} Or: {mix_text}." if mix_text else text, fmt)


def span(values: np.ndarray) -> str:
    """``3`` or ``2-5``: the range of integer ``values``."""
    lo, hi = int(values.min()), int(values.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def _marked(text: str, fmt: str) -> str:
    """The footnote ``text`` after the marker of ``fmt``."""
    if fmt == "latex":
        return "\\textsuperscript{*} " + latex_escape(text).replace("--", "-{}-")
    return f"{MARKERS.get(fmt, '*')} {text}"
