"""``ldpsim report``: one self-contained HTML page of a store (jinja2 template)."""

from __future__ import annotations

import base64
import io
import json
import math
import time
from collections.abc import Iterable
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import xarray as xr

from ldpsim.pipeline.errors import InputError, os_error_text
from ldpsim.pipeline.formatting import axis_labels, format_level, format_number
from ldpsim.pipeline.partial_cells import footnote
from ldpsim.pipeline.plots import store_figures
from ldpsim.pipeline.provenance import environment, read_runs
from ldpsim.pipeline.reading import check_store, iter_errors, load_dataset, open_dataset
from ldpsim.pipeline.summary import TARGET_SE, grid_axes, summarize, sweep_info
from ldpsim.pipeline.sweep import sweep_toml
from ldpsim.pipeline.table_layouts import blank_repeats
from ldpsim.pipeline.tables import (
    TABLE_COORD_MEANS,
    TABLE_ERRORS,
    TABLE_STATS,
    TABLE_STATS_DIAGNOSTICS,
    coord_mean_caption,
    error_caption,
    shown_coords,
    summary_caption,
    table_rows,
)
from ldpsim.pipeline.timings import format_seconds, median_per_point, timing_summary

#: The template, in the package's ``templates`` folder.
TEMPLATE = "report.html.j2"
#: Failures listed per method (the count is always complete); the rest are summed up.
MAX_FAILURES_SHOWN = 20
#: Resolution of the figures embedded as PNG (lower than plot's 150: a page, not print).
FIGURE_DPI = 90
#: Stores whose bounds take more memory are summarized lazily, chunk by chunk, with
#: dask; smaller ones are read into memory at once. A store of 1e5 replicates, d = 1000
#: and two methods holds 1.6 GB of float64 bounds, which an in-memory summary multiplies
#: beyond 20 GB.
IN_MEMORY_BYTES = 500e6
#: Above this many coordinates the diagnostics table shows coordinate 0 only.
MAX_DIAGNOSTIC_COORDS = 10


def default_report_path(store: str | Path) -> Path:
    """Where ``ldpsim report`` writes without ``--out``: ``<store>-report.html`` beside it."""
    return Path(str(Path(store)).removesuffix(".zarr") + "-report.html")


def _html_table(caption: str, names, headers, rows, note: str = "") -> dict[str, Any]:
    labels = blank_repeats(rows)
    return {
        "caption": caption,
        "note": note,
        "names": list(names),
        "headers": list(headers),
        "rows": [
            {"labels": shown, "cells": cells, "first": bool(shown[0]) and i > 0}
            for i, (shown, (_, cells)) in enumerate(zip(labels, rows, strict=True))
        ],
    }


def result_tables(summary: xr.Dataset) -> list[dict[str, Any]]:
    """Coverage and length (coordinate means above 10 coordinates) with the replicates
    a target se needs, the diagnostics and the mean squared errors, ready for the template."""
    target = summary.attrs.get("target_se", TARGET_SE)
    needed_row = f"R for se {format_number(target)}"
    planning = (
        f"; {needed_row}: the replicates that would give the coverage a Monte-Carlo "
        f"standard error of {format_number(target)}"
    )
    tables = []
    if shown_coords(summary, "auto") == "mean":
        stats = {**TABLE_COORD_MEANS, needed_row: "coord_mean_replicates_needed"}
        caption = coord_mean_caption(summary, False) + planning
        rows = table_rows(summary, "text", stats, per_coord=False)
        tables.append(
            _html_table(caption, *rows, note=footnote(summary, [*stats.values()], "text"))
        )
        diagnostics = summary.isel(coord=[0])
        where = "; coordinate 0 of " + str(summary.sizes["coord"])
    else:
        stats = {**TABLE_STATS, needed_row: "replicates_needed"}
        tables.append(
            _html_table(
                summary_caption(summary, False) + planning,
                *table_rows(summary, "text", stats),
                note=footnote(summary, [*stats.values()], "text"),
            )
        )
        diagnostics, where = summary, ""
    tables.append(
        _html_table(
            summary_caption(diagnostics, True) + where,
            *table_rows(diagnostics, "text", TABLE_STATS_DIAGNOSTICS),
            note=footnote(diagnostics, [*TABLE_STATS_DIAGNOSTICS.values()], "text"),
        )
    )
    if any(bool(summary[v].notnull().any()) for v in TABLE_ERRORS.values()):
        rows = table_rows(summary, "text", TABLE_ERRORS, per_method=False, per_coord=False)
        note = footnote(summary, [*TABLE_ERRORS.values()], "text")
        tables.append(_html_table(error_caption(summary), *rows, note=note))
    return tables


def figure_images(ds: xr.Dataset, summary: xr.Dataset) -> list[dict[str, str]]:
    """Every figure ``ldpsim plot`` draws, as PNG data URIs (no file, no network)."""
    out = []
    for stem, fig in store_figures(ds, summary=summary).items():
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        out.append({"stem": stem, "uri": f"data:image/png;base64,{data}"})
    return out


#: How the store's ``created`` attribute and the run records write dates.
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
#: Characters of an error message shown in the failures table (the rest: ``ldpsim errors``).
MAX_ERROR_CHARS = 300


def _first_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def _rep(record: dict[str, Any]) -> int:
    rep = record.get("rep")
    return rep if isinstance(rep, int) else -1


def failure_groups(ds: xr.Dataset, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Failures per interval method, and of whole replicates, with seeds to replay them.

    Counts come from the store's flags (``failed``, ``method_failed``); the listed rows
    from the error records, at most :data:`MAX_FAILURES_SHOWN` per group.
    """
    groups: dict[str, dict[str, Any]] = {}

    def group(label: str, count: int) -> dict[str, Any]:
        return groups.setdefault(label, {"label": label, "count": count, "rows": [], "more": 0})

    method_failed = ds["method_failed"].values
    grid = len(grid_axes(ds))
    per_replicate = method_failed.reshape(*method_failed.shape[: grid + 2], -1).any(-1)
    counts = {
        str(label): int(per_replicate[..., m, :].sum())
        for m, label in enumerate(ds["method"].values)
    }
    replicates = int(ds["failed"].values.sum())
    for record in sorted(records, key=lambda r: (str(r.get("key")), _rep(r))):
        kind = record.get("kind")
        if kind == "method":
            items = (record.get("methods") or {}).items()
            entries = [(f"method {label}", message) for label, message in items]
        else:  # a whole replicate (or its task) failed
            entries = [("whole replicates", record.get("error"))]
        for label, message in entries:
            name = label.removeprefix("method ")
            g = group(
                label, counts.get(name, replicates) if label != "whole replicates" else replicates
            )
            if len(g["rows"]) >= MAX_FAILURES_SHOWN:
                g["more"] += 1
                continue
            spec = record.get("spec") or {}
            g["rows"].append(
                {
                    "key": record.get("key"),
                    "rep": record.get("rep"),
                    "seed": record.get("seed"),
                    "error": _first_line(message),
                    "spec": json.dumps(spec, default=str, sort_keys=True),
                }
            )
    for label, count in counts.items():  # flagged failures whose records are missing
        if count and f"method {label}" not in groups:
            group(f"method {label}", count)
    if replicates and "whole replicates" not in groups:
        group("whole replicates", replicates)
    return sorted(groups.values(), key=lambda g: g["label"])


def timing_tables(ds: xr.Dataset) -> dict[str, Any]:
    """Median and total compute seconds, per grid point and per method."""
    timing = timing_summary(ds)
    axes = grid_axes(ds)
    medians = median_per_point(ds)
    seconds = ds["seconds"].where(ds["done"].astype(bool)).values
    labels = [axis_labels(ds[a].values, "text") for a in axes]
    points = []
    for index in np.ndindex(*medians.shape):
        done = int(np.asarray(ds["done"].values[index]).sum())
        points.append(
            {
                "labels": [lab[i] for lab, i in zip(labels, index, strict=True)],
                "done": done,
                "median": format_seconds(float(medians[index])),
                "total": format_seconds(float(np.nansum(seconds[index]))),
            }
        )
    methods = [
        {
            "label": label,
            "median": format_seconds(value),
            "total": format_seconds(timing["per_method_total"][label]),
        }
        for label, value in timing["per_method"].items()
    ]
    return {
        "axes": axes,
        "points": points,
        "methods": methods,
        "replicates": timing["replicates"],
        "median": format_seconds(timing["median"]),
        "total": format_seconds(timing["total"]),
    }


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min {rest} s"
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def provenance(ds: xr.Dataset, store: Path) -> dict[str, Any]:
    """What made the store and this page: software, machine, cluster, runs."""
    try:
        created_with = json.loads(ds.attrs.get("versions") or "{}")
    except ValueError:
        created_with = {}
    runs = read_runs(store)
    for run in runs:
        run["wall"] = _duration(float(run.get("wall_seconds", float("nan"))))
    created = ds.attrs.get("created", "not recorded")
    return {
        "now": environment(),
        "created": created,
        "earlier_unrecorded": bool(runs) and _before(created, runs[0].get("started")),
        "created_with": created_with,
        "streams_version": ds.attrs.get("streams_version", "not recorded (version 1)"),
        "runs": runs,
        **unit_origins(ds.attrs),
    }


def unit_origins(attrs: dict[str, Any]) -> dict[str, Any]:
    """The origin of every unit a store used, and each recorded change of their code.

    Returns
    -------
    dict
        ``units``: one row per unit of the latest generation (kind, name, origin as
        :func:`~ldpsim.pipeline.code_identity.describe` writes it); ``code_changes``: one
        row per unit whose source differs from the generation before (the code version,
        the unit, old and new origin); ``units_recorded``: whether the store has them.
    """
    from ldpsim.pipeline.code_identity import changed_units, describe, read_generations

    try:
        generations = read_generations(attrs) or []
    except InputError:
        generations = []
    units = [
        {"kind": key.partition(":")[0], "name": key.partition(":")[2], "origin": describe(o)}
        for key, o in (generations[-1] if generations else {}).items()
    ]
    changes = [
        {
            "code_version": index,
            "unit": change["unit"].replace(":", " "),
            "old": describe(change["old"]),
            "new": describe(change["new"]),
        }
        for index in range(1, len(generations))
        for change in changed_units(generations[index - 1], generations[index])
    ]
    return {"units": units, "code_changes": changes, "units_recorded": bool(generations)}


def _before(created: object, started: object, slack_seconds: float = 60.0) -> bool:
    """Whether the store was created well before a run started (so earlier runs exist)."""
    try:
        a = datetime.strptime(str(created), TIMESTAMP_FORMAT)
        b = datetime.strptime(str(started), TIMESTAMP_FORMAT)
    except ValueError:
        return False
    return (b - a).total_seconds() > slack_seconds


def _environment() -> jinja2.Environment:
    text = resources.files("ldpsim.pipeline").joinpath("templates", TEMPLATE).read_text()
    env = jinja2.Environment(
        loader=jinja2.DictLoader({TEMPLATE: text}),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def build_context(store: str | Path, target_se: float = TARGET_SE) -> dict[str, Any]:
    """Everything the report shows, read from the store (checked first).

    Raises
    ------
    InputError
        Not an ldpsim store, or a damaged one (see
        :func:`ldpsim.pipeline.reading.check_store`).
    """
    from ldpsim.pipeline.damage import refuse_damage

    store = Path(store)
    check_store(store, read_chunks=False)
    refuse_damage(store)
    records = list(iter_errors(store))
    ds = open_dataset(store)
    if ds["lower"].nbytes <= IN_MEMORY_BYTES:
        ds = load_dataset(store)  # one read of each array: faster than dask's chunks
    # else the summary is computed chunk by chunk with dask, in bounded memory
    summary = summarize(ds, target_se=target_se)
    sweep = sweep_info(ds)
    level = ds.attrs.get("level")
    return {
        "name": sweep.get("name", store.name),
        "description": sweep.get("description", ""),
        "store": str(store.resolve()),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "level": format_level(level) if level is not None else "n/a",
        "replicates": sweep.get("replicates"),
        "grid": {a: axis_labels(ds[a].values, "text") for a in grid_axes(ds)},
        "methods": [str(m) for m in ds["method"].values],
        "d": int(ds.sizes["coord"]),
        "done": int(ds["done"].values.sum()),
        "total": int(ds["done"].size),
        "sweep_toml": sweep_toml(sweep, note="as stored"),
        "tables": result_tables(summary),
        "figures": figure_images(ds, summary),
        "failures": failure_groups(ds, records),
        "max_failures": MAX_FAILURES_SHOWN,
        "timings": timing_tables(ds),
        "provenance": provenance(ds, store),
    }


def render_report(context: dict[str, Any]) -> str:
    """The HTML page of a :func:`build_context` result."""
    return _environment().get_template(TEMPLATE).render(**context)


def write_report(store: str | Path, out: str | Path, target_se: float = TARGET_SE) -> Path:
    """Write the HTML report of ``store`` to ``out`` (replaced if it exists).

    The page is self-contained: styles inline, figures as PNG data URIs, no script and
    no reference to anything outside the file, so it opens from a mail attachment
    without a network.

    Raises
    ------
    InputError
        A store that is not one or is damaged (nothing is written), or an ``out`` that
        cannot be written.
    """
    html = render_report(build_context(store, target_se))
    out = Path(out)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"Cannot write the report {str(out)!r}: {os_error_text(exc, out)}."
        ) from None
    return out
