"""Tables of a summary: which rows and columns, their captions, and ``format_table``."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import xarray as xr

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.formatting import (
    MISSING_TEXT,
    axis_labels,
    cell_text,
    count_text,
    fmt_name,
    format_level,
    format_number,
    latex_escape,
    named_text,
)
from ldpsim.pipeline.summary.case_parameters import case_parameters
from ldpsim.pipeline.summary.cell_statistics import (
    BOOTSTRAP_RESAMPLES,
    SE_RULE_TEXT,
    se_rule,
    statistic_names,
)
from ldpsim.pipeline.summary.nominal_claims import (
    CLAIM_OF,
    FLAG_SIZE,
    FLAG_Z,
    departs,
    method_claims,
)
from ldpsim.pipeline.summary.partial_cells import COUNTS, MARKERS, footnote, partials
from ldpsim.pipeline.summary.records import (
    COORD_MEAN_RECORD_FIELDS,
    ERROR_FIELDS,
    RECORD_FIELDS,
    coord_mean_records,
    records,
    records_over,
    render_records,
)
from ldpsim.pipeline.summary.summary import band_labels, shared_level, sweep_info
from ldpsim.pipeline.summary.table_layouts import Rows, latex_table, markdown_table, text_table
from ldpsim.pipeline.summary.variables import grid_axes
from ldpsim.pipeline.sweep import CASE_AXIS

#: Names that moved to records.py, formatting.py and table_layouts.py, importable from
#: here as before.
__all__ = [
    "COORDS_MODES",
    "COORD_MEAN_RECORD_FIELDS",
    "ERROR_FIELDS",
    "RECORD_FIELDS",
    "TABLE_FORMATS",
    "axis_labels",
    "case_columns",
    "check_statistics_shown",
    "coord_mean_records",
    "format_level",
    "format_number",
    "format_table",
    "records",
    "shown_coords",
    "summary_records",
    "table_coords",
    "table_rows",
]

#: Output formats of :func:`format_table`.
TableFormat = Literal["text", "markdown", "latex", "csv", "json"]
TABLE_FORMATS: tuple[str, ...] = get_args(TableFormat)
#: How :func:`format_table` shows the coordinates: ``all`` one row (record) each,
#: ``mean`` their means; ``auto`` is ``all`` up to :data:`AUTO_MAX_COORDS` coordinates.
CoordsMode = Literal["auto", "all", "mean"]
COORDS_MODES: tuple[str, ...] = get_args(CoordsMode)
#: The most coordinates that ``coords='auto'`` lists one by one in the tables.
AUTO_MAX_COORDS = 10

#: Row label -> summary variable of the table rows per method (each with its ``_se``).
TABLE_STATS = {"cover": "coverage", "length": "length"}
#: The same with the diagnostics: predicted coverage next to the observed one.
TABLE_STATS_DIAGNOSTICS = {
    "cover": "coverage",
    "pred cover": "predicted_coverage",
    "length": "length",
    "bias/sd": "bias_over_sd",
    "var ratio": "variance_ratio",
}
#: The same for ``coords='mean'``: the means over the coordinates, one row pair per method.
#: ``joint`` is the coverage of all coordinates at once, the target of a simultaneous band.
TABLE_COORD_MEANS = {
    "cover": "coord_mean_coverage",
    "joint": "joint_coverage",
    "length": "coord_mean_length",
}
#: Row label -> summary variable of the error table (``errors``): one row each per grid
#: point [and checkpoint], for all methods and coordinates.
TABLE_ERRORS = {"mse average": "mse", "mse last": "mse_last"}
#: Statistics that are counts, shown as whole numbers without a standard error.
COUNT_STATS = ("replicates_needed", "coord_mean_replicates_needed", "joint_replicates_needed")
#: Statistics shown with three significant digits (the others with three decimals).
SIGNIFICANT_STATS = ("length", "coord_mean_length", "mse", "mse_last")
#: Coverage statistics -> the count of the replicates they are a fraction of: the cells
#: that :func:`table_rows` tests against the nominal level when given one, each only for
#: the methods whose nominal claim it is (:mod:`ldpsim.pipeline.summary.nominal_claims`).
COVERAGE_COUNTS = {
    "coverage": "n_done",
    "coord_mean_coverage": "coord_mean_n_done",
    "joint_coverage": "joint_n_done",
}
#: The z of the uncertainty shown beside a coverage: Wilson's interval at 0 and 1 in the
#: tables, and the figures' error bars (+-2 Monte-Carlo standard errors). The flag is a
#: test of its own (:data:`~ldpsim.pipeline.summary.nominal_claims.FLAG_Z`).
INTERVAL_Z = 2.0
#: The mark of a flagged coverage cell, per table format.
DEPARTURE_MARK = "\N{DAGGER}"
DEPARTURE_MARKS = {"text": DEPARTURE_MARK, "markdown": DEPARTURE_MARK, "latex": r"$^{\dagger}$"}


def wilson_interval(fraction: float, count: float, z: float = INTERVAL_Z) -> tuple[float, float]:
    """Wilson's score interval of a binomial proportion.

    Unlike the Wald interval ``p +- z sqrt(p (1 - p) / R)``, it does not collapse to a
    point at 0 or 1: from R = 10 replicates that all covered it gives [0.714, 1] at
    z = 2, where Wald gives a standard error of 0.

    Parameters
    ----------
    fraction : float
        The observed proportion, in [0, 1].
    count : float
        The number of trials R, > 0.
    z : float
        The normal quantile, > 0 (2: about 95%).

    Returns
    -------
    tuple of float
        The lower and upper bound, within [0, 1]; NaN for a NaN proportion or R <= 0.

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
    inference. Journal of the American Statistical Association 22, 209-212.
    """
    if not (np.isfinite(fraction) and np.isfinite(count) and count > 0):
        return float("nan"), float("nan")
    z2 = z * z
    centre = (fraction + z2 / (2 * count)) / (1 + z2 / count)
    half = (
        z
        / (1 + z2 / count)
        * np.sqrt(fraction * (1 - fraction) / count + z2 / (4 * count * count))
    )
    return max(0.0, float(centre - half)), min(1.0, float(centre + half))


def coverage_cell(
    value: float, se: float, count: float, level: float, claimed: bool = True
) -> tuple[str, bool]:
    """The text of a coverage cell and whether it departs from the nominal ``level``.

    Inside (0, 1) the cell is ``0.902 (0.013)``; at 0 or 1, where the standard error
    ``sqrt(p (1 - p) / R)`` is 0, it shows Wilson's interval instead,
    ``1.000 [0.714, 1.000]``. Whether it departs is the test of
    :func:`~ldpsim.pipeline.summary.nominal_claims.departs` (two-sided at 5%, with the standard
    error under coverage = ``level``), and only where the coverage is the method's
    nominal claim (``claimed``).

    Parameters
    ----------
    value, se : float
        The coverage and its Monte-Carlo standard error.
    count : float
        The replicates the coverage is a fraction of (R).
    level : float
        The nominal level, in (0, 1).
    claimed : bool
        Whether this coverage is what the method claims (per coordinate for an interval,
        joint for a simultaneous band); False shows it without a flag.

    Returns
    -------
    tuple of (str, bool)
        The cell's text (``n/a`` for NaN) and the departure flag.
    """
    if not np.isfinite(value):
        return "n/a", False
    flag = claimed and bool(departs(value, count, level))
    if value in (0.0, 1.0) and not se > 0:
        low, high = wilson_interval(value, count)
        if np.isfinite(low):
            return f"{value:.3f} [{low:.3f}, {high:.3f}]", flag
    return cell_text(value, se, False), flag


def summary_records(summary: xr.Dataset, coord_means: bool = False) -> list[dict[str, Any]]:
    """The csv and json records of a summary, with its own statistics.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`ldpsim.pipeline.summary.summary.summarize`.
    coord_means : bool
        The records of the coordinate means (:func:`coord_mean_records`) instead of one
        per coordinate (:func:`records`). The statistics given to ``summarize`` are per
        coordinate: a summary with them is refused (:func:`check_statistics_shown`).

    Returns
    -------
    list of dict
        The records of :func:`records` (or :func:`coord_mean_records`); per coordinate,
        each statistic ``NAME`` given to ``summarize`` adds ``NAME``, ``NAME_se`` and
        ``NAME_se_method`` (how its standard error was computed: ``sd / sqrt(R)`` or
        ``bootstrap, B = 1000``) before ``n_replicates``.

    Raises
    ------
    ldpsim.pipeline.errors.InputError
        ``coord_means`` for a summary with statistics of its own.

    Examples
    --------
    >>> recs = summary_records(summary)  # doctest: +SKIP
    >>> recs[0]["upper_cover"], recs[0]["upper_cover_se_method"]  # doctest: +SKIP
    (0.95, 'sd / sqrt(R)')
    """
    names = statistic_names(summary)
    check_statistics_shown(names, "mean" if coord_means else "all", "mean")
    if not names:
        return coord_mean_records(summary) if coord_means else records(summary)
    checkpoint = ["checkpoint"] if "checkpoint" in summary.dims else []
    dims = [*grid_axes(summary), "method", *checkpoint, "coord"]
    own = records_over(summary, dims, [f for n in names for f in (n, f"{n}_se")])
    rules = {name: SE_RULE_TEXT[se_rule(summary, name)] for name in names}
    out = []
    for rec, extra in zip(records(summary), own, strict=True):
        total = rec.pop("n_replicates")  # stays the last field
        for name in names:
            rec.update({name: extra[name], f"{name}_se": extra[f"{name}_se"]})
            rec[f"{name}_se_method"] = rules[name]
        out.append({**rec, "n_replicates": total})
    return out


def record_fields(summary: xr.Dataset, coord_means: bool = False) -> list[str]:
    """The fields of :func:`summary_records`, the csv header when there is no record."""
    if coord_means:
        return [*COORD_MEAN_RECORD_FIELDS, "n_replicates"]
    own = [
        f"{n}{suffix}" for n in statistic_names(summary) for suffix in ("", "_se", "_se_method")
    ]
    return [*RECORD_FIELDS, *own, "n_replicates"]


def shown_coords(summary: xr.Dataset, coords: CoordsMode) -> Literal["all", "mean"]:
    """What ``coords`` means for this summary: ``auto`` is ``all`` for at most
    :data:`AUTO_MAX_COORDS` coordinates, else ``mean``.

    Raises
    ------
    ValueError
        ``coords`` is not one of :data:`COORDS_MODES`.
    """
    if coords not in COORDS_MODES:
        raise ValueError(
            f"The 'coords' parameter of format_table must be one of {', '.join(COORDS_MODES)}. "
            f"Got {coords!r}."
        )
    if coords == "auto":
        return "all" if summary.sizes["coord"] <= AUTO_MAX_COORDS else "mean"
    return coords


def table_coords(ds: xr.Dataset, fmt: str, coords: CoordsMode) -> Literal["all", "mean"]:
    """What the table of :func:`format_table` in format ``fmt`` shows: ``csv`` and
    ``json`` every coordinate's record unless ``coords`` is ``mean``, the other formats
    :func:`shown_coords`. ``ds`` is a summary or its store (only its coord count is read).

    Raises
    ------
    ValueError
        ``coords`` is not one of :data:`COORDS_MODES`.
    """
    shown = shown_coords(ds, coords)
    return ("mean" if coords == "mean" else "all") if fmt in ("csv", "json") else shown


def check_statistics_shown(
    statistics: Collection[str], shown: Literal["all", "mean"], coords: str
) -> None:
    """Refuse statistics given to summarize that a table would leave out.

    They are per coordinate; the means over the coordinates have no place for them, and
    averaging a bootstrapped number over coordinates has no standard error without a
    bootstrap of the whole replicates. Called before they are computed (they cost
    :data:`~ldpsim.pipeline.summary.cell_statistics.BOOTSTRAP_RESAMPLES` calls per cell), and
    again by the tables.

    Parameters
    ----------
    statistics : collection of str
        The names of the statistics (none: nothing to check).
    shown : {'all', 'mean'}
        What the table shows (:func:`table_coords`).
    coords : str
        The ``coords`` asked for, named in the message.

    Raises
    ------
    ldpsim.pipeline.errors.InputError
        Statistics, and a table of the means over the coordinates.
    """
    if not statistics or shown != "mean":
        return
    why = (
        f"coords='auto' shows the means over the coordinates for more than "
        f"{AUTO_MAX_COORDS} of them"
        if coords == "auto"
        else "coords='mean' shows the means over the coordinates"
    )
    raise InputError(
        f"The statistics given to summarize ({', '.join(statistics)}) are per coordinate, "
        f"and {why} without them; use coords='all' (--coords all), a row per coordinate."
    )


# -- tables -------------------------------------------------------------------------------
def caption_head(summary: xr.Dataset, where: str = "") -> str:
    """'name: 90% intervals', the start of a table's caption; with ``where`` (the values
    every row shares, ``n = 5e4``), 'name: 90% intervals at n = 5e4'."""
    name = sweep_info(summary).get("name")
    level = shared_level(summary)
    head = f"{name}: " if name else ""
    if level is not None:
        head += f"{format_level(level)} intervals"
    else:
        head += "intervals at each row's level" if "level" in summary.dims else "intervals"
    return f"{head} at {where}" if where else head


def replicates_per_cell(summary: xr.Dataset, count: str) -> str:
    """'replicates per cell: 35-36 of 40' from the count variable ``count``, over the
    coordinates each grid point has (a case of smaller d has no others)."""
    values = summary[count]
    if "coord" in values.dims and "coord_exists" in summary:
        values = values.where(summary["coord_exists"])
    counts = values.values[~np.isnan(values.values.astype(np.float64))]
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    # The replicates per grid point (a run's part: its own sweep's; a selection of some
    # replicates: the store's, so that it shows as partial), else the sweep's.
    reps = summary.attrs.get("replicates", sweep_info(summary).get("replicates"))
    done = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if reps is not None:
        done += f" of {reps}"
    return f"replicates per cell: {done}"


def summary_caption(summary: xr.Dataset, diagnostics: bool, where: str = "") -> str:
    """The caption of the coverage and length table (with ``diagnostics``: their rows;
    ``where``: as for :func:`caption_head`)."""
    shown = (
        "coverage, predicted coverage (pred cover: a normal interval of this bias/sd and "
        "var ratio), mean length, bias/sd of the estimate and var ratio (mean length / "
        "(2 z sd))^2"
        if diagnostics
        else "coverage and mean length"
    )
    return (
        f"{caption_head(summary, where)}; {shown} (Monte-Carlo standard errors in brackets); "
        f"{replicates_per_cell(summary, 'n_done')}"
    )


def statistics_caption(summary: xr.Dataset) -> str:
    """What the caption says of the statistics given to summarize ('' for none): how
    each standard error was computed."""
    names = statistic_names(summary)
    words = {
        "mean": "the mean of per-replicate values, standard error sd / sqrt(R)",
        "bootstrap": (
            f"standard error from {BOOTSTRAP_RESAMPLES} bootstrap resamples of the replicates"
        ),
        "none": "no replicate",
    }
    return "".join(f"; {name}: {words[se_rule(summary, name)]}" for name in names)


def coord_mean_caption(summary: xr.Dataset, diagnostics: bool, where: str = "") -> str:
    """The caption of the table of coordinate means (``where``: as for
    :func:`caption_head`)."""
    left_out = (
        "; the diagnostics are per coordinate and left out here (--coords all "
        "--diagnostics shows them)"
        if diagnostics
        else ""
    )
    return (
        f"{caption_head(summary, where)}; coverage and mean length, each the mean over the d "
        f"coordinates of the grid point (Monte-Carlo standard errors in brackets, from "
        f"the spread of the per-replicate means over the coordinates), and joint "
        f"coverage (all d coordinates covered at once; binomial standard errors); "
        f"{replicates_per_cell(summary, 'coord_mean_n_done')}; --coords all lists "
        f"each coordinate{left_out}"
    )


def error_caption(summary: xr.Dataset, where: str = "") -> str:
    """The caption of the mean squared error table (``where``: as for
    :func:`caption_head`)."""
    name = sweep_info(summary).get("name")
    counts = np.concatenate([summary[f"{v}_n_done"].values.ravel() for v in TABLE_ERRORS.values()])
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    head = f"{name}: " if name else ""
    return (
        f"{head}mean squared error{f' at {where}' if where else ''} (mean over replicates "
        "of the squared norm of the error) "
        f"of the average theta_bar_n and of the last iterate theta_n (Monte-Carlo standard "
        f"errors in brackets); replicates per cell: {lo if lo == hi else f'{lo}-{hi}'}"
    )


def case_columns(summary: xr.Dataset, fmt: str) -> tuple[list[str], list[list[str]]]:
    """The columns a table shows for the ``case`` axis: the parameters that vary across
    the cases (:func:`~ldpsim.pipeline.summary.case_parameters.case_parameters`), one each.

    Parameters
    ----------
    summary : xarray.Dataset
        A summary (or store) with a ``case`` axis.
    fmt : str
        The table's format: names and values are LaTeX for ``latex``
        (:func:`~ldpsim.pipeline.formatting.fmt_name`,
        :func:`~ldpsim.pipeline.formatting.parameter_text`).

    Returns
    -------
    tuple of (list of str, list of list of str)
        The column names (the spec keys: ``d``, ``sparsity``, ``mechanism``) and, per
        case in the order of the ``case`` coordinate, its cells (``-`` where a case
        leaves the parameter unset). The case label is a last column where two cases
        show the same cells. Both empty when no parameter varies (the table shows the
        ``case`` column as for any axis).
    """
    parameters = case_parameters(summary)
    if not parameters:
        return [], []
    names = [fmt_name(name, fmt) for name in parameters]
    cells = [
        [named_text(name, values[i], fmt) for name, values in parameters.items()]
        for i in range(summary.sizes[CASE_AXIS])
    ]
    if len({tuple(row) for row in cells}) < len(cells):
        labels = axis_labels(summary[CASE_AXIS].values, fmt)
        names.append(fmt_name(CASE_AXIS, fmt))
        cells = [[*row, label] for row, label in zip(cells, labels, strict=True)]
    return names, cells


def column_headers(summary: xr.Dataset, fmt: str) -> list[str]:
    """The value columns of :func:`table_rows`: one per n (``n = 1e4``, in LaTeX
    ``$n = 10^{4}$``), the spec's n alone without an n axis or checkpoints, else
    ``value``."""
    col_axis = "n" if "n" in grid_axes(summary) else None
    if col_axis is None and "checkpoint" not in summary.dims:
        n = sweep_info(summary).get("spec", {}).get("n")
        col_values = [] if n is None else [n]
    else:
        col_values = [] if col_axis is None else list(summary[col_axis].values)
    if not col_values:
        return ["value"]
    return [
        f"$n = {label.strip('$')}$" if fmt == "latex" else f"n = {label}"
        for label in axis_labels(col_values, fmt)
    ]


def table_rows(
    summary: xr.Dataset,
    fmt: str,
    stats: dict[str, str],
    per_method: bool = True,
    per_coord: bool = True,
    level: float | None = None,
) -> tuple[list[str], list[str], list[tuple[list[str], list[str]]]]:
    """Column names, column headers and rows (labels, cells) of a table of ``stats``.

    Rows per grid point [and checkpoint], with ``per_coord`` per coord (for statistics
    with a coord dim) and with ``per_method`` per method, in the order of the summary's
    coordinates (the sweep's); a ``case`` axis shows as the parameters that vary across
    its cases, a column each (:func:`case_columns`). A partial cell (fewer than all
    its grid point's replicates, :mod:`ldpsim.pipeline.summary.partial_cells`) ends in the
    format's marker. With a nominal ``level``, the coverage cells of
    :data:`COVERAGE_COUNTS` are written by :func:`coverage_cell` (Wilson's interval at 0
    and 1), and a departure from the level (the grid point's, where ``level`` is a grid
    axis) of a method's nominal claim
    (:func:`~ldpsim.pipeline.summary.nominal_claims.method_claims`) ends in the format's
    :data:`DEPARTURE_MARKS`.
    """
    axes = grid_axes(summary)
    row_dims: list[str] = [a for a in axes if a != "n"]
    if "checkpoint" in summary.dims:
        row_dims.append("checkpoint")
    if per_coord and summary.sizes["coord"] > 1:
        row_dims.append("coord")
    if per_method:
        row_dims.append("method")
    col_headers = column_headers(summary, fmt)
    # A case shows as the parameters that tell it apart (d, sparsity, mechanism), not as
    # its label: one column each in place of the case column.
    case_names, case_labels = case_columns(summary, fmt) if CASE_AXIS in row_dims else ([], [])
    names = [
        name
        for d in row_dims
        for name in (
            case_names
            if d == CASE_AXIS and case_names
            else ["coord" if d == "coord" else fmt_name(d, fmt)]
        )
    ] + [""]

    rows: list[tuple[list[str], list[str]]] = []
    index_values = [summary[d].values for d in row_dims]
    index_labels = [axis_labels(v, fmt) for v in index_values]
    # Positional selection: exact float labels or NaN never miss; a size-1 coord goes too.
    base = summary.isel(coord=0) if summary.sizes["coord"] == 1 else summary
    # A statistic given to summarize counts the replicates of the coverage.
    own = statistic_names(summary)
    counted = {var: var for var in COUNTS} | dict.fromkeys(own, "coverage")
    marks = partials(base, {var: counted[var] for var in stats.values() if var in counted})
    marker = MARKERS.get(fmt, "*")
    skip_missing = "coord" in row_dims and "coord_exists" in summary
    method_axis = row_dims.index("method") if "method" in row_dims else None
    # A comparison (compare.py) has no method axis, and no coverage to flag.
    method_claim = method_claims(summary) if "method" in summary.dims else {}
    for idx in np.ndindex(*(len(v) for v in index_values)):
        cell = base.isel(dict(zip(row_dims, idx, strict=True)))
        if skip_missing and not bool(cell["coord_exists"].any()):
            continue  # a coordinate this grid point does not have (a case of smaller d)
        labels = []
        for d, v, lab, i in zip(row_dims, index_values, index_labels, idx, strict=True):
            if d == CASE_AXIS and case_names:
                labels += case_labels[i]
            else:
                labels.append(f"coord {int(v[i])}" if d == "coord" else lab[i])
        where = dict(zip(row_dims, idx, strict=True))
        for stat, var in stats.items():
            values = np.atleast_1d(cell[var].values)
            flags = [False] * len(values)
            if var in COUNT_STATS:  # a count: no standard error
                cells = [count_text(float(v)) for v in values]
            elif level is not None and var in COVERAGE_COUNTS:
                ses = np.atleast_1d(cell[f"{var}_se"].values)
                counts = np.broadcast_to(cell[COVERAGE_COUNTS[var]].values, values.shape)
                method = (
                    None
                    if method_axis is None
                    else str(index_values[method_axis][idx[method_axis]])
                )
                claimed = method is None or method_claim[method] == CLAIM_OF[var]
                nominal = cell_level(cell, level)
                texts = [
                    coverage_cell(float(v), float(s), float(k), nominal, claimed)
                    for v, s, k in zip(values, ses, counts, strict=True)
                ]
                cells = [text for text, _ in texts]
                flags = [flag for _, flag in texts]
            else:
                ses = np.atleast_1d(cell[f"{var}_se"].values)
                cells = [
                    cell_text(float(v), float(s), var in SIGNIFICANT_STATS or var in own)
                    for v, s in zip(values, ses, strict=True)
                ]
            if fmt == "latex":  # a standard error too small to show: '(<0.001)'
                cells = [latex_escape(c) for c in cells]
            if var in marks:
                marked = marks[var].isel(where, missing_dims="ignore").values
                marked = np.broadcast_to(marked, values.shape)
                cells = [c + marker if m else c for c, m in zip(cells, marked, strict=True)]
            mark = DEPARTURE_MARKS.get(fmt, DEPARTURE_MARK)
            cells = [c + mark if d else c for c, d in zip(cells, flags, strict=True)]
            rows.append(([*labels, stat], cells))
    return names, col_headers, rows


def cell_level(cell: xr.Dataset, level: float) -> float:
    """The nominal level of a table cell: its grid point's where ``level`` is a grid axis
    (a coordinate of the cell), else ``level``."""
    if "level" in cell.coords and cell["level"].size == 1:
        return float(cell["level"])
    return float(level)


def planned_rows(rows: list, needed_row: str, joint_row: str, bands: list[str]) -> list:
    """The (labels, cells) ``rows`` of a table with one "R for se" row per method:
    ``joint_row`` (planned from the joint coverage) for the simultaneous ``bands``
    (:func:`~ldpsim.pipeline.summary.summary.band_labels`), ``needed_row`` for the others."""
    kept = []
    for labels, cells in rows:
        method, stat = labels[-2], labels[-1]
        if stat == (needed_row if method in bands else joint_row):
            continue
        kept.append((labels, cells))
    return kept


def format_table(
    summary: xr.Dataset,
    fmt: TableFormat = "text",
    diagnostics: bool = False,
    errors: bool = False,
    coords: CoordsMode = "auto",
    replicates_needed: bool = False,
) -> str:
    """Format a summary as a table.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`summarize`.
    fmt : {'text', 'markdown', 'latex', 'csv', 'json'}
        ``text``, ``markdown`` and ``latex`` follow the paper's layout: columns are the
        values of the ``n`` axis, rows the other grid axes x [checkpoint x] [coord x]
        method x {cover, length} (a ``case`` axis as the parameters that vary across
        its cases, :func:`case_columns`), each cell a value with its Monte-Carlo
        standard error in brackets, e.g. ``0.902 (0.013)``, under a caption naming the
        level and the number of replicates. Without an ``n`` axis or with one n, the
        table is compact: the statistics are its columns, a row per grid point [and
        checkpoint, coord] and method (:func:`compact_rows`); grid axes of one value
        are named in the caption (``90% intervals at n = 5e4``). Coverage cells that
        depart from the method's nominal claim end in :data:`DEPARTURE_MARKS`, with a
        note under the table (:mod:`ldpsim.pipeline.summary.nominal_claims`). ``csv`` and
        ``json`` hold one row / object per record of :func:`records` (every statistic,
        the diagnostics included; the coordinates each grid point has), or with
        ``coords='mean'`` of :func:`coord_mean_records`; both keep ``case`` beside its
        parameters (``case_d``, ``case_mechanism``).
    diagnostics : bool
        Add the rows pred cover, bias/sd and var ratio per method (``text``,
        ``markdown`` and ``latex``); see :mod:`ldpsim.pipeline.summary.diagnostics`. They are
        per coordinate: with the coordinate means (``coords``) they are left out, and
        the caption says so.
    errors : bool
        Follow the table with a second one (``text``, ``markdown`` and ``latex``): the mean
        squared error of the average and of the last iterate (``mse average``, ``mse
        last``), one row each per grid point [and checkpoint], columns as above.
    coords : {'auto', 'all', 'mean'}
        ``all``: rows (records) per coordinate, as above. ``mean``: instead of the coord
        level, the means over the coordinates (``coord_mean_coverage`` and
        ``coord_mean_length`` with their standard errors), one cover and one length row
        per grid point [and checkpoint] and method; ``csv`` and ``json`` then hold the
        records of :func:`coord_mean_records`. ``auto``: ``all`` for a summary of at
        most :data:`AUTO_MAX_COORDS` coordinates; otherwise ``mean`` in the ``text``,
        ``markdown`` and ``latex`` tables, while ``csv`` and ``json`` keep every
        coordinate's record. A summary with statistics of its own (``summarize``'s
        ``statistics``) is refused where the means are shown: they are per coordinate.
    replicates_needed : bool
        Add a row per method (``text``, ``markdown`` and ``latex``): the replicates that
        would give the coverage the summary's ``target_se`` (``replicates_needed``, or
        ``coord_mean_replicates_needed`` with the coordinate means). ``csv`` and ``json``
        always hold it.

    Returns
    -------
    str
        The table, ending with a newline.

    Raises
    ------
    ValueError
        ``fmt`` or ``coords`` is not one of the values above.
    ldpsim.pipeline.errors.InputError
        Statistics of the summary's own and a table of the coordinate means
        (:func:`check_statistics_shown`).
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(
            f"The 'fmt' parameter of format_table must be one of {', '.join(TABLE_FORMATS)}. "
            f"Got {fmt!r}."
        )
    shown = table_coords(summary, fmt, coords)
    check_statistics_shown(statistic_names(summary), shown, coords)
    if fmt in ("json", "csv"):
        # Machines get every coordinate unless the means are asked for by name.
        means = coords == "mean"
        return render_records(summary_records(summary, means), fmt, record_fields(summary, means))
    tables = [coverage_table(summary, fmt, diagnostics, coords, replicates_needed)]
    if errors:
        tables.append(error_table(summary, fmt))
    return "\n".join(table.render(fmt) for table in tables)


@dataclass
class Table:
    """A table before its layout: ``caption``, the row labels' column ``names``, the
    cells' column ``headers``, the ``rows`` (labels, cells) and a ``note`` under it."""

    caption: str
    names: list[str]
    headers: list[str]
    rows: Rows
    note: str = ""

    def render(self, fmt: str) -> str:
        """The table in ``text``, ``markdown`` or ``latex`` layout."""
        layout = {"markdown": markdown_table, "latex": latex_table}.get(fmt, text_table)
        return layout(self.caption, self.names, self.headers, self.rows, note=self.note)


def single_valued(summary: xr.Dataset) -> tuple[xr.Dataset, list[str]]:
    """The summary without its grid axes of one value, and those axes as ``n = 5e4``:
    a column (or a column of row labels) that repeats one value says it once, in the
    caption. Plain text, in every format: a LaTeX caption is escaped once, whole."""
    fixed = [axis for axis in grid_axes(summary) if summary.sizes[axis] == 1]
    texts = [f"{axis} = {axis_labels(summary[axis].values, 'text')[0]}" for axis in fixed]
    return (summary.isel({axis: 0 for axis in fixed}) if fixed else summary), texts


def compact_rows(
    names: list[str], headers: list[str], rows: Rows
) -> tuple[list[str], list[str], Rows]:
    """A table of one column of cells laid out with the statistics as its columns.

    ``rows`` (labels ending in the statistic's, one cell each) become one row per
    labels but the last, a cell per statistic in the order they first appear
    (:data:`~ldpsim.pipeline.formatting.MISSING_TEXT` where a row has none: a
    band's "R for se" planned per coordinate); ``names`` lose the statistic's column.
    ``headers`` (the one column's) are left to the caption.
    """
    del headers  # the caller says the one column's header in the caption
    stats = list(dict.fromkeys(labels[-1] for labels, _ in rows))
    grouped: dict[tuple[str, ...], dict[str, str]] = {}
    for labels, cells in rows:
        grouped.setdefault(tuple(labels[:-1]), {})[labels[-1]] = cells[0]
    compact = [
        (list(labels), [cells.get(stat, MISSING_TEXT) for stat in stats])
        for labels, cells in grouped.items()
    ]
    return names[:-1], stats, compact


def flag_note(summary: xr.Dataset, fmt: str, joint_shown: bool) -> str:
    """The note under a table with marked coverages: what the departure mark means (the
    test of :mod:`ldpsim.pipeline.summary.nominal_claims`) and, where the table shows the joint
    coverage or has simultaneous bands (``joint_shown``), each method's claim."""
    level = shared_level(summary)
    q = format_number(level) if level is not None else "q"
    nominal = q if level is not None else "level q"
    text = (
        f"the coverage departs from its nominal {nominal}: |coverage - {q}| > {FLAG_Z:.2f} "
        f"sqrt({q} (1 - {q}) / R), a two-sided test at {100 * FLAG_SIZE:g}% of coverage "
        f"= {q} with the standard error of a coverage of exactly {q} (about 1 cell in "
        "20 is marked by chance alone)."
    )
    bands = band_labels(summary)
    if bands or joint_shown:
        claim = (
            f"the simultaneous bands ({', '.join(bands)}) on their joint coverage, the "
            "other methods on the coverage of each coordinate (and its mean)"
            if bands
            else "every method here on the coverage of each coordinate (and its mean)"
        )
        text += (
            f" Only each method's nominal claim is tested: {claim}; the other coverage is "
            "shown as information and never marked."
        )
    if fmt == "latex":
        return DEPARTURE_MARKS["latex"] + " " + latex_escape(text)
    return f"{DEPARTURE_MARKS.get(fmt, DEPARTURE_MARK)} {text}"


def coverage_table(
    summary: xr.Dataset,
    fmt: str = "text",
    diagnostics: bool = False,
    coords: CoordsMode = "auto",
    replicates_needed: bool = False,
    flag_note_under: bool = True,
) -> Table:
    """The coverage and length table of :func:`format_table` (``text``, ``markdown``,
    ``latex``) and of the report.

    Columns are the values of the ``n`` axis; a table of one column (no ``n`` axis, or
    one n) is laid out compact, the statistics as its columns (:func:`compact_rows`).
    Grid axes of one value are said once in the caption (:func:`single_valued`).
    Coverage cells are tested against the nominal level where they are the method's
    claim (:func:`table_rows`), and ``flag_note_under`` puts :func:`flag_note` under the
    table. See :func:`format_table` for the other parameters.
    """
    shown = shown_coords(summary, coords)
    check_statistics_shown(statistic_names(summary), shown, coords)
    view, fixed = single_valued(summary)
    target = view.attrs.get("target_se")
    needed_row = f"R for se {format_number(target)}" if target is not None else "R needed"
    joint_row = f"{needed_row}, joint"
    # A simultaneous band plans its replicates from its joint coverage.
    bands = band_labels(view) if replicates_needed else []
    joint = {joint_row: "joint_replicates_needed"} if bands else {}
    level = view.attrs.get("level")
    if shown == "mean":
        stats = dict(TABLE_COORD_MEANS)
        if replicates_needed:
            stats.update({needed_row: "coord_mean_replicates_needed", **joint})
        names, headers, body = table_rows(view, fmt, stats, per_coord=False, level=level)
    else:
        stats = dict(TABLE_STATS_DIAGNOSTICS if diagnostics else TABLE_STATS)
        stats.update({latex_escape(n) if fmt == "latex" else n: n for n in statistic_names(view)})
        if replicates_needed:
            stats.update({needed_row: "replicates_needed", **joint})
        names, headers, body = table_rows(view, fmt, stats, level=level)
    if bands:
        body = planned_rows(body, needed_row, joint_row, bands)
    if len(headers) == 1:
        if headers[0] != "value":
            fixed.insert(0, column_headers(view, "text")[0])  # plain, as the others
        names, headers, body = compact_rows(names, headers, body)
    where = ", ".join(fixed)
    if shown == "mean":
        caption = coord_mean_caption(view, diagnostics, where)
    else:
        caption = summary_caption(view, diagnostics, where)
    caption += statistics_caption(view)
    if replicates_needed:
        caption += (
            f"; {needed_row}: the replicates that would give the coverage a Monte-Carlo "
            "standard error of " + format_number(target if target is not None else float("nan"))
        )
    if bands:
        caption += (
            f"; {joint_row}: the same for the joint coverage (all coordinates at once), "
            f"what a simultaneous band ({', '.join(bands)}) is for"
        )
    notes = [footnote(view, list(stats.values()), fmt)]
    mark = DEPARTURE_MARKS.get(fmt, DEPARTURE_MARK)
    marked = any(cell.endswith(mark) for _, cells in body for cell in cells)
    if flag_note_under and marked:
        notes.append(flag_note(view, fmt, joint_shown=shown == "mean"))
    separator = r" \par " if fmt == "latex" else "\n"
    return Table(caption, names, headers, body, separator.join(n for n in notes if n))


def error_table(summary: xr.Dataset, fmt: str = "text") -> Table:
    """The mean squared error table of :func:`format_table` and of the report: one row
    each per grid point [and checkpoint], compact as :func:`coverage_table`'s."""
    view, fixed = single_valued(summary)
    names, headers, body = table_rows(view, fmt, TABLE_ERRORS, per_method=False, per_coord=False)
    if len(headers) == 1:
        if headers[0] != "value":
            fixed.insert(0, column_headers(view, "text")[0])  # plain, as the others
        names, headers, body = compact_rows(names, headers, body)
    note = footnote(view, list(TABLE_ERRORS.values()), fmt)
    return Table(error_caption(view, ", ".join(fixed)), names, headers, body, note)
