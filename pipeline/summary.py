"""Coverage, length and accuracy summaries of a sweep's store, and their tables."""

from __future__ import annotations

import csv
import decimal
import io
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
import xarray as xr
from ldpsim.pipeline.diagnostics import DIAGNOSTIC_ATTRS, DIAGNOSTIC_FIELDS, interval_diagnostics
from scipy.stats import norm

#: Output formats of :func:`format_table`.
TableFormat = Literal["text", "markdown", "latex", "csv", "json"]
TABLE_FORMATS: tuple[str, ...] = ("text", "markdown", "latex", "csv", "json")
#: Store dimensions that are not grid axes.
NON_GRID_DIMS = ("checkpoint", "method", "rep", "coord")
#: Fields of one record of :func:`records` besides the grid values.
RECORD_FIELDS = ("coverage", "coverage_se", "length", "length_se", "n_done", *DIAGNOSTIC_FIELDS)
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
#: Label of the oracle interval method (exact asymptotic covariance, SPEC section 5.4).
ORACLE = "oracle"

SUMMARY_ATTRS: dict[str, dict[str, str]] = {
    "coverage": {
        "long_name": "empirical coverage of theta*_j by the interval",
        "units": "1",
    },
    "coverage_se": {
        "long_name": "Monte-Carlo standard error of coverage, sqrt(cov (1 - cov) / R)",
        "units": "1",
    },
    "length": {"long_name": "mean interval length", "units": "parameter units"},
    "length_se": {
        "long_name": "Monte-Carlo standard error of the mean length, sd / sqrt(R)",
        "units": "parameter units",
    },
    "n_done": {
        "long_name": "replicates R used: done, with finite bounds for this method",
        "units": "1",
    },
    "joint_coverage": {
        "long_name": "empirical coverage of all coordinates of theta* simultaneously",
        "units": "1",
    },
    "joint_coverage_se": {
        "long_name": "Monte-Carlo standard error of joint coverage",
        "units": "1",
    },
    "joint_n_done": {
        "long_name": "replicates used for joint coverage: done, all bounds finite",
        "units": "1",
    },
    "bias": {"long_name": "mean of theta_bar_n - theta*", "units": "parameter units"},
    "rmse": {
        "long_name": "root mean squared error of theta_bar_n",
        "units": "parameter units",
    },
    "sd": {
        "long_name": "empirical sd of sqrt(n) (theta_bar_n - theta*) over replicates",
        "units": "parameter units",
    },
    "oracle_sd": {
        "long_name": "asymptotic sd sqrt(Sigma_jj), from the oracle interval",
        "units": "parameter units",
    },
    "sd_ratio": {
        "long_name": "empirical sd of sqrt(n) (theta_bar_n - theta*) / oracle sd",
        "units": "1",
    },
    **DIAGNOSTIC_ATTRS,
}


def grid_axes(ds: xr.Dataset) -> list[str]:
    """The grid axes of a store or summary, in sweep order (possibly none)."""
    dims = ds["truth" if "truth" in ds else "coverage"].dims
    return [str(d) for d in dims if d not in NON_GRID_DIMS]


def sweep_info(ds: xr.Dataset) -> dict[str, Any]:
    """The sweep specification stored in the ``sweep`` attribute ({} when absent)."""
    raw = ds.attrs.get("sweep")
    return json.loads(raw) if raw else {}


def oracle_label(ds: xr.Dataset) -> str | None:
    """The method label of the oracle interval, or None when the sweep has none.

    The label ``'oracle'`` counts; so does any label whose ``method`` kind is ``'oracle'``
    in the sweep specification.
    """
    labels = [str(m) for m in ds["method"].values]
    if ORACLE in labels:
        return ORACLE
    methods = sweep_info(ds).get("methods", {})
    for label in labels:
        if (methods.get(label) or {}).get("method") == ORACLE:
            return label
    return None


def sample_size(ds: xr.Dataset) -> xr.DataArray | None:
    """n of every cell: the checkpoint, else the ``n`` axis, else the spec's ``n``."""
    if "checkpoint" in ds.dims:
        return ds["checkpoint"].astype(np.float64)
    if "n" in ds.dims:
        return ds["n"].astype(np.float64)
    n = sweep_info(ds).get("spec", {}).get("n")
    return None if n is None else xr.DataArray(float(n))


def nominal_level(ds: xr.Dataset) -> xr.DataArray:
    """The confidence level 1 - alpha (per grid point when ``level`` is a grid axis)."""
    if "level" in ds.dims:
        return ds["level"].astype(np.float64)
    return xr.DataArray(float(ds.attrs.get("level", np.nan)))


def _ratio(num: xr.DataArray, count: xr.DataArray) -> xr.DataArray:
    # NaN (not a warning or inf) where no replicate counts.
    return (num / count.where(count > 0)).astype(np.float64)


def _binomial_se(p: xr.DataArray, count: xr.DataArray) -> xr.DataArray:
    return np.sqrt(p * (1.0 - p) / count.where(count > 0))


def _mean_sd_count(
    x: xr.DataArray, use: xr.DataArray, dim: str
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Mean, sample sd (ddof 1) and count of ``x`` over ``dim`` where ``use`` holds."""
    count = use.sum(dim)
    xm = x.where(use)
    mean = _ratio(xm.sum(dim), count)
    sq = ((xm - mean) ** 2).sum(dim)
    sd = np.sqrt(sq / (count - 1).where(count > 1))
    return mean, sd, count


def summarize(ds: xr.Dataset) -> xr.Dataset:
    """Summarize the replicates of a store (SPEC section 7).

    Only replicates with ``done`` set count; for a method, a replicate also needs
    bounds at that cell (a method that failed leaves NaN bounds there, e.g. at one
    checkpoint only, and sets ``method_failed``, which is not read here). A cell
    with no usable replicate gets NaN statistics and ``n_done`` 0, so a partly filled
    store can be summarized at any time.

    Parameters
    ----------
    ds : xarray.Dataset
        A store opened with :func:`ldpsim.pipeline.store.open_dataset` (or a Dataset of the same
        layout): ``estimate``, ``lower``, ``upper``, ``truth`` and ``done``; attributes
        ``level`` and ``sweep``.

    Returns
    -------
    xarray.Dataset
        Per grid point, method, [checkpoint,] coord: ``coverage``, ``coverage_se``
        (sqrt(cov (1 - cov) / R)), ``length`` (mean), ``length_se`` (sd / sqrt(R)) and
        ``n_done`` (R). Per grid point, method, [checkpoint]: ``joint_coverage`` (all
        coordinates covered at once), ``joint_coverage_se``, ``joint_n_done``. Per grid
        point, [checkpoint,] coord: ``bias`` and ``rmse`` of theta_bar_n, ``sd`` (sample
        sd of sqrt(n) (theta_bar_n - theta*)), ``oracle_sd`` (oracle half-length /
        z_{1 - alpha/2} * sqrt(n)) and ``sd_ratio`` = sd / oracle_sd (NaN without an
        oracle method). Per grid point, method, [checkpoint,] coord, over the replicates
        that count for the method: ``bias_over_sd``, ``variance_ratio`` and
        ``predicted_coverage`` with their standard errors (``*_se``), see
        :mod:`ldpsim.pipeline.diagnostics`. Statistics use the sample sd (ddof 1); R < 2
        gives NaN sds. Attributes ``level`` and ``sweep`` are kept.
    """
    truth = ds["truth"]
    valid = truth.notnull()  # coordinates beyond a grid point's d are NaN-padded
    done = ds["done"].astype(bool)
    lower, upper = ds["lower"], ds["upper"]

    # A failed method leaves NaN bounds exactly where it failed, so the bounds alone
    # decide. ``method_failed`` is not used: stores written before it had a checkpoint
    # axis flag a replicate at every checkpoint when the method failed at one of them,
    # which would drop that replicate from the later checkpoints too.
    ok = done & valid & lower.notnull() & upper.notnull()
    covered = (lower <= truth) & (truth <= upper)

    n_done = ok.sum("rep")
    coverage = _ratio((covered & ok).sum("rep"), n_done)
    length, length_sd, _ = _mean_sd_count(upper - lower, ok, "rep")

    # A replicate counts for joint coverage when every real coordinate has bounds.
    has_coord = valid.any("coord")
    joint_ok = done & has_coord & (ok | ~valid).all("coord")
    joint_covered = (covered | ~valid).all("coord")
    joint_n_done = joint_ok.sum("rep")
    joint_coverage = _ratio((joint_covered & joint_ok).sum("rep"), joint_n_done)

    estimate = ds["estimate"]
    est_ok = done & valid & estimate.notnull()
    error = estimate - truth
    bias, _, n_est = _mean_sd_count(error, est_ok, "rep")
    rmse = np.sqrt(_ratio((error.where(est_ok) ** 2).sum("rep"), n_est))
    _, est_sd, _ = _mean_sd_count(estimate, est_ok, "rep")

    n = sample_size(ds)
    z = xr.apply_ufunc(norm.ppf, 0.5 + nominal_level(ds) / 2.0)
    label = oracle_label(ds)
    if n is None:
        sd = xr.full_like(est_sd, np.nan)
    else:
        sd = est_sd * np.sqrt(n)
    if label is None or n is None:
        oracle_sd = xr.full_like(est_sd, np.nan)
    else:
        # Not sel(method=...): 'method' is also sel's own keyword (inexact matching).
        oracle_len = length.sel({"method": label}, drop=True)
        oracle_sd = oracle_len / 2.0 / z * np.sqrt(n)

    # Over the replicates that count for each method, so that predicted and observed
    # coverage describe the same replicates.
    diagnostics = interval_diagnostics(error, upper - lower, ok & est_ok, z)

    out = xr.Dataset(
        {
            "coverage": coverage,
            "coverage_se": _binomial_se(coverage, n_done),
            "length": length,
            "length_se": length_sd / np.sqrt(n_done.where(n_done > 0)),
            "n_done": n_done.astype(np.int64),
            "joint_coverage": joint_coverage,
            "joint_coverage_se": _binomial_se(joint_coverage, joint_n_done),
            "joint_n_done": joint_n_done.astype(np.int64),
            "bias": bias,
            "rmse": rmse,
            "sd": sd,
            "oracle_sd": oracle_sd,
            "sd_ratio": sd / oracle_sd,
            **diagnostics.data_vars,
        }
    )
    order = [*grid_axes(ds), "method", "checkpoint", "coord"]
    out = out.transpose(*[d for d in order if d in out.dims])
    for name, attrs in SUMMARY_ATTRS.items():
        out[name].attrs = dict(attrs)
    for name in out.coords:
        if name in ds.coords:
            out[name].attrs = dict(ds[name].attrs)
    out.attrs = {k: ds.attrs[k] for k in ("title", "level", "sweep") if k in ds.attrs}
    return out.compute()


# -- records ------------------------------------------------------------------------------
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
        its ``_se``. Values are plain Python types; NaN statistics are None (null in
        JSON).
    """
    axes = grid_axes(summary)
    dims = [*axes, "method", *(["checkpoint"] if "checkpoint" in summary.dims else []), "coord"]
    data = summary[list(RECORD_FIELDS)].transpose(*dims)
    index_values = [data[d].values for d in dims]
    columns = {f: data[f].values for f in RECORD_FIELDS}
    out = []
    for idx in np.ndindex(*(len(v) for v in index_values)):
        rec = {d: _native(v[i]) for d, v, i in zip(dims, index_values, idx, strict=True)}
        rec.update({f: _native(columns[f][idx]) for f in RECORD_FIELDS})
        out.append(rec)
    return out


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


def _cell(value: float, se: float, length: bool) -> str:
    digits = _length_digits(value) if length else 3
    if not np.isfinite(value):
        return "n/a"
    return f"{_fmt_stat(value, digits)} ({_fmt_stat(se, digits)})"


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


_LATEX_NAMES = {"tau": r"$\tau$", "eps": r"$\varepsilon$", "n": "$n$", "gamma": r"$\gamma$"}


def _latex_escape(text: str) -> str:
    for char in ("\\", "&", "%", "$", "#", "_", "{", "}"):
        text = text.replace(char, "\\" + char)
    return text


def _fmt_name(name: str, fmt: str) -> str:
    if fmt == "latex":
        return _LATEX_NAMES.get(name, _latex_escape(name))
    return name


def _caption(summary: xr.Dataset, diagnostics: bool) -> str:
    info = sweep_info(summary)
    level = summary.attrs.get("level")
    name = info.get("name")
    counts = summary["n_done"].values
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    reps = info.get("replicates")
    done = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if reps is not None:
        done += f" of {reps}"
    level_text = f"{format_level(level)} intervals" if level is not None else "intervals"
    head = f"{name}: " if name else ""
    shown = (
        "coverage, predicted coverage (pred cover: a normal interval of this bias/sd and "
        "var ratio), mean length, bias/sd of the estimate and var ratio (mean length / "
        "(2 z sd))^2"
        if diagnostics
        else "coverage and mean length"
    )
    return (
        f"{head}{level_text}; {shown} (Monte-Carlo standard errors in brackets); "
        f"replicates per cell: {done}"
    )


def _table_rows(
    summary: xr.Dataset, fmt: str, diagnostics: bool
) -> tuple[list[str], list[str], list[tuple[list[str], list[str]]]]:
    stats = TABLE_STATS_DIAGNOSTICS if diagnostics else TABLE_STATS
    axes = grid_axes(summary)
    col_axis = "n" if "n" in axes else None
    row_dims: list[str] = [a for a in axes if a != "n"]
    if "checkpoint" in summary.dims:
        row_dims.append("checkpoint")
    if summary.sizes["coord"] > 1:
        row_dims.append("coord")
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
    for idx in np.ndindex(*(len(v) for v in index_values)):
        cell = base.isel(dict(zip(row_dims, idx, strict=True)))
        labels = [
            (f"coord {int(v[i])}" if d == "coord" else lab[i])
            for d, v, lab, i in zip(row_dims, index_values, index_labels, idx, strict=True)
        ]
        for stat, var in stats.items():
            values = np.atleast_1d(cell[var].values)
            ses = np.atleast_1d(cell[f"{var}_se"].values)
            cells = [
                _cell(float(v), float(s), var == "length")
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


def format_table(summary: xr.Dataset, fmt: TableFormat = "text", diagnostics: bool = False) -> str:
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
        diagnostics included).
    diagnostics : bool
        Add the rows pred cover, bias/sd and var ratio per method (``text``,
        ``markdown`` and ``latex``); see :mod:`ldpsim.pipeline.diagnostics`.

    Returns
    -------
    str
        The table, ending with a newline.

    Raises
    ------
    ValueError
        ``fmt`` is not one of the formats above.
    """
    if fmt not in TABLE_FORMATS:
        raise ValueError(
            f"The 'fmt' parameter of format_table must be one of {', '.join(TABLE_FORMATS)}. "
            f"Got {fmt!r}."
        )
    if fmt == "json":
        recs = [{k: _json_value(v) for k, v in r.items()} for r in records(summary)]
        return json.dumps(recs, indent=1, allow_nan=False) + "\n"
    if fmt == "csv":
        recs = records(summary)
        buffer = io.StringIO()
        fields: list[Hashable] = list(recs[0]) if recs else list(RECORD_FIELDS)
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(recs)
        return buffer.getvalue()
    names, headers, rows = _table_rows(summary, fmt, diagnostics)
    caption = _caption(summary, diagnostics)
    if fmt == "markdown":
        return _markdown_table(caption, names, headers, rows)
    if fmt == "latex":
        return _latex_table(caption, names, headers, rows)
    return _text_table(caption, names, headers, rows)
