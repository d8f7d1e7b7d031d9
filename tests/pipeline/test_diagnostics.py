"""Bias over sd, variance ratio and predicted coverage: values, standard errors, output."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
import synthetic as syn
import xarray as xr
from scipy.stats import norm

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.summary.diagnostics import (
    DIAGNOSTIC_FIELDS,
    interval_diagnostics,
    normal_coverage,
)
from ldpsim.pipeline.summary.summary import summarize
from ldpsim.pipeline.summary.tables import format_table

Z90 = float(norm.ppf(0.95))
BB_REPS = [r for r in range(syn.DONE) if r != syn.BB_FAILED_REP]


@pytest.fixture(scope="module")
def summary() -> xr.Dataset:
    return summarize(syn.grid_store())


def test_normal_coverage():
    assert normal_coverage(0.0, 1.0, Z90) == pytest.approx(0.9, abs=1e-12)
    # Written out with the normal cdf: bias shifts the interval, r scales its half-length.
    b, r = 0.7, 0.8
    expected = norm.cdf(Z90 * math.sqrt(r) - b) - norm.cdf(-Z90 * math.sqrt(r) - b)
    assert normal_coverage(b, r, Z90) == pytest.approx(expected, rel=1e-12)
    assert normal_coverage(-b, r, Z90) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("tau", "n"), [(0.5, 100), (0.5, 10_000), (0.9, 100)])
def test_values_of_a_hand_made_store(summary, tau, n):
    cell = summary.sel({"tau": tau, "n": n})
    sd = syn.EMPIRICAL_SD / math.sqrt(n)  # of theta_bar_n over the done replicates
    for j in range(syn.D):
        oracle = cell.sel({"method": "oracle", "coord": j})
        b = syn.bias(j) / sd
        r = (syn.ORACLE_SD / syn.EMPIRICAL_SD) ** 2  # fixed width 2 z ORACLE_SD / sqrt(n)
        assert float(oracle["bias_over_sd"]) == pytest.approx(b, rel=1e-9)
        assert float(oracle["variance_ratio"]) == pytest.approx(r, rel=1e-9)
        p = norm.cdf(Z90 * math.sqrt(r) - b) - norm.cdf(-Z90 * math.sqrt(r) - b)
        assert float(oracle["predicted_coverage"]) == pytest.approx(p, rel=1e-9)
        # Their standard errors: sd (ddof 1) of the influence values over sqrt(R), the
        # oracle's from its fixed width: IF_b = (e - ebar) / sd - b IF_v / (2 var),
        # IF_r = -r IF_v / var, IF_v = (e - ebar)^2 - var (a mutation to ddof 0, 1.4%
        # off at R = 36, passed every test before).
        done = syn.bias(j) + syn.EMPIRICAL_SD * syn.standardized_noise()[: syn.DONE] / math.sqrt(n)
        centred = done - done.mean()
        var = centred.var(ddof=1)
        if_v = centred**2 - var
        if_b = centred / math.sqrt(var) - b * if_v / (2 * var)
        if_r = -r * if_v / var
        for name, values in (("bias_over_sd_se", if_b), ("variance_ratio_se", if_r)):
            se = math.sqrt((values**2).sum() / (syn.DONE - 1) / syn.DONE)
            assert float(oracle[name]) == pytest.approx(se, rel=1e-9), name

        # bb failed in one replicate: its diagnostics use the other 35 only.
        e = syn.standardized_noise()[BB_REPS]
        errors = syn.bias(j) + syn.EMPIRICAL_SD * e / math.sqrt(n)
        lengths = np.array([syn.bb_length(r, j) for r in BB_REPS])
        bb = cell.sel({"method": "bb", "coord": j})
        sd_bb = errors.std(ddof=1)
        assert float(bb["bias_over_sd"]) == pytest.approx(errors.mean() / sd_bb, rel=1e-9)
        ratio = (lengths.mean() / (2 * Z90 * sd_bb)) ** 2
        assert float(bb["variance_ratio"]) == pytest.approx(ratio, rel=1e-9)


def test_empty_cell_is_nan(summary):
    empty = summary.sel(syn.EMPTY_CELL)
    for name in DIAGNOSTIC_FIELDS:
        assert empty[name].isnull().all(), name


def test_attributes_and_dimensions(summary):
    for name in DIAGNOSTIC_FIELDS:
        assert summary[name].dims == ("tau", "n", "method", "coord"), name
        assert summary[name].attrs["long_name"] and summary[name].attrs["units"] == "1"


def test_checkpoint_store_has_diagnostics_per_checkpoint():
    s = summarize(syn.checkpoint_store(reps=3))
    assert s["variance_ratio"].dims == ("method", "checkpoint", "coord")
    assert s["variance_ratio"].notnull().all()


def experiments(rng: np.random.Generator, k: int, reps: int) -> tuple[xr.DataArray, ...]:
    """k studies of ``reps`` replicates: skewed errors, widths tied to them, coverage."""
    # Gamma(4) errors (skewness 1) centred at a bias of 0.3 sd; widths partly driven by
    # the squared error, as for a data-driven interval: no formula here assumes normality.
    shape = 4.0
    raw = rng.gamma(shape, size=(k, reps))
    error = (raw - shape) / math.sqrt(shape) + 0.3
    length = 2 * Z90 * (0.8 + 0.2 * error**2 + 0.1 * rng.standard_normal((k, reps)))
    dims = ("experiment", "rep")
    use = xr.DataArray(np.ones((k, reps), dtype=bool), dims=dims)
    covered = xr.DataArray(np.abs(error) <= length / 2, dims=dims)  # centred intervals
    return xr.DataArray(error, dims=dims), xr.DataArray(length, dims=dims), covered, use


def test_standard_errors_match_the_spread_over_studies():
    k, reps = 2000, 400
    error, length, covered, use = experiments(np.random.default_rng(15), k, reps)
    diag = interval_diagnostics(error, length, covered, use, Z90)
    for name in ("bias_over_sd", "variance_ratio", "predicted_coverage", "coverage_gap"):
        spread = float(diag[name].std("experiment", ddof=1))
        mean_se = float(diag[f"{name}_se"].mean("experiment"))
        # The spread over k studies is itself estimated: its relative sd is about
        # 1 / sqrt(2 (k - 1)) = 1.6% for near-normal statistics; allow 4 of those plus 2%
        # for the delta method's O(1 / R) error at R = 400.
        tolerance = 4 / math.sqrt(2 * (k - 1)) + 0.02
        assert mean_se == pytest.approx(spread, rel=tolerance), name


def test_predicted_equals_observed_for_a_fixed_width_normal_interval():
    # A fixed-width interval around a normal estimate covers with probability exactly
    # normal_coverage(b, r): the observed coverage must agree within Monte-Carlo error.
    rng = np.random.default_rng(7)
    reps, sd, bias, half = 20_000, 2.0, 1.2, 3.0
    estimate = bias + sd * rng.standard_normal(reps)
    error = xr.DataArray(estimate, dims="rep")
    length = xr.full_like(error, 2 * half)
    covered = np.abs(estimate) <= half
    diag = interval_diagnostics(
        error, length, xr.DataArray(covered, dims="rep"), xr.ones_like(error, dtype=bool), Z90
    )
    observed = float(np.mean(covered))
    predicted = float(diag["predicted_coverage"])
    assert float(diag["coverage_gap"]) == pytest.approx(observed - predicted, abs=1e-12)
    # Both are estimated from the same replicates; the gap's own standard error (delta
    # method) accounts for that; 4 of them.
    assert abs(observed - predicted) < 4 * float(diag["coverage_gap_se"])
    exact = normal_coverage(bias / sd, (half / (Z90 * sd)) ** 2, Z90)
    assert abs(predicted - exact) < 4 * float(diag["predicted_coverage_se"])


def test_table_rows_with_and_without_diagnostics(summary):
    plain = format_table(summary, "markdown")
    assert "pred cover" not in plain and "bias/sd" not in plain
    md = format_table(summary, "markdown", diagnostics=True)
    lines = md.splitlines()
    oracle = summary.sel({"tau": 0.5, "method": "oracle", "coord": 0})

    def cells(name: str) -> str:
        values, ses = oracle[name].values, oracle[f"{name}_se"].values
        # Marked: the synthetic store has 36 of its 40 replicates done.
        return " | ".join(f"{v:.3f} ({s:.3f})\\*" for v, s in zip(values, ses, strict=True))

    assert f"|  |  |  | bias/sd | {cells('bias_over_sd')} |" in lines
    assert f"|  |  |  | var ratio | {cells('variance_ratio')} |" in lines
    # 2 tau x 2 coord x 2 methods x 5 statistics under a header and a rule.
    assert sum(line.startswith("|") for line in lines) == 2 + 40
    labels = [line.split("|")[4].strip() for line in lines[4:9]]
    assert labels == ["cover", "pred cover", "length", "bias/sd", "var ratio"]
    assert "predicted coverage" in lines[0]
    tex = format_table(summary, "latex", diagnostics=True)
    assert tex.count(r"\\") == 1 + 40 and "bias/sd" in tex
    text = format_table(summary, "text", diagnostics=True)
    assert sum("var ratio" in line for line in text.splitlines()[1:]) == 8  # not the caption


def test_csv_and_json_hold_the_diagnostics(summary):
    rows = list(csv.DictReader(io.StringIO(format_table(summary, "csv"))))
    data = json.loads(format_table(summary, "json"))
    first = summary.sel({"tau": 0.5, "n": 100, "method": "bb", "coord": 0})
    for name in DIAGNOSTIC_FIELDS:
        assert float(rows[0][name]) == pytest.approx(float(first[name]), rel=1e-12)
        assert data[0][name] == pytest.approx(float(first[name]), rel=1e-12)
        assert rows[-1][name] == "" and data[-1][name] is None  # the empty cell


def test_summarize_cli_diagnostics_flag(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    syn.grid_store().to_zarr(store, zarr_format=3, consolidated=False)
    assert main(["summarize", str(store)]) == 0
    assert "var ratio" not in capsys.readouterr().out
    assert main(["summarize", str(store), "--diagnostics", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == format_table(summarize(syn.grid_store()), "markdown", True).strip()


def diagnostics_of(errors: list[float], lengths: list[float]) -> xr.Dataset:
    """:func:`interval_diagnostics` of one cell of these replicates (all counted)."""
    error = xr.DataArray(np.array(errors), dims="rep")
    length = xr.DataArray(np.array(lengths), dims="rep")
    covered = abs(error) <= length / 2
    return interval_diagnostics(error, length, covered, xr.ones_like(covered), Z90)


def test_an_estimate_that_does_not_vary_has_no_diagnostics():
    # sd 0: b = ebar / 0 and r = L / 0 are not numbers ("n/a"), not inf, and neither are
    # their standard errors (0.0 before: the influence values, all NaN, summed to 0).
    diag = diagnostics_of([0.3, 0.3, 0.3, 0.3], [1.0, 1.2, 1.1, 0.9])
    for name in DIAGNOSTIC_FIELDS:
        assert diag[name].isnull().all(), name


def test_two_replicates_give_the_diagnostics_but_no_standard_errors():
    # The values need R >= 2 (an sd of ddof 1), their standard errors R >= 3.
    diag = diagnostics_of([0.1, -0.3], [1.0, 1.5])
    for name in DIAGNOSTIC_FIELDS:
        assert diag[name].isnull().all() == name.endswith("_se"), name
    diag = diagnostics_of([0.1, -0.3, 0.2], [1.0, 1.5, 1.2])
    for name in DIAGNOSTIC_FIELDS:
        assert np.isfinite(diag[name]).all(), name


def test_the_gap_is_the_summarys_coverage_minus_the_predicted(summary):
    # The observed coverage of the gap is over the replicates that count: not the
    # replicate not done whose garbage intervals cover (GARBAGE_REP), nor bb's failed one.
    # A mutation counting every covering interval (covered, not covered.where(use))
    # moved the gap by 1/36 and passed every test (a mutation hunt, h19b).
    for method in syn.METHODS:
        cell = summary.sel({"tau": 0.5, "n": 100, "method": method})
        expected = cell["coverage"] - cell["predicted_coverage"]
        np.testing.assert_allclose(cell["coverage_gap"], expected, rtol=0, atol=1e-12)


def test_the_gap_standard_error_matches_its_spread_for_a_fixed_width_normal_interval():
    # Observed and predicted coverage of a fixed-width interval around a normal estimate
    # estimate the same probability from the same replicates: they move together, and
    # the gap's standard error is sd(IF_cover - IF_pred) / sqrt(R), not their sum's.
    # Mutations adding the influence values (IF_cover + IF_pred), and giving predicted
    # coverage the gap's standard error, passed every test (a mutation hunt, h19b): the
    # first's was 2.6 times the spread.
    rng = np.random.default_rng(11)
    k, reps, half = 2000, 200, 1.2 * Z90
    estimate = 0.4 + rng.standard_normal((k, reps))
    dims = ("experiment", "rep")
    error = xr.DataArray(estimate, dims=dims)
    length = xr.full_like(error, 2 * half)
    covered = xr.DataArray(np.abs(estimate) <= half, dims=dims)
    diag = interval_diagnostics(error, length, covered, xr.ones_like(covered), Z90)
    # As above: 4 relative sds of the spread over k studies, plus the delta method's error.
    tolerance = 4 / math.sqrt(2 * (k - 1)) + 0.05
    for name in ("coverage_gap", "predicted_coverage"):
        spread = float(diag[name].std("experiment", ddof=1))
        mean_se = float(diag[f"{name}_se"].mean("experiment"))
        assert mean_se == pytest.approx(spread, rel=tolerance), (name, mean_se, spread)


def test_replicates_not_used_do_not_count_in_the_coverage():
    # The last replicate is covered but not used: the gap is that of the other three.
    error = xr.DataArray(np.array([0.1, -0.3, 0.2, 0.0]), dims="rep")
    length = xr.DataArray(np.array([0.1, 1.0, 0.1, 1.0]), dims="rep")
    covered = abs(error) <= length / 2
    use = xr.DataArray(np.array([True, True, True, False]), dims="rep")
    diag = interval_diagnostics(error, length, covered, use, Z90)
    three = diagnostics_of([0.1, -0.3, 0.2], [0.1, 1.0, 0.1])
    assert bool(covered[3]) and float(three["coverage_gap"]) != 0
    for name in DIAGNOSTIC_FIELDS:
        assert float(diag[name]) == pytest.approx(float(three[name]), rel=1e-12), name
