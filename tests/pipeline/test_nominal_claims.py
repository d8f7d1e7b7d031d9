"""Issue 43, items 1-3 and 8: flags that test each method's nominal claim, labels by case,
compact tables and records of the coordinates that exist."""

from __future__ import annotations

import json

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from scipy.stats import binom, norm

from ldpsim.pipeline.formatting import cell_text
from ldpsim.pipeline.report.plots import _bar_figures, _diagnostics_figure, _line_figures
from ldpsim.pipeline.report.report import result_tables, store_facts
from ldpsim.pipeline.summary.nominal_claims import (
    FLAG_Z,
    departs,
    false_flag_rate,
    method_claims,
    null_se,
)
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import (
    DEPARTURE_MARK,
    coverage_cell,
    format_table,
    wilson_interval,
)
from ldpsim.pipeline.sweep import note_overrides

#: Replicates of the flag-rate checks: the issue's R.
FLAG_RS = (40, 200, 500)
#: Binomial cells drawn at exactly nominal coverage per R.
CELLS = 10_000


def flagged_at(covered: np.ndarray, replicates: int, level: float) -> np.ndarray:
    """The tables' flag (:func:`coverage_cell`, the one function of the text, Markdown,
    LaTeX and HTML tables) of coverages ``covered / replicates``, each shown with its
    own standard error as the summary gives it."""
    out = []
    for k in covered:
        p = k / replicates
        out.append(coverage_cell(p, np.sqrt(p * (1 - p) / replicates), replicates, level)[1])
    return np.array(out)


def exact_flag_rate(replicates: int, level: float) -> float:
    """The probability that the tables flag a cell whose true coverage is ``level``:
    the binomial sum over the covering counts they flag."""
    covered = np.arange(replicates + 1)
    flags = flagged_at(covered, replicates, level)
    return float(binom.pmf(covered[flags], replicates, level).sum())


# -- item 1: the flag is a test of coverage = nominal at 5% ------------------------------
def test_exact_false_flag_rates_at_nominal_lie_between_3_5_and_6_percent():
    rates = {r: exact_flag_rate(r, syn.LEVEL) for r in FLAG_RS}
    # The z test with the null's standard error sqrt(q (1 - q) / R), computed here on
    # its own: 5.7%, 4.4% and 4.4% (the old rule, p's own se: 8.6%, 6.6%, 5.2%).
    for r, rate in rates.items():
        k = np.arange(r + 1)
        z = np.abs(k / r - syn.LEVEL) / np.sqrt(syn.LEVEL * (1 - syn.LEVEL) / r)
        assert rate == pytest.approx(binom.pmf(k[z > norm.ppf(0.975)], r, syn.LEVEL).sum())
        assert 0.035 <= rate <= 0.06, (r, rate)
    assert [round(rates[r], 3) for r in FLAG_RS] == [0.057, 0.044, 0.044]


def test_flag_rate_of_binomial_cells_at_nominal_matches_the_exact_rate():
    rng = np.random.default_rng(43)
    for r in FLAG_RS:
        covered = rng.binomial(r, syn.LEVEL, CELLS)
        # Each possible cell's flag once, then the drawn cells' flags.
        observed = flagged_at(np.arange(r + 1), r, syn.LEVEL)[covered].mean()
        exact = exact_flag_rate(r, syn.LEVEL)
        # The flags of 10,000 independent cells are a Binomial(10,000, exact) count: its
        # rate has sd sqrt(exact (1 - exact) / 10,000) (<= 0.0024 here), and 4 sd are
        # passed by chance with probability 6e-5.
        tolerance = 4 * np.sqrt(exact * (1 - exact) / CELLS)
        assert abs(observed - exact) <= tolerance, (r, observed, exact)
        assert 0.035 <= observed <= 0.06


def test_the_issues_example_is_not_flagged_and_an_undercoverage_is():
    # The oracle's 0.935 (0.017) at R = 200: z under the null 1.65, not a departure.
    assert not coverage_cell(0.935, np.sqrt(0.935 * 0.065 / 200), 200, 0.9)[1]
    # 0.85 at R = 200 is 2.36 null se short (p's own se, 0.025, gave 1.98: unflagged).
    assert coverage_cell(0.85, np.sqrt(0.85 * 0.15 / 200), 200, 0.9)[1]
    # 10 of 10 covered: Wilson's interval shown, and 1.0 is 1.05 null se from 0.9.
    assert coverage_cell(1.0, 0.0, 10, 0.9) == ("1.000 [0.714, 1.000]", False)


# -- item 2: each method is tested on its own claim only ----------------------------------
CLAIM_REPS = 200


def covering_store(
    ns: list[int], methods: list[str], covers: np.ndarray, method_specs: dict
) -> xr.Dataset:
    """Every replicate done, the truth 0 at every coordinate, and each interval (-0.1,
    0.1) where ``covers`` (n, method, rep, coord) and (0.01, 0.21) where not; the sweep's
    methods ``method_specs``."""
    reps, d = covers.shape[2:]
    lower = np.where(covers, -0.1, 0.01)
    done = np.ones((len(ns), reps), dtype=bool)
    sweep = json.loads(syn.sweep_attr({"n": ns}, {"eps": 1.0, "d": d}, methods, reps))
    sweep["methods"] = method_specs
    ds = xr.Dataset(
        {
            "estimate": (("n", "rep", "coord"), np.zeros((len(ns), reps, d))),
            "lower": (("n", "method", "rep", "coord"), lower),
            "upper": (("n", "method", "rep", "coord"), lower + 0.2),
            "truth": (("n", "coord"), np.zeros((len(ns), d))),
            "done": (("n", "rep"), done),
            "failed": (("n", "rep"), ~done),
            "method_failed": (("n", "method", "rep"), np.zeros(covers.shape[:3], dtype=bool)),
        },
        coords={
            "n": np.array(ns, dtype=np.int64),
            "method": np.array(methods, dtype=object),
            "rep": np.arange(reps),
            "coord": np.arange(d),
        },
    )
    ds.attrs.update(level=syn.LEVEL, sweep=json.dumps(sweep))
    return ds


def claims_store() -> xr.Dataset:
    """Grid n = 100, 1000; d = 2; R = 200; methods bb and oracle (intervals), band and
    band_low (simultaneous bands). Misses per coordinate (the same at both n):

    - bb: coordinate 0 in replicates 0-12, coordinate 1 in 13-25: 0.935 each (the issue's
      oracle: 1.65 null se over), joint 0.870;
    - oracle: coordinate 0 in 0-29, coordinate 1 in 30-59: 0.85 each (2.36 null se
      short), joint 0.70 (not its claim);
    - band: coordinate 0 in 0-19: 0.9 and 1.0, joint 0.9;
    - band_low: coordinate 0 in 0-39: 0.8 and 1.0, joint 0.8 (4.7 null se short).
    """
    misses = {
        "bb": [range(0, 13), range(13, 26)],
        "oracle": [range(0, 30), range(30, 60)],
        "band": [range(0, 20), range(0)],
        "band_low": [range(0, 40), range(0)],
    }
    methods, ns, d, reps = list(misses), [100, 1000], 2, CLAIM_REPS
    covers = np.ones((len(ns), len(methods), reps, d), dtype=bool)
    for m, method in enumerate(methods):
        for j, missed in enumerate(misses[method]):
            covers[:, m, list(missed), j] = False
    return covering_store(
        ns,
        methods,
        covers,
        {
            "bb": {},
            "oracle": {},
            "band": {"method": "bb", "simultaneous": True},
            "band_low": {"method": "bb", "simultaneous": True, "band": "sidak"},
        },
    )


#: The flagged cells of :func:`claims_store`'s tables, by their row labels, at both n:
#: with a row per coordinate, the oracle's coordinates (bb's 0.935 is no departure; the
#: bands' 0.8, 0.9 and 1.0 per coordinate are not their claim); with the coordinate
#: means, the oracle's mean and band_low's joint coverage (not the intervals' joint 0.87
#: and 0.70).
FLAGGED = {
    "all": {("coord 0", "oracle", "cover"), ("coord 1", "oracle", "cover")},
    "mean": {("oracle", "cover"), ("band_low", "joint")},
}


def filled(labels: list[list[str]]) -> list[list[str]]:
    """Row labels with the blanks of repeated levels filled in again."""
    out: list[list[str]] = []
    for row in labels:
        out.append([v or (out[-1][i] if out else "") for i, v in enumerate(row)])
    return out


@pytest.mark.parametrize("coords", ["all", "mean"])
def test_tables_flag_each_methods_claim_only_with_one_rule(coords):
    summary = summarize(claims_store())
    want = {(*labels, column) for labels in FLAGGED[coords] for column in (0, 1)}
    # ldpsim summarize's text table marks as many cells (and explains the mark once).
    assert format_table(summary, "text", coords=coords).count(DEPARTURE_MARK) == len(want) + 1
    if coords == "all":
        # The report's first table marks these cells (and plans the bands' replicates).
        table = result_tables(summary)[0]
        rows = [row for group in table["groups"] for row in group]
        got = {
            (*labels, column)
            for labels, row in zip(filled([row["labels"] for row in rows]), rows, strict=True)
            for column, cell in enumerate(row["cells"])
            if cell["departs"]
        }
        assert got == want
    # The same cells in every format: one function, coverage_table's.
    from ldpsim.pipeline.summary.tables import DEPARTURE_MARKS, coverage_table

    for fmt, mark in DEPARTURE_MARKS.items():
        # ldpsim summarize's tables: the marked cells, and one mark more in the note
        # under the table that explains it.
        table = coverage_table(summary, fmt, coords=coords)
        got = {
            (*(label.replace("\\_", "_") for label in labels), column)
            for labels, cells in table.rows
            for column, cell in enumerate(cells)
            if cell.endswith(mark)
        }
        assert got == want, fmt
        assert format_table(summary, fmt, coords=coords).count(mark) == len(want) + 1, fmt


def test_the_coverage_figures_compare_each_methods_claim_with_nominal():
    summary = summarize(claims_store())
    coverage, _ = _line_figures(summary, "n")
    for ax in coverage.axes:
        if not ax.get_visible() or not ax.containers:
            continue
        series = {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}
        # Per coordinate: the intervals filled, the bands hollow (not their claim).
        for method in ("bb", "oracle"):
            assert series[method].lines[0].get_markerfacecolor() != "white"
        for method in ("band", "band_low"):
            assert series[f"{method} (not its claim)"].lines[0].get_markerfacecolor() == "white"
    # Each method once under its own name, and what the hollow markers mean.
    from ldpsim.pipeline.report.plots import HOLLOW_TEXT

    legend = [t.get_text() for t in coverage.legends[0].get_texts()]
    assert sorted(legend) == sorted(["bb", "oracle", "band", "band_low", "nominal", HOLLOW_TEXT])


def test_the_joint_panel_draws_only_the_bands_against_nominal():
    # sparse's shape: the coordinate means and the joint coverage as dot panels.
    ds = syn.sparse_shaped_store(dims=(3, 6), sparsities=(1,), reps=10)
    cov, _ = _bar_figures(summarize(ds))
    mean_ax, joint_ax = [ax for ax in cov.axes if ax.get_visible()]
    for ax, claimed in (
        (mean_ax, {"bb", "bm", "sn", "oracle"}),
        (joint_ax, {"band", "band_sidak"}),
    ):
        drawn = {c.get_label(): c for c in ax.containers}
        for label, container in drawn.items():
            method = label.removesuffix(" (not its claim)")
            hollow = container.lines[0].get_markerfacecolor() == "white"
            assert hollow == (method not in claimed), (ax.get_title(), label)
        assert any(line.get_label() == "nominal" for line in ax.get_lines())
    assert (mean_ax.get_xlabel(), joint_ax.get_xlabel()) == ("coverage", "joint")
    # Without a band, the joint coverage is nobody's claim: no nominal line in its panel.
    plain = ds.sel(method=["bb", "bm", "sn", "oracle"])
    sweep = json.loads(plain.attrs["sweep"])
    sweep["methods"] = {m: syn.SPARSE_METHODS[m] for m in ("bb", "bm", "sn", "oracle")}
    plain.attrs["sweep"] = json.dumps(sweep)
    cov, _ = _bar_figures(summarize(plain))
    _, joint_ax = [ax for ax in cov.axes if ax.get_visible()]
    assert not any(line.get_label() == "nominal" for line in joint_ax.get_lines())


def test_one_coordinate_gets_no_joint_panel_beside_its_coverage():
    # A mutation hunt (h15e): the joint coverage of a single coordinate (its coverage
    # again) drawn as a second panel passed every test.
    ds = claims_store().sel(n=100, drop=True).isel(coord=[0])
    sweep = json.loads(ds.attrs["sweep"])
    sweep["grid"], sweep["spec"]["d"] = {}, 1
    ds.attrs["sweep"] = json.dumps(sweep)
    summary = summarize(ds)
    assert "joint" in method_claims(summary).values()  # the bands claim it
    cov, _ = _bar_figures(summary)
    (ax,) = [ax for ax in cov.axes if ax.get_visible()]
    assert (ax.get_title(), ax.get_xlabel()) == ("", "coverage")


# -- "R for se" of a simultaneous band: planned from its joint coverage -------------------
#: planning_store's target standard error (``ldpsim summarize --target-se 0.01``).
PLAN_SE = 0.01
PLAN_REPS = 100
#: Per n, the replicates in which each coordinate is missed: bb's coordinates alone
#: (joint 0.80 and 0.85), the band's now and then at once (joint 0.94 and 0.96).
PLAN_MISSES = {
    100: {"bb": [range(0, 10), range(10, 20)], "band": [range(0, 3), range(3, 6)]},
    1000: {"bb": [range(0, 5), range(5, 15)], "band": [range(0, 2), range(0, 4)]},
}


def planning_store() -> xr.Dataset:
    """Grid n = 100, 1000; d = 2; R = 100; a marginal bb and a simultaneous band (Sidak)
    missing the coordinates of :data:`PLAN_MISSES`, every coverage inside (0, 1)."""
    ns, methods, d, reps = list(PLAN_MISSES), ["bb", "band"], 2, PLAN_REPS
    covers = np.ones((len(ns), len(methods), reps, d), dtype=bool)
    for i, n in enumerate(ns):
        for m, method in enumerate(methods):
            for j, missed in enumerate(PLAN_MISSES[n][method]):
                covers[i, m, list(missed), j] = False
    return covering_store(
        ns,
        methods,
        covers,
        {"bb": {}, "band": {"method": "bb", "simultaneous": True, "band": "sidak"}},
    )


def planned(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """The replicates for a coverage se of PLAN_SE, from ``ds``'s bounds (R p (1 - p) /
    se^2 = R (se_R / PLAN_SE)^2, rounded up): per n, method and coordinate
    (``coverage``), per n and method of the per-replicate fractions of covered
    coordinates (``mean``, their sd / sqrt(R) the standard error) and of all covered
    at once (``joint``)."""
    covered = ((ds["lower"] <= ds["truth"]) & (ds["truth"] <= ds["upper"])).values
    reps = covered.shape[2]

    def needed(se: np.ndarray) -> np.ndarray:
        return np.ceil(np.round(reps * (se / PLAN_SE) ** 2, 6))

    def binomial(p: np.ndarray) -> np.ndarray:
        return needed(np.sqrt(p * (1 - p) / reps))

    fractions = covered.mean(axis=3)  # n, method, rep
    return {
        "coverage": binomial(covered.mean(axis=2)),
        "mean": needed(fractions.std(axis=2, ddof=1) / np.sqrt(reps)),
        "joint": binomial(covered.all(axis=3).mean(axis=2)),
    }


PLAN_ROW = f"R for se {PLAN_SE:g}"
PLAN_CAPTION = (
    f"; {PLAN_ROW}: the replicates that would give the coverage a Monte-Carlo standard "
    f"error of {PLAN_SE:g}; {PLAN_ROW}, joint: the same for the joint coverage (all "
    "coordinates at once), what a simultaneous band (band) is for"
)


def body_rows(text: str) -> list[list[str]]:
    """The words of each row of a text table (between its second and third rule)."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    return [line.split() for line in lines[rules[1] + 1 : rules[2]]]


@pytest.mark.parametrize("coords", ["all", "mean"])
def test_a_bands_r_for_se_row_plans_from_its_joint_coverage_at_every_n(coords):
    # `ldpsim summarize --target-se 0.01`: bb's row plans its coverage (per coordinate,
    # or their mean), the band's its joint coverage, one column per n; neither method
    # has the other's row. A mutation hunt (h16d, T39): the two swapped (the band's
    # coverage per coordinate planned, as if it were an interval) passed the tests of
    # tables.py, which built no band table of more than one n.
    from ldpsim.pipeline.formatting import count_text
    from ldpsim.pipeline.summary.tables import coverage_table

    ds = planning_store()
    summary = summarize(ds, target_se=PLAN_SE)
    want = planned(ds)
    # The band's joint coverage 0.94 and 0.96: 0.94 x 0.06 / 0.01^2 = 564, 384.
    np.testing.assert_array_equal(want["joint"][:, 1], [564, 384])

    def texts(values: np.ndarray) -> list[str]:
        return [count_text(float(v)) for v in values]

    if coords == "all":
        expected = {}
        for j in range(2):
            expected[f"coord {j}", "bb", PLAN_ROW] = texts(want["coverage"][:, 0, j])
            expected[f"coord {j}", "band", f"{PLAN_ROW}, joint"] = texts(want["joint"][:, 1])
    else:
        expected = {
            ("bb", PLAN_ROW): texts(want["mean"][:, 0]),
            ("band", f"{PLAN_ROW}, joint"): texts(want["joint"][:, 1]),
        }
    table = coverage_table(summary, "text", coords=coords, replicates_needed=True)
    assert table.headers == ["n = 1e2", "n = 1e3"]
    got = {tuple(labels): cells for labels, cells in table.rows if "R for se" in labels[-1]}
    assert got == expected
    assert table.caption.endswith(PLAN_CAPTION)
    # The table ldpsim summarize prints: that caption, those rows in the sweep's order.
    text = format_table(summary, "text", coords=coords, replicates_needed=True)
    assert text.splitlines()[0] == table.caption
    shown = [row[-2:] for row in body_rows(text) if "se" in row]
    assert shown == list(expected.values())


def test_a_band_table_of_one_n_leaves_each_methods_other_r_for_se_cell_missing():
    # One n: the statistics are the columns; bb has no joint planning, the band none per
    # coordinate: MISSING_TEXT there, not an empty cell (the text columns would shift).
    # A mutation hunt (h16d, T42): "" in its place passed the tests of tables.py.
    from ldpsim.pipeline.formatting import MISSING_TEXT, count_text
    from ldpsim.pipeline.summary.tables import coverage_table

    ds = planning_store().sel(n=[1000])
    summary = summarize(ds, target_se=PLAN_SE)
    want = planned(ds)
    expected = {}
    for j in range(2):
        expected[f"coord {j}", "bb"] = [count_text(want["coverage"][0, 0, j]), MISSING_TEXT]
        expected[f"coord {j}", "band"] = [MISSING_TEXT, count_text(want["joint"][0, 1])]
    table = coverage_table(summary, "text", replicates_needed=True)
    assert table.headers == ["cover", "length", PLAN_ROW, f"{PLAN_ROW}, joint"]
    assert {tuple(labels): cells[2:] for labels, cells in table.rows} == expected
    assert table.caption.startswith("synthetic: 90% intervals at n = 1e3;")
    assert table.caption.endswith(PLAN_CAPTION)
    # Each printed row ends in its two planning cells.
    text = format_table(summary, "text", replicates_needed=True)
    assert [row[-2:] for row in body_rows(text)] == list(expected.values())


@pytest.mark.parametrize("coords", ["all", "mean"])
def test_a_band_table_without_replicates_needed_says_nothing_of_planning(coords):
    # Without --target-se: no "R for se" row or column, and no caption of one, bands or
    # not. A mutation hunt (h16d, T46): the bands' part of that caption shown without
    # its rows passed every test.
    summary = summarize(planning_store(), target_se=PLAN_SE)
    for fmt in ("text", "markdown", "latex"):
        text = format_table(summary, fmt, coords=coords)
        assert "R for se" not in text and "what a simultaneous band" not in text, fmt
    caption = format_table(summary, "text", coords=coords).splitlines()[0]
    counted = f"replicates per cell: {PLAN_REPS} of {PLAN_REPS}"
    end = f"{counted}; --coords all lists each coordinate" if coords == "mean" else counted
    assert caption.endswith(end)


# -- item 3: labels -----------------------------------------------------------------------
def test_dot_panels_name_each_cases_own_d():
    # Cases of d = 3 and 6 in a store of 6 coordinates: no panel says "the 6 coords".
    ds = syn.sparse_shaped_store(dims=(3, 6), sparsities=(1,), reps=10)
    cov, length = _bar_figures(summarize(ds))
    titles = [" ".join(ax.get_title().split()) for fig in (cov, length) for ax in fig.axes]
    assert not any("6 coords" in title for title in titles), titles
    assert "mean over each row's d coords" in titles
    assert "joint: all d coords of a row at once" in titles
    # Every row label says its d.
    labels = [t.get_text() for t in cov.axes[0].get_yticklabels()]
    assert all(label.startswith(("d=3,", "d=6,")) for label in labels), labels
    # One d for every grid point: the number.
    uniform = syn.sparse_shaped_store(dims=(6,), sparsities=(1, 4), reps=10)
    cov, _ = _bar_figures(summarize(uniform))
    assert "mean over the 6 coords" in [ax.get_title() for ax in cov.axes]


def test_dot_figure_legends_leave_the_panel_titles_free():
    # sparse's long row labels once squeezed the panel until its title ran under the
    # legend (the length figure: "mean over the 12 coords" here).
    ds = syn.sparse_shaped_store(dims=(4, 12), sparsities=(1, 4), reps=4)
    for fig in _bar_figures(summarize(ds)):
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        legends = [legend.get_window_extent(renderer) for legend in fig.legends]
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            title = ax.title.get_window_extent(renderer)
            for legend in legends:
                assert not title.overlaps(legend), (ax.get_title(), title, legend)


def test_a_float_n_is_written_as_the_tables_write_it():
    before = {"description": "sparse", "spec": {"n": 1_000_000, "eps": 1.0}}
    after = {"description": "sparse", "spec": {"n": 50000.0, "eps": 2.0}}
    assert note_overrides(before, after)["description"] == "sparse (as run: n = 5e4, eps = 2.0)"
    # The header of a report and the tables' caption: 5e4, as 1e5 is 1e5.
    for n, text in ((5e4, "5e4"), (1e5, "1e5"), (250_000, "2.5e5")):
        ds = syn.sparse_shaped_store(dims=(6,), sparsities=(1,), reps=4, n=n)
        assert store_facts(ds)["n"] == text
        assert f"intervals at n = {text};" in format_table(summarize(ds), "text")


def test_a_standard_error_below_the_columns_precision_is_not_zero():
    assert cell_text(0.99996, 0.00004, False) == "1.000 (<0.001)"
    assert cell_text(0.00843, 0.000004, True) == "0.00843 (<0.00001)"
    assert cell_text(0.5, 0.0, False) == "0.500 (0.000)"  # an se of exactly 0 stays 0
    assert cell_text(0.658, 1e-16, True) == "0.658 (0.000)"  # and one of rounding noise
    # A diverged run's length (a hunt, 2026-12-01: 67 digits of fixed point).
    assert cell_text(1.234e66, 5.6e64, True) == "1.23e+66 (5.6e+64)"
    assert cell_text(-2.5e6, float("nan"), False) == "-2.5e+06 (n/a)"
    assert cell_text(999_999.9996, 0.0, False) == "1e+06 (0)"  # rounds to 1e6: exponent
    assert cell_text(1e66, 1e50, True) == "1e+66 (0)"  # an se at rounding noise is 0
    assert cell_text(0.902, 0.013, False) == "0.902 (0.013)"


def test_bias_over_sd_is_drawn_once_where_the_methods_share_it():
    # bb and the oracle centre at theta_bar_n and count the same replicates: one bias/sd,
    # one error bar per panel; their variance ratios differ, one bar each.
    ds = syn.wide_store(2)
    rep = syn.WIDE_FAILED_REP
    for name in ("lower", "upper"):
        values = ds[name].values.copy()
        values[:, 0, rep] = values[:, 1, rep]
        ds[name] = (ds[name].dims, values)
    ds["method_failed"] = xr.zeros_like(ds["method_failed"])
    fig = _diagnostics_figure(summarize(ds), "n")
    for ax in fig.axes:
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        if ax.get_ylabel() == "bias / sd":
            assert [c.get_label() for c in bars] == ["bb, oracle\n(same values)"]
        elif ax.get_ylabel() == "variance ratio":
            assert [c.get_label() for c in bars] == ["bb", "oracle"]


# -- item 8: compact tables, records of the coordinates that exist -------------------------
def test_a_store_of_one_n_gets_statistics_as_columns():
    # sparse's shape (more than 10 coordinates: their means and the joint coverage), one n.
    ds = syn.sparse_shaped_store(dims=(3, 12), sparsities=(1,), reps=10)
    summary = summarize(ds)
    lines = format_table(summary, "text").splitlines()
    assert "intervals at n = 5e4;" in lines[0]
    header = lines[2].split()
    labels = ["d", "mechanism", "calibration", "delta", "method"]
    assert header == [*labels, "cover", "joint", "length"]
    body = lines[4 : lines.index(lines[1], 4)]
    cases, methods = ds.sizes["case"], ds.sizes["method"]
    assert len(body) == cases * methods  # was cases x methods x 3 statistics
    # The report: the same layout, its "R for se" columns beside them.
    report = result_tables(summary)[0]
    assert report["headers"][:3] == ["cover", "joint", "length"]
    assert sum(len(group) for group in report["groups"]) == cases * methods


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_records_only_for_the_coordinates_a_grid_point_has(fmt):
    ds = syn.sparse_shaped_store(dims=(3, 6), sparsities=(1,), reps=10)
    summary = summarize(ds)
    text = format_table(summary, fmt)
    if fmt == "csv":
        import csv
        import io

        records = list(csv.DictReader(io.StringIO(text)))
    else:
        records = json.loads(text)
    cases = json.loads(ds.attrs["sweep"])["cases"]
    per_case = {label: int(case["d"]) for label, case in cases.items()}
    methods = ds.sizes["method"]
    assert len(records) == sum(per_case.values()) * methods  # not cases x 6 x methods
    assert all(int(r["coord"]) < per_case[r["case"]] for r in records)
    assert all(int(r["n_done"]) == 10 for r in records)


@pytest.mark.parametrize(
    ("replicates", "rate"), [(40, 0.057), (200, 0.044), (500, 0.044)], ids=["40", "200", "500"]
)
def test_the_false_flag_rates_the_module_states(replicates, rate):
    # nominal_claims: 5.7%, 4.4% and 4.4% at R = 40, 200 and 500 (q = 0.9), with the
    # standard error under H0, sqrt(q (1 - q) / R).
    assert null_se(0.9, replicates) == pytest.approx(np.sqrt(0.09 / replicates), rel=1e-12)
    assert false_flag_rate(replicates, 0.9) == pytest.approx(rate, abs=5e-4)
    # The same sum, from scipy's binomial.
    k = np.arange(replicates + 1)
    flagged = np.abs(k / replicates - 0.9) > FLAG_Z * np.sqrt(0.09 / replicates)
    exact = binom.pmf(k[flagged], replicates, 0.9).sum()
    assert false_flag_rate(replicates, 0.9) == pytest.approx(exact, rel=1e-9)


def test_no_replicate_gives_no_standard_error_and_no_flag():
    # R = 0: NaN, not the infinite sqrt(q (1 - q) / 0); a cell without replicates or
    # without a coverage is not flagged.
    assert np.isnan(null_se(0.9, np.array([0, -1]))).all()
    assert departs(np.array([0.5, np.nan, 0.5]), np.array([0, 40, 40]), 0.9).tolist() == [
        False,
        False,
        True,
    ]


def test_wilsons_interval_stays_in_zero_one_and_a_zero_se_inside_is_shown_as_such():
    # Unclamped, centre - half at coverage 0 is -7e-18 at R = 29 ("-0.000"), and
    # centre + half at coverage 1 is 1 + 2e-16 at R = 21.
    assert wilson_interval(0.0, 29)[0] == 0.0
    assert wilson_interval(1.0, 21)[1] == 1.0
    assert coverage_cell(0.0, 0.0, 29, 0.9)[0].startswith("0.000 [0.000, ")
    # Inside (0, 1) a standard error of 0 (a coordinate mean that every replicate
    # shares) is shown as it is, not replaced by Wilson's interval.
    assert coverage_cell(0.5, 0.0, 40, 0.9, claimed=False) == ("0.500 (0.000)", False)
