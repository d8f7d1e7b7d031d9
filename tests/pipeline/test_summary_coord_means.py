"""Coverage and length averaged over the coordinates, and `summarize --coords`."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
import synthetic as syn
import xarray as xr

from ldpsim.pipeline.cli import COORDS_MODES, main
from ldpsim.pipeline.summary import tables
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import (
    AUTO_MAX_COORDS,
    COORD_MEAN_RECORD_FIELDS,
    coverage_cell,
    format_table,
    records,
)

WIDE_D = 50
WIDE_REPS = 40
COORD_MEANS = ["coord_mean_coverage", "coord_mean_length"]


@pytest.fixture(scope="module")
def wide() -> xr.Dataset:
    return syn.wide_store(WIDE_D, reps=WIDE_REPS)


@pytest.fixture(scope="module")
def wide_summary(wide: xr.Dataset) -> xr.Dataset:
    return summarize(wide)


def per_replicate_se(values: np.ndarray) -> float:
    """Sample sd (ddof 1) over replicates (rows) of the row means / sqrt(rows)."""
    means = values.mean(axis=1)
    return float(np.std(means, ddof=1) / math.sqrt(len(means)))


def bb_bounds(store: xr.Dataset, n: int) -> tuple[np.ndarray, np.ndarray]:
    """bb's coverage indicators and lengths (replicates x coordinates), failed rep left out."""
    cell = store.sel({"n": n, "method": "bb"})
    reps = [r for r in range(store.sizes["rep"]) if r != syn.WIDE_FAILED_REP]
    lower = cell["lower"].values[reps]
    upper = cell["upper"].values[reps]
    truth = cell["truth"].values
    return (lower <= truth) & (truth <= upper), upper - lower


def test_dims_and_attributes(wide_summary):
    for name in [*COORD_MEANS, "coord_mean_coverage_se", "coord_mean_length_se"]:
        assert wide_summary[name].dims == ("n", "method")
        assert wide_summary[name].attrs["long_name"] and wide_summary[name].attrs["units"]
    assert wide_summary["coord_mean_n_done"].dims == ("n", "method")
    assert wide_summary["coord_mean_n_done"].sel({"method": "bb"}).values.tolist() == [39, 39]
    assert wide_summary["coord_mean_n_done"].sel({"method": "oracle"}).values.tolist() == [40, 40]


@pytest.mark.parametrize("store", ["grid", "wide"])
def test_means_are_means_over_coordinates(store, wide):
    # A method fails for all coordinates of a replicate or none: the replicate means
    # average to the coordinate means of coverage and length.
    s = summarize(syn.grid_store() if store == "grid" else wide)
    for name, per_coord in [("coord_mean_coverage", "coverage"), ("coord_mean_length", "length")]:
        xr.testing.assert_allclose(s[name], s[per_coord].mean("coord"), rtol=1e-12)


def test_se_of_perfectly_correlated_coordinates():
    # Every coordinate of a replicate is covered or none is: each replicate's fraction is
    # 0 or 1, so their sample sd is sqrt(R / (R - 1) p (1 - p)) and the standard error
    # sqrt(p (1 - p) / (R - 1)), the single coordinate's binomial one times
    # sqrt(R / (R - 1)): averaging perfectly correlated coordinates gains nothing.
    s = summarize(syn.wide_store(WIDE_D, reps=WIDE_REPS, correlated=True))
    for method, reps in [("bb", WIDE_REPS - 1), ("oracle", WIDE_REPS)]:
        m = s.sel({"method": method})
        p = m["coord_mean_coverage"].values
        np.testing.assert_array_equal(m["coverage"].values, np.repeat(p[:, None], WIDE_D, 1))
        assert (m["n_done"].values == reps).all() and (m["coord_mean_n_done"] == reps).all()
        np.testing.assert_allclose(
            m["coord_mean_coverage_se"].values, np.sqrt(p * (1 - p) / (reps - 1)), rtol=1e-12
        )
        np.testing.assert_allclose(
            m["coord_mean_coverage_se"].values,
            m["coverage_se"].isel(coord=0).values * math.sqrt(reps / (reps - 1)),
            rtol=1e-12,
        )
    assert 0 < float(s["coord_mean_coverage"].min()) < float(s["coord_mean_coverage"].max()) < 1


def test_se_of_independent_coordinates(wide, wide_summary):
    for n in syn.WIDE_NS:
        covered, length = bb_bounds(wide, n)
        m = wide_summary.sel({"n": n, "method": "bb"})
        assert float(m["coord_mean_coverage"]) == pytest.approx(covered.mean(), rel=1e-12)
        assert float(m["coord_mean_coverage_se"]) == pytest.approx(
            per_replicate_se(covered.astype(float)), rel=1e-12
        )
        assert float(m["coord_mean_length"]) == pytest.approx(length.mean(), rel=1e-12)
        assert float(m["coord_mean_length_se"]) == pytest.approx(
            per_replicate_se(length), rel=1e-12
        )
        # Independent coordinates: about the binomial se of all R d indicators, far
        # below the single coordinate's. The se is a sample sd over R = 39-40
        # replicates, of relative sd about 1 / sqrt(2 (R - 1)) = 0.11: 0.6-1.4 is
        # about 3.5 of those sds. (A binomial se over the R d pairs would pass this
        # check too; the perfectly correlated case above is the one that catches it.)
        p = float(m["coord_mean_coverage"])
        pooled = math.sqrt(p * (1 - p) / covered.size)
        assert 0.6 < float(m["coord_mean_coverage_se"]) / pooled < 1.4
        assert float(m["coord_mean_coverage_se"]) < float(m["coverage_se"].mean()) / 3


def test_padded_coordinates_are_left_out(wide):
    # A grid point of smaller d (NaN-padded theta*): the means run over its real coords.
    padded = wide.copy(deep=True)
    padded["truth"][{"n": 0, "coord": slice(30, None)}] = np.nan
    s = summarize(padded).sel({"n": 100, "method": "bb"})
    covered, length = bb_bounds(padded, 100)
    assert float(s["coord_mean_coverage"]) == pytest.approx(covered[:, :30].mean(), rel=1e-12)
    assert float(s["coord_mean_coverage_se"]) == pytest.approx(
        per_replicate_se(covered[:, :30].astype(float)), rel=1e-12
    )
    assert float(s["coord_mean_length"]) == pytest.approx(length[:, :30].mean(), rel=1e-12)


def test_replicate_with_some_coordinates_missing(wide):
    # Bounds at some coordinates only: the replicate's fraction is over those it has.
    partial = wide.copy(deep=True)
    for name in ("lower", "upper"):
        partial[name][{"n": 0, "method": 1, "rep": 0, "coord": slice(0, 10)}] = np.nan
    s = summarize(partial).sel({"n": 100, "method": "oracle"})
    cell = partial.sel({"n": 100, "method": "oracle"})
    covered = ((cell["lower"] <= 0) & (cell["upper"] >= 0)).values
    fractions = [covered[0, 10:].mean(), *covered[1:].mean(axis=1)]
    assert int(s["coord_mean_n_done"]) == WIDE_REPS
    assert float(s["coord_mean_coverage"]) == pytest.approx(np.mean(fractions), rel=1e-12)
    expected_se = np.std(fractions, ddof=1) / math.sqrt(WIDE_REPS)
    assert float(s["coord_mean_coverage_se"]) == pytest.approx(expected_se, rel=1e-12)


def test_the_mean_tables_caption_counts_the_replicates_of_the_means(wide):
    # The oracle without bounds at coordinates 0-9 in replicates 0-4 (n = 100): those
    # coordinates count 35 replicates, the means over the coordinates still 40 (each
    # replicate has bounds at some coordinate). The caption of the table of means says
    # the means' counts (coord_mean_n_done), the table per coordinate n_done's. A
    # mutation hunt (h16d, T23): the mean table's caption counting n_done passed.
    partial = wide.copy(deep=True)
    for name in ("lower", "upper"):
        partial[name][{"n": 0, "method": 1, "rep": slice(0, 5), "coord": slice(0, 10)}] = np.nan
    summary = summarize(partial)
    done = partial["done"] & ~partial["method_failed"]
    bounds = done & partial["lower"].notnull() & partial["upper"].notnull()
    per_coord = bounds.sum("rep").values
    per_mean = bounds.any("coord").sum("rep").values
    assert (per_coord.min(), per_mean.min(), per_mean.max()) == (35, WIDE_REPS - 1, WIDE_REPS)

    def caption(coords: str) -> str:
        return format_table(summary, "text", coords=coords).splitlines()[0]

    lo, hi = per_mean.min(), per_mean.max()
    assert f"; replicates per cell: {lo}-{hi} of {WIDE_REPS}; --coords all" in caption("mean")
    lo, hi = per_coord.min(), per_coord.max()
    assert caption("all").endswith(f"; replicates per cell: {lo}-{hi} of {WIDE_REPS}")


def test_cell_without_replicates_is_nan():
    s = summarize(syn.grid_store()).sel({"tau": 0.9, "n": 10_000})
    assert s["coord_mean_coverage"].isnull().all() and s["coord_mean_length_se"].isnull().all()
    assert (s["coord_mean_n_done"] == 0).all()


def test_checkpoints():
    s = summarize(syn.checkpoint_store(reps=3))
    assert s["coord_mean_coverage"].dims == ("method", "checkpoint")
    xr.testing.assert_allclose(s["coord_mean_coverage"], s["coverage"].isel(coord=0, drop=True))
    recs = json.loads(format_table(s, "json", coords="mean"))
    assert len(recs) == len(syn.RUN_METHODS) * len(syn.CHECKPOINTS)
    assert list(recs[0]) == ["method", "checkpoint", *COORD_MEAN_RECORD_FIELDS, "n_replicates"]


# -- tables -------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["text", "markdown", "latex", "csv", "json"])
def test_default_is_all_for_few_coordinates(fmt):
    # d <= 10: the default output is the per-coordinate one, diagnostics and errors too.
    for store in (syn.grid_store(), syn.wide_store(AUTO_MAX_COORDS)):
        s = summarize(store)
        for options in ({}, {"diagnostics": True, "errors": True}):
            assert format_table(s, fmt, **options) == format_table(s, fmt, coords="all", **options)
    assert "coord 9" in format_table(s, "text")


def table_rows(text: str) -> list[str]:
    """The rows of a text table between its header rule and its closing rule."""
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    return lines[rules[1] + 1 : rules[2]]


def test_many_coordinates_give_the_mean_table(wide_summary):
    text = format_table(wide_summary, "text")
    assert text == format_table(wide_summary, "text", coords="mean")
    caption = text.splitlines()[0]
    assert "mean over the d coordinates" in caption and "--coords all lists each" in caption
    assert "replicates per cell: 39-40 of 40" in caption
    rows = table_rows(text)
    labels = [[w for w in r.split() if w[0].isalpha()] for r in rows]
    assert labels == [
        ["bb", "cover"],
        ["joint"],
        ["length"],
        ["oracle", "cover"],
        ["joint"],
        ["length"],
    ]
    bb = wide_summary.sel({"method": "bb"})
    joint = [
        coverage_cell(c, s, k, syn.LEVEL, claimed=False)[0]
        for c, s, k in zip(
            bb["joint_coverage"].values,
            bb["joint_coverage_se"].values,
            bb["joint_n_done"].values,
            strict=True,
        )
    ]
    # A joint coverage of 0: Wilson's interval, as in the report; a partial store.
    assert joint == ["0.000 [0.000, 0.093]"] * 2
    assert rows[1].endswith("  ".join(f"{cell}*" for cell in joint))
    bb = wide_summary.sel({"method": "bb"})
    cover = [
        f"{c:.3f} ({s:.3f})"
        for c, s in zip(
            bb["coord_mean_coverage"].values, bb["coord_mean_coverage_se"].values, strict=True
        )
    ]
    # bb's 0.8 per coordinate is far from 0.9: a departure from its claim (issue 43).
    assert rows[0].split()[-4:] == [w for cell in cover for w in f"{cell}*\N{DAGGER}".split()]
    assert "coord" not in "\n".join(rows)
    # The row count does not grow with d.
    wider = format_table(summarize(syn.wide_store(4 * WIDE_D, reps=WIDE_REPS)), "text")
    assert len(table_rows(wider)) == len(rows) == 6
    assert len(table_rows(format_table(wide_summary, "text", coords="all"))) == 4 * WIDE_D


def test_mean_table_formats(wide_summary):
    md = format_table(wide_summary, "markdown", coords="mean")
    assert "| method |  | n = 1e2 | n = 1e4 |" in md.splitlines()
    assert sum(line.startswith("|") for line in md.splitlines()) == 2 + 6
    tex = format_table(wide_summary, "latex", coords="mean")
    assert tex.count(r"\\") == 1 + 6 and r"\begin{tabular}{llrr}" in tex


def test_mean_table_leaves_out_diagnostics_and_keeps_errors(wide_summary):
    text = format_table(wide_summary, "text", diagnostics=True, errors=True)
    main_table, errors = text.split("\n\n")
    assert "diagnostics are per coordinate and left out" in main_table.splitlines()[0]
    assert "pred cover" not in main_table and "bias/sd" not in main_table
    assert table_rows(main_table + "\n") == table_rows(format_table(wide_summary, "text"))
    all_errors = format_table(wide_summary, "text", errors=True, coords="all").split("\n\n")[1]
    assert errors == all_errors


def test_csv_and_json(wide_summary):
    # auto keeps every coordinate's record; mean gives one per grid point and method.
    assert format_table(wide_summary, "csv") == format_table(wide_summary, "csv", coords="all")
    assert len(json.loads(format_table(wide_summary, "json"))) == len(records(wide_summary))
    rows = list(csv.DictReader(io.StringIO(format_table(wide_summary, "csv", coords="mean"))))
    assert len(rows) == len(syn.WIDE_NS) * len(syn.WIDE_METHODS)
    assert list(rows[0]) == ["n", "method", *COORD_MEAN_RECORD_FIELDS, "n_replicates"]
    first = wide_summary.sel({"n": 100, "method": "bb"})
    assert float(rows[0]["coord_mean_coverage"]) == float(first["coord_mean_coverage"])
    assert rows[0]["coord_mean_n_done"] == "39" and float(rows[0]["mse"]) == float(first["mse"])
    data = json.loads(format_table(wide_summary, "json", coords="mean"))
    assert [(r["n"], r["method"]) for r in data] == [
        (100, "bb"),
        (100, "oracle"),
        (10_000, "bb"),
        (10_000, "oracle"),
    ]


def test_unknown_coords_mode(wide_summary):
    with pytest.raises(ValueError, match="'coords' parameter of format_table must be one of"):
        format_table(wide_summary, "text", coords="median")


# -- command line -------------------------------------------------------------------------
def test_cli_offers_every_coords_mode():
    assert COORDS_MODES == tables.COORDS_MODES


def test_cli_coords(tmp_path, wide, wide_summary, capsys):
    path = tmp_path / "wide.zarr"
    wide.to_zarr(path, zarr_format=3, consolidated=False)
    for options, coords in [
        ([], "auto"),
        (["--coords", "all"], "all"),
        (["--format", "csv", "--coords", "mean"], "mean"),
    ]:
        assert main(["summarize", str(path), *options]) == 0
        fmt = "csv" if "csv" in options else "text"
        out = capsys.readouterr().out
        if fmt == "text":  # the text table is followed by a line of timings
            out, timings = out.rsplit("\n\n", 1)
            out += "\n\n"
            assert timings.startswith("median seconds per replicate")
        assert out == format_table(wide_summary, fmt, coords=coords) + "\n"
    # A bad value is bad usage: exit 2, one line naming the option.
    assert main(["summarize", str(path), "--coords", "median"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--coords" in err and "median" in err


def test_the_mean_table_plans_replicates_from_the_coordinate_means(wide_summary):
    # "R for se" of the mean table is coord_mean_replicates_needed, one per n and method.
    lines = format_table(wide_summary, "text", coords="mean", replicates_needed=True)
    row = [line for line in lines.splitlines() if line.strip().startswith("R for se")][-1]
    planned = np.ravel(wide_summary["coord_mean_replicates_needed"].sel(method="oracle").values)
    assert set(row.split()[-2:]) <= {f"{int(v):,}" for v in planned}
