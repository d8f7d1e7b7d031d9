"""Tables of a summary: records, and text, Markdown, LaTeX, CSV and JSON renderings."""

from __future__ import annotations

import csv
import decimal
import io
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal, get_args

import numpy as np
import xarray as xr

from ldpsim.pipeline.diagnostics import DIAGNOSTIC_FIELDS
from ldpsim.pipeline.summary import grid_axes, sweep_info

#: Output formats of :func:`format_table`.
TableFormat = Literal["text", "markdown", "latex", "csv", "json"]
TABLE_FORMATS: tuple[str, ...] = get_args(TableFormat)
#: How :func:`format_table` shows the coordinates: ``all`` one row (record) each,
#: ``mean`` their means; ``auto`` is ``all`` up to :data:`AUTO_MAX_COORDS` coordinates.
CoordsMode = Literal["auto", "all", "mean"]
COORDS_MODES: tuple[str, ...] = get_args(CoordsMode)
#: The most coordinates that ``coords='auto'`` lists one by one in the tables.
AUTO_MAX_COORDS = 10

#: Statistics of a grid point [and checkpoint], the same for all its methods and coords.
ERROR_FIELDS = ("mse", "mse_se", "mse_n_done", "mse_last", "mse_last_se", "mse_last_n_done")
#: Fields of one record of :func:`records` besides the grid values.
RECORD_FIELDS = (
    "coverage",
    "coverage_se",
    "length",
    "length_se",
    "n_done",
    *DIAGNOSTIC_FIELDS,
    *ERROR_FIELDS,
    "replicates_needed",
)
#: Fields of one record of :func:`coord_mean_records` besides the grid values.
COORD_MEAN_RECORD_FIELDS = (
    "coord_mean_coverage",
    "coord_mean_coverage_se",
    "coord_mean_length",
    "coord_mean_length_se",
    "coord_mean_n_done",
    "joint_coverage",
    "joint_coverage_se",
    "joint_coverage_z",
    "joint_n_done",
    *ERROR_FIELDS,
    "coord_mean_replicates_needed",
)

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
COUNT_STATS = ("replicates_needed", "coord_mean_replicates_needed")
#: Statistics shown with three significant digits (the others with three decimals).
SIGNIFICANT_STATS = ("length", "coord_mean_length", "mse", "mse_last")


def _native(value: Any) -> Any:
    """A numpy scalar as a plain Python value; NaN becomes None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def records(summary: xr.Dataset) -> list[dict[str, Any]]:
    """One record per grid point, method, [checkpoint,] coord of a summary.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`summarize`.

    Returns
    -------
    list of dict
        Keys: one per grid axis (its value), ``method``, ``checkpoint`` (only when the
        store has checkpoints), ``coord``, then ``coverage``, ``coverage_se``,
        ``length``, ``length_se``, ``n_done`` and the diagnostics
        ``predicted_coverage``, ``bias_over_sd``, ``variance_ratio``, each followed by
        its ``_se``, and the mean squared errors of the average and the last iterate
        (:data:`ERROR_FIELDS`: ``mse``, ``mse_se``, ``mse_n_done``, ``mse_last``,
        ``mse_last_se``, ``mse_last_n_done``), which are per grid point [and checkpoint]
        and so repeat in the records of its methods and coordinates. Values are plain
        Python types; NaN statistics are None (null in JSON).
    """
    return _records(summary, [*_method_dims(summary), "coord"], RECORD_FIELDS)


def coord_mean_records(summary: xr.Dataset) -> list[dict[str, Any]]:
    """One record per grid point, method [and checkpoint] of a summary: coordinate means.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`summarize`.

    Returns
    -------
    list of dict
        Keys: one per grid axis (its value), ``method``, ``checkpoint`` (only when the
        store has checkpoints), then ``coord_mean_coverage``, ``coord_mean_coverage_se``,
        ``coord_mean_length``, ``coord_mean_length_se``, ``coord_mean_n_done`` (see
        :func:`ldpsim.pipeline.summary.coordinate_means`) and the mean squared errors
        (:data:`ERROR_FIELDS`), which are per grid point [and checkpoint] and so repeat
        in the records of its methods. Values are plain Python types; NaN statistics
        are None (null in JSON).
    """
    return _records(summary, _method_dims(summary), COORD_MEAN_RECORD_FIELDS)


def _method_dims(summary: xr.Dataset) -> list[str]:
    """The grid axes, ``method`` and [``checkpoint``]: the outer dims of the records."""
    checkpoint = ["checkpoint"] if "checkpoint" in summary.dims else []
    return [*grid_axes(summary), "method", *checkpoint]


def _records(
    summary: xr.Dataset, dims: Sequence[str], fields: Sequence[str]
) -> list[dict[str, Any]]:
    """One record per index of ``dims``; ``fields[0]`` must have exactly these dims."""
    data = summary[list(fields)]
    index_values = [data[d].values for d in dims]
    full = data[fields[0]]
    columns = {f: data[f].broadcast_like(full).transpose(*dims).values for f in fields}
    out = []
    for idx in np.ndindex(*(len(v) for v in index_values)):
        rec = {d: _native(v[i]) for d, v, i in zip(dims, index_values, idx, strict=True)}
        rec.update({f: _native(columns[f][idx]) for f in fields})
        out.append(rec)
    return out


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


def _json_value(value: Any) -> Any:
    # Strict JSON has no Infinity: an infinite grid value (eps = inf) is written "inf".
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


# -- tables -------------------------------------------------------------------------------
def _fmt_stat(value: float, digits: int | None = None) -> str:
    if not np.isfinite(value):
        return "n/a"
    return f"{value:.{3 if digits is None else digits}f}"


def _length_digits(value: float) -> int:
    """Decimals that show three significant digits of a length (at least 3)."""
    if not np.isfinite(value) or value == 0:
        return 3
    return max(3, 2 - math.floor(math.log10(abs(value))))


def _cell(value: float, se: float, significant: bool) -> str:
    digits = _length_digits(value) if significant else 3
    if not np.isfinite(value):
        return "n/a"
    return f"{_fmt_stat(value, digits)} ({_fmt_stat(se, digits)})"


def _count_cell(value: float) -> str:
    return f"{int(value):,}" if np.isfinite(value) else "n/a"


def _is_power_of_ten(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 10:
        return False
    if not math.isfinite(value) or not float(value).is_integer():
        return False
    return 10 ** round(math.log10(value)) == int(value)


def format_number(value: float) -> str:
    """A float as ``g`` writes it (0.9, 1e+06) unless that hides digits: then in full.

    ``f"{0.9999999:g}"`` is '1'; this gives '0.9999999', so that distinct values never
    print alike.
    """
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def format_level(level: float) -> str:
    """A confidence level as a percentage with every digit it has: 0.9 -> '90%',
    0.9999999 -> '99.99999%' (never rounded up to '100%')."""
    percent = decimal.Decimal(repr(float(level))) * 100
    return f"{percent.normalize():f}%"


def axis_labels(values: Sequence[Any], fmt: str) -> list[str]:
    """Labels of an axis's values, in one style for the whole axis.

    An axis of powers of ten reaching 1000 (n = 1e6, 1e7, 1e8) is written 1e6 (10^{6} in
    LaTeX), as in the paper; otherwise integers as such and floats with ``g``.
    """
    native = [_native(v) for v in values]
    if native and all(_is_power_of_ten(v) for v in native) and max(native) >= 1000:
        exps = [round(math.log10(v)) for v in native]
        return [f"$10^{{{e}}}$" if fmt == "latex" else f"1e{e}" for e in exps]
    out = []
    for v in native:
        if isinstance(v, float) and math.isinf(v):
            text = (r"$\infty$" if fmt == "latex" else "inf") if v > 0 else "-inf"
        elif isinstance(v, float):
            text = format_number(v)
        else:
            text = str(v)
            if fmt == "latex":
                text = _latex_escape(text)
        out.append(text)
    return out


_LATEX_NAMES = {
    "tau": r"$\tau$",
    "eps": r"$\varepsilon$",
    "delta": r"$\delta$",
    "mu": r"$\mu$",
    "n": "$n$",
    "gamma": r"$\gamma$",
}


def _latex_escape(text: str) -> str:
    for char in ("\\", "&", "%", "$", "#", "_", "{", "}"):
        text = text.replace(char, "\\" + char)
    return text


def _fmt_name(name: str, fmt: str) -> str:
    if fmt == "latex":
        return _LATEX_NAMES.get(name, _latex_escape(name))
    return name


def _caption_head(summary: xr.Dataset) -> str:
    """'name: 90% intervals', the start of a table's caption."""
    name = sweep_info(summary).get("name")
    level = summary.attrs.get("level")
    head = f"{name}: " if name else ""
    return head + (f"{format_level(level)} intervals" if level is not None else "intervals")


def _replicates_per_cell(summary: xr.Dataset, count: str) -> str:
    """'replicates per cell: 35-36 of 40' from the count variable ``count``."""
    counts = summary[count].values
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    reps = sweep_info(summary).get("replicates")
    done = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if reps is not None:
        done += f" of {reps}"
    return f"replicates per cell: {done}"


def _caption(summary: xr.Dataset, diagnostics: bool) -> str:
    shown = (
        "coverage, predicted coverage (pred cover: a normal interval of this bias/sd and "
        "var ratio), mean length, bias/sd of the estimate and var ratio (mean length / "
        "(2 z sd))^2"
        if diagnostics
        else "coverage and mean length"
    )
    return (
        f"{_caption_head(summary)}; {shown} (Monte-Carlo standard errors in brackets); "
        f"{_replicates_per_cell(summary, 'n_done')}"
    )


def _coord_mean_caption(summary: xr.Dataset, diagnostics: bool) -> str:
    left_out = (
        "; the diagnostics are per coordinate and left out here (--coords all "
        "--diagnostics shows them)"
        if diagnostics
        else ""
    )
    return (
        f"{_caption_head(summary)}; coverage and mean length, each the mean over the d "
        f"coordinates of the grid point (Monte-Carlo standard errors in brackets, from "
        f"the spread of the per-replicate means over the coordinates), and joint "
        f"coverage (all d coordinates covered at once; binomial standard errors); "
        f"{_replicates_per_cell(summary, 'coord_mean_n_done')}; --coords all lists "
        f"each coordinate{left_out}"
    )


def _error_caption(summary: xr.Dataset) -> str:
    name = sweep_info(summary).get("name")
    counts = np.concatenate([summary[f"{v}_n_done"].values.ravel() for v in TABLE_ERRORS.values()])
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    head = f"{name}: " if name else ""
    return (
        f"{head}mean squared error (mean over replicates of the squared norm of the error) "
        f"of the average theta_bar_n and of the last iterate theta_n (Monte-Carlo standard "
        f"errors in brackets); replicates per cell: {lo if lo == hi else f'{lo}-{hi}'}"
    )


def _table_rows(
    summary: xr.Dataset,
    fmt: str,
    stats: dict[str, str],
    per_method: bool = True,
    per_coord: bool = True,
) -> tuple[list[str], list[str], list[tuple[list[str], list[str]]]]:
    """Column names, column headers and rows (labels, cells) of a table of ``stats``.

    Rows per grid point [and checkpoint], with ``per_coord`` per coord (for statistics
    with a coord dim) and with ``per_method`` per method.
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
    names = [("coord" if d == "coord" else _fmt_name(d, fmt)) for d in row_dims] + [""]

    rows: list[tuple[list[str], list[str]]] = []
    index_values = [summary[d].values for d in row_dims]
    index_labels = [axis_labels(v, fmt) for v in index_values]
    # Positional selection: exact float labels or NaN never miss; a size-1 coord goes too.
    base = summary.isel(coord=0) if summary.sizes["coord"] == 1 else summary
    skip_missing = "coord" in row_dims and "coord_exists" in summary
    for idx in np.ndindex(*(len(v) for v in index_values)):
        cell = base.isel(dict(zip(row_dims, idx, strict=True)))
        if skip_missing and not bool(cell["coord_exists"].any()):
            continue  # a coordinate this grid point does not have (a case of smaller d)
        labels = [
            (f"coord {int(v[i])}" if d == "coord" else lab[i])
            for d, v, lab, i in zip(row_dims, index_values, index_labels, idx, strict=True)
        ]
        for stat, var in stats.items():
            values = np.atleast_1d(cell[var].values)
            if var in COUNT_STATS:  # a count: no standard error
                cells = [_count_cell(float(v)) for v in values]
                rows.append(([*labels, stat], cells))
                continue
            ses = np.atleast_1d(cell[f"{var}_se"].values)
            cells = [
                _cell(float(v), float(s), var in SIGNIFICANT_STATS)
                for v, s in zip(values, ses, strict=True)
            ]
            rows.append(([*labels, stat], cells))
    return names, col_headers, rows


def _blank_repeats(rows: list[tuple[list[str], list[str]]]) -> list[list[str]]:
    """Row labels with a level left blank where it repeats the row above (paper style)."""
    out, previous = [], None
    for labels, _ in rows:
        shown = list(labels)
        if previous is not None:
            for i in range(len(labels)):
                if labels[: i + 1] == previous[: i + 1]:
                    shown[i] = ""
                else:
                    break
        out.append(shown)
        previous = labels
    return out


def _text_table(caption: str, names, headers, rows) -> str:
    labels = _blank_repeats(rows)
    table = [
        [*names, *headers],
        *[[*lab, *cells] for lab, (_, cells) in zip(labels, rows, strict=True)],
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    n_labels = len(names)

    def line(r: Sequence[str]) -> str:
        parts = [
            r[i].ljust(widths[i]) if i < n_labels else r[i].rjust(widths[i]) for i in range(len(r))
        ]
        return "  ".join(parts).rstrip()

    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    body = [line(table[0]), rule, *(line(r) for r in table[1:])]
    return "\n".join([caption, rule, *body, rule]) + "\n"


def _markdown_table(caption: str, names, headers, rows) -> str:
    labels = _blank_repeats(rows)
    head = "| " + " | ".join([*names, *headers]) + " |"
    align = "|" + "|".join([":--"] * len(names) + ["--:"] * len(headers)) + "|"
    body = [
        "| " + " | ".join([*lab, *cells]) + " |"
        for lab, (_, cells) in zip(labels, rows, strict=True)
    ]
    return "\n".join([f"**{caption}**", "", head, align, *body]) + "\n"


def _latex_table(caption: str, names, headers, rows) -> str:
    labels = _blank_repeats(rows)
    spec = "l" * len(names) + "r" * len(headers)
    lines = [
        r"\begin{table}",
        r"\centering",
        rf"\caption{{{_latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\hline",
        " & ".join([*names, *headers]) + r" \\",
        r"\hline",
    ]
    for i, (lab, (_, cells)) in enumerate(zip(labels, rows, strict=True)):
        # A rule between groups of the outermost row level, as in the paper.
        if i > 0 and lab[0] != "" and len(names) > 2:
            lines.append(r"\hline")
        lines.append(" & ".join([*lab, *cells]) + r" \\")
    lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _records_table(summary: xr.Dataset, fmt: str, coord_means: bool) -> str:
    """The ``json`` or ``csv`` table of the records (of the coordinate means)."""
    recs = coord_mean_records(summary) if coord_means else records(summary)
    if fmt == "json":
        recs = [{k: _json_value(v) for k, v in r.items()} for r in recs]
        return json.dumps(recs, indent=1, allow_nan=False) + "\n"
    empty_fields = COORD_MEAN_RECORD_FIELDS if coord_means else RECORD_FIELDS
    buffer = io.StringIO()
    fields: list[Hashable] = list(recs[0]) if recs else list(empty_fields)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(recs)
    return buffer.getvalue()


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
        axes x [checkpoint x] [coord x] method x {cover, length}, each cell a value with
        its Monte-Carlo standard error in brackets, e.g. ``0.902 (0.013)``, under a
        caption naming the level and the number of replicates. ``csv`` and ``json``
        hold one row / object per record of :func:`records` (every statistic, the
        diagnostics included), or with ``coords='mean'`` of :func:`coord_mean_records`.
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
        coordinate's record.
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
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(
            f"The 'fmt' parameter of format_table must be one of {', '.join(TABLE_FORMATS)}. "
            f"Got {fmt!r}."
        )
    shown = shown_coords(summary, coords)
    if fmt in ("json", "csv"):
        # Machines get every coordinate unless the means are asked for by name.
        return _records_table(summary, fmt, coord_means=coords == "mean")
    render = {"markdown": _markdown_table, "latex": _latex_table}.get(fmt, _text_table)
    target = summary.attrs.get("target_se")
    needed_row = f"R for se {format_number(target)}" if target is not None else "R needed"
    if shown == "mean":
        caption = _coord_mean_caption(summary, diagnostics)
        stats = dict(TABLE_COORD_MEANS)
        if replicates_needed:
            stats[needed_row] = "coord_mean_replicates_needed"
        rows = _table_rows(summary, fmt, stats, per_coord=False)
    else:
        stats = dict(TABLE_STATS_DIAGNOSTICS if diagnostics else TABLE_STATS)
        if replicates_needed:
            stats[needed_row] = "replicates_needed"
        caption, rows = _caption(summary, diagnostics), _table_rows(summary, fmt, stats)
    if replicates_needed:
        caption += (
            f"; {needed_row}: the replicates that would give the coverage a Monte-Carlo "
            "standard error of " + format_number(target if target is not None else float("nan"))
        )
    table = render(caption, *rows)
    if errors:
        rows = _table_rows(summary, fmt, TABLE_ERRORS, per_method=False, per_coord=False)
        table += "\n" + render(_error_caption(summary), *rows)
    return table
