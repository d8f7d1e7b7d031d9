"""A figure laid out again for a phone: one panel per row, the legend above them."""

from __future__ import annotations

import textwrap
import warnings
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator

from ldpsim.pipeline.report.plots import TITLE_CHARS_PER_INCH

#: The narrow figure's width in inches: at 96 CSS px per inch, 374 px, what a 400 px
#: phone's page shows at 1:1 (the report's margins leave it 376 px).
NARROW_INCHES = 3.9
#: Legend labels up to this many characters go two to a row.
TWO_COLUMN_CHARS = 16
#: Label ticks (the grid points of a dot figure's rows) longer than this many characters
#: are wrapped onto further lines, and their rows made as high as the lines need.
TICK_LABEL_CHARS = 20
#: A line of text is this many times its font size high.
LINE_SPACING = 1.3


def narrow_layout(fig: Figure, width: float = NARROW_INCHES) -> Figure | None:
    """Lay ``fig`` out again, in place, ``width`` inches wide with one panel per row.

    The visible panels keep their order (row by row) and their heights (as last drawn:
    draw or save the figure first for the heights of its layout); hidden spare
    panels go; every panel gets its tick labels (shared axes label only the outer ones),
    and label ticks longer than :data:`TICK_LABEL_CHARS` characters are wrapped (their
    panel made higher as the lines need); the figure's legends become one legend above
    the panels, in a row of its own (a later legend's title becomes an entry), and the
    title is wrapped to the new width. Drawn at 96 dots per inch its text keeps its size
    in CSS px: the report shows it at 1:1 on a phone, where the wide figure would shrink
    its text to a third.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A figure of panels with constrained layout (every ``ldpsim plot`` figure).
    width : float, default NARROW_INCHES
        The new width in inches.

    Returns
    -------
    matplotlib.figure.Figure or None
        ``fig`` itself; None where its panels do not fit ``width`` (constrained layout
        gives up: labels wider than the figure), and ``fig`` is then of no further use.
    """
    # The panels' heights as last drawn: the wide figure's once it is saved (the report
    # saves it first), else as its grid first placed them (a draw costs a second).
    panels = [ax for ax in fig.axes if ax.get_visible()]
    heights = [ax.get_position().height * fig.get_figheight() for ax in panels]
    for ax in [ax for ax in fig.axes if not ax.get_visible()]:
        fig.delaxes(ax)
    heights = [h * _wrap_tick_labels(ax, h) for ax, h in zip(panels, heights, strict=True)]
    entries, title, size = _legend_entries(fig)
    rows = [*([1.0] if entries else []), *heights]
    grid = GridSpec(len(rows), 1, figure=fig, height_ratios=rows)
    for row, ax in enumerate(panels, start=len(rows) - len(panels)):
        ax.set_subplotspec(grid[row, 0])
        ax.tick_params(which="both", labelleft=True, labelbottom=True)
    key = None
    if entries:
        # In a row of its own: a figure legend above the panels would cover the title.
        key = fig.add_subplot(grid[0, 0])
        key.axis("off")
        longest = max(len(line) for _, label in entries for line in label.splitlines())
        key.legend(
            [handle for handle, _ in entries],
            [label for _, label in entries],
            loc="center",
            ncols=2 if longest <= TWO_COLUMN_CHARS else 1,
            fontsize=size,
            title=title,
            title_fontsize=size,
            frameon=False,
        )
    text = " ".join(fig.get_suptitle().split())
    if text:
        fig.suptitle("\n".join(textwrap.wrap(text, int(TITLE_CHARS_PER_INCH * width))))
    # The legend's row as high as the legend, the panels as high as before: what the
    # layout leaves over (titles, labels) is measured at a first guess, then added.
    fig.set_size_inches(width, sum(rows) + 3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.draw_without_rendering()
    if any("constrained_layout not applied" in str(w.message) for w in caught):
        return None
    if key is not None:
        rows[0] = key.get_legend().get_window_extent().height / fig.dpi + 0.05
    drawn = sum(ax.get_position().height for ax in [*panels, key] if ax is not None)
    fig.set_size_inches(width, fig.get_figheight() * (1 - drawn) + sum(rows))
    grid.set_height_ratios(rows)
    return fig


def _wrap_tick_labels(ax: Axes, height: float) -> float:
    """Wrap the y tick labels of ``ax`` that are words set by hand (a dot figure's grid
    points: fixed ticks, plain text, not numbers) longer than :data:`TICK_LABEL_CHARS`;
    the factor by which the panel, ``height`` inches high, must grow for their lines (1
    where none is)."""
    if not isinstance(ax.yaxis.get_major_locator(), FixedLocator):
        return 1.0
    ticks = list(ax.get_yticks())
    # From the formatter: a shared axis's hidden labels are drawn as "".
    labels = list(ax.yaxis.get_major_formatter().format_ticks(ticks))
    if any(text.startswith("$") for text in labels):
        return 1.0  # numbers (mathtext), not words
    if all(len(text) <= TICK_LABEL_CHARS for text in labels):
        return 1.0
    wrapped = ["\n".join(textwrap.wrap(text, TICK_LABEL_CHARS)) or text for text in labels]
    ax.set_yticks(ticks, wrapped)
    lines = max(text.count("\n") + 1 for text in wrapped)
    points = ax.yaxis.get_major_ticks()[0].label1.get_fontsize()
    needed = lines * points * LINE_SPACING / 72 * len(labels)
    return max(1.0, needed / height)


def _legend_entries(fig: Figure) -> tuple[list[tuple[Any, str]], str | None, Any]:
    """The handles and labels of the figure's legends, which are removed; the first
    one's title, and their font size. A later legend's title is an entry of its own."""
    entries: list[tuple[Any, str]] = []
    title, size = None, "small"
    for index, legend in enumerate(list(fig.legends)):
        texts = legend.get_texts()
        if texts:
            size = texts[0].get_fontsize()
        heading = legend.get_title().get_text()
        if index == 0:
            title = heading or None
        elif heading:
            entries.append((Line2D([], [], linestyle="none"), f"{heading}:"))
        entries += list(zip(legend.legend_handles, [t.get_text() for t in texts], strict=True))
        legend.remove()
    return entries, title, size
