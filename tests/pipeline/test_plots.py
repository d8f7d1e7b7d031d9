"""Figures of hand-made stores: the expected files, non-empty and well-formed."""

from __future__ import annotations

import io
import json
import textwrap
import warnings
from pathlib import Path

import matplotlib.cbook
import matplotlib.pyplot as plt
import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from matplotlib.colors import to_rgba

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.report.narrow_layout import NARROW_INCHES, narrow_layout
from ldpsim.pipeline.report.plots import (
    ERROR_COLORS,
    ERROR_SERIES,
    FAILED_TEXT,
    LEGEND_CHARS,
    MAX_PANEL_COLUMNS,
    NO_DATA_TEXT,
    NO_VALUE_TEXT,
    NOT_DONE_TEXT,
    PANEL_SIZE,
    PARTIAL_TEXT,
    _diagnostics_figure,
    _errors_figure,
    _partial_of,
    _sparsity_figure,
    method_styles,
    plot_store,
    store_figures,
)
from ldpsim.pipeline.summary.summary import summarize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def check_files(files: list[Path], out_dir: Path, stems: list[str]) -> None:
    expected = [out_dir / f"{stem}.{ext}" for stem in stems for ext in ("png", "pdf")]
    assert sorted(files) == sorted(expected)
    for path in files:
        data = path.read_bytes()
        assert len(data) > 5_000, path
        if path.suffix == ".png":
            assert data.startswith(PNG_SIGNATURE)
        else:
            assert data.startswith(b"%PDF")


def test_plots_of_a_store_path_with_n_axis(tmp_path):
    store = tmp_path / "s.zarr"
    syn.grid_store().to_zarr(store, zarr_format=3, consolidated=False)
    out = tmp_path / "figures"
    files = plot_store(store, out)
    check_files(files, out, ["coverage", "length", "diagnostics"])


def drawn_kinds(ds: xr.Dataset) -> list[str]:
    """The figures :func:`plot_store` would write for ``ds``, made but not drawn (drawing
    and saving them is most of its time: about 1.5 s a file on a slow core)."""
    figures = store_figures(ds)
    for fig in figures.values():
        plt.close(fig)
    return list(figures)


def test_plots_of_a_checkpoint_store():
    # Which figures, made but not drawn: test_plots_of_a_store_path_with_n_axis writes
    # files (PNG and PDF), and test_plot_text.py draws every figure of this store.
    stems = ["coverage", "length", "running", "diagnostics", "errors"]
    assert sorted(drawn_kinds(syn.checkpoint_store(reps=3))) == sorted(stems)
    # One replicate: no sd, so no diagnostics figure (it would be empty).
    assert sorted(drawn_kinds(syn.checkpoint_store())) == sorted(
        ["coverage", "length", "running", "errors"]
    )
    # A store of an older ldpsim, without last iterates: the average's errors alone
    # (test_errors_figure_draws_both_mean_squared_errors), the same figures.
    assert sorted(drawn_kinds(syn.checkpoint_store(reps=3).drop_vars("last"))) == sorted(stems)


def test_errors_figure_draws_both_mean_squared_errors():
    summary = summarize(syn.checkpoint_store(reps=3))
    fig = _errors_figure(summary)
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    # One error-bar container per series; its first line holds the plotted values.
    series = {bars.get_label(): bars.lines[0] for bars in ax.containers}
    assert set(series) == {label for _, label in ERROR_SERIES}
    for var, label in ERROR_SERIES:
        np.testing.assert_array_equal(series[label].get_ydata(), summary[var].values)
    without_last = _errors_figure(summarize(syn.checkpoint_store(reps=3).drop_vars("last")))
    labels = [bars.get_label() for bars in without_last.axes[0].containers]
    assert labels == ["average theta_bar_n"]


def test_errors_panels_per_grid_point(tmp_path):
    # Two grid values: a panel each.
    store = xr.concat([syn.checkpoint_store(reps=3)] * 2, dim=xr.DataArray([0.5, 1.0], dims="eps"))
    store["truth"] = store["truth"].isel(eps=0, drop=True).expand_dims(eps=[0.5, 1.0])
    fig = _errors_figure(summarize(store))
    assert [ax.get_title() for ax in fig.axes] == ["eps=0.5", "eps=1"]


def test_diagnostics_panels_wrap():
    # d = 1, 2 tau x 4 eps = 8 grid points: MAX_PANEL_COLUMNS side by side, the rest on
    # further rows; each grid point has a bias/sd panel above a variance-ratio panel.
    # Sizes in pixels at plot_store's dpi, from the figures' sizes (saved without a
    # tight bounding box, a PNG is the figure's size times the dpi: test_plots_of_a_
    # store_path_with_n_axis saves them).
    store = syn.grid_store().isel(coord=[0]).expand_dims(eps=[0.5, 1.0, 2.0, 4.0])
    figures = store_figures(store)
    dpi, (panel_w, panel_h) = 150, PANEL_SIZE

    def pixels(stem: str) -> tuple[int, int]:
        width, height = figures[stem].get_size_inches() * dpi
        return round(width), round(height)

    rows = -(-8 // MAX_PANEL_COLUMNS)
    assert rows > 1
    width, height = pixels("diagnostics")
    assert width == round(dpi * (panel_w * MAX_PANEL_COLUMNS + 2.0))
    assert height == round(dpi * (panel_h * 2 * rows + 0.6))
    # The coverage and length figures wrap the same way: one panel per grid point (one
    # coordinate).
    for stem in ("coverage", "length"):
        width, height = pixels(stem)
        assert width == round(dpi * (panel_w * MAX_PANEL_COLUMNS + 2.0)), stem
        assert height == round(dpi * (panel_h * rows + 0.6)), stem
    for fig in figures.values():
        plt.close(fig)


def test_bar_plots_without_n_axis(tmp_path):
    files = plot_store(syn.point_store(), tmp_path / "new" / "dir")
    check_files(files, tmp_path / "new" / "dir", ["coverage", "length"])


def test_privacy_figures_for_a_store_with_eps_n_and_the_floor():
    # A store with eps and n axes and an np_boot method (price-of-privacy) also gets
    # the length relative to np_boot against eps, and coverage against n eps.
    ds = syn.grid_store().rename({"tau": "eps"})
    floor = ds.sel({"method": ["bb"]}).assign_coords(method=np.array(["np_boot"], dtype=object))
    ds = xr.concat([ds, floor], dim="method", data_vars="minimal", coords="minimal")
    # Made but not drawn: test_plot_text.py draws every figure of this store.
    stems = ["coverage", "length", "diagnostics", "privacy-length", "privacy-coverage"]
    assert sorted(drawn_kinds(ds)) == sorted(stems)
    # Each under its own name (a mutation hunt, h15e: the two swapped passed).
    figures = store_figures(ds, ["privacy-length", "privacy-coverage"])
    for kind, labels in (
        ("privacy-length", ("eps", "length / np_boot")),
        ("privacy-coverage", ("n eps", "coverage")),
    ):
        shown = [ax for ax in figures[kind].axes if ax.get_visible()]
        assert {(ax.get_xlabel(), ax.get_ylabel()) for ax in shown} == {labels}, kind
    plt.close("all")
    # Without the floor, no such figures.
    plain = drawn_kinds(syn.grid_store().rename({"tau": "eps"}))
    assert sorted(plain) == ["coverage", "diagnostics", "length"]


def sparse_store() -> xr.Dataset:
    """A hand-made store of the `sparse` sweep's shape: grid axis `case` only, cases with
    d and sparsity, two calibrations; interval lengths 0.1 s (sparse) or 0.1 d (dense)."""
    cases = {}
    for d, s in ((2, 1), (2, 2), (4, 1), (4, 2), (4, 4)):
        for calibration in ("sparse", "dense"):
            cases[f"d{d}-s{s}-{calibration}"] = {"d": d, "sparsity": s, "calibration": calibration}
    labels, methods, reps, width = list(cases), ["band", "oracle"], 5, 4
    truth = np.zeros((len(labels), width))
    lower = np.full((len(labels), len(methods), reps, width), np.nan)
    for c, label in enumerate(labels):
        d, s = cases[label]["d"], cases[label]["sparsity"]
        truth[c, d:] = np.nan  # a smaller d is NaN-padded
        half = 0.05 * (s if cases[label]["calibration"] == "sparse" else d)
        lower[c, :, :, :d] = -half
        lower[c, 0, :2, 0] = half / 2  # the band misses coordinate 0 in 2 of 5 replicates
    upper = np.where(np.isnan(lower), np.nan, lower + 2 * np.abs(lower))
    upper[:, 0, :2, 0] = lower[:, 0, :2, 0] + 0.1
    estimate = np.where(np.isnan(truth[:, None, :]), np.nan, 0.0) + np.zeros((1, reps, 1))
    sweep = json.loads(syn.sweep_attr({"case": labels}, {"model": "sparse_mean"}, methods, reps))
    sweep["cases"] = cases
    ds = xr.Dataset(
        {
            "estimate": (("case", "rep", "coord"), estimate),
            "lower": (("case", "method", "rep", "coord"), lower),
            "upper": (("case", "method", "rep", "coord"), upper),
            "truth": (("case", "coord"), truth),
            "done": (("case", "rep"), np.ones((len(labels), reps), dtype=bool)),
            "failed": (("case", "rep"), np.zeros((len(labels), reps), dtype=bool)),
            "method_failed": (("case", "method", "rep"), np.zeros(lower.shape[:3], dtype=bool)),
        },
        coords={
            "case": np.array(labels, dtype=object),
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(width),
        },
    )
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep))
    return ds


def test_sparsity_figure():
    # One row per d, columns length / marginal / joint coverage against s; a line per
    # method and calibration (the case parameter that varies besides d and s), with the
    # values of the summary.
    store = sparse_store()
    assert sorted(drawn_kinds(store)) == ["coverage", "length", "sparsity"]
    summary = summarize(store)
    fig = _sparsity_figure(summary)
    axes = np.array(fig.axes).reshape(2, 3)
    length_ax, marginal_ax, joint_ax = axes[1]  # d = 4
    assert length_ax.get_title() == "d = 4" and length_ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in length_ax.get_lines()}
    dense = lines["oracle, dense"]
    np.testing.assert_array_equal(dense.get_xdata(), [1, 2, 4])
    np.testing.assert_allclose(dense.get_ydata(), [0.4, 0.4, 0.4])  # 2 * 0.05 d
    np.testing.assert_allclose(lines["oracle, sparse"].get_ydata(), [0.1, 0.2, 0.4])
    marginal = {line.get_label(): line for line in marginal_ax.get_lines()}
    np.testing.assert_allclose(marginal["band, sparse"].get_ydata(), 1 - 0.4 / 4)
    joint = {bars.get_label(): bars.lines[0] for bars in joint_ax.containers}
    np.testing.assert_allclose(joint["band, sparse"].get_ydata(), 0.6)
    np.testing.assert_allclose(joint["oracle, dense"].get_ydata(), 1.0)
    assert np.array_equal(axes[0, 0].lines[0].get_xdata(), [1, 2])  # d = 2: s <= d
    # Not drawn for a store of another shape.
    assert _sparsity_figure(summarize(syn.grid_store())) is None


def test_coverage_error_bars_use_wilson_at_0_and_1():
    from ldpsim.pipeline.report.plots import _line_figures, coverage_error

    # +-2 se inside (0, 1); Wilson's interval at z = 2 at 0 and 1 (R = 10: [0.714, 1]).
    bars = coverage_error(np.array([1.0, 0.0, 0.9]), np.array([0.0, 0.0, 0.03]), 10)
    np.testing.assert_allclose(bars, [[1 - 10 / 14, 0.0, 0.06], [0.0, 4 / 14, 0.06]])
    summary = summarize(syn.grid_store(), diagnostics=False)
    cell = {"tau": 0.5, "n": 100, "method": "oracle", "coord": 0}
    summary["coverage"].loc[cell] = 1.0  # all covered: Wald's se is 0
    summary["coverage_se"].loc[cell] = 0.0
    r = int(summary["n_done"].loc[cell])
    cov_fig, _ = _line_figures(summary, "n")
    spans = [
        (float(seg[:, 1].min()), float(seg[:, 1].max()))
        for ax in cov_fig.axes
        for container in ax.containers
        if container.get_label() == "oracle"
        for seg in container.lines[2][0].get_segments()
        if len(seg)  # a cell without replicates (NaN) draws no bar
    ]
    low = r / (r + 4)  # Wilson's lower bound at 1 with z = 2
    assert any(np.allclose(span, (low, 1.0)) for span in spans), spans


def partial_marks(fig) -> list[tuple[str, tuple[float, float]]]:
    """The ``*`` marks of a figure's panels: (colour, point) each."""
    return [
        (line.get_color(), point)
        for ax in fig.axes
        for line in ax.lines
        if line.get_gid() == "partial"
        for point in zip(line.get_xdata(), line.get_ydata(), strict=True)
    ]


def test_points_on_fewer_than_all_replicates_are_marked_as_in_the_tables():
    # A hunt (2026-12-01): the tables marked a cell of fewer than all replicates, the
    # figures drew its point like any other. Here bb failed in one of the 36 replicates
    # (every bb cell partial) and the oracle in none; the empty cell draws no point.
    complete = syn.grid_store().isel(rep=range(syn.DONE))  # a sweep of 36 replicates
    complete.attrs["sweep"] = json.dumps(
        {**json.loads(syn.grid_store().attrs["sweep"]), "replicates": syn.DONE}
    )
    figures = store_figures(complete, ["coverage", "length", "diagnostics"])
    colours = {m: style["color"] for m, style in method_styles(syn.METHODS).items()}
    points = (len(syn.TAUS) * len(syn.NS) - 1) * syn.D  # bb's finite cells, per figure
    for kind in ("coverage", "length"):
        marks = partial_marks(figures[kind])
        assert len(marks) == points and {colour for colour, _ in marks} == {colours["bb"]}
        labels = figures[kind].legends[0].get_texts()
        assert PARTIAL_TEXT in [label.get_text() for label in labels]
    # bias / sd is drawn once for both (one estimate): partial where bb's is.
    assert len(partial_marks(figures["diagnostics"])) == 2 * points
    for fig in figures.values():
        plt.close(fig)
    # Without bb's failure and the missing replicates, nothing is marked.
    clean = complete.sel({"method": ["oracle"]})
    clean.attrs["sweep"] = complete.attrs["sweep"]
    for fig in store_figures(clean, ["coverage", "length"]).values():
        assert not partial_marks(fig)
        plt.close(fig)
    # The dot figures (no n axis) and the whole-store partial: every finite point.
    point = syn.point_store()
    for fig in store_figures(point, ["coverage", "length"]).values():
        assert len(partial_marks(fig)) == len(syn.METHODS) * syn.D
        plt.close(fig)


def test_a_grid_value_with_no_replicate_done_is_marked_on_the_axis():
    # A hunt (2026-12-01, figures): a grid point not run yet vanished from the line
    # figures without a mark, where the tables show its cells n/a*. grid_store's empty
    # cell (tau = 0.9, n = 1e4): one grey x on the bottom edge of each of its panels.
    ds = syn.grid_store()
    figures = store_figures(ds, ["coverage", "length"])
    for fig in figures.values():
        marks = [
            (ax, line) for ax in fig.axes for line in ax.lines if line.get_gid() == "not-done"
        ]
        assert len(marks) == syn.D, marks  # the panels of tau = 0.9, a coordinate each
        for ax, line in marks:
            assert list(line.get_xdata()) == [syn.EMPTY_CELL["n"]]
            assert "tau=0.9" in ax.get_title(), ax.get_title()
        assert NOT_DONE_TEXT in [text.get_text() for text in fig.legends[0].get_texts()]
        plt.close(fig)
    # Every grid point done (the empty cell dropped): no mark, no legend entry.
    done = ds.sel(n=[syn.NS[0]])
    for fig in store_figures(done, ["coverage", "length"]).values():
        assert not [line for ax in fig.axes for line in ax.lines if line.get_gid() == "not-done"]
        assert NOT_DONE_TEXT not in [text.get_text() for text in fig.legends[0].get_texts()]
        plt.close(fig)


def test_the_errors_figure_marks_a_checkpoint_of_fewer_replicates():
    # The second read of the marks (2026-12-01): the errors figure averages the done
    # replicates too. Two of six not done: every point of both series marked.
    ds = syn.checkpoint_store(reps=6)
    ds["done"][:2] = False
    for name in ("estimate", "last", "lower", "upper"):
        ds[name][{"rep": slice(0, 2)}] = np.nan
    fig = _errors_figure(summarize(ds))
    assert len(partial_marks(fig)) == 2 * len(syn.CHECKPOINTS)
    plt.close(fig)
    whole = _errors_figure(summarize(syn.checkpoint_store(reps=6)))
    assert not partial_marks(whole)
    plt.close(whole)


def renamed_method(ds: xr.Dataset, old: str, new: str) -> xr.Dataset:
    """``ds`` with the method ``old`` labelled ``new``, in its sweep too."""
    methods = [new if str(m) == old else str(m) for m in ds["method"].values]
    ds = ds.assign_coords(method=np.array(methods, dtype=object))
    sweep = json.loads(ds.attrs["sweep"])
    sweep["methods"] = {new if k == old else k: v for k, v in sweep["methods"].items()}
    ds.attrs["sweep"] = json.dumps(sweep)
    return ds


def test_a_long_method_label_is_wrapped_in_the_legend_and_leaves_the_panels_room():
    from ldpsim.pipeline.report.narrow_layout import narrow_layout
    from ldpsim.pipeline.report.report import figure_alt

    long = "sn_with_a_label_of_sixty_eight_characters_that_has_no_space_in_it_xx"
    assert len(long) == 68
    sparse = syn.sparse_shaped_store(dims=(10,), sparsities=(1,), reps=4)
    figures = {
        **store_figures(renamed_method(syn.grid_store(), "oracle", long), ["coverage", "length"]),
        **store_figures(
            renamed_method(sparse, str(sparse["method"].values[0]), long), ["sparsity"]
        ),
    }
    assert list(figures) == ["coverage", "length", "sparsity"]
    for kind, fig in figures.items():
        legend = fig.legends[0]
        lines = [line for text in legend.get_texts() for line in text.get_text().split("\n")]
        assert max(map(len, lines)) <= LEGEND_CHARS, (kind, lines)
        # Broken after its underscores, as the report's tables break it, not mid-word
        # (before: "sn_with_a_label_of_s" / "ixty_eight_character" / ...).
        (entry,) = [t.get_text() for t in legend.get_texts() if t.get_gid() == long]
        assert entry.replace("\n", "") == long and entry.count("_\n") == entry.count("\n")
        # The alt text names the method whole, not its wrapped lines.
        assert f"{long}," in figure_alt(kind, fig) or f"{long}." in figure_alt(kind, fig)
        # Laid out on a desktop page and for a phone, as the report draws them: the
        # panels keep their room (matplotlib warns where they collapse to nothing).
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig.savefig(io.BytesIO(), format="png", dpi=40)
            narrow = narrow_layout(fig)
            narrow.savefig(io.BytesIO(), format="png", dpi=40)
        plt.close(fig)


def test_a_wrapped_legend_entry_is_named_whole_in_the_alt_text():
    # The diagnostics' entry of methods with the same values is wrapped (at 14) before
    # the legend is made. Before: its gid kept the breaks, and the alt text read
    # "bb_rademacher_ multipliers, bm (same values)", a screen reader two words.
    from ldpsim.pipeline.report.plots import _wrap_label, wrapped_legend
    from ldpsim.pipeline.report.report import figure_alt

    entries = ["bb_rademacher_multipliers, quantile-tau0.5 (same values)", "sn", "oracle"]
    fig, ax = plt.subplots()
    handles = [ax.plot([0, 1], [0, i])[0] for i in range(len(entries))]
    wrapped_legend(fig, handles, [_wrap_label(entries[0], 14), *entries[1:]])
    assert "\n" in fig.legends[0].get_texts()[0].get_text()
    assert [t.get_gid() for t in fig.legends[0].get_texts()] == entries
    assert f"Lines: {', '.join(entries)}." in figure_alt("diagnostics", fig)
    plt.close(fig)


def test_a_legend_label_breaks_where_a_table_label_does():
    from ldpsim.pipeline.report.plots import _wrap_label

    label = "bb_with_a_rather_long_method_label_rademacher"
    assert _wrap_label(label, 20) == "bb_with_a_rather_\nlong_method_label_\nrademacher"
    # The diagnostics' entry of methods with the same values, at 14 characters.
    group = _wrap_label(f"{label}, sn, oracle (same values)", 14)
    assert group.split("\n")[-3:] == ["rademacher,", "sn, oracle", "(same values)"]
    # A part longer than a line is cut inside it, and nothing is lost; exponents stay.
    assert _wrap_label("x" * 25 + "_y", 20) == "x" * 20 + "\n" + "xxxxx_y"
    assert _wrap_label("quantile-tau0.5 eps 1e-05", 20) == "quantile-tau0.5 eps\n1e-05"
    assert _wrap_label("bb", 20) == "bb"
    # A line of exactly the width, and one that is the width but for a trailing space
    # (at a break), are whole; a trailing space is not carried into the next line.
    # Before: '>=' for '>', and a length with the space counted, passed (h23d).
    assert _wrap_label("bb_with_a_rather_long", 21) == "bb_with_a_rather_long"
    assert _wrap_label("quantile-tau0.5 eps 1e-05", 19) == "quantile-tau0.5 eps\n1e-05"
    assert _wrap_label("x" * 20 + " y", 20) == "x" * 20 + "\ny"


def test_a_panel_whose_methods_failed_says_so_not_that_nothing_is_done():
    # bb failed in every done replicate (its bounds NaN, marked failed): its panels said
    # "no replicate done yet", sending the user to run again instead of to `ldpsim errors`.
    store = syn.grid_store().sel(method=["bb"])
    failed = store["done"].expand_dims(method=["bb"]).transpose(*store["method_failed"].dims)
    every = store["method_failed"].astype(bool) | failed.astype(bool)
    store["method_failed"] = every
    store["lower"] = store["lower"].where(~every)
    store["upper"] = store["upper"].where(~every)
    figure = store_figures(store)["coverage"]
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    plt.close("all")
    assert FAILED_TEXT in texts and NO_DATA_TEXT not in texts, texts


def half_spans(fig) -> np.ndarray:
    """The half-lengths of every error bar drawn in ``fig``."""
    spans = [
        (segment[1, 1] - segment[0, 1]) / 2
        for ax in fig.axes
        for bars in ax.containers
        for segment in bars.lines[2][0].get_segments()
        if len(segment) == 2  # a NaN value's bar is no segment
    ]
    return np.array(spans)


def test_error_bars_of_means_are_two_standard_errors():
    # The captions say +-2 Monte-Carlo standard errors; only the coverage bars (Wilson's
    # at 0 and 1) were tested, and bars of one SE went unseen in the diagnostics and
    # errors figures. Each bar's half-length is 2 SE of a value drawn, to rounding.
    summary = summarize(syn.grid_store())
    diagnostics = _diagnostics_figure(summary, "n")
    ses = np.concatenate(
        [summary[f"{var}_se"].values.ravel() for var in ("bias_over_sd", "variance_ratio")]
    )
    ses = ses[np.isfinite(ses) & (ses > 0)]
    spans = half_spans(diagnostics)
    spans = spans[np.isfinite(spans) & (spans > 0)]
    assert spans.size >= 8
    for span in spans:
        assert np.min(np.abs(span / (2 * ses) - 1)) < 1e-9, span
    checkpoints = summarize(syn.checkpoint_store(reps=3))
    errors = _errors_figure(checkpoints)
    expected = np.concatenate([2 * checkpoints[f"{var}_se"].values for var, _ in ERROR_SERIES])
    np.testing.assert_allclose(half_spans(errors), expected, rtol=1e-12)
    plt.close("all")


def test_figures_of_many_panels_set_their_shared_limits_a_linear_number_of_times(monkeypatch):
    # The panels of a line or diagnostics figure share their x axis (coverage: y too).
    # Setting the scale and ticks on every panel, and reading a panel's limits (axhline)
    # before the next panel had its data, relimited every panel each time: the limits
    # changed P**2 times (55,666 for 64 panels) and each change looks up all P siblings,
    # so 100 panels took 16 s to draw and 400 more than 8 minutes (8,000 grid points).
    # Counted by the axes' public "xlim_changed"/"ylim_changed" events, each sibling's.
    calls = 0
    process = matplotlib.cbook.CallbackRegistry.process

    def counted(self, signal, *args, **kwargs):
        nonlocal calls
        calls += signal in ("xlim_changed", "ylim_changed")
        return process(self, signal, *args, **kwargs)

    monkeypatch.setattr(matplotlib.cbook.CallbackRegistry, "process", counted)
    counts = {}
    for k in (4, 16):  # 2 tau x k eps grid points, a panel each
        store = syn.grid_store().isel(coord=[0]).expand_dims(eps=[0.5 + i for i in range(k)])
        calls = 0
        figures = store_figures(store)
        counts[2 * k] = calls
        assert {ax.get_xscale() for fig in figures.values() for ax in fig.axes} == {"log"}
        for fig in figures.values():
            plt.close(fig)
    assert counts[32] <= 5 * counts[8], counts  # linear: 4 times the panels


def test_the_narrow_layout_puts_each_panel_in_a_row_of_its_own_under_one_legend():
    # A mutation hunt (2026-12-02, narrow_layout.py line by line): only the browser test
    # looked at the phone's figures; every line of the layout could change unseen here.
    fig = plt.figure(figsize=(10, 5), layout="constrained")
    axes = fig.subplots(2, 3, sharex=True)
    for i, ax in enumerate(axes.flat[:5]):
        ax.plot([0, 1], [0, i], label=f"m{i}")
    axes.flat[5].set_visible(False)
    words = [f"grid point {i} with a long label" for i in range(8)]
    axes.flat[4].set_yticks(np.arange(8.0), words)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="method", loc="outside right upper")
    fig.legend(handles[:1], ["ok"], title="series", loc="outside right lower")
    fig.suptitle("a title long enough that a phone's figure must wrap it onto more lines")
    panels = list(axes.flat[:5])
    before = [ax.get_position().height * fig.get_figheight() for ax in panels]
    assert narrow_layout(fig) is fig
    assert fig.get_figwidth() == pytest.approx(NARROW_INCHES)
    # The hidden panel gone; the legend's row, then the panels in their order.
    assert len(fig.axes) == 6 and not fig.legends
    (key,) = [ax for ax in fig.axes if ax not in panels]
    assert key.get_subplotspec().rowspan.start == 0
    assert [ax.get_subplotspec().rowspan.start for ax in panels] == [1, 2, 3, 4, 5]
    for ax in panels:
        assert ax.xaxis.get_tick_params()["labelbottom"]
        assert ax.yaxis.get_tick_params()["labelleft"]
    # One legend: the first one's title, the later one's as an entry, two columns.
    legend = key.get_legend()
    assert legend.get_title().get_text() == "method"
    assert [t.get_text() for t in legend.get_texts()] == [*labels, "series:", "ok"]
    assert legend._ncols == 2
    assert "\n" in fig.get_suptitle()
    # The long words wrapped, their panel made higher; the others keep their heights.
    ratios = fig.axes[0].get_subplotspec().get_gridspec().get_height_ratios()
    assert [t.get_text() for t in panels[4].get_yticklabels()] == [
        "\n".join(textwrap.wrap(w, 20)) for w in words
    ]
    assert ratios[1:5] == pytest.approx(before[:4])
    assert ratios[5] > before[4] * 1.2
    plt.close(fig)
    # Numbers in mathtext are not words: not wrapped.
    fig = plt.figure(figsize=(6, 3), layout="constrained")
    ax = fig.subplots()
    numbers = ["$\\mathdefault{10^{2}}$", "$\\mathdefault{10^{4}}$"]
    ax.set_yticks([1.0, 2.0], numbers)
    narrow_layout(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == numbers
    plt.close(fig)
    # Panels that cannot fit: None.
    fig = plt.figure(figsize=(6, 3), layout="constrained")
    fig.subplots().set_ylabel("a label " * 20)
    assert narrow_layout(fig, width=0.3) is None
    plt.close(fig)


def test_the_line_figures_draw_the_summary_s_lengths_bars_level_and_n_ticks():
    # A mutation hunt (2026-12-02, plots.py): the length figure could plot the coverage,
    # on a linear axis, the nominal line sit at another level, the coverage bars be
    # zero and the n ticks be labelled in reverse, with every test passing.
    summary = summarize(syn.grid_store())
    figures = store_figures(syn.grid_store(), ["coverage", "length"])
    methods = [str(m) for m in summary["method"].values]
    drawn = [
        y
        for ax in figures["length"].axes
        for line in ax.lines
        if line.get_label() in methods
        for y in line.get_ydata()
    ]
    values = summary["length"].values
    np.testing.assert_allclose(
        np.sort(np.array(drawn)[np.isfinite(drawn)]), np.sort(values[np.isfinite(values)])
    )
    shown = [ax for ax in figures["length"].axes if ax.get_visible() and ax.lines]
    assert shown and {ax.get_yscale() for ax in shown} == {"log"}
    for ax in figures["coverage"].axes:
        if ax.get_visible():
            (nominal,) = [line for line in ax.lines if line.get_label() == "nominal"]
            assert list(nominal.get_ydata()) == [syn.LEVEL, syn.LEVEL]
    p = summary["coverage"].values
    interior = np.count_nonzero((p > 0) & (p < 1))
    assert np.count_nonzero(half_spans(figures["coverage"]) > 0) >= interior > 0
    for fig in figures.values():
        ax = fig.axes[0]
        fig.canvas.draw()
        labels = dict(
            zip(ax.get_xticks(), [t.get_text() for t in ax.get_xticklabels()], strict=True)
        )
        assert [labels[n] for n in syn.NS] == ["1e2", "1e4"], labels
    plt.close("all")


def tau_store() -> xr.Dataset:
    """:func:`synthetic.grid_store` at n = 100: grid axis tau only, so dot figures."""
    ds = syn.grid_store().sel(n=100, drop=True)
    ds.attrs["sweep"] = syn.sweep_attr({"tau": syn.TAUS}, {"n": 100}, syn.METHODS)
    return ds


def test_the_dot_figures_draw_the_summary_s_values_in_their_rows_against_the_level():
    # A mutation hunt (h15e, plots.py): the rows drawn last first, the nominal line at
    # 1 - level, a length axis linear over more than a decade, a method's dots at
    # another row's label or another coordinate's values, passed every test.
    ds = tau_store()
    summary = summarize(ds)
    # tau = 0.9's intervals 20 times as long: rows told apart, lengths over a decade.
    summary["length"] = summary["length"].where(summary["tau"] == 0.5, 20 * summary["length"])
    figures = store_figures(ds, ["coverage", "length"], summary=summary)
    methods = [str(m) for m in summary["method"].values]
    for kind, var in (("coverage", "coverage"), ("length", "length")):
        axes = figures[kind].axes
        first = axes[0]
        labels = dict(
            zip(first.get_yticks(), [t.get_text() for t in first.get_yticklabels()], strict=True)
        )
        assert [labels[y] for y in sorted(labels, reverse=True)] == ["tau=0.5", "tau=0.9"]
        assert [ax.get_title() for ax in axes] == ["coord 0", "coord 1"]
        assert first.get_ylabel() == "tau"
        for ax, coord in zip(axes, summary["coord"].values, strict=True):
            if kind == "coverage":
                dots = {c.get_label(): c.lines[0] for c in ax.containers}
                (nominal,) = [line for line in ax.lines if line.get_label() == "nominal"]
                assert list(nominal.get_xdata()) == [syn.LEVEL, syn.LEVEL]
                assert ax.get_xlabel() == "coverage"
            else:
                dots = {line.get_label(): line for line in ax.lines if line.get_label() in methods}
                assert ax.get_xscale() == "log" and ax.get_xlabel() == "mean length"
            assert sorted(dots) == sorted(methods)
            # Each row's dots centred on its label.
            heights = np.array([line.get_ydata() for line in dots.values()])
            np.testing.assert_allclose(heights.mean(axis=0), np.round(heights[0]), atol=1e-12)
            for method, line in dots.items():
                for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True):
                    tau = float(labels[float(round(y))].removeprefix("tau="))
                    want = summary[var].sel({"tau": tau, "method": method, "coord": coord})
                    assert x == pytest.approx(float(want), rel=1e-12), (kind, method, tau)
    # A coverage of 1 (the oracle's at coord 1): Wilson's bar from R / (R + 4) to 1, R
    # the replicates that coverage counts.
    cell = {"tau": 0.5, "method": "oracle", "coord": 1}
    assert float(summary["coverage"].sel(cell)) == 1.0
    r = int(summary["n_done"].sel(cell))
    (bars,) = [c for c in figures["coverage"].axes[1].containers if c.get_label() == "oracle"]
    spans = [tuple(segment[:, 0]) for segment in bars.lines[2][0].get_segments()]
    assert any(np.allclose(span, (r / (r + 4), 1.0)) for span in spans), spans
    plt.close("all")


def test_the_diagnostics_figure_draws_the_summary_s_values_against_their_references():
    # A mutation hunt (h15e, plots.py): the values of other cells, the panels' labels
    # swapped or the variance ratio's reference line at 0 passed every test.
    summary = summarize(syn.grid_store())
    fig = _diagnostics_figure(summary, "n")
    variables = {"bias / sd": ("bias_over_sd", 0.0), "variance ratio": ("variance_ratio", 1.0)}
    drawn = set()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        tau, coord = ax.get_title().split(", ")
        cell = {"tau": float(tau.removeprefix("tau=")), "coord": int(coord.removeprefix("coord "))}
        var, reference = variables[ax.get_ylabel()]
        # The lower panel of a cell names the shared n axis.
        assert ax.get_xlabel() == ("n" if var == "variance_ratio" else "")
        (line,) = [line for line in ax.lines if line.get_linestyle() == ":"]
        assert list(line.get_ydata()) == [reference, reference]
        bars = {bars.get_label(): bars.lines[0].get_ydata() for bars in ax.containers}
        assert sorted(bars) == sorted(syn.METHODS)
        for method, values in bars.items():
            want = summary[var].sel({**cell, "method": method}).values
            np.testing.assert_array_equal(values, want, err_msg=f"{var} {cell} {method}")
        drawn.add((var, cell["tau"], cell["coord"]))
    assert len(drawn) == 2 * len(syn.TAUS) * syn.D
    plt.close(fig)


def test_the_dot_figures_mark_each_method_s_partial_cells_and_hide_spare_panels():
    # A mutation hunt (h15e, plots.py): marks of the first method or the first coordinate
    # drawn for all, spare axes of the panel grid left showing, and no word in a panel
    # without values, passed every test.
    reps = 10
    ds = syn.wide_store(4, reps=reps).sel(n=syn.WIDE_NS[0], drop=True)
    spec = {"eps": 1.0, "d": 4, "n": syn.WIDE_NS[0]}
    ds.attrs["sweep"] = syn.sweep_attr({}, spec, syn.WIDE_METHODS, reps)
    summary = summarize(ds)
    # bb failed in a replicate (every coordinate); the oracle's coverage at coord 2
    # counts one replicate fewer; no method has a length at coord 3.
    summary["n_done"].loc[{"method": "oracle", "coord": 2}] = reps - 1
    summary["length"].loc[{"coord": 3}] = np.nan
    partial = _partial_of(summary, "coverage")
    assert partial.sel({"method": "bb"}).all() and partial.sel({"method": "oracle"}).sum() == 1
    figures = store_figures(ds, ["coverage", "length"], summary=summary)
    colors = {m: style["color"] for m, style in method_styles(syn.WIDE_METHODS).items()}
    for kind, fig in figures.items():
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in shown] == [f"coord {c}" for c in range(4)], kind
        assert len(fig.axes) == 2 * MAX_PANEL_COLUMNS  # the two spare ones hidden
        for coord, ax in enumerate(shown):
            marked = {line.get_color() for line in ax.lines if line.get_gid() == "partial"}
            at = [{"method": m, "coord": coord} for m in syn.WIDE_METHODS]
            want = {
                colors[cell["method"]]
                for cell in at
                if partial.sel(cell) and np.isfinite(summary[kind].sel(cell))
            }
            assert marked == want, (kind, coord)
            empty = kind == "length" and coord == 3
            assert (NO_DATA_TEXT in [t.get_text() for t in ax.texts]) == empty, (kind, coord)
    plt.close("all")


def test_the_diagnostics_against_a_grid_axis_are_those_at_the_last_checkpoint():
    # A mutation hunt (h15e, plots.py): the first checkpoint's values drawn instead
    # passed every test.
    store = xr.concat([syn.checkpoint_store(reps=3)] * 2, dim=xr.DataArray([0.5, 1.0], dims="eps"))
    store["truth"] = store["truth"].isel(eps=0, drop=True).expand_dims(eps=[0.5, 1.0])
    summary = summarize(store)
    last = summary.isel(checkpoint=-1).sel(coord=0)
    first = summary.isel(checkpoint=0).sel(coord=0)
    assert not np.allclose(last["variance_ratio"], first["variance_ratio"])
    fig = _diagnostics_figure(summary, "eps")
    drawn = {}
    for ax in fig.axes:
        for bars in ax.containers:
            drawn[(ax.get_ylabel(), bars.get_label())] = bars.lines[0].get_ydata()
    for method in syn.RUN_METHODS:
        want = last["variance_ratio"].sel({"method": method}).values
        np.testing.assert_allclose(drawn[("variance ratio", method)], want, rtol=1e-12)
    # bias / sd: one estimate, theta_bar_n, for every method: drawn once.
    (same,) = [values for (label, _), values in drawn.items() if label == "bias / sd"]
    want = last["bias_over_sd"].sel({"method": "bb"}).values
    np.testing.assert_allclose(same, want, rtol=1e-12)
    plt.close(fig)


def test_diagnostics_group_methods_by_values_and_standard_errors_nan_equal_to_nan():
    # A mutation hunt (h15e, plots.py): methods of equal values but unequal standard
    # errors drawn once (with the first one's bars), equal ones with a NaN drawn apart,
    # a panel without values left wordless, and "coord 0" in the titles of a store of
    # one coordinate, passed every test.
    summary = summarize(syn.grid_store().isel(coord=[0]))
    cell = {"tau": 0.5}
    oracle, bb = {**cell, "method": "oracle"}, {**cell, "method": "bb"}
    # At tau = 0.5 the oracle's bias / sd is bb's, its standard error not; at tau = 0.9
    # both are bb's, whose value at n = 10,000 is NaN (no replicate done there).
    summary["bias_over_sd"].loc[oracle] = summary["bias_over_sd"].loc[bb]
    summary["bias_over_sd_se"].loc[oracle] = 2 * summary["bias_over_sd_se"].loc[bb]
    for var in ("bias_over_sd", "bias_over_sd_se"):
        summary[var].loc[{"tau": 0.9, "method": "oracle"}] = summary[var].sel(
            {"tau": 0.9, "method": "bb"}
        )
    assert summary["bias_over_sd"].sel({"tau": 0.9}).isnull().any()
    # No variance ratio at all at tau = 0.9.
    summary["variance_ratio"].loc[{"tau": 0.9}] = np.nan
    fig = _diagnostics_figure(summary, "n")
    labels, texts = {}, {}
    for ax in fig.axes:
        if ax.get_visible():
            labels[(ax.get_title(), ax.get_ylabel())] = [c.get_label() for c in ax.containers]
            texts[(ax.get_title(), ax.get_ylabel())] = [t.get_text() for t in ax.texts]
    assert labels[("tau=0.5", "bias / sd")] == ["bb", "oracle"]
    assert labels[("tau=0.9", "bias / sd")] == ["bb, oracle\n(same values)"]
    assert [key for key, text in texts.items() if NO_VALUE_TEXT in text] == [
        ("tau=0.9", "variance ratio")
    ]
    plt.close(fig)
    # A long method label in that entry breaks after its underscore, as the legend's
    # and the tables' labels do. Before: textwrap's break inside the word passed (h23d).
    renamed = summary.assign_coords(
        method=[m if m != "bb" else "bb_multipliers_t" for m in summary["method"].values]
    )
    fig = _diagnostics_figure(renamed, "n")
    (ax,) = [
        ax for ax in fig.axes if (ax.get_title(), ax.get_ylabel()) == ("tau=0.9", "bias / sd")
    ]
    entry = "bb_\nmultipliers_t,\noracle (same\nvalues)"
    assert [c.get_label() for c in ax.containers] == [entry]
    plt.close(fig)


def test_the_errors_figure_keeps_a_series_with_some_values_and_names_an_empty_panel():
    # A mutation hunt (h15e, plots.py): a series left out for one missing value, and a
    # panel without values left wordless, passed every test.
    store = xr.concat([syn.checkpoint_store(reps=3)] * 2, dim=xr.DataArray([0.5, 1.0], dims="eps"))
    store["truth"] = store["truth"].isel(eps=0, drop=True).expand_dims(eps=[0.5, 1.0])
    summary = summarize(store)
    summary["mse_last"].loc[{"eps": 0.5, "checkpoint": syn.CHECKPOINTS[0]}] = np.nan
    # The last iterate's error counts a replicate fewer at the second checkpoint.
    summary["mse_last_n_done"].loc[{"eps": 0.5, "checkpoint": syn.CHECKPOINTS[1]}] -= 1
    for var, _ in ERROR_SERIES:
        summary[var].loc[{"eps": 1.0}] = np.nan  # nothing for the second grid point
    fig = _errors_figure(summary)
    first, second = fig.axes
    assert [bars.get_label() for bars in first.containers] == [label for _, label in ERROR_SERIES]
    assert [t.get_text() for t in first.texts] == []
    assert [t.get_text() for t in second.texts] == [NO_DATA_TEXT]
    (mark,) = partial_marks(fig)  # the average's errors count every replicate
    assert mark[0] == ERROR_COLORS["mse_last"]
    assert mark[1][0] == pytest.approx(syn.CHECKPOINTS[1], rel=0.2)  # dodged
    plt.close(fig)


def test_a_figure_of_lengths_alone_is_drawn():
    # A mutation hunt (h15e, plots.py): the pair of dot or line figures drawn only when
    # the coverage was asked for passed every test.
    for ds in (syn.point_store(), syn.grid_store()):
        figures = store_figures(ds, ["length"])
        assert list(figures) == ["length"]
        assert figures["length"].axes[0].get_xlabel() in {"mean length", "n"}
        plt.close("all")
    # A kind not in FIGURE_KINDS is refused, not drawn as nothing (api.plot checks it
    # first; store_figures' own check went untested).
    with pytest.raises(InputError, match="Unknown figure kind 'bogus'"):
        store_figures(syn.point_store(), ["length", "bogus"])


def test_a_light_methods_markers_and_error_bars_stand_out_from_white():
    # WCAG 2.1's 1.4.11 asks 3:1 of a graphical object against what is beside it. Before:
    # bm's orange markers and error bars were 2.25:1 on white, cdp_blb_var's sky blue
    # 2.31:1, cdp_blb_pct's yellow 1.32:1 (and two spare colours under 3:1 too).
    from ldpsim.pipeline.report.plots import (
        METHOD_COLORS,
        MIN_EDGE_CONTRAST,
        SPARE_COLORS,
        contrast_ratio,
    )

    assert contrast_ratio("#E69F00") == pytest.approx(2.25, abs=0.01)
    assert contrast_ratio("#000") == pytest.approx(21.0)
    spares = [f"plugin_{i}" for i in range(len(SPARE_COLORS))]
    styles = method_styles([*METHOD_COLORS, *spares])
    for method, style in styles.items():
        assert contrast_ratio(style["markeredgecolor"]) >= MIN_EDGE_CONTRAST, method
        if contrast_ratio(style["color"]) >= MIN_EDGE_CONTRAST:  # kept as it is
            assert style["markeredgecolor"] == style["color"], method
    # bm's error bars in a figure: in its markers' edge colour, not its light orange.
    ds = renamed_method(syn.grid_store(), "oracle", "bm")
    fig = store_figures(ds, ["coverage"])["coverage"]
    edge = to_rgba(method_styles(["bb", "bm"])["bm"]["markeredgecolor"])
    bars = [
        tuple(c)
        for ax in fig.axes
        for container in ax.containers
        if container.get_label() == "bm"
        for c in container[2][0].get_colors()
    ]
    assert bars and set(bars) == {edge}
    plt.close(fig)
    # bm's * marks (a cell of fewer than all replicates: bb's failure, renamed) likewise.
    fig = store_figures(renamed_method(syn.grid_store(), "bb", "bm"), ["coverage"])["coverage"]
    marks = {colour for colour, _ in partial_marks(fig)}
    assert method_styles(["bm"])["bm"]["markeredgecolor"] in marks  # the oracle's black too
    assert all(contrast_ratio(colour) >= MIN_EDGE_CONTRAST for colour in marks), marks
    plt.close(fig)


def test_a_long_panel_title_stays_over_its_panel_clear_of_the_legend():
    # A case label of 50 characters without a space in the rightmost panel. Before: its
    # title stayed one line (wrapped at spaces only, at 40 characters), wider than the
    # length figure's panel (its log ticks leave less room), and ran under the legend
    # frame; the alt text read the title's lines as separate words.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from test_plot_text import mixed_store

    from ldpsim.pipeline.report.report import figure_alt

    label = "randomized_response_with_a_long_label_and_eps_one"
    ds = mixed_store({"quantile": 1}, reps=4, models=("laplace", label))
    figures = store_figures(ds, ["coverage", "length", "diagnostics"])
    for kind, fig in figures.items():
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        legend = fig.legends[0].get_window_extent(renderer)
        titles = [ax.title for ax in fig.axes if ax.get_visible() and ax.get_title()]
        assert any(label[:20] in title.get_text() for title in titles)
        for title in titles:
            box = title.get_window_extent(renderer)
            assert box.x1 < legend.x0 or box.y0 > legend.y1, (kind, title.get_text())
        assert f"{label}, quantile" in figure_alt(kind, fig), kind
        plt.close(fig)


def test_a_panel_title_cut_within_a_word_is_one_name_in_the_alt_text():
    # A case label of 41 characters without a break is cut at 32. Before: the alt text
    # joined the title's lines by a space, "randomizedresponsewithalonglabel andepsone".
    from ldpsim.pipeline.report.plots import _panel_title
    from ldpsim.pipeline.report.report import figure_alt

    label = "randomizedresponsewithalonglabelandepsone"
    fig, ax = plt.subplots()
    ax.plot([1, 2], [0.8, 0.9])
    _panel_title(ax, {"mechanism": label, "tau": 0.5}, 1, {})
    assert "\n" in ax.get_title()  # wrapped on the figure
    assert label in figure_alt("coverage", fig)
    plt.close(fig)


def test_a_light_methods_markers_and_error_bars_stand_out_in_the_sparsity_figure():
    # The sparsity figure draws its markers and error bars with its own calls. Before: a
    # light method's kept its colour there, as its legend entry did (cdp_blb_pct's
    # yellow 1.32:1 on white), where the other figures had the darker edge.
    from ldpsim.pipeline.report.plots import MIN_EDGE_CONTRAST, contrast_ratio

    summary = summarize(renamed_method(sparse_store(), "band", "cdp_blb_pct"))
    fig = _sparsity_figure(summary)
    edge = method_styles(["oracle", "cdp_blb_pct"])["cdp_blb_pct"]["markeredgecolor"]
    assert contrast_ratio(edge) >= MIN_EDGE_CONTRAST
    lines = [
        line
        for ax in fig.axes
        for line in ax.get_lines()
        if str(line.get_label()).startswith("cdp_blb_pct")
    ]
    assert lines and {line.get_markeredgecolor() for line in lines} == {edge}
    bars = [
        tuple(c[:3])  # a coverage it does not claim is faint (alpha 0.5)
        for ax in fig.axes
        for container in ax.containers
        if str(container.get_label()).startswith("cdp_blb_pct")
        for c in container[2][0].get_colors()
    ]
    assert bars and set(bars) == {to_rgba(edge)[:3]}
    # The joint coverage's markers (an error bar's own line) too (a mutation hunt, h24d).
    marked = {
        container[0].get_markeredgecolor()
        for ax in fig.axes
        for container in ax.containers
        if str(container.get_label()).startswith("cdp_blb_pct")
    }
    assert marked == {edge}
    handles = [h for legend in fig.legends for h in legend.legend_handles]
    assert edge in {getattr(h, "get_markeredgecolor", lambda: None)() for h in handles}
    plt.close(fig)


def test_the_edge_contrast_and_the_panel_title_width_are_those_measured():
    """WCAG 2.1's 3:1 for graphical objects, not the constant compared with itself, and
    panel titles cut at 32 characters (the length figure's panels hold about that many).
    Before: either constant changed passed every test (a mutation hunt, h24d)."""
    from ldpsim.pipeline.report.plots import (
        PANEL_TITLE_CHARS,
        _edge_color,
        _join_lines,
        contrast_ratio,
    )

    for light in ("#E69F00", "#56B4E9", "#F0E442"):  # orange, sky blue, yellow
        assert 3.0 <= contrast_ratio(_edge_color(light)) < 3.2, light
    title = _join_lines(["mechanism " + "x" * 26], PANEL_TITLE_CHARS)
    assert PANEL_TITLE_CHARS == 32 and "\n" in title
    assert max(len(line) for line in title.split("\n")) <= 32
