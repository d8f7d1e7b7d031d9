"""A sweep's cases shown by the parameters that vary across them (issue 33, item 2).

A tiny store of a validated sweep whose cases set d, sparsity, mechanism,
calibration, coef, and for the Gaussian case eps and delta (sparse's shape): d,
mechanism, calibration, eps (from [spec] where a case leaves it) and delta (unset:
None) vary; sparsity and coef do not. They become the summary's ``case_*``
coordinates, the tables' columns, the csv and json fields and the figures' titles.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
import zarr
from test_plot_text import overlapping_pairs

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.report.plots import store_figures
from ldpsim.pipeline.report.report import (
    CSS_PX_PER_INCH,
    grid_lines,
    result_tables,
    smallest_text_points,
    timing_tables,
)
from ldpsim.pipeline.summary.case_parameters import case_coords, case_parameters
from ldpsim.pipeline.summary.compare import compare_methods, format_comparison
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import format_table, records, table_rows
from ldpsim.pipeline.sweep import Sweep

CASES = {
    "d2-laplace-sparse": {
        "d": 2,
        "sparsity": 1,
        "mechanism": "laplace",
        "calibration": "sparse",
        "coef": 0.0,
    },
    "d2-laplace-dense": {
        "d": 2,
        "sparsity": 1,
        "mechanism": "laplace",
        "calibration": "dense",
        "coef": 0.0,
    },
    "d3-gaussian-sparse": {
        "d": 3,
        "sparsity": 1,
        "mechanism": "gaussian",
        "calibration": "sparse",
        "coef": 0.0,
        "eps": 2.0,
        "delta": 1e-6,
    },
}
LABELS = list(CASES)
#: What varies, per case in the sweep's order; eps is [spec]'s 1.0 where a case leaves it.
VARYING = {
    "d": [2, 2, 3],
    "mechanism": ["laplace", "laplace", "gaussian"],
    "calibration": ["sparse", "dense", "sparse"],
    "eps": [1.0, 1.0, 2.0],
    "delta": [None, None, 1e-6],
}
METHODS = ["bb", "oracle"]
REPS = 4


def case_sweep() -> Sweep:
    tables = {
        "replicates": REPS,
        "seed": 1,
        "spec": {"model": "sparse_mean", "eps": 1.0, "n": 1000, "level": syn.LEVEL},
        "grid": {"case": LABELS},
        "cases": CASES,
        "methods": {label: {} for label in METHODS},
    }
    return Sweep.from_dict(tables, name="sparse-cases")


def case_store() -> xr.Dataset:
    """Grid axis case only, the cases' d (a smaller d NaN-padded), every replicate done;
    the intervals cover, half-length 0.1 (bb) and 0.2 (oracle)."""
    width = max(case["d"] for case in CASES.values())
    truth = np.zeros((len(LABELS), width))
    for c, case in enumerate(CASES.values()):
        truth[c, case["d"] :] = np.nan
    estimate = truth[:, None, :] + 0.01 * np.arange(REPS)[None, :, None]
    half = np.array([0.1, 0.2])[None, :, None, None]
    done = np.ones((len(LABELS), REPS), dtype=bool)
    ds = xr.Dataset(
        {
            "estimate": (("case", "rep", "coord"), estimate),
            "lower": (("case", "method", "rep", "coord"), estimate[:, None] - half),
            "upper": (("case", "method", "rep", "coord"), estimate[:, None] + half),
            "truth": (("case", "coord"), truth),
            "done": (("case", "rep"), done),
            "failed": (("case", "rep"), ~done),
            "method_failed": (("case", "method", "rep"), np.zeros((3, 2, REPS), dtype=bool)),
            "seconds": (("case", "rep"), np.full(done.shape, 0.5)),
            "job_id": (("case", "rep"), np.zeros(done.shape, dtype=np.int64)),
        },
        coords={
            "case": np.array(LABELS, dtype=object),
            "method": np.array(METHODS, dtype=object),
            "rep": np.arange(REPS),
            "coord": np.arange(width),
        },
    )
    ds.attrs.update(level=syn.LEVEL, sweep=case_sweep().to_json(), rep_chunk=REPS)
    return ds


@pytest.fixture(scope="module")
def store() -> xr.Dataset:
    return case_store()


@pytest.fixture(scope="module")
def summary(store: xr.Dataset) -> xr.Dataset:
    return summarize(store)


def test_the_varying_parameters_and_only_those(store, summary):
    assert case_parameters(store) == VARYING
    assert case_parameters(summary) == VARYING
    # Of two cases, only what tells those two apart.
    assert case_parameters(summary.isel(case=[0, 1])) == {"calibration": ["sparse", "dense"]}
    assert case_parameters(summary.isel(case=[0])) == {}
    assert case_parameters(summary.isel(case=0)) == {}  # no case dimension left


def test_they_are_coordinates_along_case(summary):
    names = [name for name in summary.coords if str(name).startswith("case_")]
    assert names == [f"case_{name}" for name in VARYING]
    for name in names:
        assert summary[name].dims == ("case",) and summary[name].attrs["long_name"]
    assert summary["case_d"].dtype == np.int64
    assert summary["case_d"].values.tolist() == [2, 2, 3]
    assert summary["case_mechanism"].values.tolist() == VARYING["mechanism"]
    assert summary["case_eps"].values.tolist() == [1.0, 1.0, 2.0]
    np.testing.assert_array_equal(summary["case_delta"].values, [np.nan, np.nan, 1e-6])
    # They select like any coordinate, and a statistic may not take their names.
    gaussian = summary.where(summary["case_mechanism"] == "gaussian", drop=True)
    assert gaussian["case"].values.tolist() == ["d3-gaussian-sparse"]
    with pytest.raises(InputError, match="case_d"):
        summarize(case_store(), statistics={"case_d": lambda cell: cell.upper > cell.truth})


def test_text_tables_show_the_parameters_in_the_sweeps_order(summary):
    names, _, rows = table_rows(summary, "text", {"cover": "coverage"})
    assert names == ["d", "mechanism", "calibration", "eps", "delta", "coord", "method", ""]
    firsts = [labels[:5] for labels, _ in rows if labels[-3:] == ["coord 0", "bb", "cover"]]
    assert firsts == [
        ["2", "laplace", "sparse", "1", "-"],
        ["2", "laplace", "dense", "1", "-"],
        ["3", "gaussian", "sparse", "2", "1e-06"],
    ]
    # The third coordinate only where d = 3.
    assert sum(labels[5] == "coord 2" for labels, _ in rows) == len(METHODS)
    text = format_table(summary)
    # One n: the statistics are the columns, n in the caption (issue 43).
    assert text.splitlines()[2].split() == [*names[:-1], "cover", "length"]
    assert "intervals at n = 1e3;" in text.splitlines()[0]
    assert not any(label in text for label in LABELS)
    latex = format_table(summary, "latex")
    assert r"d & mechanism & calibration & $\varepsilon$ & $\delta$ & coord & method" in latex
    markdown = format_table(summary, "markdown", coords="mean")
    assert "| d | mechanism | calibration | eps | delta | method |" in markdown


def test_the_case_label_stays_where_two_cases_read_the_same(summary):
    sweep = json.loads(summary.attrs["sweep"])
    sweep["cases"]["d2-laplace-dense"] = dict(sweep["cases"]["d2-laplace-sparse"], eps=1.0)
    same = summary.assign_attrs(sweep=json.dumps(sweep))
    names, _, rows = table_rows(same, "text", {"cover": "coverage"}, per_coord=False)
    assert names == ["d", "mechanism", "eps", "delta", "case", "method", ""]
    assert [labels[4] for labels, _ in rows if labels[-2:] == ["bb", "cover"]] == LABELS


def test_csv_and_json_keep_the_case_beside_its_parameters(store, tmp_path, capsys):
    path = tmp_path / "s.zarr"
    store.to_zarr(path, zarr_format=3, consolidated=False)
    zarr.open_group(str(path / "ldpsim"), mode="w", zarr_format=3)  # as a real store has
    assert main(["summarize", str(path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    fields = [f"case_{name}" for name in VARYING]
    assert list(rows[0])[: len(fields) + 3] == ["case", *fields, "method", "coord"]
    by_case = {row["case"]: row for row in rows}
    assert list(by_case) == LABELS
    assert by_case["d3-gaussian-sparse"]["case_delta"] == "1e-06"
    assert by_case["d2-laplace-dense"]["case_delta"] == ""  # unset
    assert by_case["d2-laplace-dense"]["case_calibration"] == "dense"
    assert main(["summarize", str(path), "--format", "json", "--coords", "mean"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [(r["case"], r["case_d"], r["case_delta"]) for r in recs[:: len(METHODS)]] == [
        ("d2-laplace-sparse", 2, None),
        ("d2-laplace-dense", 2, None),
        ("d3-gaussian-sparse", 3, 1e-6),
    ]


def test_a_comparison_shows_the_parameters_too(store):
    comparison = compare_methods(store, "bb", "oracle")
    header = format_comparison(comparison, "csv").splitlines()[0].split(",")
    assert header[:7] == ["case", *(f"case_{name}" for name in VARYING), "coord"]
    text = format_comparison(comparison, "text", coords="mean")
    assert text.splitlines()[2].split()[:5] == list(VARYING)


def test_the_reports_tables_show_the_parameters(summary):
    for table in result_tables(summary):
        assert table["names"][:5] == list(VARYING)
        first = table["groups"][0][0]["labels"]
        assert first[:5] == ["2", "laplace", "sparse", "1", "-"]


def test_the_reports_header_and_timings_show_the_parameters(store):
    # The header names the cases by what they vary, each value once, not by 3 labels.
    assert grid_lines(store) == [
        "3 cases of d = 2, 3; mechanism = laplace, gaussian; calibration = sparse, dense; "
        "eps = 1, 2; delta = -, 1e-06"
    ]
    timings = timing_tables(store)
    assert timings["axes"] == list(VARYING)
    assert [p["labels"] for p in timings["points"]][2] == ["3", "gaussian", "sparse", "2", "1e-06"]
    # Without cases, an axis is its values.
    assert grid_lines(store.isel(case=0, drop=True)) == []


def test_figure_titles_say_the_parameters(store, summary):
    figures = store_figures(store, ["coverage", "length"], summary=summary)
    coverage = figures["coverage"]
    ticks = [t.get_text() for t in coverage.axes[0].get_yticklabels()]
    assert ticks == [  # one row per case, in the sweep's order (the first on top)
        "d=2, laplace, sparse, eps=1",
        "d=2, laplace, dense, eps=1",
        "d=3, gaussian, sparse, eps=2, delta=1e-06",
    ]
    for fig in figures.values():
        assert overlapping_pairs(fig) == []
        assert smallest_text_points(fig) * CSS_PX_PER_INCH / 72 >= 10


def test_a_sweep_without_cases_is_unchanged():
    summary = summarize(syn.grid_store())
    assert case_parameters(summary) == {} and case_coords(summary) == {}
    assert not [name for name in summary.coords if str(name).startswith("case_")]
    names, _, _ = table_rows(summary, "text", {"cover": "coverage"})
    assert names == ["tau", "coord", "method", ""]
    assert list(records(summary)[0])[:4] == ["tau", "n", "method", "coord"]
    # A case axis whose sweep does not define the cases shows the labels.
    labelled = summary.rename({"tau": "case"}).assign_coords(case=["a", "b"])
    assert case_parameters(labelled) == {}
    assert table_rows(labelled, "text", {"cover": "coverage"})[0][0] == "case"


def test_missing_values_in_coordinates():
    # Text unset is "-", a number unset NaN; a list is written as JSON text.
    sweep = json.loads(case_sweep().to_json())
    cases = copy.deepcopy(sweep["cases"])
    cases["d3-gaussian-sparse"]["budget_range"] = [1.0, 2.0]
    del cases["d2-laplace-dense"]["mechanism"]
    sweep["cases"] = cases
    ds = xr.Dataset(coords={"case": np.array(LABELS, dtype=object)})
    ds.attrs["sweep"] = json.dumps(sweep)
    coords = case_coords(ds)
    assert coords["case_mechanism"].values.tolist() == ["laplace", "-", "gaussian"]
    assert coords["case_budget_range"].values.tolist() == ["-", "-", "[1.0, 2.0]"]
    assert math.isnan(coords["case_delta"].values[0])


def test_the_types_of_the_coordinates():
    # Integers one case leaves unset are floats with NaN; bools all set are bools, and
    # text where one is unset (not a False); other values are JSON text.
    sweep = json.loads(case_sweep().to_json())
    first, _, third = (sweep["cases"][label] for label in LABELS)
    first.update(clip=3, flag=True, shuffle=True, names=["a", "b"])
    third.update(clip=5, flag=False, shuffle=False)
    sweep["cases"][LABELS[1]]["flag"] = True
    ds = xr.Dataset(coords={"case": np.array(LABELS, dtype=object)})
    ds.attrs["sweep"] = json.dumps(sweep)
    coords = case_coords(ds)
    assert coords["case_d"].dtype == np.int64
    assert np.array_equal(coords["case_clip"].values, [3.0, math.nan, 5.0], equal_nan=True)
    assert coords["case_flag"].dtype == bool
    assert coords["case_flag"].values.tolist() == [True, True, False]
    assert coords["case_shuffle"].values.tolist() == ["true", "-", "false"]
    assert coords["case_names"].values.tolist() == ['["a", "b"]', "-", "-"]
    # A case on the axis that the sweep does not define: no parameters, no error.
    other = ds.assign_coords(case=np.array([*LABELS[:2], "other"], dtype=object))
    assert case_parameters(other) == {} and case_coords(other) == {}
