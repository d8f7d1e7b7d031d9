"""The run-time estimate: its measured constants, its scaling and the one-day threshold."""

from __future__ import annotations

import pytest

from ldpsim.pipeline.cost import (
    LONG_RUN_SECONDS,
    REPLICATE_OVERHEAD_S,
    STEP_NS_D1,
    STEP_NS_D4,
    duration_text,
    estimated_seconds,
    sweep_seconds,
)
from ldpsim.pipeline.sweep import load_sweep


def test_the_measured_models_get_their_measured_step_time():
    for dim, step_ns in ((1, STEP_NS_D1), (4, STEP_NS_D4)):
        steps = estimated_seconds(10**7, dim) - estimated_seconds(0, dim)
        assert steps == pytest.approx(10**7 * step_ns * 1e-9)


def test_linear_in_n_and_replicates_increasing_in_d():
    one = estimated_seconds(10**6, 2)
    assert estimated_seconds(10**6, 2, replicates=7) == pytest.approx(7 * one)
    assert estimated_seconds(0, 2, replicates=5) == pytest.approx(5 * REPLICATE_OVERHEAD_S)
    double = estimated_seconds(2 * 10**6, 2) - REPLICATE_OVERHEAD_S
    assert double == pytest.approx(2 * (one - REPLICATE_OVERHEAD_S))
    times = [estimated_seconds(10**6, dim) for dim in range(1, 10)]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_the_sweep_sum_counts_every_point_replicate_and_batch():
    sweep = load_sweep("demo", ["grid.n=[1000, 3000]", "batch=2"], replicates=3)
    expected = sum(3 * estimated_seconds(2 * n, 1) for n in (1000, 3000)) * 2  # 2 tau values
    assert sweep_seconds(sweep) == pytest.approx(expected)


def test_shipped_sweeps_are_under_a_day_and_n_1e15_is_over():
    for name in ("demo", "paper-table1", "paper-table2", "paper-figure1"):
        assert sweep_seconds(load_sweep(name)) < LONG_RUN_SECONDS, name
    assert sweep_seconds(load_sweep("demo", ["grid.n=[1e15]"], 1)) > 100 * LONG_RUN_SECONDS


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "0.5 s"), (42, "42 s"), (90, "1.5 min"), (7200, "2 h"), (86_400 * 148, "148 days")],
)
def test_duration_text(seconds, text):
    assert duration_text(seconds) == text
