"""Your own statistics (issue 34, item 9): ``summarize(..., statistics={name: fn})`` and
``ldpsim summarize --statistic NAME`` from the entry-point group ``ldpsim.statistics``.

The store is :func:`synthetic.grid_store` with its bounds moved by a fixed random amount,
so that both one-sided coverages vary between replicates; bb failed in one replicate and
one grid point has no done replicate, so the cells count different replicates.
"""

from __future__ import annotations

import csv
import io
import json
import warnings

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from conftest import one_error_line

from ldpsim.pipeline import api
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError, shown_value
from ldpsim.pipeline.summary import cell_statistics
from ldpsim.pipeline.summary.cell_statistics import BOOTSTRAP_RESAMPLES, Cell, StatisticPlugin
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import (
    AUTO_MAX_COORDS,
    format_table,
    record_fields,
    summary_records,
)


def lower_cover(c: Cell) -> np.ndarray:
    """One-sided coverage: the lower bound at or below theta*."""
    return c.lower <= c.truth


def median_length(c: Cell) -> float:
    """The median interval length (one number: a bootstrap standard error)."""
    return float(np.median(c.upper - c.lower))


@pytest.fixture(scope="module")
def store() -> xr.Dataset:
    ds = syn.grid_store()
    shift = np.random.default_rng(5).normal(0.0, 0.1, ds["lower"].shape)
    return ds.assign(lower=ds["lower"] + shift, upper=ds["upper"] + shift)


@pytest.fixture(scope="module")
def summary(store) -> xr.Dataset:
    own = {"lower_cover": lower_cover, "median_length": median_length}
    return api.summarize(store, as_dataset=True, statistics=own)


def counted(store: xr.Dataset, cell: dict) -> dict[str, np.ndarray]:
    """The stored arrays of a cell at the replicates its coverage counts, by numpy."""
    c = store.sel(cell)
    lower, upper = c["lower"].values, c["upper"].values
    use = c["done"].values & np.isfinite(lower) & np.isfinite(upper)
    truth = float(c["truth"])
    return {"lower": lower[use], "upper": upper[use], "truth": truth}


CELLS = [
    {"tau": tau, "n": n, "method": m, "coord": j}
    for tau in syn.TAUS
    for n in syn.NS
    for m in syn.METHODS
    for j in range(syn.D)
    if {"tau": tau, "n": n} != syn.EMPTY_CELL
]


def test_one_sided_coverage_is_numpy_on_the_stored_arrays_with_se_sd_over_root_r(store, summary):
    # sd of ddof 0, coverage's rule (sqrt(p (1 - p) / R) for indicators).
    for cell in CELLS:
        arrays = counted(store, cell)
        hits = (arrays["lower"] <= arrays["truth"]).astype(float)
        count = len(hits)
        assert count == int(summary["n_done"].sel(cell))  # the coverage's replicates
        got = summary.sel(cell)
        np.testing.assert_allclose(float(got["lower_cover"]), hits.mean(), rtol=1e-12)
        se = hits.std(ddof=0) / np.sqrt(count)
        np.testing.assert_allclose(float(got["lower_cover_se"]), se, rtol=1e-12)
    # It varies (the test could fail), and bb counts 35 replicates where the oracle has 36.
    values = summary["lower_cover"].sel({"tau": 0.5, "n": 100, "method": "bb"}).values
    assert 0.0 < values.min() and values.max() < 1.0
    assert summary["lower_cover_se"].attrs["se_method"] == "mean"
    empty = summary.sel(syn.EMPTY_CELL)
    assert np.isnan(empty["lower_cover"]).all() and np.isnan(empty["lower_cover_se"]).all()


def test_the_median_length_gets_a_bootstrap_se_close_to_a_reference(store, summary):
    for cell in CELLS:
        arrays = counted(store, cell)
        lengths = arrays["upper"] - arrays["lower"]
        got = summary.sel(cell)
        assert float(got["median_length"]) == np.median(lengths)
        if cell["method"] == "oracle":  # one length in all replicates: no spread
            assert np.ptp(lengths) < 1e-12 and float(got["median_length_se"]) < 1e-12
            continue
        # An independent bootstrap, 4 times longer, in the test.
        rng = np.random.default_rng(2024)
        draws = np.array(
            [np.median(rng.choice(lengths, len(lengths))) for _ in range(4 * BOOTSTRAP_RESAMPLES)]
        )
        reference = draws.std(ddof=1)
        # Monte-Carlo error of an sd from B draws: sd^2 (kurtosis - 1) / (4 B).
        centred = draws - draws.mean()
        kurtosis = np.mean(centred**4) / np.mean(centred**2) ** 2
        per_draw = reference**2 * (kurtosis - 1) / 4
        tolerance = 4 * np.sqrt(per_draw / BOOTSTRAP_RESAMPLES + per_draw / draws.size)
        se = float(got["median_length_se"])
        assert np.isfinite(se) and se > 0
        assert abs(se - reference) < tolerance, (cell, se, reference, tolerance)
    assert summary["median_length_se"].attrs["se_method"] == "bootstrap"
    assert summary["median_length_se"].attrs["bootstrap_resamples"] == BOOTSTRAP_RESAMPLES


def test_a_fixed_seed_gives_the_same_bootstrap_se_every_time(store, summary):
    again = api.summarize(store, as_dataset=True, statistics={"median_length": median_length})
    np.testing.assert_array_equal(again["median_length_se"], summary["median_length_se"])


def test_the_tables_show_them_and_say_which_se(summary):
    text = format_table(summary, "text")
    assert "lower_cover: the mean of per-replicate values, standard error sd / sqrt(R)" in text
    assert f"median_length: standard error from {BOOTSTRAP_RESAMPLES} bootstrap" in text
    rows = [line for line in text.splitlines() if "lower_cover " in line]
    assert len(rows) == len(syn.TAUS) * syn.D * len(syn.METHODS)  # per tau, coord, method
    recs = json.loads(format_table(summary, "json"))
    first = summary.sel(CELLS[0])
    rec = next(
        r for r in recs if all(r[k] == (v if k != "n" else int(v)) for k, v in CELLS[0].items())
    )
    assert rec["lower_cover"] == float(first["lower_cover"])
    assert rec["lower_cover_se"] == float(first["lower_cover_se"])
    assert rec["lower_cover_se_method"] == "sd / sqrt(R)"
    assert rec["median_length_se_method"] == f"bootstrap, B = {BOOTSTRAP_RESAMPLES}"
    assert list(rec)[-1] == "n_replicates"
    header = next(csv.reader(io.StringIO(format_table(summary, "csv"))))
    assert {"lower_cover", "lower_cover_se", "median_length_se_method"} <= set(header)
    assert " & lower\\_cover & " in format_table(summary, "latex")  # a row label, escaped


def test_the_data_frame_has_their_columns(store, summary):
    frame = api.summarize(store, statistics={"lower_cover": lower_cover})
    row = frame[(frame["tau"] == 0.5) & (frame["n"] == 100) & (frame["method"] == "bb")]
    np.testing.assert_allclose(
        row["lower_cover"].to_numpy(),
        summary["lower_cover"].sel({"tau": 0.5, "n": 100, "method": "bb"}),
    )
    assert frame["lower_cover"].dtype == np.float64
    assert set(frame["lower_cover_se_method"]) == {"sd / sqrt(R)"}


def test_a_statistic_that_raises_is_one_input_error_naming_it(store):
    def exploding(c: Cell) -> float:
        raise ZeroDivisionError("no replicates\nat all")

    with pytest.raises(InputError) as info:
        api.summarize(store, statistics={"lower_cover": lower_cover, "exploding": exploding})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("The statistic 'exploding' raised ZeroDivisionError: no ")
    assert "test_own_statistics.py, line" in message and "method = bb" in message
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize(
    ("statistics", "error", "words"),
    [
        ({"x": lambda c: "many"}, InputError, "not a number"),
        # A forgotten return, and a number as text: refused, not read as NaN and 0.5.
        ({"x": lambda c: None}, InputError, "'x' returned None at the cell"),
        ({"x": lambda c: "0.5"}, InputError, "'x' returned '0.5' at the cell"),
        ({"x": lambda c: np.zeros((2, 2))}, InputError, "shape (2, 2)"),
        ({"x": lambda c: c.upper + 1j}, InputError, "'x' returned complex values at the cell"),
        ({"x": lambda c: 1j}, InputError, "return real numbers (the real part, or the abs"),
        ({"coverage": lower_cover}, InputError, "the summary's 'coverage'"),
        ({"tau": lower_cover}, InputError, "the summary's 'tau'"),
        ({"a": lower_cover, "a_se": lower_cover}, InputError, "the summary's 'a_se'"),
        # A field of the records and of a comparison's, a dimension the store lacks.
        ({"n_replicates": lower_cover}, InputError, "the summary's 'n_replicates'"),
        ({"coverage_diff": lower_cover}, InputError, "the summary's 'coverage_diff'"),
        ({"checkpoint": lower_cover}, InputError, "the summary's 'checkpoint'"),
        ({"2x": lower_cover}, InputError, "not a valid name"),
        ({"x": 1.0}, api.InputTypeError, "must be a function of a Cell"),
        ([lower_cover], api.InputTypeError, "must be a mapping"),
    ],
)
def test_bad_statistics_are_refused_in_one_line(store, statistics, error, words):
    with pytest.raises(error) as info:
        api.summarize(store, statistics=statistics)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_cells_are_read_only(store):
    def writes(c: Cell) -> float:
        c.lower[0] = 0.0
        return 0.0

    with pytest.raises(InputError, match="'writes' raised ValueError: assignment destination"):
        api.summarize(store, statistics={"writes": writes})


def test_a_statistic_cannot_change_what_the_next_one_sees(store, summary):
    changed = []

    def overwrites(c: Cell) -> float:
        for array in (c.lower, c.upper, c.estimate, c.truth):
            while isinstance(array, np.ndarray):  # the array, then the memory it views
                try:
                    array.setflags(write=True)
                    array[...] = 0.0
                    changed.append(c.labels)
                except ValueError:  # "cannot set WRITEABLE flag to True of this array"
                    pass
                array = array.base
        return 0.0

    own = {"overwrites": overwrites, "lower_cover": lower_cover, "median_length": median_length}
    again = api.summarize(store, as_dataset=True, statistics=own)
    assert changed == []
    for name in ("lower_cover", "lower_cover_se", "median_length", "median_length_se"):
        xr.testing.assert_identical(again[name], summary[name])


def test_values_near_the_largest_float_give_their_mean_and_se_without_warnings(store, summary):
    # 1.6e308 + 1e307 x (an indicator): its mean is 1.6e308 + 1e307 p, its se 1e307 times
    # the indicator's, though the sum of two such values overflows.
    def big(c: Cell) -> np.ndarray:
        return np.where(c.lower <= c.truth, 1.7e308, 1.6e308)

    def big_fraction(c: Cell) -> float:  # one number: a bootstrap se
        return 1.6e308 + 1e307 * float(np.mean(c.lower <= c.truth))

    def fraction(c: Cell) -> float:
        return float(np.mean(c.lower <= c.truth))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = api.summarize(
            store,
            as_dataset=True,
            statistics={"big": big, "big_fraction": big_fraction, "fraction": fraction},
        )
    cells = got["n_done"] > 0
    assert bool(np.isfinite(got["big"]).where(cells, True).all())
    # Each value is rounded to an ulp of 1.7e308 (2e292): the means and sds agree to a
    # few ulps of the values, far below 1e-12 of an se of 1e305 (0 where p is 0 or 1).
    ulp = np.spacing(1.7e308)
    for name, reference in (("big", "lower_cover"), ("big_fraction", "fraction")):
        ref = summary[reference] if reference in summary else got[reference]
        np.testing.assert_allclose(got[name], 1.6e308 + 1e307 * ref, rtol=1e-12)
        ref_se = summary[f"{reference}_se"] if reference in summary else got[f"{reference}_se"]
        np.testing.assert_allclose(got[f"{name}_se"], 1e307 * ref_se, rtol=1e-12, atol=4 * ulp)


STATISTICS_MODULE = '''
import numpy as np


def upper_cover(c):
    """One-sided coverage: the upper bound at or above theta*."""
    return c.upper >= c.truth


def exploding(c):
    raise RuntimeError("boom")
'''


@pytest.fixture
def statistics_site(tmp_path, monkeypatch):
    """An installed package declaring statistics in the group ldpsim.statistics."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "my_statistics.py").write_text(STATISTICS_MODULE)
    info = site / "my_statistics-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-statistics\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ldpsim.statistics]\n"
        "upper_cover = my_statistics:upper_cover\n"
        "exploding = my_statistics:exploding\n"
        "missing = my_statistics:not_there\n"
    )
    monkeypatch.syspath_prepend(str(site))
    cell_statistics.statistic_plugins.cache_clear()
    yield site
    cell_statistics.statistic_plugins.cache_clear()


def test_the_cli_takes_an_installed_statistic(statistics_site, store, tmp_path, capsys):
    path = tmp_path / "S.zarr"
    store.to_zarr(path, zarr_format=3, consolidated=False)
    assert main(["summarize", str(path), "--statistic", "upper_cover", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    expected = api.summarize(store, statistics={"upper_cover": lambda c: c.upper >= c.truth})
    got = [float(r["upper_cover"]) if r["upper_cover"] else np.nan for r in rows]
    np.testing.assert_allclose(got, expected["upper_cover"].to_numpy(), rtol=1e-12)
    assert {r["upper_cover_se_method"] for r in rows} == {"sd / sqrt(R)"}

    assert main(["summarize", str(path), "--statistic", "upper_cover"]) == 0
    assert "upper_cover: the mean of per-replicate values" in capsys.readouterr().out

    # The statistics are per coordinate: the coordinate means refuse them in one line.
    code = main(["summarize", str(path), "--statistic", "upper_cover", "--coords", "mean"])
    one_error_line(capsys.readouterr(), code, ["(upper_cover)", "coords='all' (--coords all)"])

    code = main(["summarize", str(path), "--statistic", "exploding"])
    one_error_line(capsys.readouterr(), code, ["'exploding' raised RuntimeError: boom"])
    code = main(["summarize", str(path), "--statistic", "nope"])
    one_error_line(capsys.readouterr(), code, ["Unknown statistic 'nope'", "upper_cover"])
    code = main(["summarize", str(path), "--statistic", "missing"])
    one_error_line(capsys.readouterr(), code, ["'missing'", "cannot be imported", "left out"])


def test_list_shows_installed_statistics(statistics_site, capsys):
    assert main(["list"]) == 0
    captured = capsys.readouterr()
    assert "Statistics (summarize --statistic NAME):" in captured.out
    assert "upper_cover" in captured.out and "my-statistics 1.0" in captured.out
    assert "The statistic plugin 'missing'" in captured.err
    # The statistics' names in a column of their own width (not the units' 27).
    line = next(line for line in captured.out.splitlines() if "upper_cover" in line)
    assert line.startswith("  upper_cover  One-sided coverage"), line


def wrapped(c: Cell) -> np.ndarray:
    """The share of replicates whose interval is shorter than the median,
    a summary wrapped over two lines.

    Details that ``ldpsim list`` leaves out.
    """
    return c.upper - c.lower


def test_a_statistic_summary_wrapped_over_two_lines_is_shown_whole():
    # The second read (2026-12-01): units' summaries were shown whole, a statistic's was
    # cut after its first line ("... shorter than the median,").
    plugin = StatisticPlugin("wrapped", "mod:wrapped", "mine 1.0", wrapped, None)
    assert plugin.description == (
        "The share of replicates whose interval is shorter than the median, a summary "
        "wrapped over two lines."
    )


# -- the review of the statistics ---------------------------------------------------------
def covered(c: Cell) -> np.ndarray:
    """The two-sided coverage indicators: the statistic that is coverage."""
    return (c.lower <= c.truth) & (c.truth <= c.upper)


@pytest.mark.parametrize("reps", [slice(None), [0]], ids=["36 replicates", "one replicate"])
def test_the_coverage_indicators_give_coverage_and_its_se_cell_for_cell(store, reps):
    summary = api.summarize(store.isel(rep=reps), as_dataset=True, statistics={"cov": covered})
    np.testing.assert_array_equal(summary["cov"], summary["coverage"])  # NaN where R = 0
    # The same rule, sqrt(p (1 - p) / R), to rounding: ddof 1 would be sqrt(R / (R - 1))
    # times larger (1.4% for R = 36), and NaN rather than 0 for R = 1.
    np.testing.assert_allclose(summary["cov_se"], summary["coverage_se"], rtol=1e-12, atol=0)
    assert summary["cov_se"].attrs["se_method"] == "mean"
    se = summary["coverage_se"].values
    assert (se[np.isfinite(se)] > 0).any() if reps == slice(None) else np.nanmax(se) == 0


def test_shape_one_is_one_number_and_a_cell_of_one_replicate_reads_as_the_others(store):
    part = store.copy(deep=True)
    single = {"tau": 0.5, "n": 100}  # keeps replicate 0 only: its cells have R = 1
    part["done"].loc[single] = np.arange(syn.REPS) == 0
    own = {
        "q90": lambda c: np.quantile(c.upper - c.lower, [0.9]),
        "q90_number": lambda c: float(np.quantile(c.upper - c.lower, 0.9)),
        "lower_cover": lower_cover,
    }
    summary = api.summarize(part, as_dataset=True, statistics=own)
    assert (summary["n_done"].sel(single) == 1).all()
    # shape (1,) is one number everywhere, the R = 1 cells included: a bootstrap se, the
    # same draws as the float's (the generator is the cell's, whatever the statistic).
    assert summary["q90_se"].attrs["se_method"] == "bootstrap"
    np.testing.assert_array_equal(summary["q90"], summary["q90_number"])
    np.testing.assert_array_equal(summary["q90_se"], summary["q90_number_se"])
    assert np.isnan(summary["q90_se"].sel(single)).all()  # no bootstrap of one replicate
    assert (summary["q90_se"].sel({"tau": 0.9, "n": 100, "method": "bb"}) > 0).all()
    # A per-replicate statistic returns shape (1,) there too: sd / sqrt(1) = 0, as coverage.
    assert summary["lower_cover_se"].attrs["se_method"] == "mean"
    assert (summary["lower_cover_se"].sel(single) == 0).all()
    np.testing.assert_array_equal(summary["coverage_se"].sel(single), 0.0)


def test_each_cell_draws_its_own_resamples_from_a_seed_of_its_labels(store):
    twin = store.copy(deep=True)
    for name in ("lower", "upper"):  # coordinate 1 gets coordinate 0's intervals
        twin[name].loc[{"coord": 1}] = twin[name].sel(coord=0).values
    statistics = {"median_length": median_length}
    summary = api.summarize(twin, as_dataset=True, statistics=statistics)
    cell = {"tau": 0.5, "n": 100, "method": "bb"}
    se = summary["median_length_se"].sel(cell)
    assert float(se.sel(coord=0)) != float(se.sel(coord=1))  # the same replicates, other draws
    for j in range(syn.D):  # each the sd of resamples from the generator of its labels
        arrays = counted(twin, {**cell, "coord": j})
        lengths = arrays["upper"] - arrays["lower"]
        rng = cell_statistics.bootstrap_generator({**cell, "coord": j})
        draws = [
            np.median(lengths[rng.integers(0, len(lengths), size=len(lengths))])
            for _ in range(BOOTSTRAP_RESAMPLES)
        ]
        assert float(se.sel(coord=j)) == np.std(draws, ddof=1)
    # A part of the store gives its cells the same numbers.
    part = api.summarize(twin.sel(tau=[0.5]), as_dataset=True, statistics=statistics)
    np.testing.assert_array_equal(part["median_length_se"].sel(cell), se)


def test_messages_name_a_cell_and_quote_values_as_the_tables_and_the_api_do(store, summary):
    def picky(c: Cell) -> float:
        if c.labels["n"] == 10_000:
            raise ValueError("too many")
        return 0.0

    with pytest.raises(InputError) as info:
        api.summarize(store, statistics={"picky": picky})
    assert str(info.value).endswith(" at the cell tau = 0.5, n = 1e4, method = bb, coord = 0.")
    assert "n = 1e4" in format_table(summary, "text")  # the table's column
    # One wording of a value (errors.shown_value) in the API, the accessor and here.
    assert api.shown_value is shown_value
    assert shown_value(np.float64(0.5)) == "0.5" and shown_value("x" * 81) == "a str"
    with pytest.raises(InputError, match=r"returned 'many' at the cell tau = 0.5, n = 1e2"):
        api.summarize(store, statistics={"x": lambda c: np.str_("many")})
    label = "m" * 60  # the accessor named labels over 40 characters by their type
    with pytest.raises(InputError, match=f"Cannot select method = {label!r}"):
        store.ldpsim.sel(method=label)


def test_statistics_are_refused_with_the_coordinate_means_before_they_are_computed(store):
    calls = []

    def counting(c: Cell) -> np.ndarray:
        calls.append(c.labels)
        return lower_cover(c)

    with pytest.raises(InputError) as info:
        api.summarize(store, coords="mean", statistics={"counting": counting})
    message = str(info.value)
    assert "\n" not in message and "(counting)" in message and "coords='all'" in message
    assert calls == []
    # The Dataset keeps them per coordinate: coords does not shape it.
    got = api.summarize(store, coords="mean", as_dataset=True, statistics={"counting": counting})
    assert got["counting"].sizes["coord"] == syn.D and len(calls) > 0


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv", "json"])
def test_no_table_of_the_coordinate_means_drops_them(summary, fmt):
    with pytest.raises(InputError, match="coords='mean' shows the means over the coordinates"):
        format_table(summary, fmt, coords="mean")


def test_auto_with_many_coordinates_refuses_them_in_text_and_keeps_them_in_csv(store):
    copies = AUTO_MAX_COORDS // syn.D + 1  # more coordinates than auto lists one by one
    wide = xr.concat([store] * copies, "coord", data_vars="minimal", coords="minimal")
    wide = wide.assign_coords(coord=np.arange(copies * syn.D))
    summary = api.summarize(wide, as_dataset=True, statistics={"lower_cover": lower_cover})
    with pytest.raises(InputError, match="coords='auto' shows the means over the coordinates"):
        format_table(summary, "text")
    rows = list(csv.DictReader(io.StringIO(format_table(summary, "csv"))))
    assert len(rows) == summary["lower_cover"].size and "lower_cover_se" in rows[0]
    assert "lower_cover" in format_table(summary, "text", coords="all")


def test_a_selection_of_replicates_is_counted_against_the_sweeps(store):
    # A hunt (2026-12-01): the first 20 of 40 replicates were captioned "of 20" and left
    # unmarked, as a whole store; a cell of a selection now says so.
    part = store.isel(rep=slice(0, 20))
    assert json.loads(part.attrs["sweep"])["replicates"] == syn.REPS  # the whole store's
    table = format_table(api.summarize(part, as_dataset=True), "text")
    assert "replicates per cell: 0-20 of 40" in table.splitlines()[0], table
    assert "20 not in the selection of replicates" in table
    # A part with its own sweep (run() returns such a part) is whole.
    part.attrs["sweep"] = json.dumps({**json.loads(part.attrs["sweep"]), "replicates": 20})
    table = format_table(api.summarize(part, as_dataset=True), "text")
    assert "replicates per cell: 0-20 of 20" in table and "not in the selection" not in table


def test_one_number_in_one_cell_and_per_replicate_values_in_another_is_refused(store):
    def mixed(c: Cell):
        return c.upper >= c.truth if c.labels["coord"] == 0 else float(np.mean(c.upper))

    with pytest.raises(InputError, match="elsewhere; return one kind in every cell") as info:
        api.summarize(store, as_dataset=True, statistics={"mixed": mixed})
    assert "mixed" in str(info.value) and "\n" not in str(info.value)


def test_records_pair_each_statistic_with_its_checkpoint_and_coordinate():
    # Checkpoints and two coordinates: coord 1's theta* is below every lower bound (never
    # covered), and bm fails at checkpoint 10 for 4 of 8 replicates (2 of 4 left covered).
    base = syn.early_failure_store()
    other = base.assign(truth=base["truth"] - 1.0)
    wide = xr.concat([base, other], "coord", data_vars="minimal", coords="minimal")
    wide = wide.assign_coords(coord=[0, 1])
    summary = api.summarize(wide, as_dataset=True, statistics={"lower_cover": lower_cover})
    recs = summary_records(summary)
    assert len(recs) == summary["lower_cover"].size == 2 * 3 * 2
    got = {(r["method"], r["checkpoint"], r["coord"]): r["lower_cover"] for r in recs}
    assert got[("bm", 10, 0)] == 0.5 and got[("bm", 100, 0)] == 0.75
    assert got[("bb", 10, 0)] == 0.75 and got[("bm", 10, 1)] == 0.0
    for rec in recs:
        cell = {k: rec[k] for k in ("method", "checkpoint", "coord")}
        assert rec["lower_cover"] == float(summary["lower_cover"].sel(cell))
    # The csv header names every field of the records, the statistic's three last.
    fields = record_fields(summary)
    axes = {"method", "checkpoint", "coord"}
    assert set(fields) == set(recs[0]) - axes
    assert fields[-4:] == [
        "lower_cover",
        "lower_cover_se",
        "lower_cover_se_method",
        "n_replicates",
    ]
    plain = api.summarize(wide, as_dataset=True)
    assert set(record_fields(plain, True)) == set(summary_records(plain, True)[0]) - axes
    # The statistics are per coordinate: no records of the means with them.
    with pytest.raises(InputError, match="coords='mean'"):
        summary_records(summary, coord_means=True)


def test_a_statistic_cell_has_three_significant_digits_and_the_partial_mark():
    # A tenth of the median length, 0.028: three significant digits as a length (not
    # 0.028 (0.003)), and the "*" of its cell's 36 of 40 replicates, as its coverage.
    def tenth(c: Cell) -> float:
        return median_length(c) / 10

    summary = api.summarize(syn.grid_store(), as_dataset=True, statistics={"tenth": tenth})
    lines = format_table(summary, "text").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("0.5  coord 0  bb"))
    assert lines[first].split()[-1] == "(0.064)*"
    assert lines[first + 2].split()[:2] == ["tenth", "0.0280"]
    assert lines[first + 2].endswith("*")


def test_a_bootstrap_resamples_the_methods_estimates_too(store, summary):
    # The bootstrap se of the mean of the method's estimate (one number) is close to the
    # sd / sqrt(R) of the estimates (a mutation hunt, h17a: resampling the bounds but not
    # the estimates, an se of 0, passed every test). Tolerance: an sd from B draws has a
    # relative Monte-Carlo error of about 1 / sqrt(2 B), 2.2% for B = 1000.
    got = api.summarize(
        store, as_dataset=True, statistics={"mean_estimate": lambda c: float(np.mean(c.estimate))}
    )
    for cell in CELLS:
        estimates = store["estimate"].sel({k: v for k, v in cell.items() if k != "method"})
        arrays = counted(store, cell)
        use = store.sel(cell)["done"].values & np.isfinite(store.sel(cell)["lower"].values)
        values = estimates.values[use]
        assert len(values) == len(arrays["lower"])
        reference = values.std(ddof=0) / np.sqrt(len(values))
        se = float(got["mean_estimate_se"].sel(cell))
        assert reference > 0 and abs(se / reference - 1) < 0.12, (cell, se, reference)


def test_each_cell_reads_its_own_level():
    # With a level axis, a cell's level is its grid point's (a mutation hunt, h17a: the
    # first grid point's level in every cell passed every test).
    ds = syn.grid_store().rename(tau="level").assign_coords(level=[0.9, 0.8])
    got = summarize(ds, statistics={"lvl": lambda c: np.full(c.replicates, c.level)})
    counts = got["n_done"] > 0
    want = got["level"].broadcast_like(got["lvl"])
    np.testing.assert_allclose(got["lvl"].where(counts), want.where(counts), rtol=1e-12)
    assert float(got["lvl_se"].where(counts).max()) < 1e-12


def test_a_statistic_with_no_cell_to_compute_says_its_se_is_none(store):
    # No done replicate anywhere: every value NaN, and the se's rule is "none" (n/a in
    # the records), not a rule no cell used (a mutation hunt, h17a: "mean" passed).
    none_done = store.assign(done=store["done"] & False)
    got = api.summarize(none_done, as_dataset=True, statistics={"lower_cover": lower_cover})
    assert got["lower_cover"].isnull().all() and got["lower_cover_se"].isnull().all()
    assert got["lower_cover_se"].attrs["se_method"] == "none"
    assert cell_statistics.se_rule(got, "lower_cover") == "none"


def test_one_number_on_the_cell_but_an_array_on_a_resample_is_refused(store):
    def fickle(c: Cell):
        # One number on the cell's own (distinct) replicates, an array on a resample
        # (drawn with replacement: 35 draws of 35 repeat one but with p = 35! / 35^35).
        if len(np.unique(c.lower)) == c.replicates:
            return float(np.mean(c.lower))
        return c.lower

    with pytest.raises(InputError) as info:
        api.summarize(store, statistics={"fickle": fickle})
    message = str(info.value)
    assert "\n" not in message and "'fickle' returned one number at the cell" in message
    assert "on a bootstrap resample of it; return one kind." in message


@pytest.mark.parametrize(
    ("statistics", "error", "words"),
    [
        # A keyword is an identifier but no column name (a mutation hunt, h17a: it passed).
        ({"class": lower_cover}, InputError, "'class' is not a valid name"),
        (
            {1: lower_cover},
            TypeError,
            "names in the 'statistics' parameter of summarize must be str",
        ),
    ],
)
def test_a_keyword_or_a_name_not_a_str_is_refused(store, statistics, error, words):
    with pytest.raises(error) as info:
        api.summarize(store, statistics=statistics)
    assert words in str(info.value) and "\n" not in str(info.value)
