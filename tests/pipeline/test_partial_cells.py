"""Partial cells: a cell computed on fewer than all its grid point's replicates is marked in
every table format, csv and json carry its counts, and ``summarize --strict`` exits 1.

The stores are :func:`synthetic.grid_store` cut to the tau = 0.5 grid points, whose 36
replicates are all done: bb failed in replicate ``BB_FAILED_REP`` (35 of 36 count for bb),
the oracle has all 36. Without that replicate the store is complete and nothing is marked.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.summary.partial_cells import (
    any_partial,
    footnote,
    partial,
    replicates_per_point,
)
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import format_table
from ldpsim.pipeline.summary.variables import reserved_names


def tau_half(reps: list[int]) -> xr.Dataset:
    ds = syn.grid_store().sel(tau=[0.5]).isel(rep=reps)
    ds = ds.assign_coords(rep=range(len(reps)))
    ds.attrs["sweep"] = syn.sweep_attr(
        {"tau": [0.5], "n": syn.NS}, {"eps": 1.0}, syn.METHODS, replicates=len(reps)
    )
    return ds


@pytest.fixture(scope="module")
def with_failure() -> xr.Dataset:
    return summarize(tau_half(list(range(syn.DONE))))


@pytest.fixture(scope="module")
def complete() -> xr.Dataset:
    return summarize(tau_half([r for r in range(syn.DONE) if r != syn.BB_FAILED_REP]))


def test_counts_of_a_failed_method(with_failure):
    bb = with_failure.sel({"method": "bb"})
    oracle = with_failure.sel({"method": "oracle"})
    assert bb["n_done"].values.ravel().tolist() == [35] * 4
    assert bb["n_failed"].values.ravel().tolist() == [1] * 4
    assert oracle["n_done"].values.ravel().tolist() == [36] * 4
    assert oracle["n_failed"].values.ravel().tolist() == [0] * 4
    assert bb["coord_mean_n_failed"].values.ravel().tolist() == [1, 1]
    assert with_failure["replicates_done"].values.ravel().tolist() == [36, 36]
    assert with_failure.attrs["replicates"] == 36
    assert any_partial(with_failure)


@pytest.mark.parametrize(
    ("fmt", "marker"), [("text", "*"), ("markdown", "\\*"), ("latex", "$^{*}$")]
)
def test_only_the_partial_cells_are_marked(with_failure, complete, fmt, marker):
    table = format_table(with_failure, fmt)
    rows = [line for line in table.splitlines() if "(" in line and ")" in line]
    bb_rows = [r for r in rows if " bb " in r.replace("|", " ").replace("&", " ")]
    oracle_rows = [r for r in rows if "oracle" in r]
    assert bb_rows and oracle_rows
    # A bb row's two cells (n = 1e2, 1e4) are marked; the oracle's are not.
    assert all(r.count(marker) == 2 for r in bb_rows), bb_rows
    assert not any(marker in r for r in oracle_rows), oracle_rows
    note = "computed on fewer than all 36 replicates of its grid point: 35 counted, 1 lost"
    assert note in table
    clean = format_table(complete, fmt)
    assert marker not in clean and "fewer than all" not in clean


def test_coordinate_means_and_errors_are_marked_too(with_failure):
    means = format_table(with_failure, "text", coords="mean")
    # One tau: said in the caption, not in a column (issue 43).
    bb_cover = next(line for line in means.splitlines() if line.startswith("bb "))
    assert bb_cover.count("*") == 2
    assert "35 counted, 1 lost" in means
    # The mean squared errors count all 36 replicates: not marked.
    errors = format_table(with_failure, "text", errors=True).split("\n\n")[1]
    assert "*" not in errors


def test_csv_and_json_carry_the_counts(with_failure):
    rows = list(csv.DictReader(io.StringIO(format_table(with_failure, "csv"))))
    for row in rows:
        expected = ("35", "1") if row["method"] == "bb" else ("36", "0")
        assert (row["n_done"], row["n_failed"], row["n_replicates"]) == (*expected, "36")
    means = json.loads(format_table(with_failure, "json", coords="mean"))
    assert {(r["method"], r["coord_mean_n_done"], r["coord_mean_n_failed"]) for r in means} == {
        ("bb", 35, 1),
        ("oracle", 36, 0),
    }


def test_strict_exits_1_on_a_partial_cell(with_failure, tmp_path, capsys):
    for name, reps, code in (
        ("partial", list(range(syn.DONE)), 1),
        ("complete", [r for r in range(syn.DONE) if r != syn.BB_FAILED_REP], 0),
    ):
        path = tmp_path / f"{name}.zarr"
        tau_half(reps).to_zarr(path, zarr_format=3, consolidated=False)
        assert main(["summarize", str(path)]) == 0
        capsys.readouterr()
        assert main(["summarize", str(path), "--strict"]) == code, name
        err = capsys.readouterr().err
        assert ("--strict" in err) == (code == 1)


def test_a_method_failing_at_some_coordinates_marks_the_coordinate_means():
    # Found by a hunt (2026-12-01): bb failed at coordinate 1 only, in one replicate of
    # the complete store (35 replicates). The means over the coordinates still count all
    # 35 (that one over coordinate 0 alone), so their cells were not marked.
    ds = tau_half([r for r in range(syn.DONE) if r != syn.BB_FAILED_REP])
    bb = list(ds["method"].values).index("bb")
    for name in ("lower", "upper"):
        ds[name][:, :, bb, 5, 1] = float("nan")
    ds["method_failed"][:, :, bb, 5] = True
    summary = summarize(ds)
    assert summary.sel({"method": "bb"})["coord_mean_n_done"].values.ravel().tolist() == [35] * 2
    means = format_table(summary, "text", coords="mean")
    bb_cover = next(line for line in means.splitlines() if line.startswith("bb "))
    assert bb_cover.count("*") == 2
    note = "all 35 replicates of its grid point (or on fewer than all coordinates of some)"
    assert f"{note}: 34-35 counted, 1 lost" in means  # joint coverage: 34
    oracle = next(line for line in means.splitlines() if line.startswith("oracle "))
    assert "*" not in oracle


def test_the_caption_counts_only_the_coordinates_a_grid_point_has():
    # A case of smaller d has NaN-padded coordinates, which no table shows: the
    # caption's "replicates per cell" read 0-200 for a store without failures.
    summary = summarize(tau_half([r for r in range(syn.DONE) if r != syn.BB_FAILED_REP]))
    summary["coord_exists"][...] = [True, False]
    summary["n_done"][..., 1] = 0
    assert "replicates per cell: 35 of 35" in format_table(summary, "text")


def test_a_cell_without_a_method_axis_mixes_code_versions_if_any_method_does(complete):
    # bb's replicates come from two versions of its code, the oracle's from one: bb's
    # cells are marked, the oracle's not, and a cell without a method axis (the mean
    # squared error) counts the most versions of any method of its grid point.
    versions = xr.ones_like(complete["n_done"].isel(coord=0), dtype=np.int64)
    versions.loc[{"method": "bb"}] = 2
    mixed = complete.assign(code_versions=versions)
    coverage = partial(mixed, "coverage")
    assert coverage.sel({"method": "bb"}).all() and not coverage.sel({"method": "oracle"}).any()
    assert partial(mixed, "mse").all() and not partial(complete, "mse").any()


def test_a_footnote_of_partial_cells_that_mix_code_versions_says_both(with_failure):
    # bb failed in one replicate and its replicates come from two versions of its code:
    # the footnote gives the counts, then the versions (a mutation dropping the versions
    # from a footnote with counts passed every test: a mutation hunt, h19b).
    versions = xr.ones_like(with_failure["n_done"].isel(coord=0), dtype=np.int64)
    versions.loc[{"method": "bb"}] = 2
    table = format_table(with_failure.assign(code_versions=versions), "text")
    assert "35 counted, 1 lost" in table
    assert (
        "--format csv gives each cell's n_done and n_failed. Or: mixes replicates of 2 code"
        in table
    )


def test_a_statistic_the_store_has_no_values_for_is_not_marked():
    # A store older than the last iterate: mse_last counts no replicate by design (none
    # failed, some are done). It is n/a, not a partial cell.
    summary = summarize(tau_half(list(range(syn.DONE))).drop_vars("last"))
    assert (summary["mse_last_n_done"] == 0).all() and (summary["replicates_done"] > 0).all()
    assert not partial(summary, "mse_last").any()
    assert partial(summary, "coverage").sel({"method": "bb"}).all()  # bb failed once


def test_a_statistic_the_store_has_no_values_for_is_not_marked_where_a_replicate_failed():
    # As above, with replicate 7 failed: the failure is no reason to mark what no
    # replicate could fill (a mutation counting failed replicates as failures of the
    # statistic marked mse_last and passed every test: a mutation hunt, h19b).
    ds = tau_half(list(range(syn.DONE))).drop_vars("last")
    ds["done"][{"rep": 7}] = False
    ds["failed"][{"rep": 7}] = True
    for name in ("lower", "upper", "estimate"):
        ds[name][{"rep": 7}] = np.nan
    summary = summarize(ds)
    assert (summary["replicates_failed"] == 1).all() and (summary["mse_last_n_done"] == 0).all()
    assert not partial(summary, "mse_last").any()
    assert partial(summary, "mse").all()  # 35 of 36: the failed replicate is lost


def test_the_footnote_of_a_selection_counts_the_replicates_left_out_apart():
    # 20 of the 40 replicates of a grid point whose first 36 are done: the other 20 are
    # not in the selection, none is "not computed yet".
    ds = syn.grid_store().sel(tau=[0.5], n=[100]).isel(rep=range(20))
    text = format_table(summarize(ds), "text")
    assert (
        "lost to a failure of the replicate or of the method (ldpsim errors STORE), 0 not" in text
    )
    assert "20 not in the selection of replicates" in text


def test_the_footnote_of_every_replicate_says_nothing_of_a_selection(with_failure):
    # A mutation saying ", 0 not in the selection of replicates" under every partial
    # table passed every test (a mutation hunt, h19b).
    table = format_table(with_failure, "text")
    assert "0 not computed yet (ldpsim run resumes them); a selection by failure" in table
    assert "selection of replicates" not in table


@pytest.mark.parametrize(
    ("method", "lacking", "other"),
    [("oracle", "methods_pending", "bb"), ("bb", "n_failed", "oracle")],
)
def test_a_method_pending_or_failing_in_every_done_replicate_is_marked(
    complete, method, lacking, other
):
    # A method that counts no replicate at a grid point with done replicates: partial,
    # not n/a by design (a statistic the store has no values for). Pending: added to the
    # store and not computed yet (a mutation hunt, 2026-12-02: the pending term dropped
    # from "by design" passed every test); failing: the method failed in each of them
    # (h15b). As the summary of such a store has it, at n = NS[0].
    summary = complete.copy(deep=True)
    cell = {"method": method, "n": syn.NS[0]}
    summary["n_done"].loc[cell] = 0
    summary[lacking].loc[cell] = summary["replicates_done"].sel(n=syn.NS[0])
    marked = partial(summary, "coverage")
    assert marked.sel(cell).all() and not marked.sel({"method": other}).any()
    assert not partial(complete, "coverage").any()


def test_a_mask_along_one_axis_keeps_its_coordinate(with_failure):
    # The mean squared error of a summary with one grid axis: the mask's one dimension
    # is its coordinate's, which it keeps (a cell is found by its label, not position).
    mask = partial(with_failure.isel(tau=0), "mse")
    assert mask.dims == ("n",) and mask["n"].values.tolist() == syn.NS
    assert not mask.sel(n=syn.NS[0])


def test_a_pending_method_is_not_counted_in_the_footnote_of_the_mean_squared_errors():
    # The oracle added to the store and pending in the 36 done replicates of 40: the
    # mean squared errors (of theta_bar_n, no interval method's) lack the 4 not done
    # only. Before (a mutation hunt, h15b): "36 counted, 0 lost, 40 not computed yet".
    summary = summarize(syn.grid_store().sel(tau=[0.5], n=[100]))
    summary["methods_pending"].loc[{"method": "oracle"}] = syn.DONE
    summary["n_done"].loc[{"method": "oracle"}] = 0
    coverage, errors = format_table(summary, "text", errors=True).split("\n\n")
    counts = "36 counted, 0 lost to a failure of the replicate or of the method (ldpsim errors "
    assert f"{counts}STORE), 4 not computed yet" in errors
    assert "0-35 counted" in coverage and "4-40 not computed yet" in coverage
    # LaTeX would set the option's '--' as a dash.
    assert "-{}-format csv" in format_table(summary, "latex")


def test_more_replicates_than_the_sweep_says_are_counted_against_the_held():
    # A store grown by a run with more replicates than its sweep attribute states.
    ds = tau_half(list(range(syn.DONE)))
    assert replicates_per_point(ds) == syn.DONE
    fewer = ds.copy()
    fewer.attrs["sweep"] = syn.sweep_attr(
        {"tau": [0.5], "n": syn.NS}, {"eps": 1.0}, syn.METHODS, replicates=10
    )
    assert replicates_per_point(fewer) == syn.DONE
    assert replicates_per_point(ds.drop_attrs()) == syn.DONE


def test_an_empty_sweep_attribute_counts_the_held_replicates():
    # An empty sweep attribute is no sweep, as everywhere a summary reads it: the held
    # replicates count (a mutation reading it as JSON, dropping "and raw", failed every
    # summary of such a store and passed every test: a mutation hunt, h19b).
    ds = syn.grid_store().sel(tau=[0.5], n=[100])
    ds.attrs["sweep"] = ""
    assert replicates_per_point(ds) == syn.REPS
    assert summarize(ds).attrs["replicates"] == syn.REPS


def test_a_summary_without_the_counts_of_done_replicates_marks_nothing():
    # A summary of an ldpsim older than the partial cells has no replicates_done (nor
    # the replicates attribute): nothing is marked, and its tables have no footnote.
    # Before (a mutation hunt, h19b), the footnote still read replicates_done, and
    # format_table of such a summary raised KeyError: 'replicates_done'.
    summary = summarize(tau_half(list(range(syn.DONE))))
    assert any_partial(summary)  # bb failed in one replicate
    for older in (
        summary.drop_vars("replicates_done"),
        summary.drop_vars("replicates_done").drop_attrs(),
    ):
        assert not any_partial(older) and not partial(older, "coverage").any()
        for fmt in ("text", "markdown", "latex"):
            table = format_table(older, fmt, coords="mean")
            assert "fewer than all" not in table and "bb" in table, fmt
    # Older still, before the partial cells: no n_failed either. Its csv and json were a
    # KeyError: 'n_failed'; they now hold the fields it has, the counts left out.
    older = summary.drop_vars(["replicates_done", "n_failed", "coord_mean_n_failed"])
    for coords, dropped in (("all", "n_failed"), ("mean", "coord_mean_n_failed")):
        for fmt, read in (
            ("csv", lambda t: list(csv.DictReader(io.StringIO(t)))),
            ("json", json.loads),
        ):
            whole = read(format_table(summary, fmt, coords=coords))
            assert dropped in whole[0], (coords, fmt)
            left = [{k: v for k, v in r.items() if k != dropped} for r in whole]
            assert read(format_table(older, fmt, coords=coords)) == left, (coords, fmt)
            # Nor the replicates attribute (helper-136, a real summary of b675ad6): the
            # grid point's replicates are unknown, an empty cell, not guessed.
            unknown = "" if fmt == "csv" else None
            left = [{**r, "n_replicates": unknown} for r in left]
            assert read(format_table(older.drop_attrs(), fmt, coords=coords)) == left


@pytest.mark.parametrize("sweep", ["states fewer", "absent"])
def test_the_caption_counts_against_the_summarys_replicates_not_the_sweeps(sweep):
    # The caption's "of R" is the summary's attribute `replicates` (the held 35 here),
    # as the partial marks are: a store grown past its sweep attribute's 10, or a
    # Dataset without one. A mutation hunt (h16d, T22): reading the sweep's count gave
    # "35 of 10" (more done than there are) or "35" and passed every test.
    ds = tau_half([r for r in range(syn.DONE) if r != syn.BB_FAILED_REP])
    held = ds.sizes["rep"]
    if sweep == "absent":
        ds = ds.drop_attrs()
    else:
        ds.attrs["sweep"] = syn.sweep_attr(
            {"tau": [0.5], "n": syn.NS}, {"eps": 1.0}, syn.METHODS, replicates=10
        )
    summary = summarize(ds)
    assert summary.attrs["replicates"] == held
    for coords in ("all", "mean"):
        table = format_table(summary, "text", coords=coords)
        assert f"; replicates per cell: {held} of {held}" in table.splitlines()[0], coords
        assert "*" not in table and "fewer than all" not in table


def test_a_store_older_than_method_failed_counts_only_done_replicates_as_failed():
    # Without the flag, a missing bound of a done replicate is a failure of the method;
    # replicates not done (4 per grid point here, all 40 at the empty one) have no bounds
    # and are not failures (a mutation hunt, h17a: counting them passed every test).
    ds = syn.grid_store()
    assert (~ds["done"]).any()
    flagged = summarize(ds)
    old = summarize(ds.drop_vars("method_failed"))
    for name in ("n_failed", "coord_mean_n_failed"):
        np.testing.assert_array_equal(old[name], flagged[name])
    bb = old.sel({"method": "bb"})
    assert bb["n_failed"].values.ravel().tolist() == [1, 1] * 3 + [0, 0]
    assert bb["coord_mean_n_failed"].values.ravel().tolist() == [1, 1, 1, 0]
    assert (old.sel({"method": "oracle"})["n_failed"] == 0).all()


def test_a_method_without_bounds_by_design_is_neither_failed_nor_partial():
    # bb gives no bounds at n = NS[1] in any replicate and is not flagged method_failed
    # there (as a competitor at the checkpoints it does not compute): no replicate is lost
    # to a failure, and its cells are n/a, not partial (a mutation hunt, h17a: reading
    # every missing bound as a failure, whatever the flag, passed every test).
    ds = tau_half([r for r in range(syn.DONE) if r != syn.BB_FAILED_REP])
    cell = {"method": "bb", "n": syn.NS[1]}
    for name in ("lower", "upper"):
        ds[name].loc[cell] = np.nan
    assert not ds["method_failed"].any()
    summary = summarize(ds)
    assert (summary["n_done"].sel(cell) == 0).all()
    assert (summary["n_failed"] == 0).all() and (summary["coord_mean_n_failed"] == 0).all()
    assert not partial(summary, "coverage").any()
    assert not any_partial(summary)


def test_a_grid_point_with_no_replicate_done_is_marked():
    # Nothing computed yet there: every cell is partial (0 of 40), not "n/a" by design.
    summary = summarize(syn.grid_store())
    empty = partial(summary, "coverage").sel(syn.EMPTY_CELL)
    assert int(summary["replicates_done"].sel(syn.EMPTY_CELL)) == 0
    assert bool(empty.all())


def test_a_summary_of_every_replicate_is_no_selection():
    summary = summarize(syn.grid_store())
    assert summary.attrs["replicates"] == syn.REPS
    assert "replicates_selected" not in summary.attrs
    assert summarize(syn.grid_store().isel(rep=range(5))).attrs["replicates_selected"] == 5


@pytest.mark.parametrize(("fmt", "start"), [("text", "* "), ("markdown", "\\* ")])
def test_the_footnote_starts_with_the_marker_of_its_format(with_failure, fmt, start):
    # Markdown escapes the star, which would otherwise start an emphasis or a list.
    note = footnote(with_failure, ["coverage"], fmt)
    assert note.startswith(start + "computed on fewer than all 36 replicates")


def test_the_store_dimensions_are_reserved_names():
    # A statistic plugin is checked against these alone (no store at hand).
    assert {"checkpoint", "method", "rep", "coord"} <= reserved_names()


def test_the_footnote_counts_only_the_coordinates_a_grid_point_has(complete):
    # A case of smaller d (coordinate 1 NaN-padded) whose oracle, added to the store, is
    # pending in 5 of its 35 done replicates: coordinate 0 counts 30; the padded one
    # counts none but is no cell a table shows, and the footnote does not count it.
    summary = complete.copy(deep=True)
    summary["coord_exists"][...] = [True, False]
    summary["n_done"][..., 1] = 0
    summary["methods_pending"].loc[{"method": "oracle"}] = 5
    summary["n_done"].loc[{"method": "oracle", "coord": 0}] = 30
    note = footnote(summary, ["coverage"], "text")
    assert "fewer than all 35 replicates of its grid point: 30 counted, 0 lost" in note
    assert "5 not computed yet" in note
