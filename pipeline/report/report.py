"""``ldpsim report``: one self-contained HTML page of a store (jinja2 template)."""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import shlex
import time
from collections.abc import Iterable
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from ldpsim.pipeline.compute.failures import GridNames
from ldpsim.pipeline.compute.replay import replay_route
from ldpsim.pipeline.errors import InputError, os_error_text
from ldpsim.pipeline.formatting import (
    axis_labels,
    format_level,
    named_text,
)
from ldpsim.pipeline.report.plots import (
    FAILED_TEXT,
    LABEL_BREAKS,
    NO_DATA_TEXT,
    NO_VALUE_TEXT,
    store_figures,
    unwrap_label,
)
from ldpsim.pipeline.store.provenance import PACKAGES, environment, read_runs
from ldpsim.pipeline.store.reading import check_store, iter_errors, load_dataset, open_dataset
from ldpsim.pipeline.store.store_path import beside_store, check_outside_stores
from ldpsim.pipeline.summary.case_parameters import case_parameters
from ldpsim.pipeline.summary.nominal_claims import FLAG_SIZE, FLAG_Z, false_flag_rate
from ldpsim.pipeline.summary.summary import TARGET_SE, shared_level, summarize, sweep_info
from ldpsim.pipeline.summary.table_layouts import blank_repeats
from ldpsim.pipeline.summary.tables import (
    DEPARTURE_MARK,
    TABLE_ERRORS,
    case_columns,
    coverage_table,
    error_table,
    format_table,
    shown_coords,
)
from ldpsim.pipeline.summary.timings import format_seconds, median_per_point, timing_summary
from ldpsim.pipeline.summary.variables import grid_axes
from ldpsim.pipeline.sweep import CASE_AXIS, sweep_toml

#: The template, in the package's ``templates`` folder.
TEMPLATE = "report.html.j2"
#: Failures listed per method (the count is always complete); the rest are summed up.
MAX_FAILURES_SHOWN = 20
#: Stores whose bounds take more memory are summarized lazily, chunk by chunk, with
#: dask; smaller ones are read into memory at once. A store of 1e5 replicates, d = 1000
#: and two methods holds 1.6 GB of float64 bounds, which an in-memory summary multiplies
#: beyond 20 GB.
IN_MEMORY_BYTES = 500e6
#: Above this many coordinates the diagnostics table shows coordinate 0 only.
MAX_DIAGNOSTIC_COORDS = 10


def default_report_path(store: str | Path) -> Path:
    """Where ``ldpsim report`` writes without ``--out``: ``<store>-report.html`` beside it."""
    return beside_store(store, "-report.html")


#: What the table footnotes advise on the command line, and what a reader of the page
#: can do instead (the page has the summary CSV as a download link).
HTML_ADVICE = {
    "--format csv gives each cell's n_done and n_failed.": (
        "The summary CSV (Download, at the top of Results) gives each cell's n_done and n_failed."
    ),
    "--coords all lists each coordinate": (
        "ldpsim summarize --coords all STORE lists each coordinate"
    ),
}


def _for_html(text: str) -> str:
    """A caption or footnote with command-line advice replaced by what the page offers."""
    for advice, instead in HTML_ADVICE.items():
        text = text.replace(advice, instead)
    return text


def _html_table(caption: str, names, headers, rows, note: str = "") -> dict[str, Any]:
    """A table for the template: a row group (``tbody``) per block of rows that share all
    labels but the last (a method's statistics), so that a printed page never splits one,
    ``major`` where the first label changes (a rule above it); cells with a departure flag;
    its label columns laid out by :func:`sticky_labels`."""
    labels = blank_repeats(rows)
    groups: list[list[dict[str, Any]]] = []
    major: list[bool] = []
    for i, (shown, (full, cells)) in enumerate(zip(labels, rows, strict=True)):
        if i == 0 or len(shown) < 2 or any(shown[:-1]):
            groups.append([])
            major.append(i == 0 or bool(shown[0]))
        groups[-1].append(
            {
                "labels": shown,
                # A label left blank where it repeats is still the row's header for a
                # screen reader, which names a cell by the headers of its own row only.
                "repeats": [str(label) for label in full],
                "cells": [
                    {"text": cell, "departs": cell.endswith(DEPARTURE_MARK)} for cell in cells
                ],
            }
        )
    # An empty header cell (the statistic's column) says what it holds.
    names = [name or "statistic" for name in names]
    layout = sticky_labels(names, [row for group in groups for row in group])
    # Its widest number column, in the table's em (a departure's is bold), without its
    # padding, which a phone's narrower cells halve.
    number = max(
        (
            text_em(text, bold=True) + LABEL_SLACK_EM
            for text in (*headers, *(c["text"] for g in groups for r in g for c in r["cells"]))
        ),
        default=0.0,
    )
    label_em, narrow_label_em = layout.pop("label_em"), layout.pop("narrow_label_em")
    return {
        "caption": _for_html(caption),
        "note": _for_html(note),
        "names": names,
        "headers": list(headers),
        "groups": groups,
        "major": major,
        # A box narrower than this (in the box's em) cannot hold the sticky labels and a
        # column of numbers beside them: the labels scroll with the numbers there.
        "sticky_below": f"{(label_em + number + LABEL_PADDING_EM) * TABLE_FONT_EM:.2f}",
        # The same on a phone, of its narrower label columns, cells and font: below it
        # (a 320 px page) a Wilson interval, its column wider than the room the labels
        # leave, lay partly under them however far its box was scrolled.
        "narrow_sticky_below": (
            f"{(narrow_label_em + number + NARROW_PADDING_EM) * NARROW_TABLE_FONT_EM:.2f}"
        ),
        **layout,
    }


#: A table's font size in its scroll box's em (the template's ``table { font-size }``),
#: and on a phone (its ``.scroll table { font-size }`` there).
TABLE_FONT_EM = 0.9
NARROW_TABLE_FONT_EM = 0.85
#: A label cell's horizontal padding on a desktop and on a phone, and room to spare
#: beyond its text's width (:func:`text_em`), in em.
LABEL_PADDING_EM = 1.2
NARROW_PADDING_EM = 0.6
LABEL_SLACK_EM = 0.15
#: The widest label column on a desktop; wider labels wrap.
MAX_LABEL_EM = 16.0
#: The widest label column on a phone (a page up to 600 px wide): two such
#: columns leave a 400 px phone about half its width for the numbers.
NARROW_LABEL_EM = 6.5
#: Label columns a phone keeps (the innermost: method and statistic); the outer ones
#: become a heading row above each block of rows they label.
NARROW_LABEL_COLUMNS = 2
#: A phone's label column widens past NARROW_LABEL_EM, up to this, to keep a label's
#: longest unbreakable part on one line (``randomized_`` of ``randomized_response``,
#: 6.4 em): a label wraps after an underscore, a hyphen or a space, not mid-word.
NARROW_WORD_EM = 8.0


@functools.lru_cache(maxsize=4096)
def text_em(text: str, bold: bool = False) -> float:
    """The width of ``text`` on one line, in em of its font, in DejaVu Sans: the font
    matplotlib draws with and Chromium's system-ui on Debian, wider than most systems'
    (a column sized by it is wide enough)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    font = FontProperties(family="DejaVu Sans", weight="bold" if bold else "normal", size=100)
    width, _, _ = text_to_path.get_text_width_height_descent(text, font, ismath=False)
    return width / 100


def _longest_part_em(text: str, bold: bool = False) -> float:
    """The width of the widest part of ``text`` that cannot wrap
    (:data:`~ldpsim.pipeline.report.plots.LABEL_BREAKS`)."""
    return max((text_em(part, bold) for part in LABEL_BREAKS.split(text) if part), default=0.0)


def breakable(text: object) -> markupsafe.Markup:
    """``text`` escaped for HTML, with a ``<wbr>`` after each of its break opportunities
    (:data:`~ldpsim.pipeline.report.plots.LABEL_BREAKS`): a narrow label column wraps
    ``randomized_response`` after its underscore rather than anywhere (the template's
    ``breakable`` filter)."""
    parts = LABEL_BREAKS.split(str(text))
    return markupsafe.Markup("<wbr>").join(markupsafe.escape(part) for part in parts)


def sticky_labels(names: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How a results table keeps its labels in view while its numbers scroll sideways.

    Every label column is sticky (``position: sticky``), each at a fixed width (its
    widest label or name, :func:`text_em`, at most :data:`MAX_LABEL_EM`) so that the
    next one sticks right of it. On a phone only the last
    :data:`NARROW_LABEL_COLUMNS` stay columns (at most :data:`NARROW_LABEL_EM` wide);
    the outer ones are hidden, and a heading row names their values above each block of
    rows they label.

    Parameters
    ----------
    names : list of str
        The label columns' names.
    rows : list of dict
        The table's rows, their ``labels`` blank where they repeat the row above; each
        gets ``heading``: the outer labels' values where one of them changes, else "".

    Returns
    -------
    dict
        ``columns``: the CSS custom properties of the widths and offsets (``--wI``,
        ``--xI``; on a phone ``--nwI``, ``--nxI``), for the table's scroll box;
        ``label_classes``: each label column's classes (``lab lI``, ``outer``);
        ``label_em``, ``narrow_label_em``: the label columns' width on a desktop and
        on a phone, in em.
    """
    count = len(names)
    outer = max(count - NARROW_LABEL_COLUMNS, 0)
    text = [text_em(name, bold=True) + LABEL_SLACK_EM for name in names]
    word = [_longest_part_em(name, bold=True) + LABEL_SLACK_EM for name in names]
    current = [""] * count
    for row in rows:
        for i, label in enumerate(row["labels"]):
            text[i] = max(text[i], text_em(label) + LABEL_SLACK_EM)
            word[i] = max(word[i], _longest_part_em(label) + LABEL_SLACK_EM)
        current = [label or old for label, old in zip(row["labels"], current, strict=True)]
        changed = any(row["labels"][:outer])
        values = [
            # a label that names its column already ("coord 1") stands alone
            value if value.startswith(f"{name} ") else f"{name} = {value}"
            for name, value in zip(names[:outer], current[:outer], strict=True)
            if value not in ("", "-")
        ]
        row["heading"] = ", ".join(values) if changed else ""
    widths = [min(em + LABEL_PADDING_EM, MAX_LABEL_EM) for em in text]
    narrow = [
        max(
            min(em + NARROW_PADDING_EM, NARROW_LABEL_EM),
            min(part + NARROW_PADDING_EM, NARROW_WORD_EM),
        )
        for em, part in zip(text, word, strict=True)
    ]
    properties = []
    left = narrow_left = 0.0
    for i in range(count):
        properties += [f"--w{i}: {widths[i]:.2f}em", f"--x{i}: {left:.2f}em"]
        left += widths[i]
        if i >= outer:
            properties += [f"--nw{i}: {narrow[i]:.2f}em", f"--nx{i}: {narrow_left:.2f}em"]
            narrow_left += narrow[i]
    return {
        "columns": "; ".join(properties),
        "label_classes": [f"lab l{i}" + (" outer" if i < outer else "") for i in range(count)],
        "label_em": left,
        "narrow_label_em": narrow_left,
    }


def result_tables(summary: xr.Dataset) -> list[dict[str, Any]]:
    """Coverage and length (coordinate means above 10 coordinates) with the replicates
    a target se needs, the diagnostics and the mean squared errors, ready for the template.

    The tables of ``ldpsim summarize`` (:func:`~ldpsim.pipeline.summary.tables.coverage_table`,
    :func:`~ldpsim.pipeline.summary.tables.error_table`): compact (statistics as columns) for a
    store of one n, coverage cells that depart from the method's nominal claim
    (:mod:`ldpsim.pipeline.summary.nominal_claims`) ending in
    :data:`~ldpsim.pipeline.summary.tables.DEPARTURE_MARK`, Wilson's interval at 0 and 1. The
    replicates a target se needs are planned from the coverage shown for a marginal
    method, and from the joint coverage for a simultaneous band, in a column (or row)
    of its own label.
    """
    main = coverage_table(summary, "text", replicates_needed=True, flag_note_under=False)
    if shown_coords(summary, "auto") == "mean":
        diagnostics = summary.isel(coord=[0])
        where = "; coordinate 0 of " + str(summary.sizes["coord"])
    else:
        diagnostics, where = summary, ""
    diagnostic = coverage_table(diagnostics, "text", diagnostics=True, flag_note_under=False)
    diagnostic.caption += where
    tables = [main, diagnostic]
    if any(bool(summary[v].notnull().any()) for v in TABLE_ERRORS.values()):
        tables.append(error_table(summary, "text"))
    return [_html_table(t.caption, t.names, t.headers, t.rows, note=t.note) for t in tables]


def departure_rule(summary: xr.Dataset) -> dict[str, str]:
    """What How to read says of the departure mark: the mark, the test's z and size, and
    its exact rate of marks at exactly nominal coverage for this store's replicates
    (:func:`~ldpsim.pipeline.summary.nominal_claims.false_flag_rate`), one rate per level
    where ``level`` is a grid axis ("4.4% (at 90%) or 3.1% (at 95%)")."""
    levels = store_levels(summary)
    replicates = int(summary.attrs.get("replicates", 0))
    rates = [f"{100 * false_flag_rate(replicates, level):.1f}%" for level in levels]
    if replicates <= 0 or not rates:
        rate = "n/a"
    elif len(rates) == 1:
        rate = rates[0]
    else:
        rate = " or ".join(
            f"{r} (at {format_level(level)})" for r, level in zip(rates, levels, strict=True)
        )
    return {
        "mark": DEPARTURE_MARK,
        "z": f"{FLAG_Z:.2f}",
        "size": f"{100 * FLAG_SIZE:g}%",
        "replicates": f"{replicates:,}",
        "rate": rate,
    }


def summary_csv(summary: xr.Dataset) -> dict[str, str]:
    """The summary's records as a CSV download (a data: URL), with what they hold.

    Every coordinate's record up to :data:`~ldpsim.pipeline.summary.tables.AUTO_MAX_COORDS`
    coordinates, else the coordinate means (with the joint coverage): a store of d =
    1000 would otherwise put megabytes of records into the page.
    """
    means = shown_coords(summary, "auto") == "mean"
    text = format_table(summary, "csv", coords="mean" if means else "all")
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return {
        "uri": f"data:text/csv;base64,{data}",
        "what": "the means over the coordinates" if means else "one row per coordinate",
        "size": f"{len(text) / 1000:.0f} kB" if len(text) >= 1000 else f"{len(text)} bytes",
    }


#: Figures drawn in the report at CSS_PX_PER_INCH, as a browser shows an image of that
#: many pixels per inch of the figure: at 100% zoom a 10 pt font is 13.3 px, and the
#: smallest text of a figure (the legend, "small": 8.3 pt) 11.1 px.
CSS_PX_PER_INCH = 96
#: The PNG holds this many pixels per CSS pixel (sharp on high-density screens).
PIXEL_RATIO = 2
#: How a coverage's error bar is drawn where its standard error is 0.
WILSON_BARS = (
    "; at a coverage of exactly 0 or 1, where that is 0, Wilson's interval at z = 2 "
    "instead, as in the tables"
)
#: How a coverage that is not the method's nominal claim is drawn.
HOLLOW = (
    " Hollow, faint markers: a coverage the method does not claim (a simultaneous band's "
    "per coordinate, an interval's joint), shown for information; the dotted line is "
    "drawn where some method claims what a panel shows and the panel has one level (a "
    "level grid axis: each coverage panel its own; none in a figure mixing levels)."
)
#: What every figure shows, with what its bars are (+-2 Monte-Carlo standard errors).
FIGURE_CAPTIONS = {
    "coverage": (
        "Coverage of the intervals (the fraction of replicates whose interval holds the "
        "truth) per method; the dotted line is the nominal level. Error bars: +-2 "
        f"Monte-Carlo standard errors, sqrt(p (1 - p) / R){WILSON_BARS}.{HOLLOW}"
    ),
    "length": (
        "Mean interval length per method, on a log axis where the lengths are positive. No "
        "error bars: the tables give the lengths' standard errors."
    ),
    "diagnostics": (
        "Bias of the estimate over its standard deviation, and the variance ratio (mean "
        "length / (2 z sd))^2, per method; the dotted lines are a correct interval's 0 "
        "and 1. Error bars: +-2 Monte-Carlo standard errors. Methods with the same values "
        "(bb, bm, sn and the oracle share one estimate, so one bias / sd) are drawn once."
    ),
    "privacy-length": (
        "Mean length divided by the non-private bootstrap's (np_boot) against eps, log-log. "
        "No error bars."
    ),
    "privacy-coverage": (
        "Coverage against n eps per method; the dotted line is the nominal level. Error "
        f"bars: +-2 Monte-Carlo standard errors{WILSON_BARS}.{HOLLOW}"
    ),
    "errors": (
        "Mean squared error of the average and of the last iterate against n, log-log. "
        "Error bars: +-2 Monte-Carlo standard errors."
    ),
    "sparsity": (
        "Mean length, coverage averaged over the coordinates and joint coverage (all "
        "coordinates at once) against the sparsity s, one row per d. Error bars (joint "
        f"coverage only): +-2 Monte-Carlo standard errors{WILSON_BARS}.{HOLLOW}"
    ),
    "running": (
        "The running estimate and interval bounds of one replicate against n. No error "
        "bars: one replicate's path."
    ),
}
#: Panel titles named in a figure's alt text before the rest are counted.
ALT_TITLES = 8


def smallest_text_points(fig: Figure) -> float:
    """The smallest font size (points) of the visible, non-empty texts of ``fig``."""
    from matplotlib.text import Text

    sizes = [
        t.get_fontsize()
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and _shown(t)
    ]
    return float(min(sizes)) if sizes else float("nan")


def _shown(artist: Any) -> bool:
    """Whether an artist's axes (if any) are visible: hidden spare panels do not count."""
    ax = getattr(artist, "axes", None)
    return ax is None or ax.get_visible()


def figure_alt(stem: str, fig: Figure) -> str:
    """Alt text of a figure: what it plots against what, its panels and its series."""
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    ys = list(dict.fromkeys(ax.get_ylabel() for ax in panels if ax.get_ylabel()))
    xs = list(dict.fromkeys(ax.get_xlabel() for ax in panels if ax.get_xlabel()))
    logs = sorted(
        {axis for ax in panels for axis in "xy" if getattr(ax, f"get_{axis}scale")() == "log"}
    )
    # A title as it was before it was wrapped (its gid: plots._panel_title), else its
    # lines joined as they were broken (after an underscore: no space).
    titles = [
        " ".join((ax.title.get_gid() or unwrap_label(ax.get_title())).split())
        for ax in panels
        if ax.get_title()
    ]
    titles = list(dict.fromkeys(titles))
    # A legend entry's whole label (its gid: plots.wrapped_legend), not its wrapped lines.
    series = [
        " ".join((t.get_gid() or t.get_text()).split())
        for legend in fig.legends
        for t in legend.get_texts()
    ]
    head = " ".join(fig.get_suptitle().split()) if fig.get_suptitle() else stem
    parts = [f"{head}."]
    if ys:
        against = f" against {' and '.join(xs)}" if xs else ""
        log = f" (log {' and '.join(logs)} axis)" if logs else ""
        parts.append(f"{' and '.join(ys).capitalize()}{against}{log}.")
    shown = "; ".join(titles[:ALT_TITLES])
    more = f"; and {len(titles) - ALT_TITLES} more" if len(titles) > ALT_TITLES else ""
    count = f"{len(panels)} panel{'s' if len(panels) != 1 else ''}"
    parts.append(f"{count}: {shown}{more}." if titles else f"{count}.")
    if series:
        parts.append(f"Lines: {', '.join(series)}.")
    if any(t.get_text() == NO_DATA_TEXT for ax in panels for t in ax.texts):
        parts.append("Some panels have no replicate done yet.")
    if any(t.get_text() == FAILED_TEXT for ax in panels for t in ax.texts):
        parts.append("Some panels have no interval: the methods failed in every done replicate.")
    if any(t.get_text() == NO_VALUE_TEXT for ax in panels for t in ax.texts):
        parts.append("Some panels have no value: too few replicates, or methods not computed.")
    return " ".join(parts)


def figure_images(ds: xr.Dataset, summary: xr.Dataset) -> list[dict[str, Any]]:
    """Every figure ``ldpsim plot`` draws, as PNG data URIs (no file, no network).

    Each as :func:`figure_image` embeds it: the desktop's figure and a phone's.
    """
    return [
        figure_image(stem, fig, FIGURE_CAPTIONS.get(stem, ""))
        for stem, fig in store_figures(ds, summary=summary).items()
    ]


#: The smallest figure text the page shows, in CSS px: where the desktop figure would be
#: shrunk below it, the page shows the phone's figure (one panel per row) instead.
MIN_FIGURE_TEXT_PX = 10.0
#: The page's side margins together, in CSS px, above 600 px (1.5 em each side).
PAGE_MARGINS_PX = 48
#: Colours of a figure's PNG: a palette image (8 bits a pixel) holds the dozen colours of
#: a figure and their anti-aliasing, at about a third of the full-colour PNG's bytes.
PNG_COLOURS = 256


def png_uri(fig: Figure) -> dict[str, Any]:
    """``fig`` as a palette PNG data URI, :data:`PIXEL_RATIO` times its CSS size.

    Returns
    -------
    dict
        ``uri``; ``width`` and ``height``, its CSS size (at :data:`CSS_PX_PER_INCH`);
        ``min_text_px``, its smallest text in CSS px when shown at that size.
    """
    from PIL import Image

    # Agg's pixels as they are (RGBA, row by row), not a PNG of them that would only be
    # decoded again here: the same pixels, without the first PNG's compression (a quarter
    # of a large figure's time, measured 2026-11-30), so the same bytes in the end.
    dpi = CSS_PX_PER_INCH * PIXEL_RATIO
    buffer = io.BytesIO()
    fig.savefig(buffer, format="rgba", dpi=dpi)
    pixels = buffer.getvalue()
    # Agg's canvas is the figure's size in pixels, truncated (FigureCanvasBase's rule).
    columns, rows = (int(inches * dpi + 1e-8) for inches in fig.get_size_inches())
    if len(pixels) != 4 * columns * rows:
        raise RuntimeError(f"{len(pixels)} bytes of RGBA are not {columns} x {rows} pixels")
    image = Image.frombuffer("RGBA", (columns, rows), pixels, "raw", "RGBA", 0, 1)
    image = image.convert("RGB").quantize(PNG_COLOURS, Image.Quantize.FASTOCTREE)
    packed = io.BytesIO()
    image.save(packed, format="png", optimize=True)
    width, height = fig.get_size_inches() * CSS_PX_PER_INCH
    return {
        "uri": "data:image/png;base64," + base64.b64encode(packed.getvalue()).decode("ascii"),
        "width": round(float(width)),
        "height": round(float(height)),
        "min_text_px": round(smallest_text_points(fig) * CSS_PX_PER_INCH / 72, 2),
    }


#: The most panels a figure is laid out again with for a phone, one panel per row; a
#: figure of more is shown whole there too, and its caption says so. Matplotlib's
#: constrained layout sets every row of a grid again for each panel in it, so one column
#: of P panels costs O(P**2) margin edits, each dearer as P grows: a phone's figure of
#: 50, 100 and 200 panels took 7, 21 and 70 s to lay out and draw, and the report of
#: 2,000 grid points (400 panels a figure) more than 5 minutes (a scaling hunt, h24b).
MAX_NARROW_PANELS = 60


def figure_image(stem: str, fig: Figure, caption: str) -> dict[str, Any]:
    """One figure for the template: the desktop's PNG and a phone's, alt text, caption.

    The desktop's is the figure as drawn (:func:`png_uri`: ``uri``, ``width``,
    ``height``, ``min_text_px``); ``narrow`` is the same figure laid out again one panel
    per row (:func:`~ldpsim.pipeline.report.narrow_layout.narrow_layout`, shown at 1:1 on a
    phone; None where its panels do not fit a phone), and ``narrow_below`` the page
    width in CSS px below which the page shows it: where the desktop's would shrink its
    smallest text below :data:`MIN_FIGURE_TEXT_PX`. ``fig`` is laid out again in the
    process. A figure of more than :data:`MAX_NARROW_PANELS` panels gets no phone's
    figure, and its caption says so.
    """
    from ldpsim.pipeline.report.narrow_layout import narrow_layout

    alt = figure_alt(stem, fig)
    wide = png_uri(fig)
    smallest = wide["min_text_px"]  # NaN for a figure without text
    shrink = min(MIN_FIGURE_TEXT_PX / smallest, 1.0) if smallest > 0 else 1.0
    shown = math.ceil(wide["width"] * shrink)
    panels = sum(ax.get_visible() for ax in fig.axes)
    if panels > MAX_NARROW_PANELS:
        narrow = None
        caption = (
            f"{caption} On a phone too it is shown whole: its {panels} panels are more "
            f"than the {MAX_NARROW_PANELS} that the report lays out one per row."
        ).lstrip()
    else:
        narrow = narrow_layout(fig)
    return {
        "stem": stem,
        **wide,
        "alt": alt,
        "caption": caption,
        "narrow": None if narrow is None else png_uri(narrow),
        "narrow_below": shown + PAGE_MARGINS_PX,
    }


def zip_images(ds: xr.Dataset, coord: int = 0) -> dict[str, Any]:
    """The zip plots of every grid point (``ldpsim report --zip``) for the template.

    Drawn as SVG from the ranked intervals
    (:func:`ldpsim.pipeline.report.zip_plot.panel_svg`): a panel per method, at most
    :data:`~ldpsim.pipeline.report.zip_plot.SVG_MAX_LINES` lines each, text as text; about
    20 kB per grid point where the matplotlib figure's PNG takes 200 kB.

    Returns
    -------
    dict
        ``figures``: one per grid point with a done replicate: ``stem``, ``title``,
        ``panels`` (SVG elements), ``caption`` (what is drawn of that grid point: the
        section's text says what every zip plot shows) and ``level`` (the nominal
        level's text, "" without one); ``notes``: one sentence per grid point left out;
        ``coord``: the coordinate drawn.

    Raises
    ------
    InputError
        ``coord`` is not one of the store's coordinates.
    """
    from ldpsim.pipeline.report.zip_plot import SVG_MAX_LINES, panel_svg, store_zip_plots

    drawn = store_zip_plots(ds, coord=coord, max_lines=SVG_MAX_LINES)
    figures = []
    for plot in drawn.plots:
        panels = [
            panel_svg(panel, plot.level, plot.coord_in_title, plot.max_lines)
            for panel in plot.panels
        ]
        figures.append(
            {
                "stem": plot.stem,
                "title": plot.title,
                "panels": [markupsafe.Markup(svg) for svg in panels],
                "caption": plot.counts,
                "level": format_level(plot.level) if math.isfinite(plot.level) else "",
            }
        )
    return {"figures": figures, "notes": drawn.notes, "coord": coord}


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
    names = GridNames.of_dataset(ds)  # grid points by their values, as `ldpsim errors`
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
                    "key": names.name_of_key(str(record.get("key"))),
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


def timing_tables(ds: xr.Dataset, runs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Median and total compute seconds, per grid point and per method, and the runs'
    warm-up apart from them.

    ``runs``: the store's run records (:func:`ldpsim.pipeline.store.provenance.read_runs`).
    ``warm_up`` sums their ``warm_up_seconds`` (the workers' grid-point set-up and the
    methods' first calls, compiling or loading kernels: :mod:`ldpsim.tasks.warm_up`),
    which no replicate's seconds include; ``warm_up_runs`` counts the runs that recorded
    it and ``runs_without_warm_up`` those made before it was recorded (their replicates'
    first calls are in their seconds).
    """
    timing = timing_summary(ds)
    recorded = [run for run in runs or () if "warm_up_seconds" in run]
    medians = median_per_point(ds)
    seconds = ds["seconds"].where(ds["done"].astype(bool)).values
    # Each axis's cells per value; a case's are the parameters the cases vary.
    columns, cells = [], []
    for axis in grid_axes(ds):
        names, rows = case_columns(ds, "text") if axis == CASE_AXIS else ([], [])
        if names:
            columns += names
            cells.append(rows)
        else:
            columns.append(axis)
            cells.append([[label] for label in axis_labels(ds[axis].values, "text")])
    points = []
    for index in np.ndindex(*medians.shape):
        done = int(np.asarray(ds["done"].values[index]).sum())
        points.append(
            {
                "labels": [cell for rows, i in zip(cells, index, strict=True) for cell in rows[i]],
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
        "axes": columns,
        "points": points,
        "methods": methods,
        "replicates": timing["replicates"],
        "median": format_seconds(timing["median"]),
        "total": format_seconds(timing["total"]),
        "warm_up": format_seconds(sum(float(run["warm_up_seconds"]) for run in recorded)),
        "warm_up_runs": len(recorded),
        # Runs of an older ldpsim, which did not record it: not a record that cannot be
        # read, nor one whose warm-up is of the wrong type (unknown).
        "runs_without_warm_up": sum(
            1
            for run in runs or ()
            if "warm_up_seconds" not in run
            and "unreadable" not in run
            and "warm_up_seconds" not in run.get("unknown", ())
        ),
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
    except (ValueError, RecursionError):
        created_with = {}
    if not isinstance(created_with, dict):  # JSON, but no object of versions: unknown
        created_with = {}
    runs = [run if "unreadable" in run else shown_run(run) for run in read_runs(store)]
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


#: How the runs table shows a field of a run record that is missing or of the wrong type.
UNKNOWN = "unknown"


def shown_run(run: dict[str, Any]) -> dict[str, Any]:
    """A checked run record (:func:`ldpsim.pipeline.store.provenance.read_runs`) as the runs
    table shows it: ``wall`` and ``warm_up`` formatted, ``command`` as a shell reads it
    back (:func:`shlex.join`; None where not recorded), and every field the table reads
    present, :data:`UNKNOWN` where the record lacks it or holds another type (a
    warm-up that a run of an older ldpsim did not record: n/a)."""
    out = dict(run)
    for name in ("started", "finished", "computed", "failed", "cluster", "host", "cpu", "cores"):
        out.setdefault(name, UNKNOWN)
    out.setdefault("commit", None)
    # The command line as a shell reads it back: pasted, it runs the same command.
    command = run.get("command")
    out["command"] = shlex.join(command) if command else None
    out.setdefault("ended", None)  # not recorded before 0.3
    out.setdefault("methods_computed", 0)
    out["wall"] = _duration(run["wall_seconds"]) if "wall_seconds" in run else UNKNOWN
    if "warm_up_seconds" in run:
        out["warm_up"] = format_seconds(float(run["warm_up_seconds"]))
    else:
        out["warm_up"] = UNKNOWN if "warm_up_seconds" in run["unknown"] else "n/a"
    versions = run.get("versions") or {}
    out["versions"] = {
        name: versions.get(name, UNKNOWN) for name in ("python", *PACKAGES, *versions)
    }
    return out


def unit_origins(attrs: dict[str, Any]) -> dict[str, Any]:
    """The origin of every unit a store used, and each recorded change of their code.

    Returns
    -------
    dict
        ``units``: one row per unit of the latest generation (kind, name, origin as
        :func:`~ldpsim.pipeline.store.code_identity.describe` writes it); ``code_changes``: one
        row per unit whose source differs from the generation before (the code version,
        the unit, old and new origin); ``units_recorded``: whether the store has them.
    """
    from ldpsim.pipeline.store.code_identity import changed_units, describe, read_generations

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
    text = resources.files("ldpsim.pipeline.report").joinpath("templates", TEMPLATE).read_text()
    env = jinja2.Environment(
        loader=jinja2.DictLoader({TEMPLATE: text}),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["breakable"] = breakable
    return env


def store_facts(ds: xr.Dataset) -> dict[str, str]:
    """The header's n, d and replicates as the store holds them.

    n: the ``n`` axis, else the checkpoints' largest, else every n the sweep's spec and
    cases set (the stored sweep, with its ``--set`` changes); d: the coordinates each
    grid point has (its finite truths), listed when they differ; replicates: the
    store's ``rep`` axis (a run with ``--replicates`` grows it).
    """
    sweep = sweep_info(ds)
    if "n" in grid_axes(ds):
        n = ", ".join(axis_labels(ds["n"].values, "text")) + " (grid axis)"
    elif "checkpoint" in ds.dims:
        n = axis_labels(ds["checkpoint"].values, "text")[-1] + " (the last checkpoint)"
    else:
        values = [sweep.get("spec", {}).get("n")]
        values += [case.get("n") for case in (sweep.get("cases") or {}).values()]
        found = sorted({float(v) for v in values if v is not None})
        n = ", ".join(axis_labels(found, "text")) if found else "not recorded"
    truth = ds["truth"]
    while "checkpoint" in truth.dims:  # truths do not change along the run
        truth = truth.isel(checkpoint=0)
    sizes = np.unique(np.asarray(truth.notnull().sum("coord").values).ravel())
    d = ", ".join(str(int(v)) for v in sizes)
    if sizes.size > 1:
        d += " (by grid point)"
    return {"n": n, "d": d, "replicates": f"{ds.sizes['rep']:,}"}


def done_percent(done: int, total: int) -> str:
    """``done`` of ``total`` (> 0) in whole per cent, rounded down, so that a store not
    yet complete never reads 100% ("under 1%" for a few done)."""
    percent = 100 * done // total
    return "under 1%" if percent == 0 and done else f"{percent}%"


def pending_text(pending: dict[str, int]) -> str:
    """The added methods not computed yet for some done replicates, with their counts:
    ``bm for 1,000 done replicates, sn for 1 done replicate``."""
    return ", ".join(
        f"{label} for {count:,} done replicate{'s' if count != 1 else ''}"
        for label, count in pending.items()
    )


def banner(
    ds: xr.Dataset,
    done: int,
    total: int,
    runs: list[dict[str, Any]],
    pending: dict[str, int] | None = None,
) -> list[str]:
    """What the top of the page must say before any number: a partial store, methods
    added to it and not computed yet, failures.

    Parameters
    ----------
    ds : xarray.Dataset
        The store's dataset.
    done, total : int
        Its done replicates, and all its grid points ask for (> 0).
    runs : list of dict
        Its run records as the runs table shows them (:func:`shown_run`): the last
        command line is what the banner says to run again.
    pending : dict of str to int, optional
        Per method added to the store: its done replicates it is not computed for yet
        (only methods with some).

    Returns
    -------
    list of str
        One sentence each (none for a complete store without failures).
    """
    lines = []
    command = next((r["command"] for r in reversed(runs) if r.get("command")), None)
    again = (
        f"run the last command again ({command}): it resumes"
        if command
        else "run the sweep again with ldpsim run: it resumes"
    )
    if done < total:
        lines.append(
            f"Partial store: {done:,} of {total:,} replicates are done "
            f"({done_percent(done, total)}). Cells computed on fewer replicates than their "
            f"grid point asks for are marked *, panels without a done replicate say so, "
            f"and every number may still change. To finish it, {again}."
        )
    if pending:
        lines.append(
            f"Methods added to the store are not computed yet: {pending_text(pending)}. "
            f"Their cells are computed without those replicates and marked *, and may "
            f"still change. To compute them, {again}."
        )
    failed = int(ds["failed"].values.sum())
    flags = np.asarray(ds["method_failed"].values)
    grid = len(grid_axes(ds))  # (grid, method, rep[, checkpoint]): one per method and rep
    method = int(flags.reshape(*flags.shape[: grid + 2], -1).any(-1).sum())
    if failed or method:
        parts = [f"{failed:,} replicate{'s' if failed != 1 else ''} failed"] if failed else []
        if method:
            parts.append(f"interval methods failed {method:,} times")
        lines.append(
            f"Failures: {' and '.join(parts)}; the cells are computed without them, which "
            "can bias them. The Failures section lists the errors and their seeds."
        )
    return lines


def build_context(
    store: str | Path,
    target_se: float = TARGET_SE,
    *,
    zip_plots: bool = False,
    zip_coord: int = 0,
) -> dict[str, Any]:
    """Everything the report shows, read from the store (checked first).

    With ``zip_plots``, ``zip`` holds the zip plots of coordinate ``zip_coord``
    (:func:`zip_images`); without, it is None and the page has no zip plot.

    Raises
    ------
    InputError
        Not an ldpsim store, or a damaged one (see
        :func:`ldpsim.pipeline.store.reading.check_store`); a ``zip_coord`` that is not one of
        the store's coordinates.
    """
    from ldpsim.pipeline.store.damage import refuse_damage

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
    done, total = int(ds["done"].values.sum()), int(ds["done"].size)
    pending = pending_counts(summary)
    prov = provenance(ds, store)
    tables = result_tables(summary)
    return {
        "name": sweep.get("name", store.name),
        "description": sweep.get("description", ""),
        "store": str(store.resolve()),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        **level_texts(ds),
        "facts": store_facts(ds),
        "grid": grid_lines(ds),
        "methods": [str(m) for m in ds["method"].values],
        "done": done,
        "total": total,
        "pending": pending_text(pending) if pending else None,
        "banner": banner(ds, done, total, prov["runs"], pending),
        "departure": departure_rule(summary),
        "sweep_toml": sweep_toml(sweep, note="as stored"),
        "tables": tables,
        "label_columns": max((len(table["names"]) for table in tables), default=0),
        "csv": summary_csv(summary),
        "figures": figure_images(ds, summary),
        "zip": zip_images(ds, zip_coord) if zip_plots else None,
        "failures": failure_groups(ds, records),
        "replay": replay_route(store.resolve(), ds.attrs),
        "max_failures": MAX_FAILURES_SHOWN,
        "timings": timing_tables(ds, prov["runs"]),
        "provenance": prov,
    }


def store_levels(ds: xr.Dataset) -> list[float]:
    """The nominal levels of ``ds``'s cells, ascending: the values of its ``level`` grid
    axis, else its one level (:func:`~ldpsim.pipeline.summary.summary.shared_level`);
    empty where it records none."""
    if "level" in ds.coords:
        return [float(v) for v in np.unique(np.asarray(ds["level"].values, dtype=np.float64))]
    level = shared_level(ds)
    return [] if level is None else [level]


def level_texts(ds: xr.Dataset) -> dict[str, str]:
    """The page's words for the nominal level: ``level`` (the header's, "90%"),
    ``level_value`` (a noun in a sentence: "90%", or "its grid point's level (80% or
    95%)" where ``level`` is a grid axis of several values) and ``level_adjective``
    ("a 90% interval"; "a nominal interval" then)."""
    levels = store_levels(ds)
    if not levels:
        return {"level": "n/a", "level_value": "the nominal level", "level_adjective": "nominal"}
    if len(levels) == 1:
        text = format_level(levels[0])
        return {"level": text, "level_value": text, "level_adjective": text}
    listed = ", ".join(format_level(level) for level in levels)
    either = " or ".join(format_level(level) for level in levels)
    return {
        "level": f"{listed} (each grid point's: level is a grid axis)",
        "level_value": f"its grid point's level ({either})",
        "level_adjective": "nominal",
    }


def pending_counts(summary: xr.Dataset) -> dict[str, int]:
    """Per method added to the store and not computed yet for some of its done
    replicates: how many (the summary's ``methods_pending``, over the grid)."""
    if "methods_pending" not in summary:
        return {}
    pending = summary["methods_pending"]
    totals = pending.sum([dim for dim in pending.dims if dim != "method"]).values
    return {
        str(label): int(count)
        for label, count in zip(summary["method"].values, totals, strict=True)
        if count
    }


def grid_lines(ds: xr.Dataset) -> list[str]:
    """The header's grid, an axis a line: ``n = 1e4, 1e5``; the ``case`` axis by the
    values of the parameters its cases vary (``24 cases: d = 10, 100, 1000; sparsity =
    1, 4, 16; ...``), or by its labels where none varies."""
    lines = []
    for axis in grid_axes(ds):
        parameters = case_parameters(ds) if axis == CASE_AXIS else {}
        if parameters:
            values = [
                f"{name} = {', '.join(dict.fromkeys(named_text(name, v, 'text') for v in vs))}"
                for name, vs in parameters.items()
            ]
            lines.append(f"{ds.sizes[axis]} cases of {'; '.join(values)}")
        else:
            lines.append(f"{axis} = {', '.join(axis_labels(ds[axis].values, 'text'))}")
    return lines


def render_report(context: dict[str, Any]) -> str:
    """The HTML page of a :func:`build_context` result."""
    return _environment().get_template(TEMPLATE).render(**context)


def write_report(
    store: str | Path,
    out: str | Path,
    target_se: float = TARGET_SE,
    *,
    zip_plots: bool = False,
    zip_coord: int = 0,
) -> Path:
    """Write the HTML report of ``store`` to ``out`` (replaced if it exists).

    The page is self-contained: styles inline, figures as PNG data URIs (the zip plots
    as inline SVG), no script and no reference to anything outside the file, so it
    opens from a mail attachment without a network. Each figure comes twice, as wide as
    a desktop page and one panel per row for a phone, and opens full size on a click or
    tap (CSS alone); results tables keep their label columns in view while their
    numbers scroll; the print style keeps figures, captions and table headers with
    their content.

    Parameters
    ----------
    store : str or pathlib.Path
        The store.
    out : str or pathlib.Path
        The HTML file.
    target_se : float, default TARGET_SE
        The coverage standard error the "R for se" rows plan for, in (0, 1).
    zip_plots : bool, default False
        Add a "Zip plots" subsection to the figures: a zip plot per grid point
        (:func:`ldpsim.pipeline.report.zip_plot.store_zip_plots`; Morris, White & Crowther
        2019), each with its caption and alt text; a grid point without a done replicate
        gets a note instead.
    zip_coord : int, default 0
        The coordinate the zip plots draw, in [0, d).

    Raises
    ------
    InputError
        A store that is not one or is damaged (nothing is written), a ``zip_coord``
        that is not one of its coordinates, or an ``out`` that cannot be written.
    """
    check_store(store, read_chunks=False)  # a path that is no store is named first
    check_outside_stores(out, f"The report --out {str(out)!r}", "the report")
    context = build_context(store, target_se, zip_plots=zip_plots, zip_coord=zip_coord)
    html = render_report(context)
    out = Path(out)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"Cannot write the report {str(out)!r}: {os_error_text(exc, out)}."
        ) from None
    return out
