"""The built-in paper sweeps carry the paper's settings (SPEC section 8), as the replicates
will run them: every grid point is checked after normalisation, defaults included."""

from __future__ import annotations

import pytest

from ldpsim.pipeline.sweep import load_sweep

PAPER_N = {10**6, 10**7, 10**8}


def check_common(rs) -> None:
    """SPEC 8, both tables: eps = 1, eta_i = i^-0.51 from theta_0 = 0, 90% intervals,
    bb with B = 500, beta = 0.75 and Uniform(-sqrt 3, sqrt 3) multipliers."""
    assert rs.mechanism.eps == 1.0
    assert (rs.c, rs.gamma, rs.level, rs.batch) == (1.0, 0.51, 0.9, 1)
    assert all(v == 0.0 for v in rs.theta0)
    bb = rs.methods["bb"]
    assert (bb.name, bb.B, bb.beta, bb.multiplier) == ("bb", 500, 0.75, "uniform")
    # bm with its default batch count, M = bb's block count m (SPEC 5.2).
    bm = rs.methods["bm"]
    assert bm.name == "bm" and bm.n_batches is None


@pytest.mark.parametrize("name", ["paper-table1", "paper-table2"])
def test_tables_grid_and_replicates(name):
    sweep = load_sweep(name)
    assert sweep.replicates == 500
    points = sweep.points()
    assert {p.normalized.n for p in points} == PAPER_N
    for point in points:
        check_common(point.normalized)
        assert set(point.normalized.methods) == {"bb", "bm", "sn", "oracle"}


def test_table1_quantile_under_randomized_response():
    points = load_sweep("paper-table1").points()
    assert len(points) == 2 * 3
    assert {p.normalized.model.tau for p in points} == {0.5, 0.9}
    for point in points:
        rs = point.normalized
        assert rs.model.name == "quantile" and rs.model.loc == 0.0  # X ~ N(0, 1)
        assert rs.mechanism.name == "randomized_response"


def test_table2_quantile_regression_under_laplace():
    points = load_sweep("paper-table2").points()
    assert len(points) == 3
    for point in points:
        rs = point.normalized
        assert rs.model.name == "quantile_regression" and rs.model.dim == 4
        assert rs.model.tau == 0.5 and rs.model.coef == (0.0, 0.0, 1.0, -1.0)
        assert rs.mechanism.name == "laplace"


def test_figure1_one_run_with_checkpoints_from_10_to_1e6():
    sweep = load_sweep("paper-figure1")
    assert sweep.replicates == 1
    (point,) = sweep.points()
    rs = point.normalized
    check_common(rs)
    assert rs.model.name == "quantile" and rs.model.tau == 0.5 and rs.model.loc == 0.0
    assert rs.mechanism.name == "randomized_response" and rs.n == 10**6
    assert {"bb", "bm", "sn"} <= set(rs.methods)
    points = rs.checkpoints
    assert points[0] == 10 and points[-1] == 10**6 and list(points) == sorted(set(points))
    # A grid over the figure's log-scaled n axis: every decade has several checkpoints.
    for decade in range(1, 6):
        inside = [p for p in points if 10**decade <= p < 10 ** (decade + 1)]
        assert len(inside) >= 5, (decade, inside)
