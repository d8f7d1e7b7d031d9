"""plan: the replicates a task carries, the whole blocks of tasks, the store token."""

from __future__ import annotations

import re

import numpy as np

from ldpsim.pipeline.compute.plan import (
    Task,
    Work,
    plan_layout,
    task_reps,
    whole_block_tasks,
)
from ldpsim.pipeline.compute.task_keys import store_token
from ldpsim.pipeline.store.layout import Layout, layout_for
from ldpsim.pipeline.sweep import load_sweep


def test_consecutive_replicates_travel_as_one_range_others_as_they_are():
    # Dask walks every element of a list in a task's arguments: a chunk of consecutive
    # replicates goes as a range, its last replicate included. Never a range (the
    # ``+ 1`` of the count dropped) passed every test (a mutation hunt, h19a).
    assert task_reps([50, 51, 52, 53]) == range(50, 54)
    assert task_reps([7]) == range(7, 8)
    assert task_reps(list(range(2000))) == range(2000)
    gapped = [0, 1, 3]  # a failed replicate repaired, or one done
    assert task_reps(gapped) is gapped
    assert list(task_reps([])) == []


def test_a_store_token_is_8_hex_digits(tmp_path):
    # The keys' documented form (CHUNK_KEY, ``ldpsim-1a2b3c4d-0-2-c5``).
    token = store_token(tmp_path / "s.zarr")
    assert re.fullmatch("[0-9a-f]{8}", token), token


def test_a_block_is_whole_by_its_grid_points_times_its_replicates():
    # Shards of 2 x 3 grid points x 4 replicates, 8 replicates: two blocks. A task of
    # every chunk of the second (replicates 4-7) fills it whole; one that lacks a grid
    # point's chunk of the first does not. A block counted by the sum of its grid
    # extents (5, not 6 points), or by its replicates' end (8, not 4), passed every
    # test (a mutation hunt, h19a: the tests' blocks were 2 x 2 and started at 0).
    layout = Layout(
        axes=["tau", "n"],
        axis_values={"tau": [0.1, 0.5], "n": [100, 200, 300]},
        methods=["oracle"],
        replicates=8,
        d=1,
        checkpoints=None,
        rep_chunk=2,
        shard_reps=4,
        shard_grid=(2, 3),
        chunk_reps=4,
    )
    points = [(i, j) for i in range(2) for j in range(3)]

    def works(chunks):
        return [
            Work(None, p, c, list(layout.task_chunk_reps(c)), f"{p}-c{c}")
            for p in points
            for c in chunks
        ]

    assert {layout.block_of(p, c) for p in points for c in (2, 3)} == {(0, 0, 1)}
    assert layout.block_slices((0, 0, 1)) == ((slice(0, 2), slice(0, 3)), slice(4, 8))
    second = Task(works([2, 3]), "second")
    first = Task(works([0, 1])[1:], "first")  # (0, 0)'s chunk 0 done or failed
    assert whole_block_tasks([first, second], layout) == {"second"}


def test_a_sweep_of_part_of_a_store_s_grid_plans_its_own_points(tmp_path):
    # A store of n = 1000 and 2000 (grown by another run), the first done; a run of
    # n = 2000 alone computes its replicates there, at the store's position 1 along n.
    # The sweep's own index (0) read the done n = 1000 flags, planned nothing, and
    # passed every test (a mutation hunt, h19a).
    store_sweep = load_sweep("demo", ["rep_chunk=50", "grid.n=[1000, 2000]"], 100)
    layout = layout_for(store_sweep)
    assert layout.grid_shape == (2, 2)
    done = np.zeros((2, 2, 100), dtype=bool)
    done[:, 0, :] = True
    sweep = load_sweep("demo", ["rep_chunk=50", "grid.n=[2000]"], 100)
    assert [p.index for p in sweep.points()] == [(0, 0), (1, 0)]
    work, already = plan_layout(sweep, layout, tmp_path / "demo.zarr", done)
    assert already == 0
    assert [(w.index, w.chunk) for w in work] == [
        ((0, 1), 0),
        ((0, 1), 1),
        ((1, 1), 0),
        ((1, 1), 1),
    ]
    assert all(w.point.values["n"] == 2000 for w in work)
    assert [w.key.rpartition("-c")[0][-3:] for w in work] == ["0-1", "0-1", "1-1", "1-1"]


def test_a_run_on_a_store_normalizes_each_sweep_s_grid_points_once(
    demo_store, local_cluster, tmp_path, monkeypatch
):
    # A run with nothing to do reads the store's sweep five times (its layout for the
    # check of damage, the store's opening, the plan, the small-shards warning): each
    # read normalized every grid point again, 2 s a time at 20,000 points (a scaling
    # hunt, h24b: 9.0 s for a run with nothing to do, 4.9 s once). The sweep file's
    # points and the store's, once each.
    import shutil

    from conftest import DEMO_ARGS, scheduler

    from ldpsim.pipeline.cli import main
    from ldpsim.pipeline.sweep import Sweep

    store = tmp_path / "S.zarr"
    shutil.copytree(demo_store, store)
    normalized = []
    make_points = Sweep._make_points

    def counted(sweep):
        normalized.append(sweep)
        return make_points(sweep)

    monkeypatch.setattr(Sweep, "_make_points", counted)
    assert main(["run", *DEMO_ARGS, "--store", str(store), *scheduler(local_cluster)]) == 0
    assert len(normalized) == 2
    assert main(["status", "--verify", str(store)]) == 0
    assert len(normalized) == 2  # the store's sweep, read again, keeps its points
