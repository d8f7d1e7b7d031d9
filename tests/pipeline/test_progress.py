"""Progress and ETA weigh each task by its work (runner.replicate_cost), not by count."""

from __future__ import annotations

import math

import pytest

from ldpsim.pipeline import runner
from ldpsim.pipeline.runner import (
    INTERVAL_COST_STEPS,
    STEP_COST_PER_COORD,
    Progress,
    eta_seconds,
    plan,
    replicate_cost,
)
from ldpsim.pipeline.store import Store
from ldpsim.pipeline.sweep import load_sweep


def _point(*sets: str):
    return load_sweep("demo", ["grid.tau=[0.5]", "grid.n=[1000]", *sets], 1).points()[0]


def test_cost_grows_with_steps_dimension_and_checkpoints():
    base = replicate_cost(_point())
    # Each SGD step adds one unit at d = 1; the intervals add a fixed amount.
    assert replicate_cost(_point("grid.n=[3000]")) - base == pytest.approx(2000)
    assert base == pytest.approx(1000 + INTERVAL_COST_STEPS)
    # A mini-batch of 4 privatizes 4 gradients per step.
    assert replicate_cost(_point("batch=4")) - base == pytest.approx(3000)
    # Intervals at 3 checkpoints cost 3 times those at n alone.
    with_checkpoints = replicate_cost(_point("checkpoints=[10, 100, 1000]"))
    assert with_checkpoints - base == pytest.approx(2 * INTERVAL_COST_STEPS)
    # quantile_regression, d = 4: each step costs 1 + 2.8 * 3 units.
    qr = load_sweep("paper-table2", ["grid.n=[1000]"], 1).points()[0]
    assert qr.normalized.model.dim == 4
    step = 1 + 3 * STEP_COST_PER_COORD
    assert replicate_cost(qr) == pytest.approx(1000 * step + INTERVAL_COST_STEPS)


def test_eta_is_the_rate_of_the_work_done():
    assert eta_seconds(10.0, 1.0, 101.0) == pytest.approx(1000.0)
    assert eta_seconds(10.0, 101.0, 101.0) == 0.0
    assert eta_seconds(10.0, 0.0, 101.0) == math.inf


def test_tasks_weighed_by_their_work(tmp_path):
    # The demo's tasks: n = 1e4, 1e5, 1e6 for each tau, the same replicates each.
    sweep = load_sweep("demo", [], 100)
    store, _ = Store.open_or_create(tmp_path / "demo.zarr", sweep)
    work, already = plan(sweep, store)
    assert already == 0
    by_n = {w.point.normalized.n: w.cost / len(w.reps) for w in work}
    assert by_n[10**6] / by_n[10**4] == pytest.approx(
        (10**6 + INTERVAL_COST_STEPS) / (10**4 + INTERVAL_COST_STEPS)
    )
    # 6 grid points x 2 tasks of 50 replicates. By count the first task (n = 1e4) is
    # 1/12 of the run; by work, half of the cheapest of one tau's 3 points: 2.5%.
    assert len(work) == 12 and [len(w.reps) for w in work] == [50] * 12
    assert work[0].point.normalized.n == 10**4
    share = work[0].cost / sum(w.cost for w in work)
    steps = {n: n + INTERVAL_COST_STEPS for n in (10**4, 10**5, 10**6)}
    assert share == pytest.approx(steps[10**4] / (4 * sum(steps.values())), rel=1e-12)
    assert share < 0.03 < 1 / 12


def test_progress_lines_report_the_share_of_work(monkeypatch):
    monkeypatch.setattr(runner, "PLAIN_PROGRESS_EVERY", 0.0)  # a line at every update
    lines: list[str] = []
    progress = Progress(reps=3, cost=4.0, log=lines.append)
    progress.update(1, 1.0)
    progress.update(2, 3.0)
    progress.close()
    assert lines[0].startswith("progress: 1/3 replicates, 25.0% of the work, ETA ")
    assert lines[1] == "progress: 3/3 replicates, 100.0% of the work, ETA 0 s"
