"""Summaries and tables of hand-made stores whose coverage, length and errors are known."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import warnings

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from scipy.stats import norm

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.formatting import (
    count_text,
    format_number,
    named_text,
    parameter_text,
    sample_size_text,
)
from ldpsim.pipeline.store.reading import open_dataset
from ldpsim.pipeline.summary.diagnostics import DIAGNOSTIC_FIELDS
from ldpsim.pipeline.summary.records import coord_mean_records, json_value, render_records
from ldpsim.pipeline.summary.summary import replicates_needed, summarize
from ldpsim.pipeline.summary.table_layouts import latex_table, markdown_table, text_table
from ldpsim.pipeline.summary.tables import (
    ERROR_FIELDS,
    RECORD_FIELDS,
    axis_labels,
    caption_head,
    flag_note,
    format_table,
    records,
)

DONE_CELLS = [(0.5, 100), (0.5, 10_000), (0.9, 100)]
BB_REPS = [r for r in range(syn.DONE) if r != syn.BB_FAILED_REP]


@pytest.fixture(scope="module")
def store() -> xr.Dataset:
    return syn.grid_store()


@pytest.fixture(scope="module")
def summary(store: xr.Dataset) -> xr.Dataset:
    return summarize(store)


def cell(summary: xr.Dataset, tau: float, n: int, **sel) -> xr.Dataset:
    return summary.sel({"tau": tau, "n": n, **sel})


def test_dimensions_and_attributes(summary):
    assert summary["coverage"].dims == ("tau", "n", "method", "coord")
    assert summary["joint_coverage"].dims == ("tau", "n", "method")
    assert summary["bias"].dims == ("tau", "n", "coord")
    assert summary["sd_ratio"].dims == ("tau", "n", "coord")
    for name, var in summary.data_vars.items():
        assert var.attrs["long_name"] and var.attrs["units"], name
    assert summary.attrs["level"] == syn.LEVEL


def test_summary_without_diagnostics_differs_only_by_them(store, summary):
    # What `ldpsim summarize` computes for a table that does not show the diagnostics.
    lean = summarize(store, diagnostics=False)
    assert not set(DIAGNOSTIC_FIELDS) & set(lean.data_vars)
    assert set(summary.data_vars) - set(lean.data_vars) == set(DIAGNOSTIC_FIELDS)
    xr.testing.assert_identical(lean, summary.drop_vars(list(DIAGNOSTIC_FIELDS)))


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_coverage_is_exactly_k_over_r(summary, tau, n):
    # bb misses coord j when r % 7 == j: 6 of 35 (coord 0), 5 of 35 (coord 1); rep 3 failed.
    bb = cell(summary, tau, n, method="bb")
    assert bb["n_done"].values.tolist() == [35, 35]
    assert bb["coverage"].values.tolist() == [29 / 35, 30 / 35]
    oracle = cell(summary, tau, n, method="oracle")
    assert oracle["n_done"].values.tolist() == [36, 36]
    assert oracle["coverage"].values.tolist() == [33 / 36, 1.0]
    for j in range(syn.D):
        k = sum(syn.bb_covers(r, j) for r in BB_REPS)
        assert bb["coverage"].values[j] == k / len(BB_REPS)


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_coverage_se_is_binomial(summary, tau, n):
    for method, reps in (("bb", 35), ("oracle", 36)):
        c = cell(summary, tau, n, method=method)
        p = c["coverage"].values
        np.testing.assert_allclose(c["coverage_se"].values, np.sqrt(p * (1 - p) / reps))
    assert cell(summary, tau, n, method="oracle", coord=1)["coverage_se"] == 0.0


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_length_mean_and_se(summary, tau, n):
    bb = cell(summary, tau, n, method="bb")
    for j in range(syn.D):
        lengths = np.array([syn.bb_length(r, j) for r in BB_REPS])
        assert bb["length"].values[j] == pytest.approx(lengths.mean(), rel=1e-12)
        se = lengths.std(ddof=1) / math.sqrt(len(lengths))
        assert bb["length_se"].values[j] == pytest.approx(se, rel=1e-12)
    oracle = cell(summary, tau, n, method="oracle")
    expected = 2 * syn.Z * syn.ORACLE_SD / math.sqrt(n)
    np.testing.assert_allclose(oracle["length"].values, expected, rtol=1e-12)
    np.testing.assert_allclose(oracle["length_se"].values, 0.0, atol=1e-12)


@pytest.mark.parametrize("scale", [1e300, 1e307])
def test_length_of_huge_intervals_does_not_overflow(store, summary, scale):
    # Lengths near the largest float: their squares (from about 1e154) and sums overflow.
    # The mean and standard error are finite numbers, scale times those of the same
    # intervals at scale 1 (before: length_se inf, "n/a" in the tables; at 1e307 the
    # length itself inf).
    huge = store.copy()
    centre = (store["lower"] + store["upper"]) / 2
    huge["lower"] = centre - (centre - store["lower"]) * scale
    huge["upper"] = centre + (store["upper"] - centre) * scale
    with warnings.catch_warnings():  # the diagnostics' overflow: inf, not a warning line
        warnings.simplefilter("error", RuntimeWarning)
        wide = summarize(huge)
    for tau, n in DONE_CELLS:
        for name in ("length", "length_se", "coord_mean_length", "coord_mean_length_se"):
            # bb: the oracle's fixed width has an se of rounding noise only
            got = cell(wide, tau, n, method="bb")[name].values
            assert np.isfinite(got).all(), (name, got)
            expected = cell(summary, tau, n, method="bb")[name].values * scale
            np.testing.assert_allclose(got, expected, rtol=1e-9)


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_joint_coverage(summary, tau, n):
    joint = cell(summary, tau, n)
    # bb: 11 of 35 replicates miss at least one coordinate; oracle: 3 of 36.
    assert joint["joint_coverage"].values.tolist() == [24 / 35, 33 / 36]
    assert joint["joint_n_done"].values.tolist() == [35, 36]
    k = sum(syn.bb_covers(r, 0) and syn.bb_covers(r, 1) for r in BB_REPS)
    assert k == 24
    p = np.array([24 / 35, 33 / 36])
    np.testing.assert_allclose(joint["joint_coverage_se"].values, np.sqrt(p * (1 - p) / [35, 36]))
    # Against the nominal level, in binomial standard errors at that level.
    level = syn.LEVEL
    z = (p - level) / np.sqrt(level * (1 - level) / np.array([35, 36]))
    np.testing.assert_allclose(joint["joint_coverage_z"].values, z, rtol=1e-12)


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_bias_rmse_and_sd_ratio(summary, tau, n):
    c = cell(summary, tau, n)
    r = syn.DONE
    for j in range(syn.D):
        mu = syn.bias(j)
        assert c["bias"].values[j] == pytest.approx(mu, rel=1e-9)
        # mean squared error = bias^2 + (R - 1)/R * (sample variance of theta_bar).
        mse = mu**2 + (r - 1) / r * syn.EMPIRICAL_SD**2 / n
        assert c["rmse"].values[j] == pytest.approx(math.sqrt(mse), rel=1e-9)
    np.testing.assert_allclose(c["sd"].values, syn.EMPIRICAL_SD, rtol=1e-9)
    np.testing.assert_allclose(c["oracle_sd"].values, syn.ORACLE_SD, rtol=1e-12)
    np.testing.assert_allclose(c["sd_ratio"].values, syn.EMPIRICAL_SD / syn.ORACLE_SD, rtol=1e-9)


def direct_mse(values: np.ndarray, truth: np.ndarray) -> tuple[float, float, int]:
    """Mean, standard error and count of ||theta - theta*||^2 over the rows of ``values``
    (replicates x coords) whose every coordinate is finite, with plain numpy."""
    squared = np.sum((values - truth) ** 2, axis=1)
    squared = squared[np.isfinite(squared)]
    return squared.mean(), squared.std(ddof=1) / math.sqrt(squared.size), squared.size


@pytest.mark.parametrize(("tau", "n"), DONE_CELLS)
def test_mse_of_average_and_last_iterate(store, summary, tau, n):
    c = cell(summary, tau, n)
    point = store.sel(tau=tau, n=n).isel(rep=slice(0, syn.DONE))  # the done replicates
    truth = point["truth"].values
    for name, variable in (("mse", "estimate"), ("mse_last", "last")):
        mean, se, count = direct_mse(point[variable].values, truth)
        assert count == syn.DONE
        assert c[name].dims == () and int(c[f"{name}_n_done"]) == count
        assert float(c[name]) == pytest.approx(mean, rel=1e-12)
        assert float(c[f"{name}_se"]) == pytest.approx(se, rel=1e-12)
    # By construction: E||theta_bar - theta*||^2 = sum_j bias_j^2 + (R - 1)/R d sd^2 / n.
    r = syn.DONE
    expected = (
        sum(syn.bias(j) ** 2 for j in range(syn.D)) + (r - 1) / r * syn.D * syn.EMPIRICAL_SD**2 / n
    )
    assert float(c["mse"]) == pytest.approx(expected, rel=1e-9)
    last = [sum(syn.last_error(k, j) ** 2 for j in range(syn.D)) for k in range(r)]
    assert float(c["mse_last"]) == pytest.approx(np.mean(last), rel=1e-12)
    # Per coordinate, as rmse for the average.
    for j in range(syn.D):
        ms = np.mean([syn.last_error(k, j) ** 2 for k in range(r)])
        assert float(c["rmse_last"].sel(coord=j)) == pytest.approx(math.sqrt(ms), rel=1e-12)
    assert summary["mse"].dims == summary["mse_last_se"].dims == ("tau", "n")
    assert summary["rmse_last"].dims == ("tau", "n", "coord")


def test_mse_counts_replicates_with_a_last_iterate(store):
    # A store of an older ldpsim extended by a run: replicates done before have NaN last
    # iterates; mse_last uses the others, mse all of them. A NaN coordinate of the
    # average (overflow) drops that replicate from mse.
    partial = store.copy(deep=True)
    partial["last"][{"rep": slice(0, 10)}] = np.nan
    partial["estimate"][{"rep": 20, "coord": 1}] = np.nan
    c = summarize(partial).sel(tau=0.5, n=100)
    point = partial.sel(tau=0.5, n=100).isel(rep=slice(0, syn.DONE))
    truth = point["truth"].values
    mean, se, count = direct_mse(point["last"].values, truth)
    assert count == syn.DONE - 10 == int(c["mse_last_n_done"])
    assert float(c["mse_last"]) == pytest.approx(mean, rel=1e-12)
    assert float(c["mse_last_se"]) == pytest.approx(se, rel=1e-12)
    mean, se, count = direct_mse(point["estimate"].values, truth)
    assert count == syn.DONE - 1 == int(c["mse_n_done"])
    assert float(c["mse"]) == pytest.approx(mean, rel=1e-12)


def test_store_without_last_iterates(store):
    # A store written before the last iterate was kept: everything but mse_last.
    old = summarize(store.drop_vars("last"))
    new = summarize(store)
    for name in ("mse_last", "mse_last_se", "rmse_last"):
        assert old[name].isnull().all(), name
    assert (old["mse_last_n_done"] == 0).all()
    xr.testing.assert_identical(
        old.drop_vars(["mse_last", "mse_last_se", "mse_last_n_done", "rmse_last"]),
        new.drop_vars(["mse_last", "mse_last_se", "mse_last_n_done", "rmse_last"]),
    )
    assert format_table(old, "text") == format_table(new, "text")
    assert [r["mse_last"] for r in records(old)] == [None] * 16


def test_cell_without_done_replicates_is_nan(summary):
    empty = summary.sel(syn.EMPTY_CELL)
    assert (empty["n_done"] == 0).all()
    assert (empty["joint_n_done"] == 0).all()
    names = ("coverage", "coverage_se", "length", "length_se", "joint_coverage", "bias")
    for name in (*names, "mse", "mse_se", "mse_last", "mse_last_se"):
        assert empty[name].isnull().all(), name
    assert empty["mse_n_done"] == empty["mse_last_n_done"] == 0
    assert empty["sd_ratio"].isnull().all()


def test_only_done_replicates_count(store, summary):
    # Marking the garbage replicate done changes the counts: the mask is `done`, not NaN.
    changed = store.copy(deep=True)
    changed["done"].loc[{"rep": syn.GARBAGE_REP}] = True
    changed = summarize(changed)
    before = cell(summary, 0.5, 100, method="bb")["n_done"].values
    after = cell(changed, 0.5, 100, method="bb")["n_done"].values
    assert (after == before + 1).all()


def test_zarr_round_trip(tmp_path, store, summary):
    path = tmp_path / "s.zarr"
    store.to_zarr(path, zarr_format=3, consolidated=False)
    reopened = open_dataset(path)
    assert reopened["lower"].chunks is not None  # lazily loaded, as in a real run
    from_zarr = summarize(reopened)
    xr.testing.assert_allclose(from_zarr, summary, rtol=1e-12)
    assert from_zarr["method"].values.tolist() == ["bb", "oracle"]
    assert format_table(from_zarr, "markdown") == format_table(summary, "markdown")


def test_padded_coordinates_are_ignored(store):
    # A grid point with d = 1 in a d = 2 store: truth and bounds of coord 1 are NaN.
    padded = store.copy(deep=True)
    where = {"tau": 0.5, "n": 100, "coord": 1}
    for name in ("truth", "estimate", "lower", "upper"):
        padded[name].loc[where] = np.nan
    c = summarize(padded).sel(tau=0.5, n=100)
    assert (c["n_done"].sel(coord=1) == 0).all()
    # bb failed in replicate 3, a failure at the coordinates the grid point has only.
    assert c["n_failed"].sel({"method": "bb"}).values.tolist() == [1, 0]
    assert c["coverage"].sel(coord=1).isnull().all()
    assert c["bias"].sel(coord=1).isnull()
    np.testing.assert_array_equal(c["joint_coverage"], c["coverage"].sel(coord=0))
    np.testing.assert_array_equal(c["joint_n_done"], c["n_done"].sel(coord=0))


def test_no_oracle_gives_nan_sd_ratio(store):
    s = summarize(store.sel({"method": ["bb"]}))
    assert s["sd_ratio"].isnull().all()
    np.testing.assert_allclose(s["sd"].sel(tau=0.5, n=100).values, syn.EMPIRICAL_SD, rtol=1e-9)


def test_n_from_checkpoints_and_from_spec():
    # The oracle half-length is z * 2 / sqrt(n) with n = checkpoint (resp. the spec's n).
    ck = summarize(syn.checkpoint_store(reps=3))
    assert ck["coverage"].dims == ("method", "checkpoint", "coord")
    assert ck["bias"].dims == ("checkpoint", "coord")
    np.testing.assert_allclose(ck["oracle_sd"].values, syn.ORACLE_SD, rtol=1e-12)
    point = summarize(syn.point_store())
    assert "n" not in point.dims
    np.testing.assert_allclose(point["oracle_sd"].values, syn.ORACLE_SD, rtol=1e-12)
    np.testing.assert_allclose(point["sd_ratio"].values, 1.5, rtol=1e-9)


@pytest.mark.parametrize("per_checkpoint", [True, False], ids=["per-checkpoint", "old-layout"])
def test_failure_at_early_checkpoint_keeps_replicate_later(per_checkpoint):
    # bm failed at checkpoint 10 for replicates 0..3, which all cover theta*; of 4..7 the
    # even ones cover. By hand: at 10, bm has reps 4..7 of which 2 cover: 2/4; at 100
    # and 1000 all 8 count and 4 + 2 cover: 6/8, as for bb everywhere. Counting the
    # failure at every checkpoint would give 2/4 at 100 and 1000 too.
    summary = summarize(syn.early_failure_store(per_checkpoint)).isel(coord=0)
    bm, bb = summary.sel({"method": "bm"}), summary.sel({"method": "bb"})
    assert bm["n_done"].values.tolist() == [4, 8, 8]
    assert bm["joint_n_done"].values.tolist() == [4, 8, 8]
    np.testing.assert_array_equal(bm["coverage"].values, [2 / 4, 6 / 8, 6 / 8])
    np.testing.assert_array_equal(bm["joint_coverage"].values, [2 / 4, 6 / 8, 6 / 8])
    se = [math.sqrt(p * (1 - p) / r) for p, r in ((2 / 4, 4), (6 / 8, 8), (6 / 8, 8))]
    np.testing.assert_allclose(bm["coverage_se"].values, se, rtol=1e-12)
    assert bb["n_done"].values.tolist() == [8, 8, 8]
    np.testing.assert_array_equal(bb["coverage"].values, [6 / 8] * 3)


def test_records(summary):
    recs = records(summary)
    assert len(recs) == 2 * 2 * 2 * 2
    assert list(recs[0]) == ["tau", "n", "method", "coord", *RECORD_FIELDS, "n_replicates"]
    first = recs[0]
    bb = summary.sel({"tau": 0.5, "n": 100, "method": "bb", "coord": 0})
    diagnostics = {name: pytest.approx(float(bb[name])) for name in DIAGNOSTIC_FIELDS}
    assert first == {
        "tau": 0.5,
        "n": 100,
        "method": "bb",
        "coord": 0,
        "coverage": 29 / 35,
        "coverage_se": pytest.approx(math.sqrt(29 / 35 * 6 / 35 / 35)),
        "length": pytest.approx(np.mean([syn.bb_length(r, 0) for r in BB_REPS])),
        "length_se": pytest.approx(
            np.std([syn.bb_length(r, 0) for r in BB_REPS], ddof=1) / math.sqrt(35)
        ),
        "n_done": 35,
        "n_failed": 1,  # bb failed in replicate BB_FAILED_REP; 4 are not computed
        **diagnostics,
        **{name: pytest.approx(float(bb[name])) for name in ERROR_FIELDS},
        # R (se / 0.005)^2: 35 replicates with se 0.0637 -> 5682.
        "replicates_needed": math.ceil(round(35 * (float(bb["coverage_se"]) / 0.005) ** 2, 6)),
        "n_replicates": syn.REPS,
    }
    assert first["mse_n_done"] == first["mse_last_n_done"] == 36
    # Per grid point: the same in the records of every method and coordinate.
    same_point = [r for r in recs if r["tau"] == 0.5 and r["n"] == 100]
    assert {r["mse"] for r in same_point} == {first["mse"]}
    assert type(first["n"]) is int and type(first["tau"]) is float
    assert type(first["method"]) is str and type(first["n_done"]) is int
    empty = [r for r in recs if r["tau"] == 0.9 and r["n"] == 10_000]
    assert all(r["coverage"] is None and r["n_done"] == 0 for r in empty)


def test_records_with_checkpoints():
    summary = summarize(syn.checkpoint_store(reps=3))
    recs = records(summary)
    assert list(recs[0])[:3] == ["method", "checkpoint", "coord"]
    assert len(recs) == len(syn.RUN_METHODS) * len(syn.CHECKPOINTS)
    # mse per checkpoint, repeated for every method.
    assert summary["mse_last"].dims == ("checkpoint",)
    for rec in recs:
        expected = float(summary["mse_last"].sel(checkpoint=rec["checkpoint"]))
        assert rec["mse_last"] == expected


def test_text_table(summary):
    text = format_table(summary, "text")
    lines = text.splitlines()
    assert "90% intervals" in lines[0] and "0-36 of 40" in lines[0]
    header = next(line for line in lines if line.startswith("tau"))
    assert header.split()[-6:] == ["n", "=", "1e2", "n", "=", "1e4"]
    row = next(line for line in lines if " bb " in line and "cover" in line)
    assert row.split()[:4] == ["0.5", "coord", "0", "bb"]
    assert row.split()[-4:] == ["0.829", "(0.064)*"] * 2  # 36 of 40 done: all partial
    # The oracle's lengths at n = 100, 1e4.
    assert re.search(r"0\.658 \(0\.000\)\* +0\.0658 \(0\.0000\)\*", text)
    assert "n/a*" in text  # the cell without done replicates
    assert lines[-2].startswith("* computed on fewer than all 40 replicates")
    # The oracle's 36 of 36 at coordinate 1: 2 null se over 0.9, a departure (issue 43).
    assert lines[-1].startswith("\N{DAGGER} the coverage departs from its nominal 0.9")


def test_markdown_table(summary):
    md = format_table(summary, "markdown")
    lines = md.splitlines()
    assert lines[0].startswith("**synthetic: 90% intervals")
    assert "| tau | coord | method |  | n = 1e2 | n = 1e4 |" in lines
    assert "| 0.5 | coord 0 | bb | cover | 0.829 (0.064)\\* | 0.829 (0.064)\\* |" in lines
    assert "|  |  |  | length | 0.279 (0.018)\\* | 0.279 (0.018)\\* |" in lines
    assert "| 0.9 | coord 0 | bb | cover | 0.829 (0.064)\\* | n/a\\* |" in lines
    assert "|  | coord 1 | bb | cover | 0.857 (0.059)\\* | 0.857 (0.059)\\* |" in lines
    # 2 tau x 2 coord x 2 methods x {cover, length} rows under a header and a rule.
    assert sum(line.startswith("|") for line in lines) == 2 + 16


def test_a_pipe_in_a_method_label_stays_in_its_markdown_cell(summary):
    # Before: the label 'a|b' split its cell in two, every bb row had one cell too many.
    md = format_table(summary.assign_coords(method=["a|b", "oracle"]), "markdown")
    assert "| 0.5 | coord 0 | a\\|b | cover | 0.829 (0.064)\\* | 0.829 (0.064)\\* |" in md
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert {line.replace("\\|", "").count("|") for line in rows} == {7}


def test_latex_table(summary):
    tex = format_table(summary, "latex")
    assert r"\begin{tabular}{llllrr}" in tex
    assert r"\caption{synthetic: 90\% intervals" in tex
    assert r"$\tau$ & coord & method &  & $n = 10^{2}$ & $n = 10^{4}$ \\" in tex
    assert r"0.5 & coord 0 & bb & cover & 0.829 (0.064)$^{*}$ & 0.829 (0.064)$^{*}$ \\" in tex
    assert tex.count(r"\\") == 1 + 16


# Three row levels (a compare table's tau, coord and statistic): two tau groups whose inner
# levels repeat; the outer level's change shows every level again.
LAYOUT_ROWS = [
    (["0.5", "coord 0", "cover"], ["0.90", "0.91"]),
    (["0.5", "coord 0", "length"], ["0.20", "0.02"]),
    (["0.9", "coord 0", "cover"], ["0.88", "-"]),
]


def test_text_table_layout():
    text = text_table("cap", ["tau", "coord", ""], ["n = 1e2", "n = 1e4"], LAYOUT_ROWS, "note")
    rule = "-" * len("tau  coord            n = 1e2  n = 1e4")  # as wide as the header
    assert text == (
        "cap\n"
        f"{rule}\n"
        "tau  coord            n = 1e2  n = 1e4\n"
        f"{rule}\n"
        "0.5  coord 0  cover      0.90     0.91\n"
        "              length     0.20     0.02\n"
        "0.9  coord 0  cover      0.88        -\n"
        f"{rule}\n"
        "note\n"
    )


def test_markdown_table_layout():
    md = markdown_table("cap", ["tau", "coord", ""], ["n = 1e2", "n = 1e4"], LAYOUT_ROWS, "note")
    assert md == (
        "**cap**\n\n"
        "| tau | coord |  | n = 1e2 | n = 1e4 |\n"
        "|:--|:--|:--|--:|--:|\n"
        "| 0.5 | coord 0 | cover | 0.90 | 0.91 |\n"
        "|  |  | length | 0.20 | 0.02 |\n"
        "| 0.9 | coord 0 | cover | 0.88 | - |\n"
        "\nnote\n"
    )


def test_latex_table_layout():
    # A rule between the groups of the outermost level, with three levels or more.
    tex = latex_table("cap", ["tau", "coord", ""], ["n = 1e2", "n = 1e4"], LAYOUT_ROWS, "note")
    body = tex.split("\\begin{tabular}{lllrr}\n", 1)[1]
    assert body == (
        "\\hline\n"
        "tau & coord &  & n = 1e2 & n = 1e4 \\\\\n"
        "\\hline\n"
        "0.5 & coord 0 & cover & 0.90 & 0.91 \\\\\n"
        " &  & length & 0.20 & 0.02 \\\\\n"
        "\\hline\n"
        "0.9 & coord 0 & cover & 0.88 & - \\\\\n"
        "\\hline\n"
        "\\end{tabular}\n"
        "\\par\\footnotesize note\n"
        "\\end{table}\n"
    )
    # Two levels (checkpoint, method): no rules between the groups.
    rows = [(["1", "bb"], ["0.9"]), (["2", "bb"], ["0.8"])]
    two = latex_table("cap", ["checkpoint", "method"], ["cover"], rows)
    assert two.count("\\hline") == 3


def test_latex_captions_are_escaped_once(store):
    # An axis of one value is said in the caption: in LaTeX its label was LaTeX already
    # ($\tau$, $n = 10^{2}$, huber\_c) and the caption was escaped again, whole
    # (\$\\tau\$, 10^\{2\}, huber\\\_c), which LaTeX cannot compile. Now the caption
    # is plain text, escaped once (90\%, theta\_bar\_n, huber\_c).
    one_n = summarize(store.sel(n=[100], tau=[0.5]))
    caption = next(line for line in format_table(one_n, "latex").splitlines() if "caption" in line)
    assert caption.startswith(r"\caption{synthetic: 90\% intervals at tau = 0.5, n = 100;")
    errors = format_table(one_n, "latex", errors=True)
    error_caption = [line for line in errors.splitlines() if "caption" in line][-1]
    assert r"at tau = 0.5, n = 100 (mean over" in error_caption
    assert r"theta\_bar\_n" in error_caption
    underscored = summarize(store.rename(tau="huber_c").sel(n=[100], huber_c=[0.5]))
    text = format_table(underscored, "latex")
    assert r"at huber\_c = 0.5, n = 100;" in text and r"\\\_" not in text
    for line in (caption, error_caption):
        assert r"\$" not in line and r"\{" not in line and r"\\" not in line


def test_table_without_coord_level():
    # d = 1: no coord level; checkpoints are a row level, one column of values: laid out
    # with the statistics as columns (issue 43).
    text = format_table(summarize(syn.checkpoint_store()), "text", errors=True)
    header = next(line for line in text.splitlines() if line.startswith("checkpoint"))
    assert "coord" not in text.split("\n", 1)[1]
    assert header.split() == ["checkpoint", "method", "cover", "length"]
    # The rows are the checkpoints, up to the spec's n = 1e6: no caption says "at n =
    # 1e6" of them all. A mutation hunt (h16d, T26): column_headers taking the spec's n
    # with checkpoints passed every test.
    captions = [line for line in text.splitlines() if line.startswith("synthetic:")]
    assert [c.split(";")[0] for c in captions] == [
        "synthetic: 90% intervals",
        "synthetic: mean squared error (mean over replicates of the squared norm of the error) "
        "of the average theta_bar_n and of the last iterate theta_n (Monte-Carlo standard "
        "errors in brackets)",
    ]


def test_json_table(summary):
    data = json.loads(format_table(summary, "json"))
    assert len(data) == 16
    assert set(data[0]) == {"tau", "n", "method", "coord", *RECORD_FIELDS, "n_replicates"}
    assert data[0]["coverage"] == 29 / 35
    assert data[-1]["coverage"] is None and data[-1]["n_done"] == 0


def test_csv_table(summary):
    rows = list(csv.DictReader(io.StringIO(format_table(summary, "csv"))))
    assert len(rows) == 16
    assert list(rows[0]) == ["tau", "n", "method", "coord", *RECORD_FIELDS, "n_replicates"]
    assert float(rows[0]["coverage"]) == 29 / 35 and rows[0]["n_done"] == "35"
    assert rows[-1]["coverage"] == ""


def test_error_table(summary, store, tmp_path, capsys):
    # With errors: the same table, then one of mse per grid point, three significant digits.
    text = format_table(summary, "text", errors=True)
    main_table, errors = text.split("\n\n")
    assert main_table + "\n" == format_table(summary, "text")
    assert "mean squared error" in errors.splitlines()[0]
    assert "replicates per cell: 0-36" in errors.splitlines()[0]
    rows = [line.split() for line in errors.splitlines() if "mse" in line and "(" in line]
    labels = [r[:3] if r[0][0].isdigit() else r[:2] for r in rows]
    assert labels == [
        ["0.5", "mse", "average"],
        ["mse", "last"],
        ["0.9", "mse", "average"],
        ["mse", "last"],
    ]
    mse = summary["mse"].sel(tau=0.5).values
    se = summary["mse_se"].sel(tau=0.5).values
    # 0.175... (3 decimals) at n = 100, 0.00225... (5 decimals) at n = 1e4.
    # Marked: 36 of 40 replicates done.
    assert rows[0][3:] == [
        f"{mse[0]:.3f}",
        f"({se[0]:.3f})*",
        f"{mse[1]:.5f}",
        f"({se[1]:.5f})*",
    ]
    assert rows[2][-1] == "n/a*"  # the cell without done replicates
    md = format_table(summary, "markdown", errors=True)
    last = float(summary["mse_last"].sel(tau=0.9, n=100))
    last_se = float(summary["mse_last_se"].sel(tau=0.9, n=100))
    assert f"|  | mse last | {last:.5f} ({last_se:.5f})\\* | n/a\\* |" in md
    tex = format_table(summary, "latex", errors=True)
    captions = [line for line in tex.splitlines() if line.startswith(r"\caption")]
    assert len(captions) == 2 and "^" not in captions[1]  # no math outside $...$
    # The command line's flag.
    path = tmp_path / "s.zarr"
    store.to_zarr(path, zarr_format=3, consolidated=False)
    assert main(["summarize", str(path), "--errors"]) == 0
    table, timings = capsys.readouterr().out.rsplit("\n\n", 1)
    assert table + "\n" == text
    assert timings.startswith("median seconds per replicate: 0.5 (")


def test_unknown_format(summary):
    with pytest.raises(ValueError, match="'fmt' parameter of format_table must be one of"):
        format_table(summary, "html")


def test_table_with_one_coordinate(store):
    # d = 1 (paper Table 1): no coord level, one column per n.
    md = format_table(summarize(store.isel(coord=[0])), "markdown")
    lines = md.splitlines()
    assert "| tau | method |  | n = 1e2 | n = 1e4 |" in lines
    assert "| 0.5 | bb | cover | 0.829 (0.064)\\* | 0.829 (0.064)\\* |" in lines
    assert "coord" not in md


def test_axis_labels():
    assert axis_labels([10**6, 10**7, 10**8], "text") == ["1e6", "1e7", "1e8"]
    assert axis_labels([10**6, 10**7], "latex") == ["$10^{6}$", "$10^{7}$"]
    # Whole numbers of two significant digits reaching 1000: compact, as n is written
    # everywhere (issue 43); an axis with any other value in full.
    assert axis_labels([1000, 4000, 25_000], "text") == ["1e3", "4e3", "2.5e4"]
    assert axis_labels([50_000], "latex") == [r"$5 \times 10^{4}$"]
    assert axis_labels([1000, 1234], "text") == ["1000", "1234"]
    assert axis_labels([100, 500], "text") == ["100", "500"]
    assert axis_labels([0.5, 0.9, math.inf], "text") == ["0.5", "0.9", "inf"]
    assert axis_labels(["bb_rad"], "latex") == [r"bb\_rad"]
    assert axis_labels([-math.inf, 0.5, math.inf], "latex") == ["-inf", "0.5", r"$\infty$"]


def test_sample_sizes_counts_and_parameters_as_cells():
    # The sample_size_text docstring's examples; below 1000 in full.
    texts = [sample_size_text(v) for v in (50000.0, 100000, 250000, 123456, 500, 100.0)]
    assert texts == ["5e4", "1e5", "2.5e5", "123456", "500", "100"]
    assert count_text(5682.0) == "5,682" and count_text(math.nan) == "n/a"
    # g would print 0.9999999 as 1: every digit then.
    assert (format_number(0.9), format_number(1e6), format_number(0.9999999)) == (
        "0.9",
        "1e+06",
        "0.9999999",
    )
    assert named_text("n", 50000, "text") == "5e4" and named_text("n", True, "text") == "true"
    assert [parameter_text(v, "text") for v in (None, True, False, 2.0, 1000)] == [
        "-",
        "true",
        "false",
        "2",
        "1000",
    ]
    assert parameter_text([1.0, "a_b", -math.inf], "latex") == r"[1, a\_b, -inf]"


def test_infinite_grid_value_in_json(store):
    # eps = inf (no privacy) is a valid grid value; strict JSON has no Infinity.
    s = summarize(store.assign_coords(tau=[0.5, math.inf]))
    data = json.loads(format_table(s, "json"))
    assert {r["tau"] for r in data} == {0.5, "inf"}
    assert records(s)[-1]["tau"] == math.inf


def test_records_of_the_coordinate_means_and_their_edges(summary):
    recs = coord_mean_records(summary)
    assert len(recs) == 2 * 2 * 2  # tau x n x method
    first = recs[0]
    assert list(first)[:3] == ["tau", "n", "method"] and list(first)[-1] == "n_replicates"
    z = float(summary["joint_coverage_z"].sel({"tau": 0.5, "n": 100, "method": "bb"}))
    assert first["joint_coverage_z"] == z and first["n_replicates"] == syn.REPS
    # A summary without its replicates (as an older one): n_replicates is unknown, not 0.
    unknown = summary.copy()
    unknown.attrs = {k: v for k, v in summary.attrs.items() if k != "replicates"}
    assert {r["n_replicates"] for r in records(unknown)} == {None}
    # Strict JSON has no Infinity, either sign; no record is a CSV of its header.
    assert (json_value(math.inf), json_value(-math.inf), json_value(1.0)) == ("inf", "-inf", 1.0)
    assert render_records([], "csv", ["tau", "coverage"]) == "tau,coverage\n"


def test_level_as_grid_axis(store):
    # With a 'level' axis, z_{1 - alpha/2} is taken per grid point.
    s = summarize(store.rename(tau="level").assign_coords(level=[0.9, 0.8]))
    oracle_sd = s["oracle_sd"].sel(n=100).values
    np.testing.assert_allclose(oracle_sd[0], syn.ORACLE_SD, rtol=1e-12)
    np.testing.assert_allclose(oracle_sd[1], syn.ORACLE_SD * syn.Z / norm.ppf(0.9), rtol=1e-12)


def test_a_table_of_one_grid_point_names_it_in_its_captions(store):
    # A mutation hunt (h21e): the one n is written as n is everywhere (5e4, not 50000),
    # both captions say where ("at tau = 0.5, n = 5e4"), the statistics are the columns
    # in the order of the rows they replace, and the mse caption counts its replicates.
    one = summarize(store.sel(n=[10_000], tau=[0.5]).assign_coords(n=[50_000]))
    text = format_table(one, "text", diagnostics=True, errors=True)
    main_table, errors = text.split("\n\n")
    lines = main_table.splitlines()
    assert lines[0].startswith("synthetic: 90% intervals at tau = 0.5, n = 5e4; coverage, ")
    assert re.split(r"  +", lines[2]) == [
        "coord",
        "method",
        "cover",
        "pred cover",
        "length",
        "bias/sd",
        "var ratio",
    ]
    assert len(re.split(r"  +", lines[4])) == 7  # coord 0, bb and a cell per statistic
    caption = errors.splitlines()[0]
    assert caption.startswith("synthetic: mean squared error at tau = 0.5, n = 5e4 (")
    assert caption.endswith(f"replicates per cell: {syn.DONE}")  # every done one counts
    # In LaTeX the partial cells' note and the departures' are one paragraph each.
    tex = format_table(one, "latex")
    assert " \\par $^{\\dagger}$ the coverage departs" in tex


def test_a_level_axis_is_captioned_and_noted_per_row(store):
    # Before: the caption said "90% intervals" and the note "its nominal 0.9" (the first
    # grid point's level, the store's attribute) under rows at 0.8 too.
    levels = store.rename(tau="level").assign_coords(level=[0.9, 0.8])
    s = summarize(levels)
    assert caption_head(s) == "synthetic: intervals at each row's level"
    assert flag_note(s, "text", False).startswith(
        "† the coverage departs from its nominal level q: |coverage - q| > 1.96 sqrt(q (1 - q)"
    )
    one = summarize(levels.sel(level=[0.8]))
    assert caption_head(one) == "synthetic: 80% intervals"
    assert flag_note(one, "text", False).startswith("† the coverage departs from its nominal 0.8:")


def test_mse_of_the_projection(store):
    # SPEC 11: the store keeps the l1-ball projection of theta_bar_n; the summary gives
    # its mean squared l2 error beside the average's. Here a stand-in, halfway between
    # theta_bar and theta*, NaN before rep 5 (done before the variable existed).
    with_projection = store.copy(deep=True)
    projected = store["truth"] + 0.5 * (store["estimate"] - store["truth"])
    with_projection["projected"] = projected.transpose(*store["estimate"].dims)
    with_projection["projected"][{"rep": slice(0, 5)}] = np.nan
    c = summarize(with_projection).sel(tau=0.5, n=100)
    point = with_projection.sel(tau=0.5, n=100).isel(rep=slice(0, syn.DONE))
    mean, se, count = direct_mse(point["projected"].values, point["truth"].values)
    assert count == syn.DONE - 5 == int(c["mse_projected_n_done"])
    assert float(c["mse_projected"]) == pytest.approx(mean, rel=1e-12)
    assert float(c["mse_projected_se"]) == pytest.approx(se, rel=1e-12)
    # Without the variable (older stores, models without a ball): NaN, count 0.
    old = summarize(store)
    assert old["mse_projected"].isnull().all() and (old["mse_projected_n_done"] == 0).all()


def test_latex_escapes_every_special_character_of_a_label():
    # Before: '^' stayed (a LaTeX error outside math), '~' became a space and '\' the
    # line break '\\'.
    from ldpsim.pipeline.formatting import latex_escape

    assert latex_escape("a^b~c\\d") == r"a\textasciicircum{}b\textasciitilde{}c\textbackslash{}d"
    assert latex_escape("50%_&$#{x}") == r"50\%\_\&\$\#\{x\}"
    # Text-mode '|', '<' and '>' printed as a dash and inverted marks with pdflatex's
    # default font encoding (OT1): the departure note's "|coverage - 0.9| > 1.96 ..."
    # among them (a mutation hunt, h15b; pdflatex set it as "—coverage - 0.9— ¿ 1.96").
    assert latex_escape("|x| < 1 > 0") == r"\textbar{}x\textbar{} \textless{} 1 \textgreater{} 0"


def test_a_latex_cell_with_a_standard_error_too_small_to_show_escapes_its_less_than(summary):
    # A predicted coverage of 1.000 (<0.001) in a LaTeX table: a text-mode '<', which
    # pdflatex's OT1 encoding sets as an inverted exclamation mark, "1.000 (¡0.001)"
    # (pdflatex + pdftotext of summarize --format latex --diagnostics; h15g).
    text = format_table(summary, "text", diagnostics=True)
    latex = format_table(summary, "latex", diagnostics=True)
    assert "1.000 (<0.001)" in text and "(<" not in latex
    assert "1.000 (\\textless{}0.001)" in latex


def test_a_bound_at_theta_star_covers(store, summary):
    # The interval is closed: a bound equal to theta* covers (lower <= theta* <= upper).
    edge = store.copy(deep=True)
    at = {"tau": 0.5, "n": 100, "method": "bb"}
    for rep, coord, side in ((0, 1, "lower"), (1, 0, "upper")):  # both replicates cover
        assert syn.bb_covers(rep, coord)
        truth = float(store["truth"].sel(tau=0.5, n=100, coord=coord))
        edge[side].loc[{**at, "rep": rep, "coord": coord}] = truth
    got = summarize(edge).sel(at)
    np.testing.assert_array_equal(got["coverage"], summary.sel(at)["coverage"])
    np.testing.assert_array_equal(got["joint_coverage"], summary.sel(at)["joint_coverage"])


#: The cell of bb_without_coordinate_1_of_replicate_0.
BB_CELL = {"tau": 0.5, "n": 100, "method": "bb"}


def bb_without_coordinate_1_of_replicate_0(store: xr.Dataset) -> xr.Dataset:
    """A copy of ``store`` where bb gave no bounds at coordinate 1 of replicate 0 (which
    misses coordinate 0) of BB_CELL, and recorded its failure."""
    part = store.copy(deep=True)
    for name in ("lower", "upper"):
        part[name].loc[{**BB_CELL, "rep": 0, "coord": 1}] = np.nan
    part["method_failed"].loc[{**BB_CELL, "rep": 0}] = True
    return part


def test_a_method_failing_at_one_coordinate_leaves_the_replicate_out_of_the_joint_coverage(
    store, summary
):
    # bb gives no bounds at coordinate 1 of replicate 0 (which misses coordinate 0): the
    # replicate counts at coordinate 0 and in the coordinate means, not in the joint
    # coverage, whose replicates need bounds at every coordinate.
    got = summarize(bb_without_coordinate_1_of_replicate_0(store)).sel(BB_CELL)
    assert got["n_done"].values.tolist() == [35, 34]
    assert int(got["joint_n_done"]) == 34
    assert float(got["joint_coverage"]) == 24 / 34  # rep 0 was not jointly covered
    assert int(got["coord_mean_n_done"]) == 35
    # Lost to a failure of the method: replicate 3 (everywhere) and replicate 0 (at one
    # coordinate) for the coordinate means; replicate 0 at coordinate 1 only.
    assert got["n_failed"].values.tolist() == [1, 2]
    assert int(got["coord_mean_n_failed"]) == 2


def test_one_replicate_plans_no_replicates_from_an_unknown_se(store):
    # With R = 1 the coordinate means' se (ddof 1) is unknown: no plan from it, neither
    # the se's nor the nominal level's (which plans only where the se is 0).
    one = cell(summarize(store.isel(rep=[0])), 0.5, 100)
    assert (one["coord_mean_n_done"] == 1).all()
    assert one["coord_mean_coverage_se"].isnull().all()
    assert one["coord_mean_replicates_needed"].isnull().all()
    # The coverage of one replicate is 0 or 1, its se 0: the level plans.
    assert (one["coverage_se"] == 0).all()
    assert (one["replicates_needed"] == 3600).all()  # 0.9 * 0.1 / 0.005^2


def test_method_seconds_average_the_finished_replicates_only():
    # A replicate not done (not computed yet, or made pending again by a repair) may
    # still hold a method's seconds; they are not the method's time (a mutation hunt,
    # 2026-12-02: averaging over every replicate passed every test).
    ds = syn.grid_store()
    done = ds["done"].values
    shape = (*done.shape[:2], ds.sizes["method"], done.shape[2])
    seconds = np.where(np.broadcast_to(done[:, :, None, :], shape), 0.25, 100.0)
    ds["method_seconds"] = (("tau", "n", "method", "rep"), seconds)
    assert (~done).any()
    got = summarize(ds)["method_seconds"].values  # (tau, n, method)
    want = np.where(done.any(axis=-1)[..., None], 0.25, np.nan)  # a point with none: NaN
    np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))


def test_mse_of_a_grid_point_of_smaller_d_runs_over_its_coordinates(store):
    # A grid point with d = 1 in a d = 2 store (coordinate 1 NaN-padded): its mse is the
    # mean squared error of coordinate 0 over every done replicate (a mutation hunt,
    # h17a: padded coordinates dropping every replicate passed every test).
    padded = store.copy(deep=True)
    where = {"tau": 0.5, "n": 100, "coord": 1}
    for name in ("truth", "estimate", "last", "lower", "upper"):
        padded[name].loc[where] = np.nan
    c = summarize(padded).sel(tau=0.5, n=100)
    point = padded.sel(tau=0.5, n=100, coord=[0]).isel(rep=slice(0, syn.DONE))
    truth = point["truth"].values
    for name, variable in (("mse", "estimate"), ("mse_last", "last")):
        mean, se, count = direct_mse(point[variable].values, truth)
        assert count == syn.DONE == int(c[f"{name}_n_done"])
        assert float(c[name]) == pytest.approx(mean, rel=1e-12)
        assert float(c[f"{name}_se"]) == pytest.approx(se, rel=1e-12)


def test_cells_without_replicates_give_nan_without_warnings(store):
    # A cell with no done replicate, and statistics of one replicate (sd with ddof 1),
    # are NaN, silently: no RuntimeWarning of a division by zero for the user to read.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        full = summarize(store)
        one = summarize(store.isel(rep=[0]))
    assert full.sel(syn.EMPTY_CELL)["coverage"].isnull().all()
    assert one["length_se"].isnull().all()


def test_replicates_needed_is_not_one_more_for_floating_noise():
    # A coverage of 2 of 10 has se sqrt(0.16 / 10): it plans 10 (se / 0.005)^2 = 6400
    # replicates exactly, though that product reads 6400.000000000002 in floating point
    # (a mutation hunt, h17a: rounding it up to 6401 passed every test).
    coverage = xr.Variable((), 2 / 10)
    count = xr.Variable((), 10)
    se = np.sqrt(coverage * (1.0 - coverage) / count)
    assert float(count * (se / 0.005) ** 2) > 6400
    got = replicates_needed(se, count, 0.005, xr.Variable((), 0.9))
    assert float(got) == 6400


@pytest.mark.parametrize("target_se", [0.0, 1.0, 1, -0.005, 2.0])
def test_a_target_se_outside_0_1_is_refused(store, target_se):
    # A standard error of 1 or more plans nothing a coverage needs (a mutation hunt, h17a:
    # accepting 1 passed every test).
    with pytest.raises(ValueError, match=r"'target_se' parameter of summarize must be a float"):
        summarize(store, target_se=target_se)


def test_a_bool_target_se_is_a_type_error(store):
    # True is an int to Python, 1: the wrong type, not a value out of range.
    with pytest.raises(TypeError, match=r"must be a float in \(0, 1\)\. Got True\."):
        summarize(store, target_se=True)


def test_a_failed_replicate_is_lost_at_the_coordinates_a_grid_point_has_only(store):
    # A grid point with d = 1 in a d = 2 store and a replicate that failed (a mutation
    # hunt, h17a: counting it at the padded coordinate too passed every test).
    padded = store.copy(deep=True)
    where = {"tau": 0.5, "n": 100, "coord": 1}
    for name in ("truth", "estimate", "lower", "upper"):
        padded[name].loc[where] = np.nan
    lost = {"tau": 0.5, "n": 100, "rep": syn.DONE}  # not done: it failed
    padded["failed"].loc[lost] = True
    c = summarize(padded).sel(tau=0.5, n=100)
    assert c["n_failed"].sel({"method": "oracle"}).values.tolist() == [1, 0]
    assert c["n_failed"].sel({"method": "bb"}).values.tolist() == [2, 0]
    assert c["coord_mean_n_failed"].values.tolist() == [2, 1]
    assert int(c["replicates_failed"]) == 1


def test_a_methods_bias_and_rmse_count_the_replicates_where_it_gave_an_interval(store):
    # A store older than method_estimate: each method is centred at theta_bar_n where it
    # has bounds; bb failed in one replicate, which its bias and rmse leave out (a
    # mutation hunt, h17a: counting it passed every test).
    ds = store.copy(deep=True)
    ds["estimate"].loc[{"tau": 0.5, "n": 100, "rep": syn.BB_FAILED_REP}] = 100.0  # far off
    point = ds.sel(tau=0.5, n=100).isel(rep=slice(0, syn.DONE))
    c = summarize(ds).sel(tau=0.5, n=100)
    error = point["estimate"].values - point["truth"].values  # (rep, coord)
    for method, reps in (("bb", BB_REPS), ("oracle", list(range(syn.DONE)))):
        got = c.sel({"method": method})
        np.testing.assert_allclose(got["method_bias"], error[reps].mean(axis=0), rtol=1e-12)
        rmse = np.sqrt((error[reps] ** 2).mean(axis=0))
        np.testing.assert_allclose(got["method_rmse"], rmse, rtol=1e-12)
    assert float(c["method_rmse"].sel({"method": "oracle"}).max()) > 10  # replicate 3 counts


def test_replicates_older_than_method_estimate_are_centred_at_the_average(store):
    # A store extended by a newer ldpsim: the first replicates have no method estimate
    # (NaN); there each method was centred at theta_bar_n, and they count (a mutation
    # hunt, h17a: leaving them out passed every test).
    ds = store.copy(deep=True)
    own = ds["estimate"].where(ds["lower"].notnull())  # a method's own: theta_bar_n here
    ds["method_estimate"] = own.where(ds["rep"] >= 10).transpose(*ds["lower"].dims)
    extended, old = summarize(ds), summarize(store)
    for name in ("method_bias", "method_rmse", "bias_over_sd", "predicted_coverage"):
        np.testing.assert_allclose(extended[name], old[name], rtol=1e-12, err_msg=name)


def test_an_oracle_under_another_label_gives_the_sd_ratio(store, summary):
    # The oracle is the method whose kind is "oracle" in the sweep, whatever its label (a
    # mutation hunt, h17a: knowing it by the label "oracle" only passed every test).
    renamed = store.assign_coords(method=np.array(["bb", "exact"], dtype=object))
    sweep = json.loads(store.attrs["sweep"])
    sweep["methods"] = {"bb": {"method": "bb"}, "exact": {"method": "oracle"}}
    renamed.attrs["sweep"] = json.dumps(sweep)
    got = summarize(renamed)
    for name in ("oracle_sd", "sd_ratio"):
        assert got[name].notnull().any(), name
        np.testing.assert_array_equal(got[name], summary[name])


def test_the_coordinate_means_plan_from_their_own_replicates(store):
    # bb gives no bounds at coordinate 1 of replicate 0: the coordinate means count 35
    # replicates, the joint coverage 34; each plans from its own count (a mutation hunt,
    # h17a: the means planned from the joint count passed every test).
    got = summarize(bb_without_coordinate_1_of_replicate_0(store)).sel(BB_CELL)
    assert int(got["coord_mean_n_done"]) == 35 and int(got["joint_n_done"]) == 34
    for prefix, count in (("coord_mean", 35), ("joint", 34)):
        se = float(got[f"{prefix}_coverage_se"])
        want = math.ceil(round(count * (se / 0.005) ** 2, 6))
        assert se > 0 and float(got[f"{prefix}_replicates_needed"]) == want, prefix


def test_a_zero_se_plans_from_the_level_rounded_up(store):
    # One replicate: a coverage of 0 or 1 and se 0, so the level plans, 0.9 x 0.1 /
    # 0.007^2 = 1836.7 replicates: 1837 (a mutation hunt, h17a: rounding down passed).
    one = summarize(store.isel(rep=[0]), target_se=0.007).sel(tau=0.5, n=100)
    assert (one["coverage_se"] == 0).all()
    assert (one["replicates_needed"] == 1837).all()
