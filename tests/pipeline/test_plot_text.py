"""Figures people can read: no two pieces of text overlap, tick labels under every panel,
no empty panel, one colour per method in every figure.

Every figure type is drawn from hand-made stores (``synthetic.py``), among them the two
shapes the issue showed broken: a sweep whose cases mix d = 1 and d = 4 (it drew empty
panels for the coordinates a case lacks) and long model and case labels over six columns
(titles ran into each other, as in shi-coverage). The real shi-coverage and sparse stores
take over an hour each to compute: the figures drawn from them (docs/figures) are checked
where the stores exist (``outputs/``); a fresh clone skips that test.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from test_plots import sparse_store

from ldpsim.pipeline.report.plots import METHOD_COLORS, store_figures
from ldpsim.pipeline.store.reading import load_dataset
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import format_table


def mixed_store(cases: dict[str, int], reps: int = 12, models: tuple[str, ...] = ()) -> xr.Dataset:
    """Grid [model x] case x n; case label -> d (a smaller d is NaN-padded to the largest).

    Methods bb, bm, sn and oracle; intervals of half-length 0.1 (0.08 for the oracle)
    around a normal estimate, so that every statistic is finite where the coordinate is.
    """
    rng = np.random.default_rng(1)
    labels, ns, methods = list(cases), [10_000, 100_000, 1_000_000], ["bb", "bm", "sn", "oracle"]
    grid = {"case": labels, "n": ns}
    if models:
        grid = {"model": list(models), **grid}
    shape = tuple(len(v) for v in grid.values())
    width = max(cases.values())
    truth = np.zeros((*shape, width))
    for c, label in enumerate(labels):
        truth[..., c, :, cases[label] :] = np.nan
    estimate = truth[..., None, :] + 0.05 * rng.standard_normal((*shape, reps, width))
    half = np.array([0.1, 0.1, 0.12, 0.08])[:, None, None]
    lower = estimate[..., None, :, :] - half
    upper = estimate[..., None, :, :] + half
    dims = tuple(grid)
    done = np.ones((*shape, reps), dtype=bool)
    ds = xr.Dataset(
        {
            "estimate": ((*dims, "rep", "coord"), estimate),
            "lower": ((*dims, "method", "rep", "coord"), lower),
            "upper": ((*dims, "method", "rep", "coord"), upper),
            "truth": ((*dims, "coord"), truth),
            "done": ((*dims, "rep"), done),
            "failed": ((*dims, "rep"), ~done),
            "method_failed": ((*dims, "method", "rep"), np.zeros((*shape, 4, reps), bool)),
            "seconds": ((*dims, "rep"), np.ones(done.shape)),
        },
        coords={
            **{k: np.array(v, dtype=object if k != "n" else np.int64) for k, v in grid.items()},
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(width),
        },
    )
    sweep = json.loads(syn.sweep_attr(grid, {}, methods, reps))
    sweep["name"] = "shi-coverage-like"
    sweep["cases"] = {label: {"d": d} for label, d in cases.items()}
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep))
    return ds


def privacy_store() -> xr.Dataset:
    ds = syn.grid_store().rename({"tau": "eps"})
    floor = ds.sel({"method": ["bb"]}).assign_coords(method=np.array(["np_boot"], dtype=object))
    return xr.concat([ds, floor], dim="method", data_vars="minimal", coords="minimal")


def many_cases_store() -> xr.Dataset:
    """The sparse sweep's grid: 24 cases and no n axis (bar figures)."""
    cases = {}
    for d, s, kind in itertools.product((10, 100, 1000), (1, 4), ("laplace", "gaussian")):
        for calibration in ("sparse", "dense"):
            cases[f"d{d}-s{s}-{kind}-{calibration}"] = 2
    return mixed_store(cases, reps=5).isel(n=-1, drop=True)


STORES = {
    "checkpoints": lambda: syn.checkpoint_store(reps=3),
    "price of privacy": privacy_store,
    "sparse": sparse_store,
    "cases of d = 1 and d = 4": lambda: mixed_store({"quantile-tau0.5": 1, "qr-d4": 4}),
    "long labels over six columns": lambda: mixed_store(
        {"laplace-eps1": 5, "laplace-eps2": 5, "gdp-mu0.5": 5},
        reps=5,
        models=("huber_regression", "logistic_regression"),
    ),
    "24 cases as bars": many_cases_store,
}


def drawn_texts(fig: Figure) -> list[Text]:
    """Every piece of text the figure shows: titles, labels, legends, in-view tick labels."""
    hidden_axes = [ax for ax in fig.axes if not ax.get_visible()]
    ticks: set[int] = set()
    shown: list[Text] = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                ticks.update({id(tick.label1), id(tick.label2)})
                loc = tick.get_loc()
                inside = low - 1e-9 * abs(low) <= loc <= high + 1e-9 * abs(high)
                if ax.get_visible() and inside and tick.label1.get_visible():
                    shown.append(tick.label1)
    for text in fig.findobj(Text):
        if id(text) in ticks or not text.get_visible() or not text.get_text().strip():
            continue
        if isinstance(text.axes, Axes) and text.axes in hidden_axes:
            continue
        shown.append(text)
    return [t for t in shown if t.get_text().strip()]


def overlapping_pairs(fig: Figure) -> list[tuple[str, str]]:
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # lays the figure out (constrained layout) as a save would
    boxes: list[tuple[str, Bbox]] = []
    for text in drawn_texts(fig):
        box = text.get_window_extent()
        if box.width > 0 and box.height > 0:
            boxes.append((text.get_text(), box.expanded(0.98, 0.98)))  # within 1% is a touch
    return [
        (a, b)
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
        if box_a.overlaps(box_b)
    ]


@pytest.fixture(scope="module")
def figures() -> dict[str, dict[str, Figure]]:
    return {name: store_figures(make()) for name, make in STORES.items()}


def test_every_figure_type_is_drawn(figures):
    stems = {stem for figs in figures.values() for stem in figs}
    expected = {"coverage", "length", "diagnostics", "errors", "running"}
    assert stems == expected | {"privacy-length", "privacy-coverage", "sparsity"}


@pytest.mark.parametrize("store", list(STORES))
def test_no_two_texts_overlap(store, figures):
    for stem, fig in figures[store].items():
        assert overlapping_pairs(fig) == [], (store, stem)


#: The real stores behind figures in docs/figures, and the figures the docs show
#: (``docs/figures/NAME-STEM.png``; price-of-privacy's are ``docs/figures/STEM.png``).
#: ``ldpsim run NAME`` writes each store into outputs/ (seconds to an hour or more on 2
#: cores), so a fresh clone has none and skips.
DOCS_FIGURES = {
    "shi-coverage": ("coverage", "diagnostics"),
    "sparse": ("sparsity",),
    "shi-fig1-clipping": ("errors",),
    "shi-fig2-budgets": ("errors",),
    "shi-fig4-mechanisms": ("errors",),
    "shi-fig5-steps": ("errors",),
    "remedies": ("coverage",),
    "remedies-nprr": ("coverage", "length"),
    "undercoverage": ("coverage", "diagnostics"),
    "price-of-privacy": ("privacy-coverage", "privacy-length"),
}


@pytest.mark.parametrize("name", DOCS_FIGURES)
def test_no_two_texts_overlap_in_the_docs_stores_figures(name):
    """The figures the docs show, and every other figure `plot` draws from their stores
    (shi-coverage's length figure labelled 3e-1 and 4e-1 on top of each other)."""
    store = Path(__file__).resolve().parents[2] / "outputs" / f"{name}.zarr"
    if not store.is_dir():
        pytest.skip(f"no outputs/{name}.zarr: `ldpsim run {name}` writes it")
    ds = load_dataset(store)
    if not bool(ds["done"].all()):
        pytest.skip(f"outputs/{name}.zarr is not complete: `ldpsim run {name}` resumes it")
    figures = store_figures(ds)
    assert set(DOCS_FIGURES[name]) <= set(figures)
    for stem, fig in figures.items():
        assert overlapping_pairs(fig) == [], (name, stem)


def test_the_check_sees_an_overlap():
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.set_title("a title long enough to run into its neighbour on the left and right")
    ax.text(0.5, 1.02, "in the way", transform=ax.transAxes)
    assert overlapping_pairs(fig)


@pytest.mark.parametrize("store", list(STORES))
def test_every_point_lies_inside_its_panel(store, figures):
    """Dodged beside the others, each method's points stay within the x axis (seven
    methods once pushed the first and last past it)."""
    for stem, fig in figures[store].items():
        for ax in (ax for ax in fig.axes if ax.get_visible()):
            low, high = sorted(ax.get_xlim())
            for line in ax.lines:
                if line.get_transform() != ax.transData:  # a reference line across the axes
                    continue
                x = np.asarray(line.get_xdata(), dtype=float)
                x = x[np.isfinite(x)]
                assert np.all((low <= x) & (x <= high)), (store, stem, ax.get_title())


@pytest.mark.parametrize("store", list(STORES))
def test_every_panel_has_data_and_x_tick_labels(store, figures):
    for stem, fig in figures[store].items():
        shown = {id(t) for t in drawn_texts(fig)}
        for ax in (ax for ax in fig.axes if ax.get_visible()):
            finite = [
                np.isfinite(np.asarray(line.get_ydata(), dtype=float)).any()
                for line in ax.get_lines()
            ] + [bool(ax.patches)]
            assert any(finite), (store, stem, ax.get_title())
            labels = [t for t in ax.get_xticklabels(which="both") if id(t) in shown]
            assert labels, (store, stem, ax.get_title(), "no x tick labels")


def test_mixed_d_draws_a_panel_per_coordinate_a_case_has(figures):
    coverage = figures["cases of d = 1 and d = 4"]["coverage"]
    titles = sorted(ax.get_title() for ax in coverage.axes if ax.get_visible())
    # A case is titled by the parameter its cases vary (d), not by its label.
    expected = ["d=1, coord 0", *(f"d=4, coord {j}" for j in range(4))]
    assert titles == sorted(expected)
    # And the table has no rows for them.
    summary = summarize(mixed_store({"quantile-tau0.5": 1, "qr-d4": 4}))
    table = format_table(summary)
    assert "n/a" not in table
    assert table.count("coord 1") == 1  # only under qr-d4 (d = 4)


def test_one_colour_per_method_in_every_figure(figures):
    for name, figs in figures.items():
        seen: dict[str, set] = {}
        for fig in figs.values():
            for ax in fig.axes:
                for line in ax.get_lines():
                    label = line.get_label().split(",")[0]
                    if label in METHOD_COLORS:
                        seen.setdefault(label, set()).add(line.get_color())
        for label, colours in seen.items():
            assert colours == {METHOD_COLORS[label]}, (name, label, colours)
