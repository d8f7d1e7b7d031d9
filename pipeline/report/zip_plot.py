"""Zip plots of a store: every replicate's interval, ranked by its absolute z-score
(Morris, White & Crowther 2019)."""

from __future__ import annotations

import hashlib
import html
import re
import textwrap
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.formatting import format_level
from ldpsim.pipeline.report.plots import (
    MAX_PANEL_COLUMNS,
    PANEL_SIZE,
    PANEL_TITLE_CHARS,
    TITLE_CHARS_PER_INCH,
    SweepFigure,
    coverage_error,
    point_title,
    value_label,
)
from ldpsim.pipeline.summary.partial_cells import replicates_per_point
from ldpsim.pipeline.summary.summary import sweep_info
from ldpsim.pipeline.summary.variables import grid_axes

#: Most interval lines drawn per panel; a cell of more replicates shows this many, evenly
#: spaced over the ranking (every k-th), so that 10,000 replicates stay readable and the
#: PDF small. The centiles are those among all the replicates.
ZIP_MAX_LINES = 1000
#: Colours of the intervals that hold the truth and of those that miss it (Okabe and
#: Ito's blue and vermillion: colour-blind safe, and apart in a greyscale print).
COVER_COLOR = "#0072B2"
MISS_COLOR = "#D55E00"
#: The Monte-Carlo band of the observed coverage: light enough that the lines drawn over
#: it keep 3:1 against it (WCAG 2.1's 1.4.11), the vermillion of a miss too (2.4:1 on the
#: 0.8 grey it was); its grey edge (3.4:1 on white) shows where it ends.
BAND_COLOR = "#e6e6e6"
BAND_EDGE = "#8c8c8c"
#: One panel's size in inches: taller than the other figures' panels, for the lines.
ZIP_PANEL_SIZE = (PANEL_SIZE[0], 3.4)
#: The x axis of a panel of R replicates leaves out the floor(R x this) most extreme
#: bounds on each side (they are cut at its edge): one interval a hundred times wider
#: than the others would otherwise flatten the panel. Below 200 replicates, none.
X_TAIL = 0.005
#: An interval counts as centred at its estimate c when |c - midpoint| is at most this
#: fraction of its half-length (rounding of the stored bounds).
CENTRE_RTOL = 1e-6
#: Text in a panel whose method gave no interval in any done replicate.
NO_INTERVAL_TEXT = "no interval: the method\nfailed in every done replicate"
#: Stem of the zip plot of a store without grid axes (one grid point).
ZIP_STEM = "zip"


def zip_distance(
    lower: np.ndarray, upper: np.ndarray, truth: float, centre: np.ndarray | None = None
) -> np.ndarray:
    """Each interval's distance from the truth in its half-length on the truth's side:
    (c - theta*) / (c - lower) for theta* below c, (theta* - c) / (upper - c) above it.

    For a Wald interval c +- z_crit se this is |z| / z_crit, with z = (c - theta*) / se the
    statistic of the test of theta*: ranking by it ranks by |z| (Morris, White & Crowther
    2019, section 5.2). Measured on the truth's side, an interval holds theta* exactly
    where the distance is at most 1, also when it is not centred at c (a percentile
    bootstrap interval): the misses rank above every interval that covers.

    Parameters
    ----------
    lower, upper : numpy.ndarray
        The bounds, finite or infinite (not NaN), of the same shape.
    truth : float
        The true value theta*.
    centre : numpy.ndarray, optional
        The method's estimate c per interval; where absent, NaN or outside the interval,
        the interval's midpoint (lower + upper) / 2.

    Returns
    -------
    numpy.ndarray
        float64, >= 0; 0 for an interval whose centre is theta*, inf for a degenerate
        side that misses it; for an unbounded interval whose centre is not a number, 0
        where it holds theta* and inf where not.
    """
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        midpoint = (lower + upper) / 2.0
        c = midpoint if centre is None else np.asarray(centre, dtype=np.float64)
        inside = (lower <= c) & (c <= upper)  # False for NaN
        c = np.where(inside, c, midpoint)
        offset = np.abs(c - truth)
        side = np.where(truth < c, c - lower, upper - c)  # the half-length toward theta*
        distance = np.where(side > 0, offset / side, np.where(offset == 0, 0.0, np.inf))
        distance = np.where(np.isnan(offset), np.nan, distance)  # no centre: decided below
    covers = (lower <= truth) & (truth <= upper)
    return np.where(np.isnan(distance), np.where(covers, 0.0, np.inf), distance)


def fractional_centiles(count: int) -> np.ndarray:
    """The fractional centiles of ranks 1..R: 100 (rank - 1/2) / R, in (0, 100)."""
    return 100.0 * (np.arange(count) + 0.5) / max(count, 1)


def evenly_spaced(count: int, max_lines: int) -> np.ndarray:
    """Positions 0..count-1 to draw: all, or ``max_lines`` evenly spread over them (the
    first and last included)."""
    if count <= max_lines:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, max_lines)).astype(np.int64))


@dataclass(frozen=True)
class ZipPanel:
    """One method's intervals at one grid point and coordinate, ranked for a zip plot.

    The arrays hold the R replicates that count (done, with both bounds), ordered by
    :func:`zip_distance` (ties by replicate): the first has the smallest |z|, the last the
    largest.

    Attributes
    ----------
    method : str
        The method label.
    coord : int
        The coordinate j.
    truth : float
        theta*_j, the value coverage is measured against (as in the summary).
    rep : numpy.ndarray
        The replicates, ranked.
    lower, upper : numpy.ndarray
        Their bounds, ranked.
    distance : numpy.ndarray
        |c - theta*| / h, ascending.
    covers : numpy.ndarray
        lower <= theta* <= upper, ranked.
    replicates_done : int
        The grid point's done replicates (R plus those where the method failed).
    centred : bool
        Every interval is centred at its estimate c (asymmetric intervals are not: h is
        then their half-length on theta*'s side, and every miss still ranks above every
        cover).
    """

    method: str
    coord: int
    truth: float
    rep: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    distance: np.ndarray
    covers: np.ndarray
    replicates_done: int
    centred: bool

    @property
    def count(self) -> int:
        """R, the replicates drawn from (before the cap of the lines)."""
        return int(self.rep.size)

    @property
    def covering(self) -> int:
        """The intervals that hold theta*."""
        return int(self.covers.sum())

    @property
    def coverage(self) -> float:
        """The observed coverage, covering / R (NaN for R = 0)."""
        return self.covering / self.count if self.count else float("nan")

    @property
    def centile(self) -> np.ndarray:
        """Each interval's fractional centile of |z| (:func:`fractional_centiles`)."""
        return fractional_centiles(self.count)

    def coverage_band(self) -> tuple[float, float]:
        """The observed coverage +-2 Monte-Carlo standard errors, within [0, 1]; Wilson's
        interval at z = 2 at a coverage of 0 or 1, as in the coverage figures
        (:func:`ldpsim.pipeline.report.plots.coverage_error`)."""
        p = self.coverage
        se = np.sqrt(p * (1.0 - p) / self.count)
        below, above = coverage_error(p, se, self.count)[:, 0]
        return max(p - float(below), 0.0), min(p + float(above), 1.0)


def zip_panel(point: xr.Dataset, method: str, coord: int) -> ZipPanel:
    """The ranked intervals of ``method`` at coordinate ``coord`` of one grid point.

    Parameters
    ----------
    point : xarray.Dataset
        One grid point of a store (no grid axis, no checkpoint axis left): ``lower``,
        ``upper`` (method, rep, coord), ``truth`` (coord), ``done`` (rep) and, where the
        store has it, ``method_estimate``.
    method : str
        A label of ``point``'s ``method`` axis.
    coord : int
        A coordinate of ``point``.

    Returns
    -------
    ZipPanel
        The replicates that count for the method's coverage in the summary: done, with
        both bounds (not NaN), ranked.
    """
    at = point.sel({"method": method, "coord": coord})
    lower = np.asarray(at["lower"].values, dtype=np.float64)
    upper = np.asarray(at["upper"].values, dtype=np.float64)
    done = np.asarray(point["done"].values, dtype=bool)
    truth = float(at["truth"].values)
    use = done & ~np.isnan(lower) & ~np.isnan(upper)
    if "method_estimate" in point:
        centre = np.asarray(at["method_estimate"].values, dtype=np.float64)[use]
    else:
        centre = None
    lower, upper = lower[use], upper[use]
    distance = zip_distance(lower, upper, truth, centre)
    order = np.argsort(distance, kind="stable")
    centred = True
    if centre is not None:
        with np.errstate(invalid="ignore", over="ignore"):
            midpoint = (lower + upper) / 2.0
            off_centre = np.abs(np.where(np.isnan(centre), midpoint, centre) - midpoint)
            # NaN (an unbounded interval) is not counted as off centre.
            centred = not bool(np.any(off_centre > CENTRE_RTOL * (upper - lower) / 2.0))
    return ZipPanel(
        method=method,
        coord=int(coord),
        truth=truth,
        rep=np.flatnonzero(use)[order],
        lower=lower[order],
        upper=upper[order],
        distance=distance[order],
        covers=((lower <= truth) & (truth <= upper))[order],
        replicates_done=int(done.sum()),
        centred=centred,
    )


@dataclass(frozen=True)
class ZipPlot:
    """The zip plot of one grid point: its panels, file stem, title and caption; its
    matplotlib figure is drawn when first asked for (the report draws SVG instead,
    :func:`panel_svg`).

    Attributes
    ----------
    stem : str
        The file stem (:func:`zip_stem`).
    caption : str
        What the plot shows: :attr:`description`, then :attr:`counts`.
    point : dict
        The grid point.
    panels : tuple of ZipPanel
        One per method, in the store's order.
    title : str
        The figure's title: the sweep, the grid point, the checkpoint and the level.
    description : str
        The part of the caption every zip plot of the store shares (the ranking, the
        colours, the lines, the band).
    counts : str
        The part that is this grid point's own: the replicates drawn per method, the
        cap on the lines, the methods not centred, the cut x axis.
    level : float
        The nominal level (NaN if the store has none).
    max_lines : int
        Most lines drawn per panel.
    coord_in_title : bool
        Whether the panels name the coordinate (a store of d > 1).
    """

    stem: str
    caption: str
    point: dict[str, Any]
    panels: tuple[ZipPanel, ...]
    title: str
    description: str
    counts: str
    level: float
    max_lines: int
    coord_in_title: bool

    @cached_property
    def figure(self) -> Figure:
        """The matplotlib figure: one panel per method, the legend right of them."""
        return _draw_figure(self)


@dataclass(frozen=True)
class ZipPlots:
    """The zip plots of a store and one note per grid point left out."""

    plots: list[ZipPlot]
    notes: list[str]


def zip_stem(point: dict[str, Any]) -> str:
    """The file stem of a grid point's zip plot: ``zip-tau=0.5_n=100``; ``zip`` for a
    store without grid axes. Characters other than letters, digits and ``._=+-`` become
    ``-`` (a case label may hold anything), and the stem then ends in 8 hex digits of
    the label's SHA-256, so that labels differing in those characters alone (``a&b``,
    ``a|b``) keep their own files and page anchors."""
    if not point:
        return ZIP_STEM
    parts = []
    for axis, value in point.items():
        value = value.item() if isinstance(value, np.generic) else value
        # The figures write a label alone (a case name): a file name names its axis.
        parts.append(f"{axis}={value}" if isinstance(value, str) else value_label(axis, value))
    label = "_".join(parts)
    stem = re.sub(r"[^A-Za-z0-9._=+-]", "-", label)
    if stem != label:
        stem = f"{stem}-{hashlib.sha256(label.encode()).hexdigest()[:8]}"
    return f"{ZIP_STEM}-{stem}"


def check_coord(ds: xr.Dataset, coord: object) -> int:
    """The ``coord`` parameter, checked: a coordinate of the store.

    Raises
    ------
    InputError
        Not an int, or not one of the store's coordinates 0..d-1.
    """
    count = int(ds.sizes["coord"])
    if isinstance(coord, bool) or not isinstance(coord, int | np.integer):
        raise InputError(
            f"The 'coord' parameter of the zip plot (--zip-coord) must be an int in "
            f"[0, {count}). Got {coord!r}."
        )
    if not 0 <= int(coord) < count:
        raise InputError(
            f"The 'coord' parameter of the zip plot (--zip-coord) must be an int in "
            f"[0, {count}), the store's coordinates. Got {int(coord)}."
        )
    return int(coord)


def check_max_lines(max_lines: object) -> int:
    """The ``max_lines`` parameter, checked: an int >= 2.

    Raises
    ------
    InputError
        Anything else.
    """
    if isinstance(max_lines, bool) or not isinstance(max_lines, int | np.integer) or max_lines < 2:
        raise InputError(
            f"The 'max_lines' parameter of the zip plot must be an int >= 2. Got {max_lines!r}."
        )
    return int(max_lines)


def _x_limits(panel: ZipPanel, shown: np.ndarray) -> tuple[tuple[float, float], bool]:
    """A panel's theta range and whether some drawn bound lies outside it (:data:`X_TAIL`)."""
    lows = np.sort(panel.lower[shown][np.isfinite(panel.lower[shown])])
    highs = np.sort(panel.upper[shown][np.isfinite(panel.upper[shown])])
    tail = int(np.floor(X_TAIL * shown.size))
    values = [panel.truth]
    if lows.size:
        values.append(float(lows[min(tail, lows.size - 1)]))
    if highs.size:
        values.append(float(highs[max(highs.size - 1 - tail, 0)]))
    lo, hi = min(values), max(values)
    pad = 0.05 * (hi - lo) if hi > lo else max(abs(lo), 1.0) * 0.05
    lo, hi = lo - pad, hi + pad
    cut = bool(np.any(panel.lower[shown] < lo) or np.any(panel.upper[shown] > hi))
    return (lo, hi), cut


def _draw_panel(
    ax: Axes, panel: ZipPanel, level: float, max_lines: int, coord_in_title: bool
) -> None:
    """One method's zip plot in ``ax``."""
    where = f", coord {panel.coord}" if coord_in_title else ""
    if panel.count == 0:
        ax.set_title(f"{panel.method}{where}: no interval", fontsize="medium")
        ax.text(
            0.5,
            0.5,
            NO_INTERVAL_TEXT,
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="0.35",
        )
        ax.set_ylim(0, 100)
        ax.set_ylabel("fractional centile of |z|")
        return
    shown = evenly_spaced(panel.count, max_lines)
    (lo, hi), _ = _x_limits(panel, shown)
    low, high = panel.coverage_band()
    ax.axhspan(
        100 * low,
        100 * high,
        facecolor=BAND_COLOR,
        edgecolor=BAND_EDGE,
        linewidth=0.8,
        zorder=0,
        label="coverage ± 2 MC se",
    )
    # Lines thick enough to see among few replicates, thin among many.
    width = float(np.clip(150.0 / shown.size, 0.5, 2.5))
    centile = panel.centile[shown]
    covers = panel.covers[shown]
    for mask, color, label in (
        (covers, COVER_COLOR, "covers theta*"),
        (~covers, MISS_COLOR, "misses theta*"),
    ):
        if mask.any():
            ax.hlines(
                centile[mask],
                np.clip(panel.lower[shown][mask], lo, hi),
                np.clip(panel.upper[shown][mask], lo, hi),
                colors=color,
                linewidth=width,
                zorder=2,
                label=label,
            )
    ax.axvline(panel.truth, color="black", linestyle="--", linewidth=1, zorder=3, label="theta*")
    if np.isfinite(level):
        ax.axhline(
            100 * level,
            color="black",
            linestyle=":",
            linewidth=1.2,
            zorder=3,
            label=f"nominal {format_level(level)}",
        )
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # long tick labels must not touch
    ax.set_ylim(0, 100)
    ax.set_yticks([0, 25, 50, 75, 100])
    title = (
        f"{panel.method}{where}: coverage {panel.coverage:.3f} ({panel.covering}/{panel.count})"
    )
    ax.set_title(
        "\n".join(textwrap.wrap(title, PANEL_TITLE_CHARS, break_on_hyphens=False)),
        fontsize="medium",
    )
    ax.set_ylabel("fractional centile of |z|")


def _figure_title(
    ds: xr.Dataset,
    point: dict[str, Any],
    level: float,
    checkpoint: str | None,
    done: int,
    asked: int,
) -> str:
    """The zip plot's title: the sweep, the grid point, the level, and whether the point
    is partial (``done`` of its ``asked`` replicates), as the caption's ``*`` note says:
    the PNG of ``ldpsim plot --zip`` has no caption."""
    name = sweep_info(ds).get("name", "")
    parts = [f"{name}: zip plot" if name else "zip plot"]
    if point:
        parts.append(point_title(ds, point))
    if checkpoint:
        parts.append(f"n={checkpoint} (last checkpoint)")
    if np.isfinite(level):
        parts.append(f"{format_level(level)} intervals")
    if done < asked:
        parts.append(f"partial*: {done:,} of {asked:,} replicates done")
    return ", ".join(parts)


def _description(level: float, coord: int, checkpoint: str | None) -> str:
    """What every zip plot of a store shows, in words: lines, ranking, colours, band."""
    at = f" at the last checkpoint (n = {checkpoint})" if checkpoint else ""
    level_text = f"{format_level(level)} " if np.isfinite(level) else ""
    parts = [
        "Zip plot (Morris, White & Crowther 2019, section 5.2): one horizontal line per "
        f"replicate's {level_text}interval for coordinate {coord}{at}, one panel per method. "
        "The lines are ranked by |c - theta*| / h, with c the method's estimate (the "
        "interval's midpoint where it has none) and h the interval's half-length on "
        "theta*'s side (|z| / z_crit for a Wald interval), and drawn at their "
        "fractional centile of |z|, from 0 at the bottom to 100 at the top. Blue lines "
        "hold the true value theta* (the dashed vertical line), vermillion lines miss it."
    ]
    if np.isfinite(level):
        nominal = format_level(level).removesuffix("%")  # 100 x level, every digit exact
        parts.append(
            f"The dotted line is the nominal level at centile {nominal}: with nominal "
            "coverage, the lines above it are exactly those that miss."
        )
    parts.append(
        "The shaded band is the observed coverage +-2 Monte-Carlo standard errors "
        "(Wilson's interval at z = 2 at a coverage of 0 or 1); the nominal line should "
        "pass through it."
    )
    return " ".join(parts)


def _done(panels: list[ZipPanel], asked: int) -> int:
    """The replicates done at a zip plot's grid point (``asked`` without panels)."""
    return max((p.replicates_done for p in panels), default=asked)


def _counts(panels: list[ZipPanel], max_lines: int, cut: bool, asked: int, held: int) -> str:
    """What one zip plot draws of its grid point: replicates (of the ``asked``
    replicates per grid point, ``held`` of them in the Dataset: fewer done, a partial
    point), cap, centring, x range."""
    counts = ", ".join(f"{p.method} {p.count:,} of {p.replicates_done:,}" for p in panels)
    parts = [
        f"Drawn from the done replicates with an interval: {counts} (a replicate where the "
        "method failed is left out)."
    ]
    done = _done(panels, asked)
    if done < asked:
        parts.append(
            f"* A partial grid point: {done:,} of its {asked:,} replicates are done"
            f"{f' ({asked - held:,} not in the selection of replicates)' if held < asked else ''}"
            ", and the plot may still change."
        )
    capped = [p.method for p in panels if p.count > max_lines]
    if capped:
        parts.append(
            f"At most {max_lines:,} lines per panel ({', '.join(capped)}): evenly spaced "
            "over the ranking; the centiles are among all the replicates."
        )
    skewed = [p.method for p in panels if not p.centred]
    if skewed:
        parts.append(
            f"The intervals of {', '.join(skewed)} are not centred at the estimate: h is "
            "the half-length on theta*'s side (c - lower or upper - c), so their misses "
            "still rank above every interval that covers."
        )
    if cut:
        parts.append(
            f"Each panel's theta axis leaves out the most extreme bounds (the "
            f"{100 * X_TAIL:g}% on each side of a panel of 200 replicates or more, and "
            "infinite ones): the intervals reaching past it are cut at its edge."
        )
    return " ".join(parts)


def zip_figure(
    ds: xr.Dataset,
    point: dict[str, Any],
    *,
    coord: int = 0,
    max_lines: int = ZIP_MAX_LINES,
) -> ZipPlot:
    """The zip plot of one grid point: one panel per method, coordinate ``coord``.

    Parameters
    ----------
    ds : xarray.Dataset
        The store's Dataset.
    point : dict of str to object
        The grid point: every grid axis -> its value (``{}`` without grid axes).
    coord : int, default 0
        The coordinate drawn.
    max_lines : int, default ZIP_MAX_LINES
        Most intervals drawn per panel (:func:`evenly_spaced`).

    Returns
    -------
    ZipPlot

    Raises
    ------
    InputError
        ``coord`` is not one of the store's coordinates, or ``max_lines`` not an int >= 2.
    """
    coord = check_coord(ds, coord)
    max_lines = check_max_lines(max_lines)
    data = ds.sel(point) if point else ds
    checkpoint = None
    if "checkpoint" in data.dims:  # the interval at the end of the run, at the full n
        checkpoint = f"{int(data['checkpoint'].values[-1]):,}"
        data = data.isel(checkpoint=-1)
    if "level" in point:
        level = float(point["level"])
    else:
        level = float(ds.attrs.get("level", np.nan))
    methods = [str(m) for m in data["method"].values]
    panels = [zip_panel(data, m, coord) for m in methods]
    cut = any(_x_limits(p, evenly_spaced(p.count, max_lines))[1] for p in panels if p.count)
    description = _description(level, coord, checkpoint)
    asked = replicates_per_point(ds)
    counts = _counts(panels, max_lines, cut, asked, int(ds.sizes["rep"]))
    return ZipPlot(
        stem=zip_stem(point),
        caption=f"{description} {counts}",
        point=dict(point),
        panels=tuple(panels),
        title=_figure_title(ds, point, level, checkpoint, _done(panels, asked), asked),
        description=description,
        counts=counts,
        level=level,
        max_lines=max_lines,
        coord_in_title=int(ds.sizes["coord"]) > 1,
    )


def _draw_figure(plot: ZipPlot) -> Figure:
    """The matplotlib figure of a zip plot: one panel per method, the legend right."""
    panels, level = plot.panels, plot.level
    # As few rows as MAX_PANEL_COLUMNS allow, filled evenly (four methods: 2 x 2).
    n_rows = -(-len(panels) // MAX_PANEL_COLUMNS)
    n_cols = -(-len(panels) // n_rows)
    fig = SweepFigure(
        figsize=(ZIP_PANEL_SIZE[0] * n_cols + 2.2, ZIP_PANEL_SIZE[1] * n_rows + 0.6),
        layout="constrained",
    )
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharey=True)
    title = plot.title
    fig.suptitle(
        "\n".join(textwrap.wrap(title, int(TITLE_CHARS_PER_INCH * fig.get_figwidth()))) or title
    )
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    coord = panels[0].coord
    x_label = f"theta, coord {coord}" if plot.coord_in_title else "theta"
    for ax, panel in zip(axes.flat, panels, strict=False):
        _draw_panel(ax, panel, level, plot.max_lines, plot.coord_in_title)
        ax.set_xlabel(x_label)
        ax.tick_params(axis="y", which="both", labelleft=True)
    handles = [
        Line2D([], [], color=COVER_COLOR, linewidth=2),
        Line2D([], [], color=MISS_COLOR, linewidth=2),
        Line2D([], [], color="black", linestyle="--", linewidth=1),
        Patch(facecolor=BAND_COLOR, edgecolor=BAND_EDGE),
    ]
    labels = ["covers theta*", "misses theta*", "theta*", "coverage ± 2 MC se"]
    if np.isfinite(level):
        handles.insert(3, Line2D([], [], color="black", linestyle=":", linewidth=1.2))
        labels.insert(3, f"nominal {format_level(level)}")
    fig.legend(handles, labels, loc="outside right upper", fontsize="small")
    return fig


def _points(ds: xr.Dataset) -> list[dict[str, Any]]:
    """Every grid point, as axis -> value (one empty point without grid axes)."""
    axes = grid_axes(ds)
    values = [ds[a].values for a in axes]
    return [
        {a: v[i] for a, v, i in zip(axes, values, index, strict=True)}
        for index in np.ndindex(*(len(v) for v in values))
    ]


def store_zip_plots(ds: xr.Dataset, *, coord: int = 0, max_lines: int = ZIP_MAX_LINES) -> ZipPlots:
    """The zip plots of a store: one figure per grid point, one panel per method.

    A zip plot (Morris, White & Crowther 2019, section 5.2 and Figure 3) draws each
    replicate's interval as a horizontal line, ranked by the fractional centile of |z|
    (:func:`zip_distance`, :func:`fractional_centiles`), blue where it holds theta* and
    vermillion where it misses, with a dashed vertical line at theta*, a dotted horizontal
    line at the nominal level (100 x level: at nominal coverage the lines above it are
    those that miss) and a band, the observed coverage +-2 Monte-Carlo standard errors
    (Wilson's interval at 0 or 1). The replicates are those of the summary's coverage:
    done, with both bounds; coverage is against ``truth``, as in the summary. A store
    with checkpoints is drawn at the last one (the full n).

    One coordinate per figure, ``coord`` (default 0), for every method: the panel titles
    name it (for d > 1) with its coverage. Coordinate 0 does not stand for the others:
    draw another with ``coord``; the tables and the coverage figures show them all.

    Parameters
    ----------
    ds : xarray.Dataset
        The store's Dataset (:func:`ldpsim.pipeline.store.reading.load_dataset`; a lazy one is
        read one grid point at a time).
    coord : int, default 0
        The coordinate drawn, in [0, d).
    max_lines : int, default ZIP_MAX_LINES
        Most interval lines per panel (>= 2): a cell of more replicates shows this many,
        evenly spaced over the ranking, and its caption says so.

    Returns
    -------
    ZipPlots
        ``plots``: a :class:`ZipPlot` per grid point that has a done replicate (and the
        coordinate), in the store's order; ``notes``: one sentence per grid point left
        out, saying why.

    Raises
    ------
    InputError
        ``coord`` is not one of the store's coordinates, or ``max_lines`` not an int >= 2.

    References
    ----------
    Morris, T. P., White, I. R. & Crowther, M. J. (2019). Using simulation studies to
    evaluate statistical methods. Statistics in Medicine 38, 2074-2102.
    """
    coord = check_coord(ds, coord)
    max_lines = check_max_lines(max_lines)
    plots, notes = [], []
    for point in _points(ds):
        where = point_title(ds, point) or "the store"
        data = ds.sel(point) if point else ds
        if not bool(np.asarray(data["done"].values).any()):
            notes.append(f"No zip plot for {where}: no replicate is done there yet.")
            continue
        truth = data["truth"]
        while "checkpoint" in truth.dims:  # truths do not change along the run
            truth = truth.isel(checkpoint=-1)
        if not np.isfinite(float(truth.sel(coord=coord).values)):
            notes.append(
                f"No zip plot for {where}: it has no coordinate {coord} (its d is smaller)."
            )
            continue
        plots.append(zip_figure(ds, point, coord=coord, max_lines=max_lines))
    return ZipPlots(plots=plots, notes=notes)


# -- the report's zip panels: SVG, drawn from the ranked intervals -----------------------
#: One panel of the report's zip plots, in CSS px at 1:1 (the SVG's user units): four
#: side by side fit a desktop page, two a 400 px phone.
SVG_PANEL_SIZE = (240, 230)
#: Every text of an SVG panel, in CSS px at 1:1: at two panels side by side on a 400 px
#: phone (176 px or more, 0.73 of their size) still 10.3 px.
SVG_FONT_PX = 14
#: Most lines an SVG panel draws (the report's zip plots): a path segment each, so that
#: a report of many grid points stays small; evenly spaced as in the figures.
SVG_MAX_LINES = 200
#: The panel's plot area inside its box: left (y tick labels and the axis label), right,
#: bottom (x tick labels and the axis label), and the height of a title line.
SVG_MARGINS = {"left": 48, "right": 10, "bottom": 38, "title_line": 17}
#: Characters of a panel title per line (14 px text in a 240 px panel).
SVG_TITLE_CHARS = 28
#: The y axis's ticks (centiles).
CENTILE_TICKS = (0, 25, 50, 75, 100)


def _tick_text(value: float, step: float) -> str:
    """A tick label with the digits its spacing needs (matplotlib's minus sign)."""
    magnitude = int(np.floor(np.log10(step))) if step > 0 else 0
    mantissa = step / 10.0**magnitude if step > 0 else 1.0
    decimals = max(0, -magnitude + (1 if not np.isclose(mantissa, round(mantissa)) else 0))
    if abs(value) < step * 1e-9:
        value = 0.0
    return f"{value:.{decimals}f}".replace("-", "\u2212")


def panel_alt(panel: ZipPanel, coord_in_title: bool) -> str:
    """A zip panel in words, for its SVG's title (what a screen reader says)."""
    where = f", coordinate {panel.coord}" if coord_in_title else ""
    if panel.count == 0:
        return (
            f"Zip plot of {panel.method}{where}: no interval, the method failed in every "
            "done replicate."
        )
    misses = panel.count - panel.covering
    return (
        f"Zip plot of {panel.method}{where}: coverage {panel.coverage:.3f} "
        f"({panel.covering} of {panel.count}); the {panel.count} intervals ranked by the "
        f"fractional centile of |z| against theta, the {misses} that miss theta* on top."
    )


def panel_svg(panel: ZipPanel, level: float, coord_in_title: bool, max_lines: int) -> str:
    """One method's zip plot as an SVG element for the report (:data:`SVG_PANEL_SIZE`).

    What :func:`zip_figure` draws in a panel, from the same ranked intervals: at most
    ``max_lines`` of them evenly spaced over the ranking (:func:`evenly_spaced`), blue
    where they hold theta* and vermillion where they miss, each at its fractional
    centile; theta* dashed, the nominal level dotted, the coverage +-2 Monte-Carlo
    standard errors shaded; the title names the method (and coordinate) with its
    coverage. Its text is real text, :data:`SVG_FONT_PX` CSS px at 1:1
    (``data-min-text-px``), escaped.
    """
    width, height = SVG_PANEL_SIZE
    where = f", coord {panel.coord}" if coord_in_title else ""
    if panel.count:
        title = f"{panel.method}{where}: coverage {panel.coverage:.3f} "
        title += f"({panel.covering}/{panel.count})"
    else:
        title = f"{panel.method}{where}: no interval"
    lines = textwrap.wrap(title, SVG_TITLE_CHARS, break_on_hyphens=False) or [title]
    left, right = SVG_MARGINS["left"], width - SVG_MARGINS["right"]
    # Room for two title lines in every panel, so that the panels of a row line up; the
    # title's last line just above the plot.
    top = SVG_MARGINS["title_line"] * max(len(lines), 2) + 8
    bottom = height - SVG_MARGINS["bottom"]

    def y_at(centile: float) -> float:
        return bottom - centile / 100.0 * (bottom - top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" font-size="{SVG_FONT_PX}" '
        f'data-min-text-px="{SVG_FONT_PX}">',
        f"<title>{html.escape(panel_alt(panel, coord_in_title))}</title>",
    ]
    for i, line in enumerate(lines):
        out.append(
            f'<text x="{width / 2:.1f}" '
            f'y="{top - 10 - SVG_MARGINS["title_line"] * (len(lines) - 1 - i)}" '
            f'text-anchor="middle">{html.escape(line)}</text>'
        )
    if panel.count:
        shown = evenly_spaced(panel.count, max_lines)
        (lo, hi), _ = _x_limits(panel, shown)

        def x_at(value: np.ndarray | float) -> np.ndarray:
            return left + (np.clip(value, lo, hi) - lo) / (hi - lo) * (right - left)

        band_low, band_high = panel.coverage_band()
        out.append(
            f'<rect x="{left}" y="{y_at(100 * band_high):.1f}" width="{right - left}" '
            f'height="{y_at(100 * band_low) - y_at(100 * band_high):.1f}" fill="{BAND_COLOR}" '
            f'stroke="{BAND_EDGE}" stroke-width="0.8"/>'
        )
        stroke = float(np.clip((bottom - top) / shown.size, 0.5, 2.5))
        starts, ends = x_at(panel.lower[shown]), x_at(panel.upper[shown])
        heights = y_at(panel.centile[shown])
        covers = panel.covers[shown]
        for mask, color in ((covers, COVER_COLOR), (~covers, MISS_COLOR)):
            if mask.any():
                # x in whole CSS px (at most half a pixel off): a third fewer bytes.
                path = "".join(
                    f"M{a:.0f} {b:.1f}H{c:.0f}"
                    for a, b, c in zip(starts[mask], heights[mask], ends[mask], strict=True)
                )
                out.append(
                    f'<path d="{path}" stroke="{color}" stroke-width="{stroke:.2f}" fill="none"/>'
                )
        if lo <= panel.truth <= hi:
            x = float(x_at(panel.truth))
            out.append(
                f'<path d="M{x:.1f} {top}V{bottom}" stroke="#000" stroke-width="1" '
                'stroke-dasharray="4 3"/>'
            )
        ticks = MaxNLocator(nbins=4).tick_values(lo, hi)
        ticks = ticks[(ticks >= lo) & (ticks <= hi)]
        step = float(np.diff(ticks).min()) if ticks.size > 1 else abs(float(hi - lo))
        for tick in ticks:
            x = float(x_at(tick))
            out.append(f'<path d="M{x:.1f} {bottom}v4" stroke="#000" stroke-width="0.8"/>')
            out.append(
                f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">'
                f"{_tick_text(float(tick), step)}</text>"
            )
        x_label = f"theta, coord {panel.coord}" if coord_in_title else "theta"
        out.append(
            f'<text x="{(left + right) / 2:.1f}" y="{height - 3}" text-anchor="middle">'
            f"{x_label}</text>"
        )
    else:
        for i, line in enumerate(NO_INTERVAL_TEXT.split("\n")):
            out.append(
                f'<text x="{(left + right) / 2:.1f}" y="{(top + bottom) / 2 + 17 * i:.1f}" '
                f'text-anchor="middle" fill="#595959">{html.escape(line)}</text>'
            )
    if np.isfinite(level):
        out.append(
            f'<path d="M{left} {y_at(100 * level):.1f}H{right}" stroke="#000" '
            'stroke-width="1.2" stroke-dasharray="1.5 2.5"/>'
        )
    for centile in CENTILE_TICKS:
        y = y_at(centile)
        out.append(f'<path d="M{left} {y:.1f}h-4" stroke="#000" stroke-width="0.8"/>')
        out.append(f'<text x="{left - 6}" y="{y + 5:.1f}" text-anchor="end">{centile}</text>')
    out.append(
        f'<text transform="translate(14 {(top + bottom) / 2:.1f}) rotate(-90)" '
        'text-anchor="middle">centile of |z|</text>'
    )
    out.append(
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
        'fill="none" stroke="#000" stroke-width="0.8"/>'
    )
    out.append("</svg>")
    return "".join(out)
