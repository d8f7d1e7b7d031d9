"""Figures of a sweep's store: coverage, length, diagnostics, errors and running intervals."""

from __future__ import annotations

import io
import itertools
import re
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

# The object-oriented API (Figure, no pyplot) renders with Agg / the PDF backend and never
# touches a display or matplotlib's global figure registry.
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter, NullLocator
from matplotlib.transforms import blended_transform_factory, offset_copy

from ldpsim.pipeline.errors import InputError, os_error_text, path_kind, unwritable_reason
from ldpsim.pipeline.formatting import (
    SAMPLE_SIZE_NAMES,
    axis_labels,
    format_level,
    format_number,
    parameter_text,
    sample_size_text,
)
from ldpsim.pipeline.store.reading import load_dataset
from ldpsim.pipeline.store.store_path import beside_store, check_outside_stores
from ldpsim.pipeline.summary.case_parameters import case_parameters
from ldpsim.pipeline.summary.nominal_claims import CLAIM_OF, method_claims
from ldpsim.pipeline.summary.partial_cells import fewer
from ldpsim.pipeline.summary.summary import oracle_label, shared_level, summarize, sweep_info
from ldpsim.pipeline.summary.tables import COVERAGE_COUNTS, INTERVAL_Z, wilson_interval
from ldpsim.pipeline.summary.variables import NON_GRID_DIMS, grid_axes
from ldpsim.pipeline.sweep import CASE_AXIS

#: The figures of :func:`store_figures`, in drawing order (also their file names).
FIGURE_KINDS = (
    "coverage",
    "length",
    "diagnostics",
    "privacy-length",
    "privacy-coverage",
    "errors",
    "sparsity",
    "running",
)
#: Formats every figure is written in.
FIGURE_FORMATS = ("png", "pdf")
#: Fixed colours so that a method looks the same in every figure: Okabe and Ito's
#: colour-blind safe palette for the built-in methods' labels.
METHOD_COLORS = {
    "bb": "#0072B2",  # blue
    "bm": "#E69F00",  # orange
    "sn": "#009E73",  # bluish green
    "oracle": "#000000",
    "fang": "#D55E00",  # vermillion
    "np_boot": "#CC79A7",  # reddish purple
    "cdp_blb_var": "#56B4E9",  # sky blue
    "cdp_blb_pct": "#F0E442",  # yellow
}
#: Further labels (a second bb variant, a plugin's method) in the order of the store's
#: methods: Paul Tol's muted scheme, also colour-blind safe, then gray. Its indigo comes
#: last: next to bb's blue (a bb variant, bb_t, is the usual first spare) it looked alike.
SPARE_COLORS = (
    "#CC6677",
    "#117733",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
    "#88CCEE",
    "#332288",
)
#: Markers and line styles, one each per method in the store's order, so that methods
#: differ in a greyscale print too (colour alone does not tell bb from bb_t there). No
#: dotted line: dotted is the nominal level and the reference lines.
METHOD_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
METHOD_LINESTYLES: tuple[Any, ...] = (
    "-",
    (0, (5, 2)),
    (0, (6, 2, 1, 2)),
    (0, (10, 3)),
    (0, (6, 2, 1, 2, 1, 2)),
    (0, (3, 2)),
)
#: Written in a panel that has no done replicate (a partial store), so that an empty
#: panel is not read as a method drawing nothing.
NO_DATA_TEXT = "no replicate done yet"
#: Written in an empty panel whose grid points have done replicates: every method shown
#: failed in each of them.
FAILED_TEXT = "no interval: the methods failed\nin every done replicate\n(ldpsim errors STORE)"
#: Written in an empty panel with done replicates and no failure: too few of them for the
#: statistic (a standard deviation needs 2), or its methods added and not computed yet.
NO_VALUE_TEXT = "no value: too few replicates,\nor methods not computed yet"
#: Height of one grid point's row in the dot figures (no n axis), in inches.
DOT_ROW_INCHES = 0.32
#: The part of a row the methods' markers are spread over.
DOT_DODGE = 0.6
#: Panel titles longer than this many characters are wrapped onto further lines.
PANEL_TITLE_CHARS = 32
#: Characters of a figure title per inch of figure width before it is wrapped.
TITLE_CHARS_PER_INCH = 9
#: Inches of a panel figure's width for its legend, right of the panels.
LEGEND_INCHES = 2.0
#: Most coordinates shown as panel rows; above it only coordinate 0 is drawn.
MAX_COORD_ROWS = 4
#: The running-interval figure splits at this fraction of the largest checkpoint (the
#: paper's Figure 1: n up to 2e5, then 2e5 to 1e6).
RUNNING_SPLIT = 0.2
PANEL_SIZE = (3.6, 2.8)
#: Up to this many values of an n axis get one tick each; more, and checkpoints, get the
#: default log ticks.
MAX_TICKS = 8
#: The diagnostics figure's panels: summary variable, axis label, the value of a correct
#: interval (no bias; the width the spread of the estimate needs).
DIAGNOSTIC_PANELS = (("bias_over_sd", "bias / sd", 0.0), ("variance_ratio", "variance ratio", 1.0))
#: Grid points side by side in the coverage, length, diagnostics, errors and privacy
#: figures; more continue on further rows (the undercoverage sweep has 18). Three panels
#: and the legend make a figure of 12.8 in: at 96 px per inch (a browser's) it fits a
#: 1,280 px page at 0.9 of its size or more, so that its smallest text (the legend's
#: 8.3 pt = 11.1 px) stays at 10 px or more (the report's browser test measures it).
MAX_PANEL_COLUMNS = 3
#: The widest figure in inches (panels and legend), for the bar figures, whose width
#: grows with the grid points: as wide as MAX_PANEL_COLUMNS panels and the legend.
MAX_FIGURE_INCHES = 12.8
#: The errors figure's series: summary variable (with its ``_se``) and legend label.
ERROR_SERIES = (("mse", "average theta_bar_n"), ("mse_last", "last iterate theta_n"))
ERROR_COLORS = {"mse": "#0072B2", "mse_last": "#D55E00"}


def _colors(methods: list[str]) -> dict[str, str]:
    """Each method's colour: its own for a built-in label, else the next spare one."""
    spare = iter(SPARE_COLORS)
    return {m: METHOD_COLORS.get(m) or next(spare, "gray") for m in methods}


#: The least contrast of a marker's edge with the white page (WCAG 2.1's 1.4.11 for
#: graphical objects): Okabe and Ito's orange, sky blue and yellow reach 2.2, 2.3 and 1.3.
MIN_EDGE_CONTRAST = 3.0


def contrast_ratio(color: Any, background: Any = "white") -> float:
    """WCAG 2.1's contrast ratio of ``color`` with ``background`` (any matplotlib
    colours; white by default, the page's)."""
    from matplotlib.colors import to_rgb

    def luminance(rgb: Any) -> float:
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(to_rgb(color)), luminance(to_rgb(background))), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _edge_color(color: str) -> str:
    """``color`` itself where it stands out from white by :data:`MIN_EDGE_CONTRAST`, else
    the lightest darker shade of it that does (its hue kept)."""
    from matplotlib.colors import to_hex, to_rgb

    rgb = np.array(to_rgb(color))
    for shade in np.arange(1.0, 0.0, -0.02):
        if contrast_ratio(rgb * shade) >= MIN_EDGE_CONTRAST:
            return color if shade == 1.0 else to_hex(rgb * shade)
    return "#000000"


def method_styles(methods: list[str]) -> dict[str, dict[str, Any]]:
    """Each method's colour, marker and line style (matplotlib keyword arguments).

    The colour is :func:`_colors`'s; marker and line style follow the store's method
    order (:data:`METHOD_MARKERS`, :data:`METHOD_LINESTYLES`), so that every method of a
    figure differs from the others in all three. A light colour's markers (and error
    bars) get a darker edge of its hue (:func:`_edge_color`), so that they show on white.
    """
    colors = _colors(methods)
    return {
        m: {
            "color": colors[m],
            "marker": METHOD_MARKERS[i % len(METHOD_MARKERS)],
            "linestyle": METHOD_LINESTYLES[i % len(METHOD_LINESTYLES)],
            "markeredgecolor": _edge_color(colors[m]),
        }
        for i, m in enumerate(methods)
    }


def _no_data(ax: Axes, cell: xr.Dataset | None = None) -> None:
    """Say in an empty panel why: nothing done there yet; or (``cell``, the panel's part
    of the summary, has done replicates) the methods failed in every one of them (no
    interval counted, some failed); or too few replicates, or methods not computed yet."""
    text = NO_DATA_TEXT
    if cell is not None and int(cell["replicates_done"].sum()) > 0:
        failed = int(cell["n_done"].sum()) == 0 and int(cell["n_failed"].sum()) > 0
        text = FAILED_TEXT if failed else NO_VALUE_TEXT
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.35")


def _has_values(*arrays: Any) -> bool:
    return any(np.isfinite(np.asarray(a, dtype=np.float64)).any() for a in arrays)


def value_label(name: str, value: Any) -> str:
    """A grid value, compact: ``tau=0.9`` for numbers, the value alone for labels
    (``huber_regression``, ``laplace``: a model or mechanism name says what it is)."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # as the tables write it
        return f"{name}={'true' if value else 'false'}"
    if name in SAMPLE_SIZE_NAMES and isinstance(value, int | float):
        return f"{name}={sample_size_text(value)}"
    if isinstance(value, float):
        return f"{name}={format_number(value)}"
    if isinstance(value, list | tuple):
        return f"{name}={parameter_text(value, 'text')}"
    return f"{name}={value}"


def _case_parts(ds: xr.Dataset) -> dict[str, list[str]]:
    """Each case's label in the figures: the parameters that vary across the cases
    (:func:`~ldpsim.pipeline.summary.case_parameters.case_parameters`) as
    :func:`value_label` writes them, ``["d=1000", "sparsity=16", "laplace", "dense"]``,
    those a case leaves unset left out. The case label is added where two cases would
    read the same, and stands alone for a case that sets none of them. Empty when nothing
    varies (the labels show)."""
    parameters = case_parameters(ds)
    if not parameters:
        return {}
    labels = [str(label) for label in ds[CASE_AXIS].values]
    parts = [
        [
            value_label(name, values[i])
            for name, values in parameters.items()
            if values[i] is not None
        ]
        for i in range(len(labels))
    ]
    if len({tuple(p) for p in parts}) < len(parts):
        parts = [[*p, label] for p, label in zip(parts, labels, strict=True)]
    return {label: p or [label] for label, p in zip(labels, parts, strict=True)}


def _point_parts(combo: dict[str, Any], cases: dict[str, list[str]]) -> list[str]:
    """A grid point as :func:`value_label` parts, a case as its parameters
    (:func:`_case_parts`)."""
    parts = []
    for name, value in combo.items():
        if name == CASE_AXIS and str(value) in cases:
            parts += cases[str(value)]
        else:
            parts.append(value_label(name, value))
    return parts


def point_title(ds: xr.Dataset, point: dict[str, Any]) -> str:
    """A grid point as the figures name it, ``tau=0.5, n=100``, a case by the parameters
    its sweep's cases vary (:func:`_case_parts`); empty for a point without axes."""
    return ", ".join(_point_parts(point, _case_parts(ds)))


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


#: A label's break opportunities: after an underscore or a space, and after a hyphen or
#: a slash that follows a letter, not a number's exponent (``-1.0`` and ``1e-05`` stay
#: whole); ``<wbr>`` in the report's tables, line breaks in a figure's legend.
LABEL_BREAKS = re.compile(r"(?<=[_ ])|(?<=[A-Za-z][-/])(?<![0-9.][A-Za-z][-/])")


def _wrap_label(text: str, width: int) -> str:
    """A method label (or a legend entry) in lines of at most ``width`` characters,
    broken at its :data:`LABEL_BREAKS` as the report's tables break it
    (``bb_with_a_rather_`` / ``long_method_label_`` / ``rademacher``), inside a part only
    where that part alone is longer than a line."""
    lines: list[str] = []
    line = ""
    for part in LABEL_BREAKS.split(text):
        if line and len((line + part).rstrip()) > width:
            lines.append(line.rstrip())
            line = part.lstrip()
        else:
            line += part
        while len(line.rstrip()) > width:  # a part longer than a line
            lines.append(line[:width])
            line = line[width:]
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines) or text


def unwrap_label(text: str) -> str:
    """A label wrapped by :func:`_wrap_label` on one line again: its lines joined as they
    were broken, directly after an underscore, a hyphen or a slash, else by a space."""
    return re.sub(r"(?<=[_/-])\n", "", text).replace("\n", " ")


def _combos(ds: xr.Dataset, dims: list[str]) -> list[dict[str, Any]]:
    """Every combination of the values of ``dims`` (one empty combination when none)."""
    values = [ds[d].values for d in dims]
    return [dict(zip(dims, c, strict=True)) for c in itertools.product(*values)]


def _shown_coords(summary: xr.Dataset) -> list[int]:
    coords = [int(c) for c in summary["coord"].values]
    return coords if len(coords) <= MAX_COORD_ROWS else coords[:1]


def _title(summary: xr.Dataset, what: str, with_level: bool = True) -> str:
    name = sweep_info(summary).get("name", "")
    level = shared_level(summary) if with_level else None
    level_text = f", {format_level(level)} intervals" if level is not None else ""
    return f"{name}: {what}{level_text}" if name else f"{what}{level_text}"


def _coord_exists(summary: xr.Dataset, combo: dict[str, Any], coord: int) -> bool:
    """Whether a grid point (any value of the axes not in ``combo``) has coordinate
    ``coord``: a case of smaller d has none beyond its d."""
    if "coord_exists" not in summary:
        return True
    return bool(summary["coord_exists"].sel({**combo, "coord": coord}).any())


def default_out_dir(store: str | Path) -> Path:
    """Where ``ldpsim plot`` draws without ``--out``: ``<store>-figures`` beside the store."""
    return beside_store(store, "-figures")


def prepare_out_dir(out_dir: str | Path) -> Path:
    """Create the figures' folder if missing and check that it can be written.

    Raises
    ------
    InputError
        ``out_dir`` is a file (or another non-folder), cannot be created (e.g. on a
        read-only file system) or is not writable.
    """
    out = Path(out_dir)
    check_outside_stores(out, f"The figures folder --out {str(out)!r}", "the figures")
    try:
        kind = path_kind(out)
        if kind is not None and kind != "folder":
            raise InputError(
                f"--out {str(out)!r} is a {kind}; figures go in a folder: give a folder "
                "path (created if missing)."
            )
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"Cannot create the figures folder --out {str(out)!r}: "
            f"{os_error_text(exc, out)}; give a writable folder."
        ) from None
    why = unwritable_reason(out)
    if why is not None:
        raise InputError(
            f"The figures folder --out {str(out)!r} is not writable ({why}); give a "
            "writable folder."
        )
    return out


def stale_figures(out_dir: Path, written: Iterable[Path]) -> list[Path]:
    """The figure files in ``out_dir`` that ``ldpsim plot`` could have written (a
    :data:`FIGURE_KINDS` or ``zip-*`` stem, a :data:`FIGURE_FORMATS` suffix) but that are
    not among ``written``: an earlier plot's, perhaps of another store, which a reader
    of the folder would take for this one's. Sorted by name; other files are not
    listed."""
    kept = {Path(path).name for path in written}
    stems = set(FIGURE_KINDS)
    try:
        entries = sorted(out_dir.iterdir())
    except OSError:
        return []
    return [
        entry
        for entry in entries
        if entry.suffix.removeprefix(".") in FIGURE_FORMATS
        and (entry.stem in stems or entry.stem.startswith("zip-") or entry.stem == "zip")
        and entry.name not in kept
        and entry.is_file()
    ]


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<stem>.png`` and ``.pdf`` (:data:`FIGURE_FORMATS`).

    Raises
    ------
    InputError
        A file cannot be written (e.g. a full disk).
    """
    paths = []
    for ext in FIGURE_FORMATS:
        path = out_dir / f"{stem}.{ext}"
        # No creation date in the PDF, so that identical data give identical files.
        metadata = {"CreationDate": None} if ext == "pdf" else None
        try:
            fig.savefig(path, dpi=150, metadata=metadata)
        except OSError as exc:  # e.g. a full disk
            raise InputError(
                f"Cannot write the figure {str(path)!r}: {os_error_text(exc, path)}."
            ) from None
        paths.append(path)
    return paths


class SweepFigure(Figure):
    """A matplotlib Figure that shows itself as a PNG in Jupyter (IPython's ``_repr_png_``).

    The figures are made without pyplot (see the imports), so no backend registers them
    for inline display; this class does, whatever backend the notebook uses.
    """

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def _panel_grid(
    n_rows: int, n_cols: int, title: str, width: float | None = None, **share: Any
) -> tuple[Figure, np.ndarray]:
    """A figure of panels; ``width`` (in panel widths) widens it beyond ``n_cols``."""
    fig = SweepFigure(
        figsize=(PANEL_SIZE[0] * (width or n_cols) + LEGEND_INCHES, PANEL_SIZE[1] * n_rows + 0.6),
        layout="constrained",
    )
    axes = fig.subplots(n_rows, n_cols, squeeze=False, **share)
    # Wrapped to the panels' width: the legend beside them reaches the title's height.
    panels_inches = fig.get_figwidth() - LEGEND_INCHES
    fig.suptitle(_wrap(title, int(TITLE_CHARS_PER_INCH * panels_inches)))
    return fig, axes


#: Appended to the legend label of a coverage a method does not claim (a band's coverage
#: of each coordinate, an interval's joint coverage): drawn hollow and faint, and not
#: what the nominal line is for (:mod:`ldpsim.pipeline.summary.nominal_claims`).
UNCLAIMED = " (not its claim)"
#: The legend's entry for the hollow markers.
HOLLOW_TEXT = "hollow: not the\nmethod's claim"


def _claim_style(style: dict[str, Any], claimed: bool) -> dict[str, Any]:
    """A method's style for a coverage: as it is where the coverage is the method's
    nominal claim, hollow and faint where it is not (no comparison with nominal)."""
    return style if claimed else {**style, "markerfacecolor": "white", "alpha": 0.5}


def _claim_label(method: str, claimed: bool) -> str:
    return method if claimed else method + UNCLAIMED


#: The legend's entry for the points marked as the tables mark a partial cell, and the
#: mark (mathtext's asterisk as a marker).
PARTIAL_TEXT = "*: not all\nreplicates"
PARTIAL_MARKER = "$*$"


def _mark_partial(ax: Axes, x: Any, y: Any, marked: Any, color: Any) -> None:
    """A ``*`` beside each point (x, y) where ``marked``: its value counts fewer than
    all of its grid point's replicates (:func:`ldpsim.pipeline.summary.partial_cells.
    fewer`), the tables' marker; the legend then explains it (:data:`PARTIAL_TEXT`).

    The marks are markers (a line without a line, gid ``"partial"``), drawn up and to
    the right of the points so that the point stays visible; they autoscale nothing.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    shown = np.asarray(marked, dtype=bool) & np.isfinite(x) & np.isfinite(y)
    if not shown.any():
        return
    beside = offset_copy(ax.transData, fig=ax.figure, x=4, y=4, units="points")
    ax.plot(
        x[shown],
        y[shown],
        linestyle="none",
        marker=PARTIAL_MARKER,
        markersize=6,
        color=_edge_color(color),  # a light colour's darker shade, as its markers' edge
        transform=beside,
        scalex=False,
        scaley=False,
        gid="partial",
        label=PARTIAL_TEXT,
    )


#: The legend's entry for the grid values of a line figure's panel where no replicate
#: is done yet (nothing to draw there), and their mark on the panel's bottom edge.
NOT_DONE_TEXT = "x on the axis: no\nreplicate done yet"
NOT_DONE_MARKER = "x"


def _mark_not_done(ax: Axes, x: Any, done: Any) -> None:
    """A grey ``x`` on the panel's bottom edge at each of ``x`` where ``done`` (the
    replicates done, per value of ``x``) is 0, so that a grid value not run yet is not
    silently missing from the line (the tables show its cells as n/a*); the legend then
    explains it (:data:`NOT_DONE_TEXT`). Markers with gid ``"not-done"``; they
    autoscale nothing."""
    x, done = np.asarray(x, dtype=np.float64), np.asarray(done)
    if done.shape != x.shape or not (done == 0).any():
        return
    ax.plot(
        x[done == 0],
        np.zeros(int((done == 0).sum())),
        linestyle="none",
        marker=NOT_DONE_MARKER,
        markersize=6,
        color="0.35",
        transform=blended_transform_factory(ax.transData, ax.transAxes),
        clip_on=False,
        scalex=False,
        scaley=False,
        gid="not-done",
        label=NOT_DONE_TEXT,
    )


def _partial_of(summary: xr.Dataset, stat: str) -> xr.DataArray:
    """Where the summary's cells of ``stat`` count fewer than all replicates (False for
    a statistic the summary lacks). A cell that only mixes code versions, which the
    tables mark too, is not marked: the legend says what a mark means."""
    if stat not in summary:
        return xr.zeros_like(summary["coverage"], dtype=bool)
    return fewer(summary, stat)


def _hollow_handle() -> Line2D:
    return Line2D([], [], color="0.35", marker="o", markerfacecolor="white", linestyle="none")


def _legend(fig: Figure, axes: np.ndarray) -> None:
    """One legend for the figure, right of the panels (it never hides data).

    A method drawn only where a coverage is not its claim (:data:`UNCLAIMED`) is listed
    once, under its own name, and the hollow markers get an entry of their own.
    """
    pairs = [
        (handle, label)
        for ax in axes.flat
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)
    ]
    seen: dict[str, Any] = {}
    for handle, label in pairs:
        if not label.endswith(UNCLAIMED):
            seen.setdefault(label, handle)
    hollow = False
    for handle, label in pairs:
        if label.endswith(UNCLAIMED):
            hollow = True
            seen.setdefault(label.removesuffix(UNCLAIMED), handle)
    if hollow:
        seen[HOLLOW_TEXT] = _hollow_handle()
    if PARTIAL_TEXT in seen:  # last, as the footnotes of a table; in grey, not a method's
        seen.pop(PARTIAL_TEXT)
        seen[PARTIAL_TEXT] = Line2D(
            [], [], color="0.25", marker=PARTIAL_MARKER, markersize=6, linestyle="none"
        )
    if NOT_DONE_TEXT in seen:  # after it, likewise
        seen[NOT_DONE_TEXT] = seen.pop(NOT_DONE_TEXT)
    if seen:
        wrapped_legend(fig, list(seen.values()), list(seen), loc="outside right upper")


#: A legend entry's line holds this many characters at most: a longer method label is
#: wrapped (within a word where it has no space), so that the legend leaves the panels
#: their width on a desktop page and on a phone.
LEGEND_CHARS = 20


def wrapped_legend(
    fig: Figure, handles: list[Any], labels: list[str], width: int = LEGEND_CHARS, **kwargs: Any
) -> Any:
    """``fig.legend`` of ``handles`` and ``labels`` (small text), each label's lines
    wrapped to ``width`` characters; each entry's text keeps its whole label as its gid,
    which the figure's alt text reads (a label broken within a word is still one name).
    """
    shown = ["\n".join(_wrap_label(line, width) for line in label.split("\n")) for label in labels]
    legend = fig.legend(handles, shown, fontsize="small", **kwargs)
    for text, label in zip(legend.get_texts(), labels, strict=True):
        # A label wrapped already (the diagnostics' methods of the same values) too.
        text.set_gid(unwrap_label(label))
    return legend


def _panel_title(
    ax: Axes, combo: dict[str, Any], coord: int | None, cases: dict[str, list[str]]
) -> None:
    """The grid point in one compact line (wrapped only where it would not fit); a case
    as its parameters (``cases``, :func:`_case_parts`)."""
    parts = _point_parts(combo, cases)
    if coord is not None:
        parts.append(f"coord {coord}")
    if parts:
        title = ax.set_title(_join_lines(parts, PANEL_TITLE_CHARS), fontsize="medium")
        # The title on one line, as it was before it was wrapped, for the alt text
        # (:func:`~ldpsim.pipeline.report.report.figure_alt`): a case label cut within
        # a word is one name there, not two.
        title.set_gid(", ".join(parts))


def _join_lines(parts: list[str], width: int) -> str:
    """``parts`` joined by ', ', a new line only between parts that would pass ``width``;
    a part longer than ``width`` broken as a label is (:func:`_wrap_label`: after its
    underscores). Before, a case label of 50 characters without a space ran past its
    panel, the rightmost panel's under the legend."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            if lines:
                lines[-1] += ","
            lines.append(part)
    return "\n".join(_wrap_label(line, width) for line in lines)


def _tick_labels_everywhere(axes: np.ndarray) -> None:
    """x tick labels under every panel, not only the bottom row (shared axes hide them);
    log y axes labelled where their labels fit (:func:`_readable_log_y`)."""
    for ax in axes.flat:
        ax.tick_params(axis="x", which="both", labelbottom=True)
    _readable_log_axes(axes)


def _readable_log_axes(axes: np.ndarray) -> None:
    """:func:`_readable_log_y` on every panel with a log y axis."""
    for ax in axes.flat:
        if ax.get_yscale() == "log":
            _readable_log_y(ax)


#: Mantissas of the labelled ticks of a log axis with fewer than two powers of ten in view.
LOG_TICK_MANTISSAS = (1.0, 2.0, 5.0)


def _readable_log_y(ax: Axes) -> None:
    """Label a log y axis with fewer than two powers of ten in view at 1, 2 and 5 times
    the powers of ten, and nothing between.

    There matplotlib labels its minor ticks too (2, 3, 4, 6 times a power of ten), and in
    a small panel 3e-1 ran into 4e-1 (shi-coverage's length figure, 1.5 decades). Where
    fewer than two 1-2-5 ticks fall inside the view (a range within a factor of 2.5),
    the default stays.
    """
    low, high = sorted(ax.get_ylim())
    if not (low > 0 and np.isfinite(high)):
        return
    decades = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
    if sum(low <= 10.0**k <= high for k in decades) >= 2:
        return  # two powers of ten or more in view: only they are labelled, and fit
    inside = [m * 10.0**k for k in decades for m in LOG_TICK_MANTISSAS]
    if sum(low <= t <= high for t in inside) < 2:
        return
    ax.yaxis.set_major_locator(LogLocator(base=10.0, subs=LOG_TICK_MANTISSAS))
    # Every major tick labelled (by default only powers of ten once the view spans more
    # than a decade), the minor ticks not at all.
    ax.yaxis.set_major_formatter(LogFormatterSciNotation(minor_thresholds=(np.inf, np.inf)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _dodge(x: np.ndarray, i: int, count: int, log: bool) -> np.ndarray:
    # Side-by-side error bars: a small shift per method (multiplicative on a log axis).
    step = (i - (count - 1) / 2) * 0.02
    if log:
        decades = float(np.log10(x.max() / x.min())) if x.size > 1 else 1.0
        return x * 10 ** (step * max(decades, 1.0))
    spread = float(np.ptp(x)) if x.size > 1 else 1.0
    return x + step * spread


def _n_axis(ax: Axes, x: np.ndarray, x_dim: str, ticks: list[str]) -> None:
    """An x axis of sample sizes: log scale (n grids are geometric), grid ticks if few.

    Call it once per figure, on any one panel: the panels share their x axis
    (``sharex=True``), and with it the scale and the ticks. Each call on a shared axis
    rescales and relimits every panel, each of which looks up all its siblings, so that
    one call per panel made a figure of P panels cost O(P**3): 100 panels took 16 s, 400
    more than 8 minutes. The label ("n") is each panel's own (``ax.set_xlabel``).
    """
    if np.all(x > 0):
        ax.set_xscale("log")
    if x_dim == "n" and len(x) <= MAX_TICKS:
        # Ticks at the grid's n values only (log minor labels would overlap).
        ax.set_xticks(x, ticks)
        ax.xaxis.set_minor_locator(NullLocator())


def coverage_error(
    coverage: np.ndarray | xr.DataArray, se: np.ndarray | xr.DataArray, count: Any
) -> np.ndarray:
    """Error bars of coverages, shape (2, N) (below, above): +-2 Monte-Carlo standard
    errors, cut at coverages of 0 and 1 (no bar claims a coverage a fraction cannot
    have), and at a coverage of 0 or 1, where that standard error is 0, the distance
    to Wilson's interval at z = 2 instead, as the tables show it
    (:func:`ldpsim.pipeline.summary.tables.wilson_interval`; from R = 10 replicates that all
    covered, [0.714, 1]). ``count`` is the replicates R of each coverage (broadcast)."""
    p = np.atleast_1d(np.asarray(coverage, dtype=np.float64))
    half = 2 * np.atleast_1d(np.asarray(se, dtype=np.float64))
    half = np.broadcast_to(half, p.shape)
    counts = np.broadcast_to(np.asarray(count, dtype=np.float64), p.shape)
    with np.errstate(invalid="ignore"):  # NaN coverages keep NaN bars
        out = np.stack([np.fmin(half, p), np.fmin(half, 1.0 - p)]).astype(np.float64)
    for i in np.flatnonzero((p == 0.0) | (p == 1.0)):
        low, high = wilson_interval(float(p[i]), float(counts[i]), INTERVAL_Z)
        if np.isfinite(low):
            # Not below 0: Wilson's bound at p = 1 may round to just under 1.
            out[:, i] = max(p[i] - low, 0.0), max(high - p[i], 0.0)
    return out


def _errorbar(
    ax: Axes,
    x: np.ndarray,
    y: xr.DataArray,
    se: xr.DataArray,
    slot: tuple[int, int],
    style: dict[str, Any] | str,
    label: str,
    count: Any = None,
    marked: Any = None,
) -> None:
    """Values with +-2 SE error bars, dodged to ``slot`` = (i, count) beside the others;
    ``style`` is a method's :func:`method_styles` entry (or a colour alone). With the
    replicates ``count`` of coverages, their :func:`coverage_error` bars (Wilson's
    interval at 0 and 1); ``marked``: the partial values (:func:`_mark_partial`)."""
    style = {"color": style, "marker": "o"} if isinstance(style, str) else style
    yerr = 2 * se.values if count is None else coverage_error(y.values, se.values, count)
    at = _dodge(x, *slot, bool(np.all(x > 0)))
    # The bars in the markers' edge colour: a light colour's darker shade.
    ecolor = style.get("markeredgecolor", style["color"])
    ax.errorbar(
        at, y.values, yerr=yerr, markersize=4, capsize=2, label=label, ecolor=ecolor, **style
    )
    if marked is not None:
        _mark_partial(ax, at, y.values, marked, style["color"])


def _wrapped_panels(
    n_cells: int, rows_per_cell: int, title: str, **share: Any
) -> tuple[Figure, np.ndarray, list[list[Axes]]]:
    """Cells of ``rows_per_cell`` panels one above the other, at most
    MAX_PANEL_COLUMNS cells side by side, further cells on further rows.

    Returns the figure, its axes and each cell's panels (top to bottom); the unused end
    of the last row is hidden.
    """
    n_cols = min(n_cells, MAX_PANEL_COLUMNS)
    n_rows = -(-n_cells // n_cols)
    fig, axes = _panel_grid(rows_per_cell * n_rows, n_cols, title, **share)
    cells = [
        [
            axes[rows_per_cell * (k // n_cols) + offset, k % n_cols]
            for offset in range(rows_per_cell)
        ]
        for k in range(n_rows * n_cols)
    ]
    for panels in cells[n_cells:]:
        for ax in panels:
            ax.set_visible(False)
    return fig, axes, cells[:n_cells]


def _x_span(x: np.ndarray, count: int = 1) -> tuple[float, float]:
    """The shared x axis's limits: every value with its error bars dodged for ``count``
    series (:func:`_dodge`), with a margin; a panel without data keeps sensible ticks."""
    log = bool(np.all(x > 0))
    low, high = _dodge(x, 0, count, log).min(), _dodge(x, count - 1, count, log).max()
    if log:
        return min(x.min() / 1.5, low / 1.2), max(x.max() * 1.5, high * 1.2)
    margin = 0.1 * (float(np.ptp(x)) if x.size > 1 else 1.0)
    return min(x.min() - 0.5, low - margin), max(x.max() + 0.5, high + margin)


def _line_figures(summary: xr.Dataset, x_dim: str) -> tuple[Figure, Figure]:
    """Coverage (+-2 SE or :func:`coverage_error`, nominal line) and log-log mean length
    against ``x_dim``."""
    if x_dim != "checkpoint" and "checkpoint" in summary.dims:
        summary = summary.isel(checkpoint=-1)  # the interval at the end of the run
    others = [a for a in grid_axes(summary) if a != x_dim]
    combos = _combos(summary, others)
    coords = _shown_coords(summary)
    methods = [str(m) for m in summary["method"].values]
    styles = method_styles(methods)
    x = summary[x_dim].values.astype(np.float64)
    ticks = axis_labels(summary[x_dim].values, "text")
    coord_in_title = len(summary["coord"]) > 1
    cells = _panel_cells(summary, combos, coords)
    cases = _case_parts(summary)
    # The coverage of each coordinate is the claim of an interval method, not of a band.
    claims = method_claims(summary)
    claimed = {m: claims[m] == CLAIM_OF["coverage"] for m in methods}
    marked = _partial_of(summary, "coverage")  # and length: the same counts

    cov_fig, cov_axes, cov_cells = _wrapped_panels(
        len(cells), len(cells[0]), _title(summary, "coverage"), sharex=True, sharey=True
    )
    len_fig, len_axes, len_cells = _wrapped_panels(
        len(cells), len(cells[0]), _title(summary, "mean length"), sharex=True
    )
    panels = [
        (combo, coord, summary.sel({**combo, "coord": coord}), cax, lax)
        for cell_pairs, cov_panels, len_panels in zip(cells, cov_cells, len_cells, strict=True)
        for (combo, coord), cax, lax in zip(cell_pairs, cov_panels, len_panels, strict=True)
    ]
    _n_axis(cov_axes[0, 0], x, x_dim, ticks)
    _n_axis(len_axes[0, 0], x, x_dim, ticks)
    for combo, coord, cell, cax, lax in panels:
        for i, method in enumerate(methods):
            m = cell.sel({"method": method})
            partial_values = marked.sel({**combo, "coord": coord, "method": method}).values
            _errorbar(
                cax,
                x,
                m["coverage"],
                m["coverage_se"],
                (i, len(methods)),
                _claim_style(styles[method], claimed[method]),
                _claim_label(method, claimed[method]),
                count=m["n_done"].values,
                marked=partial_values,
            )
            lax.plot(x, m["length"].values, markersize=4, label=method, **styles[method])
            _mark_partial(lax, x, m["length"].values, partial_values, styles[method]["color"])
    # Then what reads a panel's limits (axhline, a scale), once every panel has its data:
    # a read after each panel's data would rescale all the panels that share its axes,
    # P times (see _n_axis).
    for combo, coord, cell, cax, lax in panels:
        panel_level = shared_level(cell)  # a panel of one level where it is a grid axis
        if panel_level is not None and any(claimed.values()):
            cax.axhline(panel_level, color="gray", linestyle=":", label="nominal")
        for ax, stat in ((cax, "coverage"), (lax, "length")):
            if not _has_values(cell[stat].values):
                _no_data(ax, cell)
            else:  # grid values of the panel not run yet: marked, not silently missing
                _mark_not_done(ax, x, cell["replicates_done"].values)
        for ax in (cax, lax):
            ax.set_xlabel("n")
            _panel_title(ax, combo, coord if coord_in_title else None, cases)
        if np.any(np.isfinite(cell["length"].values) & (cell["length"].values > 0)):
            lax.set_yscale("log")
        cax.set_ylabel("coverage")
        lax.set_ylabel("mean length")
    cov_axes[0, 0].set_xlim(*_x_span(x, len(methods)))
    len_axes[0, 0].set_xlim(*_x_span(x, len(methods)))
    _tick_labels_everywhere(cov_axes)
    _tick_labels_everywhere(len_axes)
    _legend(cov_fig, cov_axes)
    _legend(len_fig, len_axes)
    return cov_fig, len_fig


def _panel_cells(
    summary: xr.Dataset, combos: list[dict[str, Any]], coords: list[int]
) -> list[list[tuple[dict[str, Any], int]]]:
    """The panels of a figure, as cells of (grid point, coordinate) stacked vertically.

    Where every grid point has every shown coordinate: one cell per grid point, its
    coordinates one above the other. Where some have fewer (cases of different d): one
    cell per (grid point, coordinate) it has, so that no panel is empty.
    """
    if all(_coord_exists(summary, combo, c) for combo in combos for c in coords):
        return [[(combo, c) for c in coords] for combo in combos]
    return [[(combo, c)] for combo in combos for c in coords if _coord_exists(summary, combo, c)]


def _diagnostics_figure(summary: xr.Dataset, x_dim: str) -> Figure | None:
    """bias/sd and variance ratio (+-2 SE) against ``x_dim`` per method; None if all NaN.

    Each combination of the other grid axes (and shown coordinate) gets two panels, one
    above the other; the combinations fill rows of at most MAX_PANEL_COLUMNS.
    """
    if x_dim != "checkpoint" and "checkpoint" in summary.dims:
        summary = summary.isel(checkpoint=-1)  # the interval at the end of the run
    if not any(summary[var].notnull().any() for var, _, _ in DIAGNOSTIC_PANELS):
        return None
    combos = _combos(summary, [a for a in grid_axes(summary) if a != x_dim])
    coord_in_title = len(summary["coord"]) > 1
    cells = [
        (combo, coord)
        for coord in _shown_coords(summary)
        for combo in combos
        if _coord_exists(summary, combo, coord)
    ]
    methods = [str(m) for m in summary["method"].values]
    styles = method_styles(methods)
    cases = _case_parts(summary)
    x = summary[x_dim].values.astype(np.float64)
    ticks = axis_labels(summary[x_dim].values, "text")
    title = _title(summary, "bias / sd and variance ratio of the intervals")
    fig, axes, panels = _wrapped_panels(len(cells), len(DIAGNOSTIC_PANELS), title, sharex=True)
    marks = {var: _partial_of(summary, var) for var, _, _ in DIAGNOSTIC_PANELS}
    _n_axis(axes[0, 0], x, x_dim, ticks)
    selected = [summary.sel({**combo, "coord": coord}) for combo, coord in cells]
    for (combo, coord), cell, cell_axes in zip(cells, selected, panels, strict=True):
        for offset, (var, _, _) in enumerate(DIAGNOSTIC_PANELS):
            ax = cell_axes[offset]
            groups = _identical_methods(cell, var, methods)
            for i, group in enumerate(groups):
                m = cell.sel({"method": group[0]})
                # A group's value is partial where any of its methods' is.
                at = marks[var].sel({**combo, "coord": coord, "method": group})
                partial_values = at.any("method").values
                style: dict[str, Any] | str = styles[group[0]]
                name = group[0]
                if len(group) > 1:  # one value (bb, bm, sn, oracle: one estimate): drawn once
                    style = {"color": "0.25", "marker": "o", "linestyle": "-"}
                    # Wrapped: a long legend entry widens the figure into its title.
                    name = _wrap_label(f"{', '.join(group)} (same values)", 14)
                _errorbar(
                    ax, x, m[var], m[f"{var}_se"], (i, len(groups)), style, name,
                    marked=partial_values,
                )  # fmt: skip
    # The reference lines once every panel has its data (see _line_figures).
    for (combo, coord), cell, cell_axes in zip(cells, selected, panels, strict=True):
        for offset, (var, label, reference) in enumerate(DIAGNOSTIC_PANELS):
            ax = cell_axes[offset]
            ax.axhline(reference, color="gray", linestyle=":")
            if not _has_values(cell[var].values):
                _no_data(ax, cell)
            if offset == len(DIAGNOSTIC_PANELS) - 1:
                ax.set_xlabel("n")  # the panels above share the axis: this one names it
            ax.set_ylabel(label)
            _panel_title(ax, combo, coord if coord_in_title else None, cases)
    axes[0, 0].set_xlim(*_x_span(x, len(methods)))
    _tick_labels_everywhere(axes)
    _legend(fig, axes)
    return fig


def _identical_methods(cell: xr.Dataset, var: str, methods: list[str]) -> list[list[str]]:
    """The methods of one panel grouped by identical values of ``var`` and its ``_se``
    (NaN equal to NaN), in the store's order: bb, bm, sn and the oracle share one
    estimate, theta_bar_n, and so one bias/sd wherever they count the same replicates;
    drawn once, not as four error bars on top of each other."""
    groups: list[list[str]] = []
    keys: list[np.ndarray] = []
    for method in methods:
        m = cell.sel({"method": method})
        key = np.stack([m[var].values, m[f"{var}_se"].values]).astype(np.float64)
        for group, seen in zip(groups, keys, strict=True):
            if np.array_equal(key, seen, equal_nan=True):
                group.append(method)
                break
        else:
            groups.append([method])
            keys.append(key)
    return groups


def _errors_figure(summary: xr.Dataset) -> Figure | None:
    """Mean squared error of the average and of the last iterate against the checkpoints.

    Log-log, +-2 SE, one panel per combination of the grid axes (wrapped as the
    diagnostics); a series without any value (a store without last iterates) is left
    out, and None is returned when neither has one.
    """
    shown = [(var, label) for var, label in ERROR_SERIES if summary[var].notnull().any()]
    if not shown:
        return None
    combos = _combos(summary, grid_axes(summary))
    cases = _case_parts(summary)
    x = summary["checkpoint"].values.astype(np.float64)
    ticks = axis_labels(summary["checkpoint"].values, "text")
    title = _title(summary, "mean squared error", with_level=False)
    fig, axes, panels = _wrapped_panels(len(combos), 1, title, sharex=True)
    marks = {var: _partial_of(summary, var) for var, _ in shown}
    _n_axis(axes[0, 0], x, "checkpoint", ticks)
    selected = [summary.sel(combo) for combo in combos]
    for combo, cell, (ax,) in zip(combos, selected, panels, strict=True):
        for i, (var, label) in enumerate(shown):
            _errorbar(
                ax, x, cell[var], cell[f"{var}_se"], (i, len(shown)), ERROR_COLORS[var], label,
                marked=marks[var].sel(combo).values,
            )  # fmt: skip
    # The scales once every panel has its data (see _line_figures).
    for combo, cell, (ax,) in zip(combos, selected, panels, strict=True):
        values = np.concatenate([cell[var].values.ravel() for var, _ in shown])
        if np.any(np.isfinite(values) & (values > 0)):
            ax.set_yscale("log")
        else:
            _no_data(ax)
        ax.set_xlabel("n")
        ax.set_ylabel("mean of ||theta - theta*||^2")
        _panel_title(ax, combo, None, cases)
    axes[0, 0].set_xlim(*_x_span(x, len(shown)))
    _tick_labels_everywhere(axes)
    _legend(fig, axes)
    return fig


def _coords_text(summary: xr.Dataset) -> tuple[str, str]:
    """How the dot figures' panel titles name the coordinates of a grid point: ``the
    12 coords`` and ``all 12 coords`` when every grid point has d = 12; where d differs
    (cases of d = 10, 100 and 1000, padded to 1000), each row's own d, which its label
    gives: ``each row's d coords`` and ``all d coords of a row``."""
    if "coord_exists" in summary:
        exists = summary["coord_exists"]
        sizes = np.unique(np.asarray(exists.sum("coord").values).ravel())
    else:
        sizes = np.array([summary.sizes["coord"]])
    if sizes.size == 1:
        d = int(sizes[0])
        return f"the {d} coords", f"all {d} coords"
    return "each row's d coords", "all d coords of a row"


def _dot_panels(summary: xr.Dataset) -> tuple[list[tuple[str, int | None, str]], ...]:
    """The panels of the dot figures: (summary variable, coord or None, title) each, for
    coverage and for length. Up to MAX_COORD_ROWS coordinates one panel each (and the
    joint coverage, when a simultaneous band claims it); more, the mean over the
    coordinates and (coverage) the joint coverage, never one coordinate standing for
    all. The titles name each grid point's own d (:func:`_coords_text`)."""
    coords = [int(c) for c in summary["coord"].values]
    mean_text, joint_text = _coords_text(summary)
    joint = ("joint_coverage", None, f"joint: {joint_text} at once")
    if len(coords) <= MAX_COORD_ROWS:
        titled = len(coords) > 1
        cov = [("coverage", c, f"coord {c}" if titled else "") for c in coords]
        length = [("length", c, f"coord {c}" if titled else "") for c in coords]
        if titled and "joint" in method_claims(summary).values():
            cov.append(joint)
        return cov, length
    cov = [("coord_mean_coverage", None, f"mean over {mean_text}"), joint]
    return cov, [("coord_mean_length", None, f"mean over {mean_text}")]


#: Inches per character of a tick label or legend entry ("small", 8.3 pt, and
#: "medium", 10 pt, text: about half an em each), for sizing the dot figures.
CHAR_INCHES = 0.075


def _bar_figures(summary: xr.Dataset) -> tuple[Figure, Figure]:
    """Coverage and mean length per grid point and method (no ``n`` axis, no checkpoints).

    A dot plot: one row per grid point (its label on the y axis, upright however many
    there are), one marker per method with +-2 SE error bars for coverage (Wilson's
    interval at 0 and 1, :func:`coverage_error`); the length
    axis is logarithmic where the lengths span more than a decade. One panel per
    coordinate up to MAX_COORD_ROWS, else the means over the coordinates and the joint
    coverage (:func:`_dot_panels`); at most MAX_PANEL_COLUMNS panels side by side. A
    coverage that is not the method's nominal claim (an interval's joint coverage, a
    band's per coordinate) is drawn hollow and faint, and a panel has the nominal line
    only where some method claims what it shows. The figure is as wide as its row
    labels and legend need beside the panels, and panel titles wrap to their panel.
    """
    axes_names = grid_axes(summary)
    combos = _combos(summary, axes_names)
    methods = [str(m) for m in summary["method"].values]
    styles = method_styles(methods)
    claims = method_claims(summary)
    level = shared_level(summary)
    positions = np.arange(len(combos))[::-1].astype(np.float64)  # the first on top
    cases = _case_parts(summary)
    tick_labels = [", ".join(_point_parts(c, cases)) or "all" for c in combos]
    height = max(PANEL_SIZE[1], DOT_ROW_INCHES * len(combos) + 1.2)
    # Room for the row labels and the legend beside the panels, so that a long label
    # (sparse: "d=1000, sparsity=16, gaussian, sparse, delta=1e-06") does not squeeze
    # the panels until their titles run under the legend.
    label_inches = CHAR_INCHES * max(len(t) for t in tick_labels) + 0.6
    legend_inches = CHAR_INCHES * min(max(map(len, [*methods, "nominal"])), LEGEND_CHARS) + 1.2
    figures = []
    for what, panels in zip(("coverage", "mean length"), _dot_panels(summary), strict=True):
        n_cols = min(len(panels), MAX_PANEL_COLUMNS)
        n_rows = -(-len(panels) // n_cols)
        width = min(PANEL_SIZE[0] * n_cols + label_inches + legend_inches, MAX_FIGURE_INCHES)
        panel_inches = max((width - label_inches - legend_inches) / n_cols, 1.0)
        fig = SweepFigure(figsize=(width, height * n_rows + 0.6), layout="constrained")
        axes = fig.subplots(n_rows, n_cols, squeeze=False, sharey=True)
        fig.suptitle(_wrap(_title(summary, what), int(TITLE_CHARS_PER_INCH * fig.get_figwidth())))
        for ax in axes.flat[len(panels) :]:
            ax.set_visible(False)
        for ax, (var, coord, title) in zip(axes.flat, panels, strict=False):
            at_coord = summary if coord is None else summary.sel(coord=coord)
            marks = _partial_of(summary, var)
            marks = marks if coord is None else marks.sel(coord=coord)
            values_all = []
            coverage = var.endswith("coverage")
            claimed = {m: not coverage or claims[m] == CLAIM_OF[var] for m in methods}
            for i, method in enumerate(methods):
                sel = at_coord.sel({"method": method})
                values = np.array([float(sel.sel(c)[var]) for c in combos])
                values_all.append(values)
                at = positions + (i - (len(methods) - 1) / 2) * DOT_DODGE / max(len(methods), 1)
                style = {k: v for k, v in styles[method].items() if k != "linestyle"}
                style = _claim_style(style, claimed[method])
                label = _claim_label(method, claimed[method])
                if coverage:
                    se = np.array([float(sel.sel(c)[f"{var}_se"]) for c in combos])
                    count = [float(sel.sel(c)[COVERAGE_COUNTS[var]]) for c in combos]
                    ax.errorbar(
                        values,
                        at,
                        xerr=coverage_error(values, se, count),
                        linestyle="none",
                        markersize=4,
                        capsize=2,
                        label=label,
                        **style,
                    )
                else:
                    ax.plot(values, at, linestyle="none", markersize=4, label=label, **style)
                marked = marks.sel({"method": method})
                marked = [bool(marked.sel(c)) for c in combos]
                _mark_partial(ax, values, at, marked, style["color"])
            finite = np.concatenate(values_all)
            finite = finite[np.isfinite(finite)]
            if coverage:
                ax.set_xlim(-0.05, 1.05)
                if level is not None and any(claimed.values()):
                    ax.axvline(float(level), color="gray", linestyle=":", label="nominal")
                ax.set_xlabel(title.split(":")[0] if var == "joint_coverage" else "coverage")
            else:
                if finite.size and finite.min() > 0 and finite.max() > 10 * finite.min():
                    ax.set_xscale("log")  # the sparse sweep's lengths span three decades
                    _readable_log_x(ax)
                ax.set_xlabel("mean length")
            if not finite.size:
                _no_data(ax)
            ax.set_yticks(positions, tick_labels)
            ax.set_ylim(positions.min() - 0.6, positions.max() + 0.6)
            ax.grid(axis="y", color="0.92")
            if title:
                chars = max(int(panel_inches / CHAR_INCHES / 1.2), 12)
                ax.set_title(_wrap(title, chars), fontsize="medium")
        axes[0, 0].set_ylabel(", ".join(axes_names))
        _legend(fig, axes)
        figures.append(fig)
    return figures[0], figures[1]


def _readable_log_x(ax: Axes) -> None:
    """Powers of ten labelled on a log x axis, nothing between (no crowded minor labels)."""
    ax.xaxis.set_major_formatter(LogFormatterSciNotation())
    ax.xaxis.set_minor_formatter(NullFormatter())


#: The method label the price-of-privacy figures divide the other lengths by (SPEC 10).
FLOOR_METHOD = "np_boot"


def _privacy_figures(summary: xr.Dataset) -> tuple[Figure, Figure] | None:
    """Length relative to the non-private floor against eps, and coverage against n eps.

    For a store with ``eps`` and ``n`` grid axes and a method labelled ``np_boot``
    (the price-of-privacy sweep): one panel per combination of the other grid axes
    (and per n, for the lengths), coordinate 0. None for any other store.
    """
    axes_present = grid_axes(summary)
    methods = [str(m) for m in summary["method"].values]
    if not {"eps", "n"} <= set(axes_present) or FLOOR_METHOD not in methods:
        return None
    summary = summary.isel(coord=0)
    if "checkpoint" in summary.dims:
        summary = summary.isel(checkpoint=-1)
    colors = _colors(methods)
    styles = method_styles(methods)
    others = [m for m in methods if m != FLOOR_METHOD]
    eps = summary["eps"].values.astype(np.float64)
    floor = summary["length"].sel({"method": FLOOR_METHOD}, drop=True)
    cases = _case_parts(summary)
    marks = _partial_of(summary, "coverage")  # and length: the same counts

    length_combos = _combos(summary, [a for a in axes_present if a != "eps"])
    len_fig, len_grid, len_cells = _wrapped_panels(
        len(length_combos), 1, _title(summary, f"mean length / {FLOOR_METHOD}")
    )
    for (ax,), combo in zip(len_cells, length_combos, strict=True):
        cell = summary.sel(combo)
        ratio = cell["length"] / floor.sel(combo)
        for method in others:
            values = ratio.sel({"method": method}).values
            ax.plot(eps, values, markersize=4, label=method, **styles[method])
            # A ratio is partial where either length is.
            marked = marks.sel(combo).sel({"method": [method, FLOOR_METHOD]}).any("method")
            _mark_partial(ax, eps, values, marked.values, styles[method]["color"])
        ax.axhline(1.0, color=colors[FLOOR_METHOD], linestyle=":", label=FLOOR_METHOD)
        ax.set_xscale("log")
        ax.set_xticks(eps, axis_labels(summary["eps"].values, "text"))
        ax.xaxis.set_minor_locator(NullLocator())
        if np.any(np.isfinite(ratio.values) & (ratio.values > 0)):
            ax.set_yscale("log")
        ax.set_xlabel("eps")
        ax.set_ylabel(f"length / {FLOOR_METHOD}")
        _panel_title(ax, combo, None, cases)
    _readable_log_axes(len_grid)
    _legend(len_fig, len_grid)

    coverage_combos = _combos(summary, [a for a in axes_present if a not in ("eps", "n")])
    cov_fig, cov_grid, cov_cells = _wrapped_panels(
        len(coverage_combos), 1, _title(summary, "coverage against n eps"), sharey=True
    )
    claims = method_claims(summary)
    claimed = {m: claims[m] == CLAIM_OF["coverage"] for m in methods}
    for (ax,), combo in zip(cov_cells, coverage_combos, strict=True):
        cell = summary.sel(combo).stack(point=("n", "eps"))
        n_eps = (cell["n"] * cell["eps"]).values.astype(np.float64)
        order = np.argsort(n_eps, kind="stable")
        marked = marks.sel(combo).stack(point=("n", "eps"))
        for i, method in enumerate(methods):
            m = cell.sel({"method": method})
            _errorbar(
                ax,
                n_eps[order],
                m["coverage"][order],
                m["coverage_se"][order],
                (i, len(methods)),
                _claim_style(styles[method], claimed[method]),
                _claim_label(method, claimed[method]),
                count=m["n_done"].values[order],
                marked=marked.sel({"method": method}).values[order],
            )
        panel_level = shared_level(summary.sel(combo))  # its own, where level is an axis
        if panel_level is not None and any(claimed.values()):
            ax.axhline(panel_level, color="gray", linestyle=":", label="nominal")
        ax.set_xscale("log")
        ax.set_xlim(*_x_span(n_eps, len(methods)))
        ax.set_xlabel("n eps")
        ax.set_ylabel("coverage")
        _panel_title(ax, combo, None, cases)
    _legend(cov_fig, cov_grid)
    return len_fig, cov_fig


#: The sparsity figure's columns: what is drawn and its axis label.
SPARSITY_PANELS = (
    ("length", "mean length (over coords)"),
    ("coverage", "coverage (mean over coords)"),
    ("joint_coverage", "joint coverage"),
)
SPARSITY_LINESTYLES = ("-", "--", ":", "-.")


def _sparsity_cases(summary: xr.Dataset) -> dict[str, dict[str, Any]] | None:
    """Each case's spec values when the only grid axis is ``case`` and every case sets
    ``d`` and ``sparsity`` (the ``sparse`` sweep); None otherwise."""
    if grid_axes(summary) != ["case"] or "checkpoint" in summary.dims:
        return None
    cases = sweep_info(summary).get("cases") or {}
    labels = [str(c) for c in summary["case"].values]
    if not all({"d", "sparsity"} <= set(cases.get(label, {})) for label in labels):
        return None
    return {label: cases[label] for label in labels}


def _sparsity_figure(summary: xr.Dataset) -> Figure | None:
    """Length, marginal and joint coverage against the sparsity s, one row per d.

    One line per method (color) and per calibration of the noise (line style: the
    parameters other than d and s that vary across the cases, e.g. mechanism and
    calibration, :func:`~ldpsim.pipeline.summary.case_parameters.case_parameters`); the length
    axis is log-log and shared by the rows, so the rows show the effect of d. Joint
    coverage has +-2 SE error bars (Wilson's interval at 0 and 1) and the nominal
    level, the target of a simultaneous band. None for a store that is not such a
    sweep (:func:`_sparsity_cases`).
    """
    cases = _sparsity_cases(summary)
    if cases is None:
        return None

    # The noise of a case: the parameters that vary but d and s ("laplace, dense").
    rest = {k: v for k, v in case_parameters(summary).items() if k not in ("d", "sparsity")}
    family = {
        str(label): ", ".join(
            value_label(name, values[i]) for name, values in rest.items() if values[i] is not None
        )
        or "all"
        for i, label in enumerate(summary[CASE_AXIS].values)
    }

    dims = sorted({int(v["d"]) for v in cases.values()})
    families = list(dict.fromkeys(family[label] for label in cases))
    methods = [str(m) for m in summary["method"].values]
    styles = method_styles(methods)
    level = shared_level(summary)
    claims = method_claims(summary)
    # Whether each column's statistic is each method's claim: the lengths are anyone's,
    # the coverage of each coordinate an interval's, the joint coverage a band's.
    claimed = {
        var: {m: var not in CLAIM_OF or claims[m] == CLAIM_OF[var] for m in methods}
        for var, _ in SPARSITY_PANELS
    }
    fig, axes = _panel_grid(len(dims), len(SPARSITY_PANELS), _title(summary, "sparse gradients"))
    marks = {var: _partial_of(summary, var) for var in ("coverage", "joint_coverage")}
    for row, d in enumerate(dims):
        for f, name in enumerate(families):
            labels = sorted(
                (
                    label
                    for label, v in cases.items()
                    if int(v["d"]) == d and family[label] == name
                ),
                key=lambda label: int(cases[label]["sparsity"]),
            )
            if not labels:
                continue
            x = np.array([float(cases[label]["sparsity"]) for label in labels])
            cell = summary.sel(case=labels)
            style = SPARSITY_LINESTYLES[f % len(SPARSITY_LINESTYLES)]
            for method in methods:
                at = cell.sel({"method": method}, drop=True)
                series = {
                    "length": at["length"].mean("coord"),
                    "coverage": at["coverage"].mean("coord"),
                    "joint_coverage": at["joint_coverage"],
                }
                # A mean over the coordinates is partial where one of them is.
                by_coord = marks["coverage"].sel({"case": labels, "method": method}).any("coord")
                marked = {
                    "length": by_coord,
                    "coverage": by_coord,
                    "joint_coverage": marks["joint_coverage"].sel(
                        {"case": labels, "method": method}
                    ),
                }
                label = f"{method}, {name}"
                edge = styles[method]["markeredgecolor"]
                for col, (var, _) in enumerate(SPARSITY_PANELS):
                    ax = axes[row, col]
                    # A coverage the method does not claim: faint, hollow and thin.
                    faint = (
                        {}
                        if claimed[var][method]
                        else {"alpha": 0.5, "markerfacecolor": "white", "linewidth": 0.8}
                    )
                    if var == "joint_coverage":
                        ax.errorbar(
                            x,
                            series[var].values,
                            yerr=coverage_error(
                                series[var].values,
                                at["joint_coverage_se"].values,
                                at["joint_n_done"].values,
                            ),
                            color=styles[method]["color"],
                            linestyle=style,
                            marker=styles[method]["marker"],
                            markeredgecolor=edge,
                            ecolor=edge,  # a light colour's darker shade, as elsewhere
                            markersize=3,
                            capsize=2,
                            label=label,
                            **faint,
                        )
                    else:
                        ax.plot(
                            x,
                            series[var].values,
                            color=styles[method]["color"],
                            linestyle=style,
                            marker=styles[method]["marker"],
                            markeredgecolor=edge,
                            markersize=3,
                            label=label,
                            **faint,
                        )
                    color = styles[method]["color"]
                    _mark_partial(ax, x, series[var].values, marked[var].values, color)
        sparsities = sorted({int(v["sparsity"]) for v in cases.values() if int(v["d"]) == d})
        row_cases = summary.sel(case=[label for label, v in cases.items() if int(v["d"]) == d])
        for col, (var, ylabel) in enumerate(SPARSITY_PANELS):
            ax = axes[row, col]
            if not _has_values(row_cases[var].values):
                _no_data(ax)  # a partial store: no case of this d has a done replicate
            ax.set_xscale("log")
            ax.set_xticks(sparsities, [str(v) for v in sparsities])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("sparsity s")
            ax.set_ylabel(ylabel)
            ax.set_title(f"d = {d}", fontsize="medium")
            if var == "length":
                ax.set_yscale("log")
            else:
                ax.set_ylim(0, 1.05)
                if level is not None and any(claimed[var].values()):
                    ax.axhline(float(level), color="gray", linestyle=":", label="nominal")
    # One length scale for every d, so that the rows show the effect of d.
    lengths = np.concatenate([line.get_ydata() for ax in axes[:, 0] for line in ax.get_lines()])
    lengths = lengths[np.isfinite(lengths) & (lengths > 0)]
    if lengths.size:
        for ax in axes[:, 0]:
            ax.set_ylim(lengths.min() / 1.5, lengths.max() * 1.5)
    _readable_log_axes(axes)
    # Two short legends, not one entry per method and noise (19 in the sparse sweep):
    # the methods by colour and marker, the noise by line style.
    method_handles = [
        Line2D(
            [],
            [],
            color=styles[m]["color"],
            marker=styles[m]["marker"],
            markeredgecolor=styles[m]["markeredgecolor"],
            markersize=4,
        )
        for m in methods
    ]
    family_handles = [
        Line2D([], [], color="black", linestyle=SPARSITY_LINESTYLES[f % len(SPARSITY_LINESTYLES)])
        for f in range(len(families))
    ]
    nominal = [Line2D([], [], color="gray", linestyle=":")] if level is not None else []
    hollow = any(not c for by_method in claimed.values() for c in by_method.values())
    wrapped_legend(
        fig,
        method_handles + nominal + ([_hollow_handle()] if hollow else []),
        methods + (["nominal"] if nominal else []) + ([HOLLOW_TEXT] if hollow else []),
        loc="outside right upper",
        title="method",
        title_fontsize="small",
    )
    wrapped_legend(
        fig,
        family_handles,
        families,
        24,
        loc="outside right lower",
        title="noise",
        title_fontsize="small",
    )
    return fig


def _first_done_rep(done: xr.DataArray) -> int | None:
    flags = np.asarray(done.values, dtype=bool)
    return int(np.argmax(flags)) if flags.any() else None


def _running_limits(
    estimate: np.ndarray, bounds: list[np.ndarray], truth: float
) -> tuple[float, float] | None:
    """y-limits: the whole estimate path, and the bounds but at the first quarter of the
    checkpoints (the earliest intervals are so wide that they would flatten the rest)."""
    data = np.concatenate([estimate, *(v[len(v) // 4 :] for v in bounds if v.size)])
    data = data[np.isfinite(data)]
    if np.isfinite(truth):
        data = np.append(data, truth)
    if data.size == 0:
        return None
    lo, hi = float(data.min()), float(data.max())
    pad = 0.15 * (hi - lo) if hi > lo else 1.0
    return lo - pad, hi + pad


def _running_figure(ds: xr.Dataset) -> Figure | None:
    """Running estimate and interval bounds against n, first done replicate, coord 0."""
    combos = _combos(ds, [a for a in grid_axes(ds) if a not in NON_GRID_DIMS])
    checkpoints = ds["checkpoint"].values.astype(np.float64)
    split = RUNNING_SPLIT * checkpoints.max()
    parts = [checkpoints <= split, checkpoints >= split]
    if min(int(p.sum()) for p in parts) < 2:
        parts = [np.ones_like(checkpoints, dtype=bool)]
    oracle = oracle_label(ds)
    methods = [str(m) for m in ds["method"].values if str(m) != oracle]
    colors = _colors(methods)
    cases = _case_parts(ds)
    fig, axes = _panel_grid(len(combos), len(parts), _title(ds, "running estimate and bounds"))
    drawn = False
    for row, combo in enumerate(combos):
        point = ds.sel(combo).isel(coord=0)
        rep = _first_done_rep(point["done"])
        if rep is None:
            for ax in axes[row]:
                ax.set_title("no replicate done", fontsize="medium")
            continue
        drawn = True
        point = point.isel(rep=rep).compute()
        truth = float(point["truth"])
        estimate = point["estimate"].values
        for col, part in enumerate(parts):
            ax = axes[row, col]
            x = checkpoints[part]
            shown = []
            ax.plot(x, estimate[part], color="black", linewidth=1.2, label="estimate")
            for method in methods:
                bounds = point.sel({"method": method})
                for bound, label in (("lower", method), ("upper", None)):
                    y = bounds[bound].values[part]
                    shown.append(y)
                    ax.plot(x, y, color=colors[method], linewidth=1, label=label)
            if np.isfinite(truth):
                ax.axhline(truth, color="gray", linestyle="--", linewidth=1, label="truth")
            limits = _running_limits(estimate[part], shown, truth)
            if limits is not None:
                ax.set_ylim(*limits)
            if col == 0 and len(parts) > 1 and x.min() > 0:
                ax.set_xscale("log")
            ax.set_xlabel("n")
            ax.set_ylabel("theta (coord 0)")
            where = _point_parts(combo, cases)
            if len(parts) > 1:
                where.append(f"n {'<=' if col == 0 else '>='} {sample_size_text(split)}")
            title = _join_lines([*where, f"replicate {rep}"], PANEL_TITLE_CHARS)
            ax.set_title(title, fontsize="medium")
    if not drawn:
        return None
    _legend(fig, axes)
    return fig


def store_figures(
    ds: xr.Dataset, kinds: Sequence[str] | None = None, *, summary: xr.Dataset | None = None
) -> dict[str, Figure]:
    """Draw a sweep's figures; those a store has no data for are left out.

    Parameters
    ----------
    ds : xarray.Dataset
        The store's Dataset (:func:`ldpsim.pipeline.store.reading.load_dataset`).
    kinds : sequence of str, optional
        The figures to draw, from :data:`FIGURE_KINDS` (default: all). What each shows
        is described in :func:`plot_store`, whose file names they are.
    summary : xarray.Dataset, optional
        ``summarize(ds)``, when the caller has it already.

    Returns
    -------
    dict of str to matplotlib.figure.Figure
        Kind -> figure, in the order of :data:`FIGURE_KINDS`.

    Raises
    ------
    InputError
        A kind not in :data:`FIGURE_KINDS`.
    """
    wanted = list(FIGURE_KINDS) if kinds is None else list(kinds)
    for kind in wanted:
        if kind not in FIGURE_KINDS:
            raise InputError(
                f"Unknown figure kind {kind!r}. Kinds are: {', '.join(FIGURE_KINDS)}."
            )
    summary = summarize(ds) if summary is None else summary
    if "n" in grid_axes(summary):
        x_dim: str | None = "n"
    else:
        x_dim = "checkpoint" if "checkpoint" in summary.dims else None
    drawn: dict[str, Figure | None] = {}
    if {"coverage", "length"} & set(wanted):
        pair = _bar_figures(summary) if x_dim is None else _line_figures(summary, x_dim)
        drawn.update(coverage=pair[0], length=pair[1])
    if "diagnostics" in wanted and x_dim is not None:
        drawn["diagnostics"] = _diagnostics_figure(summary, x_dim)
    if {"privacy-length", "privacy-coverage"} & set(wanted):
        privacy = _privacy_figures(summary)
        if privacy is not None:
            drawn["privacy-length"], drawn["privacy-coverage"] = privacy
    if "errors" in wanted and "checkpoint" in summary.dims:
        drawn["errors"] = _errors_figure(summary)
    if "sparsity" in wanted:
        drawn["sparsity"] = _sparsity_figure(summary)
    if "running" in wanted and "checkpoint" in ds.dims:
        drawn["running"] = _running_figure(ds)
    return {
        kind: drawn[kind]
        for kind in FIGURE_KINDS
        if kind in wanted and drawn.get(kind) is not None
    }


def plot_store(path_or_ds: str | Path | xr.Dataset, out_dir: str | Path) -> list[Path]:
    """Draw a sweep's figures as PNG and PDF files.

    Parameters
    ----------
    path_or_ds : str, pathlib.Path or xarray.Dataset
        A store path (read with :func:`ldpsim.pipeline.store.store.load_dataset`) or the store's
        Dataset itself.
    out_dir : str or pathlib.Path
        Folder the figures are written to (created if missing; files are replaced).
        See :func:`prepare_out_dir` for what is refused.

    Returns
    -------
    list of pathlib.Path
        The files written: ``coverage.{png,pdf}`` (coverage against n with +-2 SE
        error bars, Wilson's interval at a coverage of 0 or 1 (:func:`coverage_error`),
        and the nominal level; one panel per combination of the other grid
        axes, one panel row per coordinate when d <= 4, else coordinate 0; at most
        MAX_PANEL_COLUMNS combinations side by side, more on further rows),
        ``length.{png,pdf}`` (mean length against n, log-log) and,
        for a store with checkpoints, ``running.{png,pdf}`` (the running estimate and
        interval bounds of the first done replicate against n, in two panels split at
        n = 0.2 max checkpoint, as in the paper's Figure 1). The x axis is the ``n``
        axis, else the checkpoints; a store with neither gets bar charts per method.
        With an x axis and at least one finite value, ``diagnostics.{png,pdf}``: bias / sd
        and the variance ratio (see :mod:`ldpsim.pipeline.summary.diagnostics`) with +-2 SE
        against n, log x, per method, two panels per combination of the other grid axes
        (and per shown coordinate), at most MAX_PANEL_COLUMNS side by side. For a
        store with checkpoints, ``errors.{png,pdf}``: the mean squared error
        E||theta - theta*||^2 of the average theta_bar_n and of the last iterate theta_n
        (``mse``, ``mse_last`` of :func:`ldpsim.pipeline.summary.summary.summarize`) with +-2 SE
        against the checkpoints, log-log, one panel per combination of the grid axes
        (the last iterate is left out for a store that does not keep it). For a
        store with ``eps`` and ``n`` axes and an ``np_boot`` method (price-of-privacy):
        ``privacy-length.{png,pdf}`` (each method's mean length divided by np_boot's
        against eps, log-log, one panel per n and other grid values) and
        ``privacy-coverage.{png,pdf}`` (coverage with +-2 SE against n x eps, one panel
        per value of the other grid axes), coordinate 0. For a sweep whose only grid
        axis is ``case`` with cases that set ``d`` and ``sparsity`` (the ``sparse``
        sweep), ``sparsity.{png,pdf}``: mean length, marginal and joint coverage against
        s, one row per d (:func:`_sparsity_figure`). In each, a ``*`` beside a point
        marks a value of fewer than all of its grid point's replicates, as the tables
        mark such a cell (:mod:`ldpsim.pipeline.summary.partial_cells`); the legend
        says so.
    """
    ds = path_or_ds if isinstance(path_or_ds, xr.Dataset) else load_dataset(path_or_ds)
    out = prepare_out_dir(out_dir)
    files: list[Path] = []
    for kind, fig in store_figures(ds).items():
        files += save_figure(fig, out, kind)
    return files
