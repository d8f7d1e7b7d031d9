"""The run-time estimate: its measured constants, its scaling and the one-day threshold."""

from __future__ import annotations

import pytest

from ldpsim.pipeline.cost import (
    BB_NS_PER_MULTIPLIER,
    INTERVAL_SECONDS,
    LONG_RUN_SECONDS,
    REPLICATE_OVERHEAD_S,
    STEP_NS_D1,
    STEP_NS_D4,
    competitor_seconds,
    duration_text,
    replicate_seconds,
    step_seconds,
    sweep_seconds,
)
from ldpsim.pipeline.sweep import Sweep, load_sweep


def test_the_measured_models_get_their_measured_step_time():
    for dim, step_ns in ((1, STEP_NS_D1), (4, STEP_NS_D4)):
        assert step_seconds(dim) == pytest.approx(step_ns * 1e-9)
    times = [step_seconds(dim) for dim in range(1, 10)]
    assert times == sorted(times) and len(set(times)) == len(times)
    # Beyond d = 4 a sparse model pays the measured cost per coordinate, a dense one the
    # slope through d = 1 and 4 (huber_regression at d = 7 measured 0.68-1.86 s per 1e7
    # steps in shi-coverage: the dense line's 1.12 s, not the sparse 0.72 s).
    assert step_seconds(7) * 1e7 == pytest.approx(1.116, abs=1e-3)
    assert step_seconds(7, sparse=True) * 1e7 == pytest.approx(0.722, abs=1e-3)


def test_the_sparse_sweep_estimate_is_its_measured_cost():
    # The `sparse` sweep ran 4,800 replicates: d = 10 (6 cases) at 0.06-0.09 s, d = 100
    # (9 cases) at 0.46-0.87 s, d = 1000 (9 cases) at 3.8-5.3 s per replicate (medians
    # per case). The estimate per replicate must fall in those ranges, widened by 20%
    # for the spread of one machine's timings between runs. In-sample (the constant
    # was fitted on these runs): a guard against changes of the cost model, not a
    # validation of it.
    sweep = load_sweep("sparse")
    for point in sweep.points():
        low, high = {10: (0.06, 0.09), 100: (0.46, 0.87), 1000: (3.8, 5.3)}[
            point.normalized.model.dim
        ]
        assert 0.8 * low <= replicate_seconds(point.normalized) <= 1.2 * high


def test_the_sweep_sum_counts_every_point_replicate_and_batch():
    sweep = load_sweep("demo", ["grid.n=[1000, 3000]", "batch=2"], replicates=3)
    points = sweep.points()
    assert len(points) == 4  # 2 tau values x 2 n values
    expected = 3 * sum(replicate_seconds(point.normalized) for point in points)
    assert sweep_seconds(sweep) == pytest.approx(expected)
    # Linear in n x batch: the batch of 2 doubles the steps of each replicate.
    single = load_sweep("demo", ["grid.n=[1000, 3000]"], replicates=3)
    steps = sweep_seconds(sweep) - sweep_seconds(single)
    assert steps == pytest.approx(3 * 2 * (1000 + 3000) * step_seconds(1))


def test_a_replicate_costs_its_steps_intervals_bootstrap_and_overhead():
    # sparse_mean at d = 2 (sparse gradients, but at most d = 4: the measured line),
    # batch 2, two checkpoints, two bb of B = 200 and 100 (each its multipliers per
    # coordinate at each checkpoint), the oracle.
    tables = {
        "replicates": 1,
        "seed": 1,
        "spec": {
            "model": "sparse_mean",
            "d": 2,
            "sparsity": 1,
            "mechanism": "laplace",
            "eps": 1.0,
            "n": 1000,
            "batch": 2,
            "checkpoints": [100, 1000],
            "level": 0.9,
        },
        "methods": {"bb": {"B": 200}, "bb_small": {"method": "bb", "B": 100}, "oracle": {}},
    }
    spec = Sweep.from_dict(tables, name="cost").points()[0].normalized
    bootstrap = (200 + 100) * 2 * BB_NS_PER_MULTIPLIER * 1e-9
    expected = (
        2000 * step_seconds(2, sparse=False)
        + 2 * (INTERVAL_SECONDS + bootstrap)
        + REPLICATE_OVERHEAD_S
    )
    assert replicate_seconds(spec) == pytest.approx(expected, rel=1e-12)


def test_the_competitors_work_grows_with_the_batch():
    overrides = ["grid.n=[1000000]", "grid.eps=[1.0]", 'grid.case=["mean"]']
    for name in ("price-of-privacy", "remedies-nprr"):
        one = load_sweep(name, overrides, 1).points()[0].normalized
        two = load_sweep(name, [*overrides, "batch=2"], 1).points()[0].normalized
        assert competitor_seconds(two) == pytest.approx(2 * competitor_seconds(one)), name


def test_shipped_sweeps_are_under_a_day_and_n_1e15_is_over():
    for name in ("demo", "paper-table1", "paper-table2", "paper-figure1"):
        assert sweep_seconds(load_sweep(name)) < LONG_RUN_SECONDS, name
    assert sweep_seconds(load_sweep("demo", ["grid.n=[1e15]"], 1)) > 100 * LONG_RUN_SECONDS


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.5, "0.5 s"),
        (42, "42 s"),
        (60, "1 min"),
        (90, "1.5 min"),
        (3600, "1 h"),
        (7200, "2 h"),
        (86_400 * 148, "148 days"),
    ],
)
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text


def test_competitors_cost_what_was_measured_and_price_of_privacy_fits_an_hour():
    # The mean at n = 1e6: fang 51 x 23.5 ns x 1e6 = 1.1985 s, np_boot 200 x 26.1 ns x
    # 1e6 = 5.22 s, cdp_blb_var and _pct 50 x 78.4 and 50 x 79 ns x 1e6 = 3.92 and
    # 3.95 s (COMPETITOR_NS).
    overrides = ["grid.n=[1000000]", "grid.eps=[1.0]", 'grid.case=["mean"]']
    point = load_sweep("price-of-privacy", overrides, 1).points()[0].normalized
    assert competitor_seconds(point) == pytest.approx(1.1985 + 5.22 + 3.92 + 3.95)
    # The sweep's replicate count was chosen to run within an hour on 2 cores.
    assert sweep_seconds(load_sweep("price-of-privacy")) < 2 * 3600


def test_nprr_costs_what_was_measured():
    # remedies-nprr at n = 1e6: three nprr methods at 48 ns per user each (0.144 s
    # measured for the three); the sweep stays within half an hour of 2 cores.
    overrides = ["grid.n=[1000000]", "grid.eps=[1.0]", 'grid.case=["mean"]']
    point = load_sweep("remedies-nprr", overrides, 1).points()[0].normalized
    assert competitor_seconds(point) == pytest.approx(3 * 48e-9 * 1e6)
    assert sweep_seconds(load_sweep("remedies-nprr")) < 2 * 1800
