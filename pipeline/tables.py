"""Tables of a summary: which rows and columns, their captions, and ``format_table``."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal, get_args

import numpy as np
import xarray as xr

from ldpsim.pipeline.case_parameters import case_parameters
from ldpsim.pipeline.cell_statistics import (
    BOOTSTRAP_RESAMPLES,
    SE_RULE_TEXT,
    se_rule,
    statistic_names,
)
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.formatting import (
    axis_labels,
    cell_text,
    count_text,
    fmt_name,
    format_level,
    format_number,
    latex_escape,
    parameter_text,
)
from ldpsim.pipeline.partial_cells import COUNTS, MARKERS, footnote, partial
from ldpsim.pipeline.records import (
    COORD_MEAN_RECORD_FIELDS,
    ERROR_FIELDS,
    RECORD_FIELDS,
    coord_mean_records,
    records,
    records_over,
    render_records,
)
from ldpsim.pipeline.summary import band_labels, grid_axes, sweep_info
from ldpsim.pipeline.sweep import CASE_AXIS
from ldpsim.pipeline.table_layouts import latex_table, markdown_table, text_table

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
#: that :func:`table_rows` flags against the nominal level when given one.
COVERAGE_COUNTS = {
    "coverage": "n_done",
    "coord_mean_coverage": "coord_mean_n_done",
    "joint_coverage": "joint_n_done",
}
#: A coverage this many Monte-Carlo standard errors from the nominal level is flagged
#: (the figures' error bars are +-2 se too).
DEPARTURE_Z = 2.0
#: The mark of a flagged coverage cell.
DEPARTURE_MARK = "\N{DAGGER}"


def wilson_interval(fraction: float, count: float, z: float = DEPARTURE_Z) -> tuple[float, float]:
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


def coverage_cell(value: float, se: float, count: float, level: float) -> tuple[str, bool]:
    """The text of a coverage cell and whether it departs from the nominal ``level``.

    Inside (0, 1) the cell is ``0.902 (0.013)`` and departs when ``|value - level| >
    DEPARTURE_Z se``. At 0 or 1, where the standard error ``sqrt(p (1 - p) / R)`` is 0,
    the cell shows Wilson's interval instead, ``1.000 [0.714, 1.000]``, and departs when
    the level lies outside it.

    Parameters
    ----------
    value, se : float
        The coverage and its Monte-Carlo standard error.
    count : float
        The replicates the coverage is a fraction of (R).
    level : float
        The nominal level, in (0, 1).

    Returns
    -------
    tuple of (str, bool)
        The cell's text (``n/a`` for NaN) and the departure flag.
    """
    if not np.isfinite(value):
        return "n/a", False
    if value in (0.0, 1.0) and not se > 0:
        low, high = wilson_interval(value, count)
        if not np.isfinite(low):
            return cell_text(value, se, False), False
        return f"{value:.3f} [{low:.3f}, {high:.3f}]", not low <= level <= high
    return cell_text(value, se, False), bool(abs(value - level) > DEPARTURE_Z * se)


def summary_records(summary: xr.Dataset, coord_means: bool = False) -> list[dict[str, Any]]:
    """The csv and json records of a summary, with its own statistics.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`ldpsim.pipeline.summary.summarize`.
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
    :data:`~ldpsim.pipeline.cell_statistics.BOOTSTRAP_RESAMPLES` calls per cell), and
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
def caption_head(summary: xr.Dataset) -> str:
    """'name: 90% intervals', the start of a table's caption."""
    name = sweep_info(summary).get("name")
    level = summary.attrs.get("level")
    head = f"{name}: " if name else ""
    return head + (f"{format_level(level)} intervals" if level is not None else "intervals")


def replicates_per_cell(summary: xr.Dataset, count: str) -> str:
    """'replicates per cell: 35-36 of 40' from the count variable ``count``."""
    counts = summary[count].values
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    # The Dataset's own replicates (a part of a store has fewer than its sweep), else the
    # sweep's (a comparison does not record them).
    reps = summary.attrs.get("replicates", sweep_info(summary).get("replicates"))
    done = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if reps is not None:
        done += f" of {reps}"
    return f"replicates per cell: {done}"


def summary_caption(summary: xr.Dataset, diagnostics: bool) -> str:
    """The caption of the coverage and length table (with ``diagnostics``: their rows)."""
    shown = (
        "coverage, predicted coverage (pred cover: a normal interval of this bias/sd and "
        "var ratio), mean length, bias/sd of the estimate and var ratio (mean length / "
        "(2 z sd))^2"
        if diagnostics
        else "coverage and mean length"
    )
    return (
        f"{caption_head(summary)}; {shown} (Monte-Carlo standard errors in brackets); "
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


def coord_mean_caption(summary: xr.Dataset, diagnostics: bool) -> str:
    """The caption of the table of coordinate means."""
    left_out = (
        "; the diagnostics are per coordinate and left out here (--coords all "
        "--diagnostics shows them)"
        if diagnostics
        else ""
    )
    return (
        f"{caption_head(summary)}; coverage and mean length, each the mean over the d "
        f"coordinates of the grid point (Monte-Carlo standard errors in brackets, from "
        f"the spread of the per-replicate means over the coordinates), and joint "
        f"coverage (all d coordinates covered at once; binomial standard errors); "
        f"{replicates_per_cell(summary, 'coord_mean_n_done')}; --coords all lists "
        f"each coordinate{left_out}"
    )


def error_caption(summary: xr.Dataset) -> str:
    """The caption of the mean squared error table."""
    name = sweep_info(summary).get("name")
    counts = np.concatenate([summary[f"{v}_n_done"].values.ravel() for v in TABLE_ERRORS.values()])
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    head = f"{name}: " if name else ""
    return (
        f"{head}mean squared error (mean over replicates of the squared norm of the error) "
        f"of the average theta_bar_n and of the last iterate theta_n (Monte-Carlo standard "
        f"errors in brackets); replicates per cell: {lo if lo == hi else f'{lo}-{hi}'}"
    )


def case_columns(summary: xr.Dataset, fmt: str) -> tuple[list[str], list[list[str]]]:
    """The columns a table shows for the ``case`` axis: the parameters that vary across
    the cases (:func:`~ldpsim.pipeline.case_parameters.case_parameters`), one each.

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
        [parameter_text(values[i], fmt) for values in parameters.values()]
        for i in range(summary.sizes[CASE_AXIS])
    ]
    if len({tuple(row) for row in cells}) < len(cells):
        labels = axis_labels(summary[CASE_AXIS].values, fmt)
        names.append(fmt_name(CASE_AXIS, fmt))
        cells = [[*row, label] for row, label in zip(cells, labels, strict=True)]
    return names, cells


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
    its grid point's replicates, :mod:`ldpsim.pipeline.partial_cells`) ends in the
    format's marker. With a nominal ``level`` (the HTML report), the coverage cells of
    :data:`COVERAGE_COUNTS` are written by :func:`coverage_cell` (Wilson's interval at 0
    and 1) and a departure from ``level`` ends in :data:`DEPARTURE_MARK`.
    """
    axes = grid_axes(summary)
    col_axis = "n" if "n" in axes else None
    row_dims: list[str] = [a for a in axes if a != "n"]
    if "checkpoint" in summary.dims:
        row_dims.append("checkpoint")
    if per_coord and summary.sizes["coord"] > 1:
        row_dims.append("coord")
    if per_method:
        row_dims.append("method")

    if col_axis is None and "checkpoint" not in summary.dims:
        n = sweep_info(summary).get("spec", {}).get("n")
        col_values = [] if n is None else [n]
    else:
        col_values = [] if col_axis is None else list(summary[col_axis].values)
    if col_values:
        col_headers = [
            f"$n = {label.strip('$')}$" if fmt == "latex" else f"n = {label}"
            for label in axis_labels(col_values, fmt)
        ]
    else:
        col_headers = ["value"]
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
    marks = {var: partial(base, counted[var]) for var in stats.values() if var in counted}
    marker = MARKERS.get(fmt, "*")
    skip_missing = "coord" in row_dims and "coord_exists" in summary
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
            departs = [False] * len(values)
            if var in COUNT_STATS:  # a count: no standard error
                cells = [count_text(float(v)) for v in values]
            elif level is not None and var in COVERAGE_COUNTS:
                ses = np.atleast_1d(cell[f"{var}_se"].values)
                counts = np.broadcast_to(cell[COVERAGE_COUNTS[var]].values, values.shape)
                texts = [
                    coverage_cell(float(v), float(s), float(k), float(level))
                    for v, s, k in zip(values, ses, counts, strict=True)
                ]
                cells = [text for text, _ in texts]
                departs = [flag for _, flag in texts]
            else:
                ses = np.atleast_1d(cell[f"{var}_se"].values)
                cells = [
                    cell_text(float(v), float(s), var in SIGNIFICANT_STATS or var in own)
                    for v, s in zip(values, ses, strict=True)
                ]
            if var in marks:
                marked = marks[var].isel(where, missing_dims="ignore").values
                marked = np.broadcast_to(marked, values.shape)
                cells = [c + marker if m else c for c, m in zip(cells, marked, strict=True)]
            cells = [c + DEPARTURE_MARK if d else c for c, d in zip(cells, departs, strict=True)]
            rows.append(([*labels, stat], cells))
    return names, col_headers, rows


def planned_rows(rows: list, needed_row: str, joint_row: str, bands: list[str]) -> list:
    """The (labels, cells) ``rows`` of a table with one "R for se" row per method:
    ``joint_row`` (planned from the joint coverage) for the simultaneous ``bands``
    (:func:`~ldpsim.pipeline.summary.band_labels`), ``needed_row`` for the others."""
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
        values of the ``n`` axis (a single column without one), rows the other grid
        axes x [checkpoint x] [coord x] method x {cover, length} (a ``case`` axis as
        the parameters that vary across its cases, :func:`case_columns`), each cell a
        value with its Monte-Carlo standard error in brackets, e.g. ``0.902 (0.013)``,
        under a caption naming the level and the number of replicates. ``csv`` and
        ``json`` hold one row / object per record of :func:`records` (every statistic,
        the diagnostics included), or with ``coords='mean'`` of
        :func:`coord_mean_records`; both keep ``case`` beside its parameters
        (``case_d``, ``case_mechanism``).
    diagnostics : bool
        Add the rows pred cover, bias/sd and var ratio per method (``text``,
        ``markdown`` and ``latex``); see :mod:`ldpsim.pipeline.diagnostics`. They are
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
    render = {"markdown": markdown_table, "latex": latex_table}.get(fmt, text_table)
    target = summary.attrs.get("target_se")
    needed_row = f"R for se {format_number(target)}" if target is not None else "R needed"
    joint_row = f"{needed_row}, joint"
    # A simultaneous band plans its replicates from its joint coverage, as the report.
    bands = band_labels(summary) if replicates_needed else []
    joint = {joint_row: "joint_replicates_needed"} if bands else {}
    if shown == "mean":
        caption = coord_mean_caption(summary, diagnostics)
        stats = dict(TABLE_COORD_MEANS)
        if replicates_needed:
            stats.update({needed_row: "coord_mean_replicates_needed", **joint})
        names, headers, body = table_rows(summary, fmt, stats, per_coord=False)
    else:
        stats = dict(TABLE_STATS_DIAGNOSTICS if diagnostics else TABLE_STATS)
        stats.update(
            {latex_escape(n) if fmt == "latex" else n: n for n in statistic_names(summary)}
        )
        if replicates_needed:
            stats.update({needed_row: "replicates_needed", **joint})
        caption = summary_caption(summary, diagnostics)
        names, headers, body = table_rows(summary, fmt, stats)
    if bands:
        body = planned_rows(body, needed_row, joint_row, bands)
    caption += statistics_caption(summary)
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
    table = render(
        caption, names, headers, body, note=footnote(summary, list(stats.values()), fmt)
    )
    if errors:
        rows = table_rows(summary, fmt, TABLE_ERRORS, per_method=False, per_coord=False)
        note = footnote(summary, list(TABLE_ERRORS.values()), fmt)
        table += "\n" + render(error_caption(summary), *rows, note=note)
    return table
