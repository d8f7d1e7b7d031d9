"""Paired comparisons of two interval methods on the same replicates, and planning."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ldpsim.pipeline.store.pending import pending_cells
from ldpsim.pipeline.summary.partial_cells import footnote, replicates_attrs
from ldpsim.pipeline.summary.records import (
    records_over,
    render_records,
    with_case_parameters,
    with_replicates,
)
from ldpsim.pipeline.summary.table_layouts import latex_table, markdown_table, text_table
from ldpsim.pipeline.summary.tables import (
    CoordsMode,
    TableFormat,
    caption_head,
    replicates_per_cell,
    table_coords,
    table_rows,
)
from ldpsim.pipeline.summary.variables import grid_axes
from ldpsim.tasks.validation import did_you_mean

#: Variables of :func:`compare_methods` per coordinate, and of its coordinate means.
COMPARE_FIELDS = ("coverage_diff", "coverage_diff_se", "length_ratio", "length_ratio_se")
COMPARE_COUNT = "n_paired"
COORD_MEAN_PREFIX = "coord_mean_"

COMPARE_ATTRS: dict[str, dict[str, str]] = {
    "coverage_diff": {
        "long_name": "coverage of method a - coverage of method b, on the same replicates",
        "units": "1",
    },
    "coverage_diff_se": {
        "long_name": "paired standard error: sd over replicates of (I_a - I_b) / sqrt(R)",
        "units": "1",
    },
    "length_ratio": {
        "long_name": "mean length of method a / mean length of method b, same replicates",
        "units": "1",
    },
    "length_ratio_se": {
        "long_name": (
            "delta-method standard error of length_ratio: sd over replicates of "
            "(L_a - ratio L_b) / mean(L_b) / sqrt(R)"
        ),
        "units": "1",
    },
    "n_paired": {
        "long_name": "replicates R where both methods have finite bounds (done)",
        "units": "1",
    },
    "n_unpaired": {
        "long_name": "replicates lost to a failure: done where one method or both have no "
        "finite bounds, or failed",
        "units": "1",
    },
}


def _paired(
    covered_a: xr.DataArray,
    covered_b: xr.DataArray,
    length_a: xr.DataArray,
    length_b: xr.DataArray,
    use: xr.DataArray,
) -> dict[str, xr.DataArray]:
    """Coverage difference and length ratio over ``rep`` where ``use``, paired errors."""
    count = use.sum("rep")
    root = np.sqrt(count.where(count > 0))
    ddof_count = (count - 1).where(count > 1)

    def mean(x: xr.DataArray) -> xr.DataArray:
        return x.where(use).sum("rep") / count.where(count > 0)

    # A sum of no values is NaN, not 0: values all NaN (the influence values where there
    # is no ratio, B's mean length 0) have no spread.
    def sd(x: xr.DataArray) -> xr.DataArray:
        centred = x - mean(x)
        return np.sqrt((centred.where(use) ** 2).sum("rep", min_count=1) / ddof_count)

    diff = covered_a.astype(np.float64) - covered_b.astype(np.float64)
    mean_a, mean_b = mean(length_a), mean(length_b)
    ratio = mean_a / mean_b.where(mean_b != 0)
    # Empirical influence values of the ratio of means (nonparametric delta method).
    influence = (length_a - ratio * length_b) / mean_b.where(mean_b != 0)
    return {
        "coverage_diff": mean(diff),
        "coverage_diff_se": sd(diff) / root,
        "length_ratio": ratio,
        "length_ratio_se": sd(influence) / root,
        "n_paired": count.astype(np.int64),
    }


def compare_methods(ds: xr.Dataset, a: str, b: str) -> xr.Dataset:
    """Coverage difference and length ratio of methods ``a`` and ``b``, paired.

    Both methods are computed on the same replicates, so their coverage indicators and
    lengths are correlated: the standard error of the difference is that of the
    per-replicate differences, not the two binomial errors combined. Only replicates
    that are done and where both methods have finite bounds count.

    Parameters
    ----------
    ds : xarray.Dataset
        A store's Dataset (``lower``, ``upper``, ``truth``, ``done``).
    a, b : str
        Method labels of the store, different.

    Returns
    -------
    xarray.Dataset
        Per grid point, [checkpoint,] coord: ``coverage_diff`` = cov_a - cov_b, with
        ``coverage_diff_se`` = sd_r(I_a,r - I_b,r) / sqrt(R); ``length_ratio`` =
        mean(L_a) / mean(L_b), with ``length_ratio_se`` from the delta method, sd_r((L_a,r -
        ratio L_b,r) / mean(L_b)) / sqrt(R); ``n_paired`` (R) and ``n_unpaired`` (the
        replicates lost to a failure: done without both methods' bounds, or failed).
        The same per grid point [and checkpoint] for the means over the coordinates
        (prefix ``coord_mean_``): each replicate's fraction of covered coordinates and its
        mean length over the coordinates where both methods have bounds, then paired as
        above. NaN where R = 0, NaN standard errors where R < 2 (``coord_mean_n_unpaired``:
        the replicates done without both methods' bounds at one coordinate at least, or
        failed). Per grid point ``replicates_done``, ``replicates_failed`` (counted in
        ``n_unpaired``), ``methods_pending`` (done replicates where a or b, added to the
        store, is not computed yet: in neither count) and ``coord_exists``, which mark
        the cells computed on fewer than all replicates as a summary's are
        (:mod:`ldpsim.pipeline.summary.partial_cells`). Attributes ``a``,
        ``b``, ``level``, ``sweep``, ``replicates``.

    Raises
    ------
    ValueError
        ``a`` or ``b`` is not a method of the store, or they are equal.
    """
    labels = [str(m) for m in ds["method"].values]
    for name, label in (("a", a), ("b", b)):
        if label not in labels:
            raise ValueError(
                f"The '{name}' parameter of compare_methods must be one of the store's "
                f"methods: {', '.join(labels)}. Got {label!r}."
            )
    if a == b:
        raise ValueError(f"compare_methods needs two different methods. Got {a!r} twice.")
    truth = ds["truth"]
    valid = truth.notnull()
    done = ds["done"].astype(bool)
    lower = {m: ds["lower"].sel({"method": m}, drop=True) for m in (a, b)}
    upper = {m: ds["upper"].sel({"method": m}, drop=True) for m in (a, b)}
    ok = {m: lower[m].notnull() & upper[m].notnull() for m in (a, b)}
    covered = {m: (lower[m] <= truth) & (truth <= upper[m]) for m in (a, b)}
    length = {m: upper[m] - lower[m] for m in (a, b)}
    both = done & valid & ok[a] & ok[b]
    per_coord = _paired(covered[a], covered[b], length[a], length[b], both)

    # Coordinate means: per replicate over the coordinates where both have bounds.
    coords = both.sum("coord")
    per_rep = coords > 0

    def fraction(x: xr.DataArray) -> xr.DataArray:
        return x.where(both, 0).astype(np.float64).sum("coord") / coords.where(per_rep)

    means = _paired(
        fraction(covered[a]),
        fraction(covered[b]),
        fraction(length[a]),
        fraction(length[b]),
        per_rep,
    )
    # What marks a cell computed on fewer than all replicates (partial_cells.COUNTS): the
    # replicates lost to a failure (of the replicate, or of a method in a done one) are
    # n_unpaired; a method added to the store and not computed yet for a done replicate
    # is pending (not computed yet), as in a summary.
    pending = pending_cells(ds).sel({"method": [a, b]}).any("method")
    failed = ds["failed"].astype(bool) if "failed" in ds else xr.zeros_like(done)
    # A bound missing by design (a competitor at a checkpoint) is no failure: only the
    # flagged ones are lost (a store older than the flag: every missing bound), as in a
    # summary.
    flagged = ds["method_failed"].astype(bool) if "method_failed" in ds else None
    lost = {
        m: ~ok[m] if flagged is None else ~ok[m] & flagged.sel({"method": m}, drop=True)
        for m in (a, b)
    }
    unpaired = done & valid & (lost[a] | lost[b]) & ~pending
    replicates_done = done.sum("rep").astype(np.int64)
    replicates_failed = failed.sum("rep").astype(np.int64)
    per_coord["n_unpaired"] = (unpaired.sum("rep") + (failed & valid).sum("rep")).astype(np.int64)
    means["n_unpaired"] = (unpaired.any("coord").sum("rep") + replicates_failed).astype(np.int64)
    out = xr.Dataset(
        {
            **per_coord,
            **{COORD_MEAN_PREFIX + k: v for k, v in means.items()},
            "replicates_done": replicates_done,
            "replicates_failed": replicates_failed,
            "methods_pending": pending.sum("rep").astype(np.int64),
            "coord_exists": valid,
        }
    ).compute()
    order = [*grid_axes(ds), "checkpoint", "coord"]
    out = out.transpose(*[d for d in order if d in out.dims])
    for name, attrs in COMPARE_ATTRS.items():
        out[name].attrs = dict(attrs)
        out[COORD_MEAN_PREFIX + name].attrs = {
            **attrs,
            "long_name": attrs["long_name"] + " (per-replicate means over the coordinates)",
        }
    out.attrs = {k: ds.attrs[k] for k in ("level", "sweep") if k in ds.attrs}
    out.attrs.update(a=a, b=b, **replicates_attrs(ds))
    return out


def parse_pair(text: str, labels: list[str]) -> tuple[str, str]:
    """``'A,B'`` as two method labels of the store.

    Raises
    ------
    ValueError
        Not two comma-separated labels of ``labels``, or the same one twice.
    """
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"--compare takes two methods as A,B (e.g. bb,sn). Got {text!r}.")
    return check_pair(parts[0], parts[1], labels, "--compare")


def check_pair(a: str, b: str, labels: list[str], where: str) -> tuple[str, str]:
    """``a`` and ``b``, two different method labels of ``labels``.

    Raises
    ------
    ValueError
        A label the store lacks, or the same one twice (``where`` names the caller).
    """
    unknown = [label for label in (a, b) if label not in labels]
    if unknown:
        named = ", ".join(repr(label) for label in unknown)
        if len(unknown) == 1:
            named += f"{did_you_mean(unknown[0], labels)} is not a method"
        else:
            named += " are not methods"
        raise ValueError(f"{where}: {named} of the store; its methods are {', '.join(labels)}.")
    if a == b:
        raise ValueError(f"{where} needs two different methods. Got {a!r} twice.")
    return a, b


def format_comparison(
    comparison: xr.Dataset, fmt: TableFormat = "text", coords: CoordsMode = "auto"
) -> str:
    """A table of :func:`compare_methods`, laid out as ``tables.format_table``'s.

    Parameters
    ----------
    comparison : xarray.Dataset
        The output of :func:`compare_methods`.
    fmt : {'text', 'markdown', 'latex', 'csv', 'json'}
        ``csv`` and ``json`` hold one record per grid point, [checkpoint,] coord (with
        ``coords='mean'``: per grid point [and checkpoint], the coordinate means); a
        case's parameters follow ``case``
        (:func:`~ldpsim.pipeline.summary.records.with_case_parameters`), and
        ``n_replicates``, the store's replicates, follows the counts: a record whose
        ``n_paired`` and ``n_unpaired`` add up to fewer counts the replicates done only.
    coords : {'auto', 'all', 'mean'}
        As in ``format_table``: ``auto`` shows the coordinate means above 10 coordinates
        (in csv and json every coordinate's record, as ``all``).

    Returns
    -------
    str
        The table, ending with a newline.
    """
    a, b = comparison.attrs["a"], comparison.attrs["b"]
    shown = table_coords(comparison, fmt, coords)  # csv, json: every coordinate's record
    prefix = COORD_MEAN_PREFIX if shown == "mean" else ""
    fields = [prefix + f for f in (*COMPARE_FIELDS, COMPARE_COUNT, "n_unpaired")]
    if fmt in ("csv", "json"):
        checkpoint = ["checkpoint"] if "checkpoint" in comparison.dims else []
        dims = [*grid_axes(comparison), *checkpoint, *(["coord"] if not prefix else [])]
        recs = with_case_parameters(comparison, records_over(comparison, dims, fields))
        # n_replicates: a cell whose n_paired + n_unpaired falls short of it counts only
        # the replicates done (a run not finished).
        recs = with_replicates(comparison, recs)
        for rec in recs:
            rec.update(a=a, b=b)
        return render_records(recs, fmt, [*dims, *fields, "n_replicates", "a", "b"])
    stats = {
        f"cover {a} - {b}": prefix + "coverage_diff",
        f"length {a} / {b}": prefix + "length_ratio",
    }
    rows = table_rows(comparison, fmt, stats, per_method=False, per_coord=not prefix)
    where = "the means over the coordinates, " if prefix else ""
    caption = (
        f"{caption_head(comparison)}; {where}coverage of {a} minus that of {b} and the ratio "
        f"of their mean lengths, on the same replicates (paired Monte-Carlo standard errors "
        f"in brackets; delta method for the ratio); "
        f"{replicates_per_cell(comparison, prefix + COMPARE_COUNT)}"
    )
    render = {"markdown": markdown_table, "latex": latex_table}.get(fmt, text_table)
    return render(caption, *rows, footnote(comparison, list(stats.values()), fmt))
