"""Records of a summary (one dict per cell) and their CSV and JSON renderings."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ldpsim.pipeline.formatting import native_value
from ldpsim.pipeline.summary.case_parameters import COORD_PREFIX, case_parameters
from ldpsim.pipeline.summary.diagnostics import DIAGNOSTIC_FIELDS
from ldpsim.pipeline.summary.variables import grid_axes
from ldpsim.pipeline.sweep import CASE_AXIS

#: Statistics of a grid point [and checkpoint], the same for all its methods and coords.
ERROR_FIELDS = ("mse", "mse_se", "mse_n_done", "mse_last", "mse_last_se", "mse_last_n_done")
#: Fields of one record of :func:`records` besides the grid values.
RECORD_FIELDS = (
    "coverage",
    "coverage_se",
    "length",
    "length_se",
    "n_done",
    "n_failed",
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
    "coord_mean_n_failed",
    "joint_coverage",
    "joint_coverage_se",
    "joint_coverage_z",
    "joint_n_done",
    *ERROR_FIELDS,
    "coord_mean_replicates_needed",
)


def records(summary: xr.Dataset) -> list[dict[str, Any]]:
    """One record per grid point, method, [checkpoint,] coord of a summary.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`summarize`.

    Returns
    -------
    list of dict
        Keys: one per grid axis (its value; after ``case``, the parameters that vary
        across the cases, :func:`with_case_parameters`), ``method``, ``checkpoint``
        (only when the store has checkpoints), ``coord``, then ``coverage``,
        ``coverage_se``, ``length``, ``length_se``, ``n_done``, ``n_failed``
        (replicates lost to a failure; see :mod:`ldpsim.pipeline.summary.partial_cells`) and
        the diagnostics
        ``predicted_coverage``, ``bias_over_sd``, ``variance_ratio``, each followed by
        its ``_se``, and the mean squared errors of the average and the last iterate
        (:data:`ERROR_FIELDS`: ``mse``, ``mse_se``, ``mse_n_done``, ``mse_last``,
        ``mse_last_se``, ``mse_last_n_done``), which are per grid point [and checkpoint]
        and so repeat in the records of its methods and coordinates; last
        ``n_replicates``, the replicates of the grid point. Values are plain Python
        types; NaN statistics are None (null in JSON). Only the coordinates each grid
        point has (a case of smaller d has none beyond its d), and only the fields the
        summary holds (:func:`held_fields`).
    """
    dims = [*_method_dims(summary), "coord"]
    fields = held_fields(summary, RECORD_FIELDS)
    recs = with_case_parameters(summary, records_over(summary, dims, fields))
    return with_replicates(summary, recs)


def coord_mean_records(summary: xr.Dataset) -> list[dict[str, Any]]:
    """One record per grid point, method [and checkpoint] of a summary: coordinate means.

    Parameters
    ----------
    summary : xarray.Dataset
        The output of :func:`summarize`.

    Returns
    -------
    list of dict
        Keys: one per grid axis (its value; after ``case``, the parameters that vary
        across the cases, :func:`with_case_parameters`), ``method``, ``checkpoint``
        (only when the store has checkpoints), then ``coord_mean_coverage``,
        ``coord_mean_coverage_se``, ``coord_mean_length``, ``coord_mean_length_se``,
        ``coord_mean_n_done`` (see :func:`ldpsim.pipeline.summary.summary.coordinate_means`),
        ``coord_mean_n_failed``, the
        joint coverage and the mean squared errors (:data:`ERROR_FIELDS`), which are per
        grid point [and checkpoint] and so repeat in the records of its methods; last
        ``n_replicates``. Values are plain Python types; NaN statistics are None (null
        in JSON). Only the fields the summary holds (:func:`held_fields`).
    """
    fields = held_fields(summary, COORD_MEAN_RECORD_FIELDS)
    recs = records_over(summary, _method_dims(summary), fields)
    return with_replicates(summary, with_case_parameters(summary, recs))


def held_fields(summary: xr.Dataset, fields: Sequence[str]) -> list[str]:
    """The ``fields`` that ``summary`` holds, in order.

    A summary made by an older ldpsim (kept in a file and read back) lacks the
    statistics added since, e.g. ``n_failed`` before the partial cells: its records
    leave those fields out rather than invent them.
    """
    return [field for field in fields if field in summary.variables]


def with_case_parameters(summary: xr.Dataset, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with the parameters that vary across the cases right after ``case``.

    One field per parameter of :func:`~ldpsim.pipeline.summary.case_parameters.case_parameters`,
    named as the summary's coordinate (``case_d``, ``case_mechanism``), its value the
    record's case's; None (an empty CSV cell, JSON null) where the case and the sweep's
    ``[spec]`` leave it unset. ``case`` stays, so a record joins back to the sweep.
    Records without a case axis are returned as they are.
    """
    parameters = case_parameters(summary)
    if not parameters:
        return recs
    labels = [str(label) for label in summary[CASE_AXIS].values]
    fields = {
        label: {f"{COORD_PREFIX}{name}": values[i] for name, values in parameters.items()}
        for i, label in enumerate(labels)
    }
    out = []
    for rec in recs:
        grown: dict[str, Any] = {}
        for key, value in rec.items():
            grown[key] = value
            if key == CASE_AXIS:
                grown.update(fields[str(value)])
        out.append(grown)
    return out


def with_replicates(summary: xr.Dataset, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with ``n_replicates`` (the grid point's replicates) added, so that a
    cell's counts say whether it is partial (``n_done < n_replicates``)."""
    total = summary.attrs.get("replicates")
    return [{**r, "n_replicates": None if total is None else int(total)} for r in recs]


def _method_dims(summary: xr.Dataset) -> list[str]:
    """The grid axes, ``method`` and [``checkpoint``]: the outer dims of the records."""
    checkpoint = ["checkpoint"] if "checkpoint" in summary.dims else []
    return [*grid_axes(summary), "method", *checkpoint]


def records_over(
    summary: xr.Dataset, dims: Sequence[str], fields: Sequence[str]
) -> list[dict[str, Any]]:
    """One record per index of ``dims`` of the variables ``fields`` of ``summary``.

    ``fields[0]`` must have exactly these dims; the others are broadcast to them. With a
    ``coord`` dim, only the coordinates a grid point has (``coord_exists``): a case of
    d = 10 in a store of d up to 1000 has 10 records per method, not 1000.
    """
    data = summary[list(fields)]
    index_values = [data[d].values for d in dims]
    full = data[fields[0]]
    columns = {f: data[f].broadcast_like(full).transpose(*dims).values for f in fields}
    exists = None
    if "coord" in dims and "coord_exists" in summary:
        exists = summary["coord_exists"].broadcast_like(full).transpose(*dims).values
    out = []
    for idx in np.ndindex(*(len(v) for v in index_values)):
        if exists is not None and not exists[idx]:
            continue
        rec = {d: native_value(v[i]) for d, v, i in zip(dims, index_values, idx, strict=True)}
        rec.update({f: native_value(columns[f][idx]) for f in fields})
        out.append(rec)
    return out


def json_value(value: Any) -> Any:
    """A record value for strict JSON: an infinite grid value (eps = inf) as "inf"."""
    # Strict JSON has no Infinity: an infinite grid value (eps = inf) is written "inf".
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def render_records(recs: list[dict[str, Any]], fmt: str, empty_fields: Sequence[str] = ()) -> str:
    """Records as JSON (a list of objects, NaN as null, inf as "inf") or CSV.

    ``empty_fields`` are the CSV header when there is no record.
    """
    if fmt == "json":
        recs = [{k: json_value(v) for k, v in r.items()} for r in recs]
        return json.dumps(recs, indent=1, allow_nan=False) + "\n"
    buffer = io.StringIO()
    fields: list[Hashable] = list(recs[0]) if recs else list(empty_fields)
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(recs)
    return buffer.getvalue()
