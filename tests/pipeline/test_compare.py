"""Paired comparisons of two methods and the replicates a target standard error needs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import synthetic as syn

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.summary.compare import compare_methods, format_comparison, parse_pair
from ldpsim.pipeline.summary.summary import summarize


def direct(ds, a, b, cell, j):
    """The comparison of one cell and coordinate, computed replicate by replicate."""
    point = ds.sel(cell)
    truth = float(point["truth"].values[j])
    rows = []
    for r in range(ds.sizes["rep"]):
        if not point["done"].values[r]:
            continue
        bounds = {}
        for m in (a, b):
            lo = float(point["lower"].sel({"method": m}).values[r, j])
            hi = float(point["upper"].sel({"method": m}).values[r, j])
            bounds[m] = (lo, hi)
        if any(math.isnan(v) for pair in bounds.values() for v in pair):
            continue
        covers = [float(lo <= truth <= hi) for lo, hi in bounds.values()]
        lengths = [hi - lo for lo, hi in bounds.values()]
        rows.append((covers[0] - covers[1], lengths[0], lengths[1]))
    d, la, lb = (np.array(c) for c in zip(*rows, strict=True))
    count = len(d)
    ratio = la.mean() / lb.mean()
    # Delta method: Var(a/b) ~ (s_aa - 2 r s_ab + r^2 s_bb) / (R mean_b^2).
    cov = np.cov(la, lb, ddof=1)
    var_ratio = (cov[0, 0] - 2 * ratio * cov[0, 1] + ratio**2 * cov[1, 1]) / lb.mean() ** 2
    return {
        "coverage_diff": d.mean(),
        "coverage_diff_se": d.std(ddof=1) / math.sqrt(count),
        "length_ratio": ratio,
        "length_ratio_se": math.sqrt(var_ratio / count),
        "n_paired": count,
    }


@pytest.mark.parametrize(("a", "b"), [("bb", "oracle"), ("oracle", "bb")])
def test_comparison_against_a_direct_computation(a, b):
    # Both orders: the failing method (bb) second too (a mutation pairing only on a's
    # bounds counted bb's failure as a miss, n_paired 36 of 36 done, and no test saw it).
    ds = syn.grid_store()
    comparison = compare_methods(ds, a, b)
    for cell in ({"tau": 0.5, "n": 100}, {"tau": 0.9, "n": 100}):
        for j in range(syn.D):
            expected = direct(ds, a, b, cell, j)
            got = comparison.sel(cell).isel(coord=j)
            for name, value in expected.items():
                assert float(got[name]) == pytest.approx(value, rel=1e-12), (cell, j, name)
    # bb failed in one replicate: the pairs leave it out.
    assert int(comparison["n_paired"].sel(tau=0.5, n=100).isel(coord=0)) == syn.DONE - 1
    # The empty cell: no pairs, NaN statistics.
    empty = comparison.sel(syn.EMPTY_CELL)
    assert int(empty["n_paired"].max()) == 0 and bool(empty["coverage_diff"].isnull().all())


def test_coordinate_means_against_a_direct_computation():
    ds = syn.wide_store(d=20, reps=50)
    comparison = compare_methods(ds, "bb", "oracle").sel(n=100)
    point = ds.sel(n=100)
    truth = point["truth"].values
    covers, lengths = {}, {}
    for m in ("bb", "oracle"):
        lower = point["lower"].sel({"method": m}).values
        upper = point["upper"].sel({"method": m}).values
        covers[m] = ((lower <= truth) & (truth <= upper)).mean(axis=1)
        lengths[m] = (upper - lower).mean(axis=1)
    keep = ~np.isnan(lengths["bb"])  # bb failed in one replicate: no pair there
    diff = covers["bb"][keep] - covers["oracle"][keep]
    assert int(comparison["coord_mean_n_paired"]) == keep.sum() == 49
    assert float(comparison["coord_mean_coverage_diff"]) == pytest.approx(diff.mean())
    assert float(comparison["coord_mean_coverage_diff_se"]) == pytest.approx(
        diff.std(ddof=1) / math.sqrt(49)
    )
    # bb's intervals are exactly twice the oracle's: ratio 2 with no spread.
    assert float(comparison["coord_mean_length_ratio"]) == pytest.approx(2.0)
    assert float(comparison["coord_mean_length_ratio_se"]) == pytest.approx(0.0, abs=1e-12)


def test_csv_and_json_keep_every_coordinate_above_ten():
    # As format_table's: csv and json hold every coordinate's record unless coords is
    # "mean". Before, coords "auto" switched a comparison of d = 20 to coordinate means
    # (a script reading the columns broke once d passed 10).
    comparison = compare_methods(syn.wide_store(d=20, reps=50), "bb", "oracle")
    for fmt in ("csv", "json"):
        text = format_comparison(comparison, fmt)
        rows = json.loads(text) if fmt == "json" else text.splitlines()[1:]
        assert len(rows) == comparison.sizes["n"] * 20, (fmt, len(rows))
        mean = format_comparison(comparison, fmt, coords="mean")
        assert "coord_mean_coverage_diff" in mean and "coord_mean_" not in text
    assert "the means over the coordinates" in format_comparison(comparison, "text")


def test_the_records_name_both_methods_and_the_means_count_a_partly_failed_replicate():
    # bb failed at coordinate 0 only of replicate 7 (flagged): that replicate keeps its
    # other coordinates' pair in the means, and is lost at one coordinate at least, so
    # coord_mean_n_unpaired counts it (as documented). Mutations counting only the
    # replicates lost at every coordinate, writing a's label as b in the records, and
    # dropping what says the means' variables are means passed every test (a mutation
    # hunt, h19b).
    ds = syn.wide_store(d=3, reps=10)
    for name in ("lower", "upper"):
        ds[name][{"method": 0, "rep": 7, "coord": 0}] = np.nan
    ds["method_failed"][{"method": 0, "rep": 7}] = True
    comparison = compare_methods(ds, "bb", "oracle").sel(n=100)
    assert comparison["n_unpaired"].values.tolist() == [2, 1, 1]  # and WIDE_FAILED_REP
    assert int(comparison["coord_mean_n_unpaired"]) == 2
    assert int(comparison["coord_mean_n_paired"]) == 9
    means = comparison["coord_mean_n_unpaired"].attrs["long_name"]
    assert means.endswith("or failed (per-replicate means over the coordinates)"), means
    for coords in ("all", "mean"):
        recs = json.loads(format_comparison(comparison, "json", coords=coords))
        assert {(r["a"], r["b"]) for r in recs} == {("bb", "oracle")}, coords


def test_a_ratio_over_intervals_of_length_zero_is_not_a_number():
    # The oracle's intervals as points (lower = upper = truth): bb's mean length over 0
    # is n/a, not inf (a mutation dividing by the zero mean passed every test: h19b).
    ds = syn.wide_store(d=3, reps=10)
    point = ds["truth"].broadcast_like(ds["lower"].sel({"method": "oracle"}))
    for name in ("lower", "upper"):
        ds[name].loc[{"method": "oracle"}] = point.where(
            ds["lower"].sel({"method": "oracle"}).notnull()
        )
    comparison = compare_methods(ds, "bb", "oracle")
    assert int(comparison["n_paired"].min()) == 9  # the pairs are there
    assert comparison["length_ratio"].isnull().all()
    assert comparison["coord_mean_length_ratio"].isnull().all()
    # No ratio, no error for it (its sum skipping NaN read 0.0).
    assert comparison["length_ratio_se"].isnull().all()
    assert comparison["coord_mean_length_ratio_se"].isnull().all()
    assert (comparison["coverage_diff"] <= 0).all()  # the points cover


def test_the_footnote_of_the_means_names_the_paired_counts_and_an_error_every_unknown_label():
    # The means over the coordinates of a comparison count pairs too (coord_mean_n_paired):
    # their footnote points at n_paired, not a summary's n_done. And a refusal names
    # every label the store lacks. Mutations reading only "n_paired" as paired, and
    # naming the first unknown label alone, passed every test (a mutation hunt, h19b).
    ds = syn.grid_store().sel(tau=[0.5], n=[100])
    text = format_comparison(compare_methods(ds, "bb", "oracle"), "text", coords="mean")
    assert "35 counted, 1 lost" in text
    assert "--format csv gives each cell's n_paired and n_unpaired." in text
    with pytest.raises(ValueError, match="'xx', 'yy' are not methods of the store"):
        parse_pair("xx,yy", ["bb", "oracle"])
    with pytest.raises(ValueError, match="'xx' is not a method of the store"):
        parse_pair("bb,xx", ["bb", "oracle"])
    with pytest.raises(ValueError, match=r"'orcale' \(did you mean 'oracle'\?\) is not a"):
        parse_pair("bb,orcale", ["bb", "oracle"])


def test_replicates_needed_scales_the_observed_se():
    summary = summarize(syn.grid_store(), target_se=0.01)
    cell = summary.sel({"tau": 0.5, "n": 100, "method": "bb"}).isel(coord=1)
    r, se = int(cell["n_done"]), float(cell["coverage_se"])
    assert float(cell["replicates_needed"]) == math.ceil(round(r * (se / 0.01) ** 2, 6))
    # The oracle covers coordinate 1 in every replicate: no spread, so the level plans.
    oracle = summary.sel({"tau": 0.5, "n": 100, "method": "oracle"}).isel(coord=1)
    assert float(oracle["coverage"]) == 1.0
    assert float(oracle["replicates_needed"]) == 900  # 0.9 x 0.1 / 0.01^2
    with pytest.raises(ValueError, match="'target_se' parameter of summarize"):
        summarize(syn.grid_store(), target_se=0.0)


def test_a_method_is_not_compared_with_itself():
    with pytest.raises(ValueError, match="two different methods"):
        compare_methods(syn.grid_store(), "bb", "bb")
    with pytest.raises(ValueError, match="'b' parameter of compare_methods"):
        compare_methods(syn.grid_store(), "bb", "sn")


def test_parse_pair():
    assert parse_pair("bb, sn", ["bb", "sn"]) == ("bb", "sn")
    for bad in ("bb", "bb,bb", "bb,xx", "bb,sn,oracle"):
        with pytest.raises(ValueError, match="--compare"):
            parse_pair(bad, ["bb", "sn", "oracle"])


def test_summarize_compare_on_the_command_line(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    syn.grid_store().to_zarr(store, zarr_format=3, consolidated=False)
    assert main(["summarize", str(store), "--compare", "bb,oracle"]) == 0
    out = capsys.readouterr().out
    assert "cover bb - oracle" in out and "length bb / oracle" in out
    expected = direct(syn.grid_store(), "bb", "oracle", {"tau": 0.5, "n": 100}, 0)
    diff, se = expected["coverage_diff"], expected["coverage_diff_se"]
    assert f"{diff:.3f} ({se:.3f})" in out
    text = format_comparison(compare_methods(syn.grid_store(), "bb", "oracle"), "csv")
    assert text.splitlines()[0].startswith("tau,n,coord,coverage_diff,coverage_diff_se")
    assert main(["summarize", str(store), "--compare", "bb,nope"]) == 2
    assert "not a method of the store" in capsys.readouterr().err
    # The summary table's options are refused with --compare, not ignored.
    for option in (["--target-se", "0.01"], ["--diagnostics"], ["--errors"]):
        assert main(["summarize", str(store), "--compare", "bb,oracle", *option]) == 2
        err = capsys.readouterr().err
        assert f"{option[0]} is an option of the summary table" in err, err
        assert len(err.strip().splitlines()) == 1, err
    # --target-se adds the planning row; the timings line follows the table.
    assert main(["summarize", str(store), "--target-se", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "R for se 0.01" in out
    assert "median seconds per replicate: 0.5 (108 replicates" in out  # 3 cells x 36


def test_comparison_cells_on_fewer_replicates_are_marked(tmp_path, capsys):
    # Found by a hunt (2026-12-01): a comparison over the 35 of 36 replicates where bb
    # has bounds was printed unmarked, and --strict judged the summary, not it.
    ds = syn.grid_store().sel(tau=[0.5], n=[100])
    text = format_comparison(compare_methods(ds, "bb", "oracle"), "text")
    cells = [line for line in text.splitlines() if "bb - oracle" in line or "bb / oracle" in line]
    assert cells and all(line.endswith("*") for line in cells), cells
    assert "35 counted, 1 lost" in text and "n_paired and n_unpaired" in text
    complete = ds.isel(rep=[r for r in range(syn.DONE) if r != syn.BB_FAILED_REP])
    # A selection of 35 of the sweep's 40 replicates is marked as such...
    selected = format_comparison(compare_methods(complete, "bb", "oracle"), "text")
    assert "35 counted, 0 lost" in selected and "5 not in the selection of replicates" in selected
    # ...and a store of a sweep of 35 replicates, all done, is not.
    # (A dict of its own: isel shares ds's attrs, and ds's store below keeps 40.)
    complete.attrs = {
        **complete.attrs,
        "sweep": json.dumps({**json.loads(ds.attrs["sweep"]), "replicates": 35}),
    }
    clean = format_comparison(compare_methods(complete, "bb", "oracle"), "text")
    assert "*" not in clean and "fewer than all" not in clean
    rows = format_comparison(compare_methods(ds, "bb", "oracle"), "csv").splitlines()
    assert rows[0].endswith("n_paired,n_unpaired,n_replicates,a,b")
    # A hunt (2026-12-01): the records did not show the replicates not yet done.
    for fmt, coords in (("json", "all"), ("json", "mean")):
        text = format_comparison(compare_methods(ds, "bb", "oracle"), fmt, coords=coords)
        prefix = "coord_mean_" if coords == "mean" else ""
        for rec in json.loads(text):
            counted = rec[prefix + "n_paired"] + rec[prefix + "n_unpaired"]
            assert (counted, rec["n_replicates"]) == (syn.DONE, syn.REPS), rec
    for name, store, code in (("partial", ds, 1), ("complete", complete, 0)):
        path = tmp_path / f"{name}.zarr"
        store.to_zarr(path, zarr_format=3, consolidated=False)
        assert main(["summarize", str(path), "--compare", "bb,oracle", "--strict"]) == code
        capsys.readouterr()


def star_line(text):
    return next(line for line in text.splitlines() if line.startswith("*"))


def test_the_footnote_counts_failed_replicates_and_pending_methods_as_a_summary_does():
    # A failed replicate (not done, failed) was "not computed yet" in the comparison's
    # footnote (replicates_failed was 0), and a method added to the store but not
    # computed yet for some done replicates was "lost to a failure". Now counted as a
    # summary counts them. One grid point: tau = 0.5, n = 100 (36 of 40 replicates done).
    ds = syn.grid_store().sel(tau=[0.5], n=[100])
    ds["method_seconds"] = (("tau", "n", "method", "rep"), np.full((1, 1, 2, syn.REPS), 0.25))
    ds["done"][{"rep": 7}] = False
    ds["failed"][{"rep": 7}] = True
    for var in ("lower", "upper", "estimate", "last"):
        ds[var][{"rep": 7}] = np.nan
    pending = {"method": 1, "rep": slice(4, 6)}  # oracle not computed yet for reps 4, 5
    for var in ("lower", "upper", "method_seconds"):
        ds[var][pending] = np.nan
    comparison = compare_methods(ds, "bb", "oracle")
    assert int(comparison["replicates_failed"].squeeze()) == 1
    assert int(comparison["methods_pending"].squeeze()) == 2
    # Lost: bb's failure at rep 3 and the failed replicate 7; not computed yet: the 4
    # replicates not done and the 2 pending; counted: the other 36 - 1 - 2 - 1 = 32.
    cell = comparison.isel(tau=0, n=0, coord=0)
    assert (int(cell["n_paired"]), int(cell["n_unpaired"])) == (syn.DONE - 1 - 2 - 1, 2)
    # The coordinate means lose the same two: bb's failure and the failed replicate.
    means = comparison.isel(tau=0, n=0)
    assert (int(means["coord_mean_n_paired"]), int(means["coord_mean_n_unpaired"])) == (32, 2)
    line = star_line(format_comparison(comparison, "text"))
    assert line.startswith(
        "* computed on fewer than all 40 replicates of its grid point: 32 counted, 2 "
        "lost to a failure of the replicate or of the method (ldpsim errors STORE), 6 not "
        "computed yet (ldpsim run resumes them)"
    ), line


def test_a_bound_missing_by_design_is_not_a_failure():
    # A competitor has no interval at the checkpoints (not flagged as failed): the
    # summary counts no failure there; compare counted every such replicate as "lost to
    # a failure (ldpsim errors STORE)". Only a flagged missing bound is lost.
    ds = syn.checkpoint_store(reps=3)
    first = {"method": 3, "checkpoint": 0}  # the oracle at the first checkpoint
    ds["lower"][first] = np.nan
    ds["upper"][first] = np.nan
    cell = compare_methods(ds, "bb", "oracle").isel(checkpoint=0, coord=0)
    assert (int(cell["n_paired"]), int(cell["n_unpaired"])) == (0, 0)
    ds["method_failed"][{**first, "rep": 1}] = True  # one of them a failure
    cell = compare_methods(ds, "bb", "oracle").isel(checkpoint=0, coord=0)
    assert (int(cell["n_paired"]), int(cell["n_unpaired"])) == (0, 1)


def test_a_pending_method_is_not_lost_in_a_store_without_failure_flags():
    # A store older than method_failed counts every missing bound as lost, except where
    # the method is pending (added, not computed yet): a mutation dropping that exception
    # counted the pending replicates in n_unpaired, and no test saw it.
    ds = syn.grid_store().sel(tau=[0.5], n=[100]).drop_vars("method_failed")
    ds["method_seconds"] = (("tau", "n", "method", "rep"), np.full((1, 1, 2, syn.REPS), 0.25))
    pending = {"method": 1, "rep": slice(4, 6)}  # oracle not computed yet for reps 4, 5
    for var in ("lower", "upper", "method_seconds"):
        ds[var][pending] = np.nan
    comparison = compare_methods(ds, "bb", "oracle")
    assert int(comparison["methods_pending"].squeeze()) == 2
    # Lost: bb's failure at rep 3 only; the 2 pending are in neither count.
    cell = comparison.isel(tau=0, n=0, coord=0)
    assert (int(cell["n_paired"]), int(cell["n_unpaired"])) == (syn.DONE - 1 - 2, 1)
    means = comparison.isel(tau=0, n=0)
    assert (int(means["coord_mean_n_paired"]), int(means["coord_mean_n_unpaired"])) == (33, 1)


def test_the_coordinate_means_caption_counts_the_means_pairs():
    # bb lacks coordinate 0 of replicate 5 only: that coordinate has 48 pairs, the others
    # and the coordinate means 49 (replicate 5 keeps its other coordinates). A mutation
    # captioning the means with the per-coordinate counts said 48-49, and no test saw it.
    ds = syn.wide_store(d=20, reps=50)
    ds["lower"][{"method": 0, "rep": 5, "coord": 0}] = np.nan
    ds["upper"][{"method": 0, "rep": 5, "coord": 0}] = np.nan
    comparison = compare_methods(ds, "bb", "oracle")
    assert int(comparison["n_paired"].min()) == 48
    assert int(comparison["coord_mean_n_paired"].min()) == 49
    text = format_comparison(comparison, "text", coords="mean")
    assert "the means over the coordinates" in text
    assert "replicates per cell: 49 of 50" in text, text
    assert "replicates per cell: 48-49 of 50" in format_comparison(comparison, "text", "all")


def test_a_bound_on_the_truth_covers():
    # Coverage is lower <= truth <= upper, both ends closed, as in a summary: bb's lower
    # and the oracle's upper exactly on the truth cover in every replicate (a mutation
    # to a strict < at either end moved the difference to -1 or +1, and no test saw it).
    ds = syn.grid_store().sel(tau=[0.5], n=[100])
    truth = float(ds["truth"].isel(tau=0, n=0, coord=0))
    at = {"tau": 0, "n": 0, "coord": 0}
    finite = ds["lower"].isel(at).notnull().values  # (method, rep): bb failed once
    for m, (low, high) in enumerate(((truth, truth + 1.0), (truth - 1.0, truth))):
        ds["lower"][{**at, "method": m}] = np.where(finite[m], low, np.nan)
        ds["upper"][{**at, "method": m}] = np.where(finite[m], high, np.nan)
    cell = compare_methods(ds, "bb", "oracle").isel(tau=0, n=0, coord=0)
    assert float(cell["coverage_diff"]) == 0.0 and float(cell["coverage_diff_se"]) == 0.0
    assert float(cell["length_ratio"]) == 1.0


def test_coordinates_a_smaller_d_lacks_are_neither_paired_nor_lost():
    # A case of d = 2 beside one of d = 4: coordinates 2 and 3 do not exist there (truth
    # NaN). A failed replicate and a failed method are lost at the coordinates that
    # exist only; mutations counting them at the padding too (valid dropped, or the
    # failed replicates counted at every coordinate) passed every test.
    ds = syn.sparse_shaped_store(dims=(2, 4), sparsities=(1,), reps=10)
    small = next(i for i, c in enumerate(ds["case"].values) if str(c).startswith("d2-"))
    bb = list(ds["method"].values).index("bb")
    ds["done"][{"case": small, "rep": 1}] = False
    ds["failed"][{"case": small, "rep": 1}] = True
    for var in ("lower", "upper"):
        ds[var][{"case": small, "rep": 1}] = np.nan
        ds[var][{"case": small, "rep": 2, "method": bb}] = np.nan
    ds["method_failed"][{"case": small, "rep": 2, "method": bb}] = True
    cell = compare_methods(ds, "bb", "oracle").isel(case=small)
    assert cell["coord_exists"].values.tolist() == [True, True, False, False]
    assert cell["n_unpaired"].values.tolist() == [2, 2, 0, 0]
    assert cell["n_paired"].values.tolist() == [8, 8, 0, 0]
    assert (int(cell["coord_mean_n_paired"]), int(cell["coord_mean_n_unpaired"])) == (8, 2)


def test_coordinate_means_use_the_coordinates_where_both_methods_have_bounds():
    # bb lacks coordinate 0 of replicate 5: that replicate's means are over the other
    # 19 coordinates, for both methods. Mutations taking every coordinate (the missing
    # length made the ratio NaN) or dividing by all 20 passed every test.
    ds = syn.wide_store(d=20, reps=50)
    ds["lower"][{"method": 0, "rep": 5, "coord": 0}] = np.nan
    ds["upper"][{"method": 0, "rep": 5, "coord": 0}] = np.nan
    point = ds.sel(n=100)
    truth = point["truth"].values
    lower = {m: point["lower"].sel({"method": m}).values for m in ("bb", "oracle")}
    upper = {m: point["upper"].sel({"method": m}).values for m in ("bb", "oracle")}
    both = np.isfinite(lower["bb"] + upper["bb"] + lower["oracle"] + upper["oracle"])
    counts = both.sum(axis=1)
    paired = counts > 0
    covered, length = {}, {}  # per replicate, over its coordinates where both have bounds
    for m in ("bb", "oracle"):
        with np.errstate(invalid="ignore"):  # 0/0 where nothing is paired
            covered[m] = ((lower[m] <= truth) & (truth <= upper[m]) & both).sum(1) / counts
            length[m] = np.where(both, upper[m] - lower[m], 0.0).sum(1) / counts
    diff = covered["bb"] - covered["oracle"]
    assert paired[5] and diff[5] != 0  # replicate 5's own difference counts
    comparison = compare_methods(ds, "bb", "oracle").sel(n=100)
    expected = diff[paired].mean()
    assert float(comparison["coord_mean_coverage_diff"]) == pytest.approx(expected, rel=1e-12)
    ratio = length["bb"][paired].mean() / length["oracle"][paired].mean()
    assert float(comparison["coord_mean_length_ratio"]) == pytest.approx(ratio, rel=1e-12)


def test_a_comparison_over_checkpoints_and_its_tables():
    comparison = compare_methods(syn.checkpoint_store(reps=3), "bb", "oracle")
    assert comparison["coverage_diff"].dims == ("checkpoint", "coord")
    assert (
        comparison["coord_mean_coverage_diff"]
        .attrs["long_name"]
        .endswith("(per-replicate means over the coordinates)")
    )
    rows = format_comparison(comparison, "csv").splitlines()
    assert rows[0].startswith("checkpoint,coord,coverage_diff,")
    assert [row.split(",")[0] for row in rows[1:]] == [str(k) for k in syn.CHECKPOINTS]
    # The text table of the coordinate means has no rows per coordinate.
    grid = compare_methods(syn.grid_store(), "bb", "oracle")
    assert "coord 0" in format_comparison(grid, "text", coords="all")
    assert "coord 0" not in format_comparison(grid, "text", coords="mean")


def test_a_pair_with_an_empty_half_is_named_as_such():
    for bad in ("bb,", ",bb", " , "):
        with pytest.raises(ValueError, match=r"--compare takes two methods as A,B"):
            parse_pair(bad, ["bb", "sn"])


def test_the_comparison_keeps_the_store_attributes():
    # (Mutation hunt h19b: dropping the sweep's record from the attributes passed.)
    ds = syn.grid_store()
    comparison = compare_methods(ds, "bb", "oracle")
    assert comparison.attrs["level"] == ds.attrs["level"]
    assert comparison.attrs["sweep"] == ds.attrs["sweep"]
    assert (comparison.attrs["a"], comparison.attrs["b"]) == ("bb", "oracle")
    assert comparison.attrs["replicates"] == syn.REPS


def test_the_caption_names_a_and_b_in_order():
    # (The records' a and b: test_the_records_name_both_methods_... above.)
    comparison = compare_methods(syn.grid_store(), "bb", "oracle")
    assert "coverage of bb minus that of oracle" in format_comparison(comparison, "text")
