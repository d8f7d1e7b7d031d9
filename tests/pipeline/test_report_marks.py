"""What a reader of tables and the report sees: marks, notes, banners, escapes (tests that
kill mutants of the report's code that the other tests let through)."""

from __future__ import annotations

import json

import synthetic as syn
import xarray as xr
from test_report import page_text

from ldpsim.pipeline.report.report import banner, build_context, render_report, sticky_labels
from ldpsim.pipeline.summary.nominal_claims import departs
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import DEPARTURE_MARK, coverage_table, format_table


def test_a_level_axis_flags_each_cell_against_its_grid_points_level():
    # level a grid axis of 0.9 and 0.5, the stored level 0.9: a cell at 0.5 is tested
    # against 0.5, not against the stored level.
    ds = syn.grid_store().rename(tau="level").assign_coords(level=[0.9, 0.5])
    summary = summarize(ds)
    table = coverage_table(summary, "text")
    checked = 0
    for labels, cells in table.rows:
        if labels[-1] != "cover":
            continue
        level, coord, method = float(labels[0]), int(labels[1].split()[1]), labels[2]
        for n_index, cell in enumerate(cells):
            if cell == "n/a" or cell.rstrip("*") == "n/a":
                continue
            point = summary.sel({"level": level, "method": method}).isel(n=n_index, coord=coord)
            expected = bool(departs(point["coverage"], point["n_done"], level))
            assert cell.endswith(DEPARTURE_MARK) == expected, (labels, cell)
            checked += 1
    assert checked > 0


def _complete_grid() -> xr.Dataset:
    """syn.grid_store at tau = 0.5 with every replicate done and no failure."""
    ds = syn.grid_store().sel(tau=[0.5]).isel(rep=slice(0, syn.DONE))
    sweep = json.loads(ds.attrs["sweep"])
    sweep["replicates"] = syn.DONE
    sweep["grid"]["tau"] = [0.5]
    ds.attrs["sweep"] = json.dumps(sweep)
    ds["method_failed"] = ds["method_failed"] & False
    bb = ds["lower"].isel(method=0, rep=syn.BB_FAILED_REP)
    ds["lower"][dict(method=0, rep=syn.BB_FAILED_REP)] = bb.fillna(0.0)
    ds["upper"][dict(method=0, rep=syn.BB_FAILED_REP)] = (
        ds["upper"].isel(method=0, rep=syn.BB_FAILED_REP).fillna(1e6)
    )
    return ds


def test_the_flag_note_is_under_a_table_only_where_a_cell_is_marked():
    summary = summarize(_complete_grid())
    # Every coverage exactly nominal: no cell is marked, and no note explains a mark.
    summary["coverage"] = xr.full_like(summary["coverage"], 0.9)
    table = format_table(summary, "text")
    assert DEPARTURE_MARK not in table
    # A level no coverage here is near marks cells, and the note explains the mark.
    marked = format_table(summarize(_complete_grid().assign_attrs(level=0.999)), "text")
    assert DEPARTURE_MARK in marked and "the coverage departs from its nominal" in marked


def test_a_cell_missing_one_replicate_not_computed_yet_is_marked():
    ds = _complete_grid()
    assert "*" not in format_table(summarize(ds), "text")
    done = ds["done"].values.copy()
    done[0, 0, -1] = False  # one replicate of tau = 0.5, n = 100 not done yet
    table = format_table(summarize(ds.assign(done=(ds["done"].dims, done))), "text")
    assert f"{syn.DONE - 1} counted" in table and "1 not computed yet" in table


def test_a_latex_footnote_keeps_its_double_hyphens():
    # "--format csv" in LaTeX would be an en dash: written -{}-.
    ds = syn.grid_store()
    table = format_table(summarize(ds), "latex")
    assert "-{}-format csv" in table and "--format" not in table


def test_the_claim_sentence_is_in_the_note_of_coordinate_means_without_bands():
    summary = summarize(syn.wide_store(12).assign_attrs(level=0.999))
    table = format_table(summary, "text", coords="mean")
    assert DEPARTURE_MARK in table
    assert "every method here on the coverage of each coordinate (and its mean)" in table


def test_the_banner_says_a_method_failed_without_a_failed_replicate():
    ds = syn.early_failure_store(per_checkpoint=True)
    flags = ds["method_failed"].values.copy()
    flags[1, 0, 1] = True  # bm failed at two checkpoints of replicate 0: one failure
    ds["method_failed"] = (ds["method_failed"].dims, flags)
    assert int(ds["failed"].sum()) == 0
    done, total = int(ds["done"].sum()), int(ds["done"].size)
    lines = banner(ds, done, total, [])
    assert lines and "interval methods failed 4 times" in lines[-1], lines


def test_the_report_has_one_flag_note_for_all_its_tables(tmp_path, without_figures):
    from conftest import edit_root_attrs

    store = syn.failing_store(tmp_path)
    edit_root_attrs(store, level=0.99)  # bb's cells are marked
    text = page_text(render_report(build_context(store)))
    assert f"{DEPARTURE_MARK}: the method's claimed coverage" in text
    assert "the coverage departs from its nominal" not in text


def test_the_csv_of_many_coordinates_holds_their_means(tmp_path):
    import base64

    from ldpsim.pipeline.report.report import summary_csv

    summary = summarize(syn.wide_store(12))
    link = summary_csv(summary)
    text = base64.b64decode(link["uri"].removeprefix("data:text/csv;base64,")).decode()
    assert link["what"] == "the means over the coordinates"
    header = text.splitlines()[0].split(",")
    assert "coord" not in header and "coord_mean_coverage" in header
    few = summary_csv(summarize(syn.wide_store(3)))
    assert few["what"] == "one row per coordinate"


def test_a_description_with_markup_is_shown_as_text(tmp_path, without_figures):
    ds = syn.grid_store()
    sweep = json.loads(ds.attrs["sweep"])
    sweep["description"] = "<script>alert(1)</script> & <b>bold</b>"
    ds.attrs["sweep"] = json.dumps(sweep)
    store = syn.save_store(ds, tmp_path / "s.zarr")
    page = render_report(build_context(store))
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_phone_keeps_two_label_columns_and_headings_skip_unset_values():
    names = ["d", "mechanism", "method", "statistic"]
    rows = [
        {"labels": ["10", "-", "bb", "cover"]},
        {"labels": ["", "", "", "length"]},
        {"labels": ["100", "laplace", "bb", "cover"]},
    ]
    out = sticky_labels(names, rows)
    assert out["label_classes"] == ["lab l0 outer", "lab l1 outer", "lab l2", "lab l3"]
    assert [row["heading"] for row in rows] == ["d = 10", "", "d = 100, mechanism = laplace"]
    assert "--nw2" in out["columns"] and "--nw1" not in out["columns"]


def test_the_timings_count_each_grid_points_done_replicates():
    from ldpsim.pipeline.report.report import timing_tables

    points = timing_tables(syn.grid_store())["points"]
    # tau = 0.9, n = 1e4 has no done replicate; the others 36 of 40.
    assert [p["done"] for p in points] == [syn.DONE, syn.DONE, syn.DONE, 0]
