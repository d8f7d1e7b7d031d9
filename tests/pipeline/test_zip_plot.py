"""Zip plots (Morris, White & Crowther 2019): the ranking, the counts, the cap, the CLI."""

from __future__ import annotations

import dataclasses
import html
import json
import re

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from test_plot_text import mixed_store

from ldpsim.pipeline.api import plot
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.report.plots import MAX_FIGURE_INCHES
from ldpsim.pipeline.report.report import CSS_PX_PER_INCH, smallest_text_points
from ldpsim.pipeline.report.zip_plot import (
    COVER_COLOR,
    MISS_COLOR,
    SVG_MARGINS,
    SVG_MAX_LINES,
    SVG_PANEL_SIZE,
    ZIP_MAX_LINES,
    _tick_text,
    panel_svg,
    store_zip_plots,
    zip_distance,
    zip_figure,
    zip_panel,
    zip_stem,
)
from ldpsim.pipeline.summary.summary import summarize

#: The smallest figure text a reader gets at 100% zoom, in CSS px (the report's rule).
MIN_TEXT_PX = 10.0
#: The grid point of grid_store drawn in most tests.
POINT = {"tau": 0.5, "n": 100}


def drawn_lines(ax) -> dict[str, np.ndarray]:
    """The interval lines of a panel by colour: 'cover' and 'miss' -> (k, 3) arrays of
    (lower, upper, centile)."""
    out = {"cover": np.empty((0, 3)), "miss": np.empty((0, 3))}
    for collection in ax.collections:
        if not isinstance(collection, LineCollection):
            continue
        color = tuple(collection.get_colors()[0])
        name = {to_rgba(COVER_COLOR): "cover", to_rgba(MISS_COLOR): "miss"}[color]
        segments = collection.get_segments()
        out[name] = np.array([(s[0][0], s[1][0], s[0][1]) for s in segments])
    return out


def test_the_intervals_that_miss_are_ranked_on_top():
    ds = syn.grid_store()
    point = ds.sel(POINT)
    missed = 0
    for method in syn.METHODS:
        for coord in range(syn.D):
            panel = zip_panel(point, method, coord)
            at = point.sel({"method": method, "coord": coord})
            lower, upper = at["lower"].values, at["upper"].values
            truth = float(at["truth"])
            # The replicates of the summary: done, with bounds (bb failed in one; the
            # not-done replicate with values is left out).
            expected = [r for r in range(syn.DONE) if np.isfinite(lower[r])]
            assert sorted(panel.rep.tolist()) == expected
            assert syn.GARBAGE_REP not in panel.rep
            assert (method == "bb") == (syn.BB_FAILED_REP not in panel.rep)
            # Ranked by |midpoint - truth| / half-length (the store has no method_estimate).
            rank = np.abs((lower + upper) / 2 - truth) / ((upper - lower) / 2)
            np.testing.assert_allclose(panel.distance, rank[panel.rep])
            assert np.all(np.diff(panel.distance) >= 0)
            # The misses are exactly the top of the ranking.
            misses = panel.count - panel.covering
            missed += misses
            assert not panel.covers[panel.count - misses :].any()
            assert panel.covers[: panel.count - misses].all()
            covers = (lower <= truth) & (truth <= upper)
            np.testing.assert_array_equal(panel.covers, covers[panel.rep])
            assert panel.centred
    assert missed > 0  # the check saw misses (the oracle covers coordinate 1 always)


def test_the_covering_count_is_the_summary_s():
    for ds in (syn.grid_store(), syn.checkpoint_store(reps=3), syn.early_failure_store()):
        summary = summarize(ds, diagnostics=False)
        if "checkpoint" in summary.dims:
            summary = summary.isel(checkpoint=-1)  # what the zip plot draws
        drawn = store_zip_plots(ds)
        assert drawn.plots
        for zip_plot in drawn.plots:
            cell = summary.sel(zip_plot.point) if zip_plot.point else summary
            for panel in zip_plot.panels:
                counts = cell.sel({"method": panel.method, "coord": panel.coord})
                assert panel.count == int(counts["n_done"])
                assert panel.covering == round(float(counts["coverage"]) * panel.count)
                assert panel.coverage == pytest.approx(float(counts["coverage"]))


def test_the_figure_draws_every_interval_at_its_centile():
    ds = syn.grid_store()
    zip_plot = zip_figure(ds, POINT, coord=0)
    fig = zip_plot.figure
    assert zip_plot.stem == "zip-tau=0.5_n=100"
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(syn.METHODS)
    for ax, panel in zip(panels, zip_plot.panels, strict=True):
        lines = drawn_lines(ax)
        assert len(lines["cover"]) == panel.covering
        assert len(lines["miss"]) == panel.count - panel.covering
        # Every cover below every miss, at the centiles 100 (rank - 1/2) / R.
        assert lines["cover"][:, 2].max() < lines["miss"][:, 2].min()
        centiles = np.sort(np.concatenate([lines["cover"][:, 2], lines["miss"][:, 2]]))
        np.testing.assert_allclose(centiles, 100 * (np.arange(panel.count) + 0.5) / panel.count)
        # The panel names the method, the coordinate and its coverage.
        title = " ".join(ax.get_title().split())
        assert title == (
            f"{panel.method}, coord 0: coverage {panel.coverage:.3f} "
            f"({panel.covering}/{panel.count})"
        )
        assert ax.get_ylim() == (0, 100)
        assert ax.get_xlabel() == "theta, coord 0"
    # The truth, the nominal level and the band are in the legend.
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == [
        "covers theta*",
        "misses theta*",
        "theta*",
        "nominal 90%",
        "coverage ± 2 MC se",
    ]
    # Readable at 100% zoom in the report: not wider than the other figures, and its
    # smallest text at 10 px or more at 96 px per inch.
    assert fig.get_figwidth() <= MAX_FIGURE_INCHES
    assert smallest_text_points(fig) * CSS_PX_PER_INCH / 72 >= MIN_TEXT_PX
    caption = zip_plot.caption
    assert "Morris, White & Crowther 2019" in caption
    assert "bb 35 of 36, oracle 36 of 36" in caption
    assert "nominal level at centile 90" in caption


def test_at_most_max_lines_per_panel():
    ds = syn.wide_store(1, reps=ZIP_MAX_LINES + 500)
    zip_plot = zip_figure(ds, {"n": 100})
    for ax, panel in zip(zip_plot.figure.axes, zip_plot.panels, strict=True):
        lines = drawn_lines(ax)
        drawn = np.concatenate([lines["cover"][:, 2], lines["miss"][:, 2]])
        assert panel.count > ZIP_MAX_LINES and len(drawn) == ZIP_MAX_LINES
        # Evenly over the ranking: the lowest and the highest centile are drawn.
        assert drawn.min() == pytest.approx(panel.centile[0])
        assert drawn.max() == pytest.approx(panel.centile[-1])
        # A miss drawn for about every miss in R / cap.
        share = len(lines["miss"]) / ZIP_MAX_LINES
        assert share == pytest.approx(1 - panel.coverage, abs=2 / ZIP_MAX_LINES)
    assert f"At most {ZIP_MAX_LINES:,} lines per panel (bb, oracle)" in zip_plot.caption
    # A smaller cap; and a cell of fewer replicates is drawn whole, without the sentence.
    small = zip_figure(syn.grid_store(), POINT, max_lines=10)
    assert all(
        len(np.concatenate(list(drawn_lines(ax).values()))) == 10 for ax in small.figure.axes
    )
    whole = zip_figure(syn.grid_store(), POINT)
    assert "At most" not in whole.caption


def test_asymmetric_intervals_are_ranked_by_the_half_length_toward_the_truth():
    ds = syn.point_store()
    # An estimate off the midpoint: a percentile interval.
    estimate = ((ds["lower"] + 3 * ds["upper"]) / 4).transpose("method", "rep", "coord")
    ds["method_estimate"] = estimate
    panel = zip_panel(ds, "bb", 0)
    at = ds.sel({"method": "bb", "coord": 0})
    c, truth = at["method_estimate"].values, float(at["truth"])
    side = np.where(truth < c, c - at["lower"].values, at["upper"].values - c)
    np.testing.assert_allclose(panel.distance, (np.abs(c - truth) / side)[panel.rep])
    # Measured on the truth's side, every miss ranks above every interval that covers.
    assert not panel.covers.all() and panel.covers.any()
    assert panel.distance[~panel.covers].min() > 1 >= panel.distance[panel.covers].max()
    assert np.all(panel.covers[: panel.covers.sum()])
    assert not panel.centred
    assert (
        "The intervals of bb, oracle are not centred at the estimate" in zip_figure(ds, {}).caption
    )


def test_zip_distance_at_the_edges():
    lower = np.array([1.0, 1.0, 0.0, -np.inf, 2.0])
    upper = np.array([1.0, 1.0, 4.0, np.inf, 3.0])
    got = zip_distance(lower, upper, 1.0)
    # A point at the truth, a point elsewhere (h = 0), |2 - 1| / 2, unbounded, a miss.
    np.testing.assert_array_equal(got[[0, 2, 3]], [0.0, 0.5, 0.0])
    assert got[4] == 3.0
    assert zip_distance(np.array([2.0]), np.array([2.0]), 1.0)[0] == np.inf


def test_grid_points_without_a_replicate_or_the_coordinate_get_a_note():
    drawn = store_zip_plots(syn.grid_store())
    assert [p.stem for p in drawn.plots] == [
        "zip-tau=0.5_n=100",
        "zip-tau=0.5_n=1e4",
        "zip-tau=0.9_n=100",
    ]
    assert drawn.notes == ["No zip plot for tau=0.9, n=1e4: no replicate is done there yet."]
    # Cases of d = 1 and 2: coordinate 1 is drawn where a case has it.
    ds = mixed_store({"mean": 1, "pair": 2}, reps=4).isel(n=[0])
    drawn = store_zip_plots(ds, coord=1)
    assert [p.stem for p in drawn.plots] == ["zip-case=pair_n=1e4"]
    # The case is named by the parameter its sweep's cases vary (d), as in the figures.
    assert drawn.notes == [
        "No zip plot for d=1, n=1e4: it has no coordinate 1 (its d is smaller)."
    ]
    with pytest.raises(InputError, match=r"must be an int in \[0, 2\).* Got 2\."):
        store_zip_plots(ds, coord=2)


def test_case_labels_differing_in_punctuation_alone_keep_their_own_files():
    stems = [zip_stem({"case": label, "n": 1000}) for label in ("a&b", "a|b", "a-b")]
    assert len(set(stems)) == 3, stems
    assert stems[0].startswith("zip-case=a-b_n=1e3-") and stems[2] == "zip-case=a-b_n=1e3"


def test_a_partial_grid_point_says_so_in_its_caption_and_title():
    # grid_store: 36 of the sweep's 40 replicates done at every grid point but one.
    caption = zip_figure(syn.grid_store(), POINT).caption
    assert "* A partial grid point: 36 of its 40 replicates are done, and the plot" in caption
    selected = zip_figure(syn.grid_store().isel(rep=slice(0, 30)), POINT).caption
    assert "30 of its 40 replicates are done (10 not in the selection of replicates)" in selected
    complete = syn.grid_store()
    complete["done"][:] = True
    assert "partial" not in zip_figure(complete, POINT).caption
    # The title says so too: the PNG of `ldpsim plot --zip` has no caption (before: no
    # mark in the PNG; only the report's caption and alt text said it).
    assert zip_figure(syn.grid_store(), POINT).title.endswith(
        ", partial*: 36 of 40 replicates done"
    )
    assert "partial" not in zip_figure(complete, POINT).title


def test_a_checkpoint_store_is_drawn_at_its_last_checkpoint():
    zip_plot = store_zip_plots(syn.checkpoint_store(reps=3)).plots[0]
    assert zip_plot.stem == "zip"
    assert "n=1,000,000 (last checkpoint)" in zip_plot.figure.get_suptitle()
    assert "at the last checkpoint (n = 1,000,000)" in zip_plot.caption


def test_plot_api_adds_the_zip_plots():
    figures = plot(syn.grid_store(), "all", zip_plots=True)
    assert [k for k in figures if k.startswith("zip")] == [
        "zip-tau=0.5_n=100",
        "zip-tau=0.5_n=1e4",
        "zip-tau=0.9_n=100",
    ]
    assert not any(k.startswith("zip") for k in plot(syn.grid_store(), "all"))
    with pytest.raises(InputError, match="give kind='all'"):
        plot(syn.grid_store(), "coverage", zip_plots=True)


@pytest.fixture
def grid_store_path(tmp_path):
    store = tmp_path / "s.zarr"
    syn.save_store(syn.grid_store(), store)
    return store


def test_plot_zip_writes_a_file_per_grid_point(grid_store_path, tmp_path, capsys, monkeypatch):
    # The other figures are test_plots.py's: not drawn here, to keep the test fast.
    monkeypatch.setattr("ldpsim.pipeline.report.plots.store_figures", lambda *args, **kwargs: {})
    out = tmp_path / "figures"
    assert main(["plot", str(grid_store_path), "--out", str(out), "--zip"]) == 0
    captured = capsys.readouterr()
    stems = ["zip-tau=0.5_n=100", "zip-tau=0.5_n=1e4", "zip-tau=0.9_n=100"]
    written = {p.name for p in out.iterdir()}
    assert {f"{stem}.{ext}" for stem in stems for ext in ("png", "pdf")} <= written
    for stem in stems:
        assert str(out / f"{stem}.png") in captured.out.splitlines()
    # The empty grid point: a note, not a crash.
    assert captured.err.strip() == (
        "ldpsim: note: No zip plot for tau=0.9, n=1e4: no replicate is done there yet."
    )
    # Without --zip, no zip plot; a coordinate the store lacks is one line, exit 2.
    plain = tmp_path / "plain"
    assert main(["plot", str(grid_store_path), "--out", str(plain)]) == 0
    assert not [p for p in plain.iterdir() if p.name.startswith("zip")]
    capsys.readouterr()
    assert main(["plot", str(grid_store_path), "--zip", "--zip-coord", "2"]) == 2
    assert "--zip-coord" in capsys.readouterr().err


def test_plot_warns_of_figures_in_out_that_it_did_not_draw(
    grid_store_path, tmp_path, capsys, monkeypatch
):
    # A hunt (2026-12-01, figures): an earlier plot's files stayed beside the new ones in
    # --out, unmentioned, and a reader took them for this store's. They stay (they may be
    # the user's), and the plot says so on stderr; files of other names are not listed.
    monkeypatch.setattr("ldpsim.pipeline.report.plots.store_figures", lambda *args, **kwargs: {})
    out = tmp_path / "figures"
    assert main(["plot", str(grid_store_path), "--out", str(out), "--zip"]) == 0
    (out / "notes.txt").write_text("mine")
    (out / "mine.png").write_bytes(b"")
    capsys.readouterr()
    before = sorted(p.name for p in out.iterdir())
    assert main(["plot", str(grid_store_path), "--out", str(out)]) == 0  # no --zip now
    err = capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing removed
    assert err.startswith(f"ldpsim: warning: {str(out)!r} also holds 6 figure file(s) this plot")
    assert "(zip-tau=0.5_n=100.pdf, zip-tau=0.5_n=100.png, " in err and "mine.png" not in err
    assert len(err.strip().splitlines()) == 1, err
    # Drawing them again: nothing is left over, nothing said.
    assert main(["plot", str(grid_store_path), "--out", str(out), "--zip"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_report_zip_has_its_section_with_captions_and_alt_text(
    grid_store_path, tmp_path, monkeypatch
):
    # The other figures are test_report.py's: not drawn here, to keep the test fast.
    monkeypatch.setattr("ldpsim.pipeline.report.report.store_figures", lambda *args, **kwargs: {})
    page = tmp_path / "zip.html"
    assert main(["report", str(grid_store_path), "--out", str(page), "--zip"]) == 0
    text = page.read_text()
    start = text.index('<h3 id="zip-plots">Zip plots</h3>')
    section = text[start : text.index("</section>", start)]
    assert '<a href="#zip-plots">Zip plots</a>' in text
    # What every zip plot shows, once, above them.
    intro = html.unescape(re.search(r"<p>One zip plot per grid point.*?</p>", section).group(0))
    for words in ("horizontal line", "fractional centile of |z|", "blue where it holds theta*"):
        assert words in intro
    figures = re.findall(r'<figure class="zip".*?</figure>', section, re.S)
    assert len(figures) == 3
    for figure in figures:
        # A heading, the legend, an SVG panel per method with its text as text.
        # grid_store's points are partial (36 of the sweep's 40 replicates done).
        heading = r"<h4>synthetic: zip plot, tau=[^<]+, 90% intervals, partial\*: 36 of 40 "
        assert re.search(heading + r"replicates done</h4>", figure)
        assert "nominal 90%" in figure and "misses theta*" in figure
        panels = re.findall(r"<svg .*?</svg>", figure, re.S)
        assert len(panels) == len(syn.METHODS)
        for panel in panels:
            alt = html.unescape(re.search(r"<title>(.*?)</title>", panel).group(1))
            assert alt.startswith(("Zip plot of bb, coordinate 0", "Zip plot of oracle"))
            assert " against theta" in alt
            assert float(re.search(r'data-min-text-px="([^"]+)"', panel).group(1)) >= 10
        caption = html.unescape(re.search(r"<figcaption[^>]*>(.*?)</figcaption>", figure).group(1))
        assert caption.startswith("Drawn from the done replicates with an interval: bb ")
        assert "ldpsim plot --zip" in caption
    assert "No zip plot for tau=0.9, n=1e4: no replicate is done there yet." in section
    # Without --zip, the page has no zip section.
    plain = tmp_path / "plain.html"
    assert main(["report", str(grid_store_path), "--out", str(plain)]) == 0
    assert "zip-plots" not in plain.read_text() and "Zip plots" not in plain.read_text()


def svg_lines(panel: str) -> dict[str, np.ndarray]:
    """The interval lines of an SVG panel by colour: 'cover' and 'miss' -> (k, 3) arrays
    of (x0, x1, y) in the panel's px."""
    out = {"cover": np.empty((0, 3)), "miss": np.empty((0, 3))}
    for path, color in re.findall(r'<path d="([^"]+)" stroke="(#[0-9A-Fa-f]{6})"', panel):
        name = {COVER_COLOR: "cover", MISS_COLOR: "miss"}.get(color)
        if name:
            segments = re.findall(r"M([\d.]+) ([\d.]+)H([\d.]+)", path)
            out[name] = np.array([(float(a), float(c), float(b)) for a, b, c in segments])
    return out


@pytest.mark.parametrize("reps", [36, SVG_MAX_LINES + 50])
def test_an_svg_panel_draws_what_the_figure_draws(reps):
    ds = syn.wide_store(1, reps=reps) if reps > 40 else syn.grid_store()
    point = {"n": 100} if reps > 40 else POINT
    plot = zip_figure(ds, point, max_lines=SVG_MAX_LINES)
    for ax, panel in zip(plot.figure.axes, plot.panels, strict=True):
        svg = panel_svg(panel, plot.level, plot.coord_in_title, SVG_MAX_LINES)
        drawn, figure = svg_lines(svg), drawn_lines(ax)
        # The same lines in each colour (at most SVG_MAX_LINES, evenly spaced), each at
        # its centile: the covers below the misses, y down from the top in SVG.
        for name in ("cover", "miss"):
            assert len(drawn[name]) == len(figure[name])
        assert len(drawn["cover"]) + len(drawn["miss"]) == min(panel.count, SVG_MAX_LINES)
        if len(drawn["miss"]):
            assert drawn["miss"][:, 2].max() < drawn["cover"][:, 2].min()
        # Each line as long as its interval on one scale, its ends in whole px (each at
        # most half a px off).
        low, high = ax.get_xlim()
        width = SVG_PANEL_SIZE[0] - SVG_MARGINS["left"] - SVG_MARGINS["right"]
        lengths = drawn["cover"][:, 1] - drawn["cover"][:, 0]
        expected = (figure["cover"][:, 1] - figure["cover"][:, 0]) * width / (high - low)
        assert np.abs(lengths - expected).max() <= 1.0 + 1e-9
        title = html.unescape(re.search(r"<title>(.*?)</title>", svg).group(1))
        assert f"coverage {panel.coverage:.3f} ({panel.covering} of {panel.count})" in title


def remedies_shaped_store(reps: int = 200) -> xr.Dataset:
    """remedies' grid (case x eps x n: 2 x 3 x 5 grid points, bb, bb_t, sn and oracle,
    d = 1), ``reps`` replicates: Wald-like intervals of a normal estimate whose se
    shrinks with n and eps, the methods' lengths apart as remedies' are."""
    rng = np.random.default_rng(24024)
    grid = {
        "case": ["mean", "quantile-tau0.5"],
        "eps": [0.5, 1.0, 2.0],
        "n": [100, 1_000, 10_000, 100_000, 1_000_000],
    }
    methods = ["bb", "bb_t", "sn", "oracle"]
    shape = tuple(len(v) for v in grid.values())
    se = 1.0 / (np.array(grid["eps"])[:, None] * np.sqrt(np.array(grid["n"]))[None, :])
    se = np.broadcast_to(se, shape)[..., None, None]  # (case, eps, n, rep, coord)
    estimate = se * rng.standard_normal((*shape, reps, 1))
    scale = np.array([0.8, 1.1, 1.05, 1.0])[:, None, None]  # per method: bb too short
    half = 1.645 * se[..., None, :, :] * scale * rng.uniform(0.8, 1.2, (*shape, 4, reps, 1))
    lower, upper = estimate[..., None, :, :] - half, estimate[..., None, :, :] + half
    dims = tuple(grid)
    done = np.ones((*shape, reps), dtype=bool)
    ds = xr.Dataset(
        {
            "estimate": ((*dims, "rep", "coord"), estimate),
            "lower": ((*dims, "method", "rep", "coord"), lower),
            "upper": ((*dims, "method", "rep", "coord"), upper),
            "truth": ((*dims, "coord"), np.zeros((*shape, 1))),
            "done": ((*dims, "rep"), done),
            "failed": ((*dims, "rep"), ~done),
            "method_failed": ((*dims, "method", "rep"), np.zeros((*shape, 4, reps), bool)),
            "seconds": ((*dims, "rep"), np.full(done.shape, 0.01)),
            "job_id": ((*dims, "rep"), np.zeros(done.shape, dtype=np.int64)),
        },
        coords={
            "case": np.array(grid["case"], dtype=object),
            "eps": grid["eps"],
            "n": np.array(grid["n"], dtype=np.int64),
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": [0],
        },
    )
    sweep = json.loads(syn.sweep_attr(grid, {}, methods, reps))
    sweep.update(name="remedies-shaped", cases={"mean": {}, "quantile-tau0.5": {"tau": 0.5}})
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep), rep_chunk=reps, versions="{}")
    return ds


#: The most a ``--zip`` report may weigh (issue 43: remedies' was 8 MB).
MAX_ZIP_REPORT_BYTES = 2_000_000


def test_a_zip_report_of_remedies_shape_stays_under_2_mb(tmp_path):
    store = tmp_path / "remedies-shaped.zarr"
    syn.save_store(remedies_shaped_store(), store)
    page = tmp_path / "report.html"
    assert main(["report", str(store), "--out", str(page), "--zip"]) == 0
    text = page.read_text()
    assert text.count('<figure class="zip"') == 30  # every grid point's
    assert text.count("<svg ") == 30 * 4  # a panel per method
    assert page.stat().st_size < MAX_ZIP_REPORT_BYTES, page.stat().st_size


def test_zip_coord_needs_zip(grid_store_path, capsys):
    assert main(["report", str(grid_store_path), "--zip-coord", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "ldpsim: error: report: --zip-coord chooses the zip plots' coordinate; add --zip."
    )
    # The same in Python.
    from ldpsim.pipeline.api import plot

    with pytest.raises(InputError, match=r"give zip_plots=True with it\. Got zip_coord=1"):
        plot(syn.grid_store(), "all", zip_coord=1)


def test_a_store_without_a_done_replicate_gives_notes_only():
    ds = syn.grid_store()
    ds["done"] = xr.zeros_like(ds["done"])
    drawn = store_zip_plots(ds)
    assert drawn.plots == [] and len(drawn.notes) == 4


def test_the_panels_draw_the_truth_the_level_the_band_and_the_axes_of_their_numbers():
    # A mutation hunt (2026-12-02, zip_plot.py line by line): the band's height, the
    # truth's and the nominal level's lines, the y ticks, the theta axis and the grid of
    # panels could all be wrong with every test passing.
    zip_plot = zip_figure(syn.grid_store(), POINT, coord=0)
    fig = zip_plot.figure
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(fig.axes) == len(panels) == 2
    # Two methods: one row, side by side.
    assert [ax.get_subplotspec().rowspan.start for ax in panels] == [0, 0]
    for ax, panel in zip(panels, zip_plot.panels, strict=True):
        # The band: the coverage +-2 se, cut at 1 (bb covers 35 of 35 here: Wilson's).
        p, count = panel.coverage, panel.count
        se = np.sqrt(p * (1 - p) / count)
        expected = (p - 2 * se, min(p + 2 * se, 1.0)) if 0 < p < 1 else (count / (count + 4), 1)
        assert panel.coverage_band() == pytest.approx(expected)
        (band,) = ax.patches
        span = (band.get_y(), band.get_y() + band.get_height())
        assert span == pytest.approx((100 * expected[0], 100 * expected[1]))
        # theta* dashed and the nominal level dotted, where they are.
        dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
        dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
        assert list(dashed[0].get_xdata()) == [panel.truth, panel.truth]
        assert list(dotted[0].get_ydata()) == [100 * syn.LEVEL, 100 * syn.LEVEL]
        assert list(ax.get_yticks()) == [0, 25, 50, 75, 100]
        # The theta axis: every bound and theta* (fewer than 200 replicates: no tail
        # left out), 5% of the range either side.
        lo = min(panel.truth, panel.lower.min())
        hi = max(panel.truth, panel.upper.max())
        assert ax.get_xlim() == pytest.approx((lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)))
    assert "theta axis leaves out" not in zip_plot.caption
    # Every interval missing on one side: theta* stays on the axis.
    far = syn.grid_store()
    far["truth"] = far["truth"] + 100.0
    ax = zip_figure(far, POINT).figure.axes[0]
    assert ax.get_xlim()[0] < float(far["truth"].sel(POINT).sel(coord=0)) < ax.get_xlim()[1]
    # A level of the grid point's, where the store sweeps it.
    leveled = syn.grid_store().expand_dims(level=[0.95])
    plot95 = zip_figure(leveled, {**POINT, "level": 0.95})
    dotted = [line for line in plot95.figure.axes[0].lines if line.get_linestyle() == ":"]
    assert plot95.level == 0.95 and list(dotted[0].get_ydata()) == [95.0, 95.0]
    # One miss in 36: the band is cut at a coverage of 1.
    one_miss = dataclasses.replace(
        zip_plot.panels[1],
        covers=np.arange(36) < 35,
        rep=np.arange(36),
        lower=np.zeros(36),
        upper=np.ones(36),
        distance=np.linspace(0, 2, 36),
    )
    p = 35 / 36
    assert one_miss.coverage_band() == pytest.approx((p - 2 * np.sqrt(p * (1 - p) / 36), 1.0))
    # Five methods: 2 rows of 3, the sixth panel hidden.
    five = dataclasses.replace(zip_plot, panels=zip_plot.panels * 2 + zip_plot.panels[:1])
    assert [ax.get_visible() for ax in five.figure.axes] == [True] * 5 + [False]
    # Three methods: one row of three, no empty panel; four: 2 x 2, no empty panel.
    for count, rows in ((3, [0, 0, 0]), (4, [0, 0, 1, 1])):
        ds = syn.checkpoint_store(reps=3).isel(method=slice(0, count))
        fig = zip_figure(ds, {}).figure
        assert [ax.get_subplotspec().rowspan.start for ax in fig.axes if ax.get_visible()] == rows
        assert len([ax for ax in fig.axes if ax.get_visible()]) == count


def test_the_theta_axis_leaves_out_the_extreme_tails_and_says_so():
    ds = syn.wide_store(1, reps=400)
    # One interval a hundred times as wide as the others, upward; one downward.
    ds["upper"][0, 1, 5, 0] = 100.0
    ds["lower"][0, 1, 7, 0] = -100.0
    plot = zip_figure(ds, {"n": 100})
    for ax, panel in zip(plot.figure.axes, plot.panels, strict=True):
        lo, hi = ax.get_xlim()
        tail = int(np.floor(0.005 * panel.count))  # 2 of 399 or 400
        width = hi - lo
        assert lo == pytest.approx(np.sort(panel.lower)[tail] - width * 0.05 / 1.1)
        assert hi == pytest.approx(np.sort(panel.upper)[-1 - tail] + width * 0.05 / 1.1)
    assert -50 < plot.figure.axes[1].get_xlim()[0] < plot.figure.axes[1].get_xlim()[1] < 50
    assert "theta axis leaves out the most extreme bounds" in plot.caption
    # Only an upper bound past the axis: still cut, and said.
    ds = syn.wide_store(1, reps=400)
    ds["upper"][0, 1, 5, 0] = 100.0
    ds["upper"][0, 1, 6, 0] = 100.0
    assert "theta axis leaves out" in zip_figure(ds, {"n": 100}).caption


def test_a_bound_at_the_truth_or_a_single_bound_counts_as_in_the_summary():
    # The summary covers where lower <= theta* <= upper and counts a replicate with both
    # bounds only: the zip plot must agree at the edges.
    ds = syn.grid_store()
    at = {**POINT, "method": "oracle", "coord": 0}
    truth = float(ds["truth"].sel(POINT).sel(coord=0))
    ds["upper"].loc[{**at, "rep": 3}] = truth  # upper bound exactly at theta*
    ds["lower"].loc[{**at, "rep": 3}] = truth - 1.0
    ds["upper"].loc[{**at, "rep": 5}] = np.nan  # one bound only
    panel = zip_panel(ds.sel(POINT), "oracle", 0)
    cell = summarize(ds, diagnostics=False).sel(POINT).sel({"method": "oracle", "coord": 0})
    assert panel.count == int(cell["n_done"]) == syn.DONE - 1
    assert 5 not in panel.rep
    assert panel.covers[list(panel.rep).index(3)]
    assert panel.coverage == pytest.approx(float(cell["coverage"]))


def test_zip_distance_of_an_estimate_at_a_bound_and_the_centring_check():
    # An estimate at the lower bound is the interval's c (not the midpoint): theta* = 1
    # above it, h = upper - c = 4.
    got = zip_distance(np.array([0.0]), np.array([4.0]), 1.0, centre=np.array([0.0]))
    assert got[0] == 0.25
    # An estimate 1% of the half-length off the midpoint: not centred.
    ds = syn.point_store()
    ds["method_estimate"] = (
        (ds["lower"] + ds["upper"]) / 2 + 0.01 * (ds["upper"] - ds["lower"]) / 2
    ).transpose("method", "rep", "coord")
    assert not zip_panel(ds, "bb", 0).centred
    ds["method_estimate"] = ((ds["lower"] + ds["upper"]) / 2).transpose("method", "rep", "coord")
    assert zip_panel(ds, "bb", 0).centred
    with pytest.raises(InputError, match=r"'max_lines' parameter .* int >= 2\. Got 1\."):
        zip_figure(syn.grid_store(), POINT, max_lines=1)
    # A cap equal to the count draws every line and does not say it capped.
    assert "At most" not in zip_figure(syn.grid_store(), POINT, max_lines=syn.DONE).caption


def test_an_svg_panel_draws_the_truth_the_level_the_band_and_its_ticks():
    plot = zip_figure(syn.grid_store(), POINT)
    width, height = SVG_PANEL_SIZE
    left, right = SVG_MARGINS["left"], width - SVG_MARGINS["right"]
    bottom = height - SVG_MARGINS["bottom"]
    top = SVG_MARGINS["title_line"] * 2 + 8
    for ax, panel in zip(plot.figure.axes, plot.panels, strict=True):
        svg = panel_svg(panel, plot.level, plot.coord_in_title, SVG_MAX_LINES)
        low, high = ax.get_xlim()

        def y_at(centile):
            return bottom - centile / 100 * (bottom - top)

        band_low, band_high = panel.coverage_band()
        y, h = map(
            float,
            re.search(
                r'<rect x="\d+" y="([\d.]+)" width="\d+" height="([\d.]+)" fill="#e6e6e6"', svg
            ).groups(),
        )
        assert y == pytest.approx(y_at(100 * band_high), abs=0.06)
        assert y + h == pytest.approx(y_at(100 * band_low), abs=0.11)
        x = float(
            re.search(r'<path d="M([\d.]+) [\d.]+V[\d.]+" [^>]*stroke-dasharray="4 3"', svg).group(
                1
            )
        )
        assert x == pytest.approx(
            left + (panel.truth - low) / (high - low) * (right - left), abs=0.06
        )
        nominal = float(
            re.search(r'<path d="M\d+ ([\d.]+)H\d+" [^>]*stroke-dasharray="1.5 2.5"', svg).group(1)
        )
        assert nominal == pytest.approx(y_at(100 * plot.level), abs=0.06)
        # The y ticks' labels, bottom to top; the x ticks' those of the figure.
        assert re.findall(r'text-anchor="end">(\d+)</text>', svg) == ["0", "25", "50", "75", "100"]
        plot.figure.canvas.draw()
        shown = [
            t.get_text()
            for t, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
            if low <= v <= high
        ]
        svg_ticks = re.findall(
            rf'<text x="[\d.]+" y="{bottom + 18}" text-anchor="middle">([^<]+)</text>', svg
        )
        assert svg_ticks == shown
        assert "theta, coord 0</text>" in svg
        alt = html.unescape(re.search(r"<title>(.*?)</title>", svg).group(1))
        assert f"the {panel.count - panel.covering} that miss theta* on top" in alt
    # A tick label has the digits its spacing needs: 0.25 apart, two.
    assert [_tick_text(v, 0.25) for v in (-0.25, 0.0, 0.5)] == ["\u22120.25", "0.00", "0.50"]
    assert _tick_text(20.0, 20.0) == "20" and _tick_text(0.3, 0.1) == "0.3"
    # A method label with markup is text, not markup.
    odd = zip_panel(syn.grid_store().sel(POINT), "bb", 0)
    odd = type(odd)(**{**odd.__dict__, "method": "a<b&c"})
    svg = panel_svg(odd, plot.level, True, SVG_MAX_LINES)
    assert "a<b" not in svg and "a&lt;b&amp;c" in svg


def test_the_lines_over_the_band_keep_3_to_1_against_it():
    # WCAG 2.1's 1.4.11 for graphical objects. Before: a miss's vermillion line over the
    # 0.8 grey band (where the misses lie, at the top) was 2.4:1 against it.
    from ldpsim.pipeline.report.plots import contrast_ratio
    from ldpsim.pipeline.report.zip_plot import BAND_COLOR, BAND_EDGE, COVER_COLOR, MISS_COLOR

    for line in (COVER_COLOR, MISS_COLOR):
        assert contrast_ratio(line, BAND_COLOR) >= 3.0, line
        assert contrast_ratio(line) >= 3.0, line
    assert contrast_ratio(BAND_EDGE) >= 3.0  # the band's extent, on white
    assert contrast_ratio("#D55E00", "0.8") == pytest.approx(2.41, abs=0.01)
    svg = panel_svg(zip_figure(syn.grid_store(), POINT).panels[0], 0.9, False, SVG_MAX_LINES)
    assert f'fill="{BAND_COLOR}" stroke="{BAND_EDGE}"' in svg
