"""Grid indices turned into keys, file names and store positions stay apart.

A grid index is a tuple of ints; every place that writes one as text (a task's chunk
key, a failure record's file name, a block's digest manifest) must keep (1, 12) and
(11, 2) apart, which a join without a separator ("1" + "12" = "11" + "2") would not.
The same two grid points must also land at distinct store positions and draw from
distinct streams.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from ldpsim.pipeline.compute.plan import plan_layout
from ldpsim.pipeline.compute.replay import recorded_failures
from ldpsim.pipeline.compute.task_keys import CHUNK_KEY, KEY_SUFFIX, chunk_key
from ldpsim.pipeline.store.chunk_writes import placed_blocks
from ldpsim.pipeline.store.digests import block_manifest
from ldpsim.pipeline.store.layout import META_GROUP, layout_for, store_index
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks.grid_point import GridPointSetup

#: Two grid indices that a join without a separator makes one: "1" "12" and "11" "2".
A, B = (1, 12), (11, 2)
#: 12 x 13 grid points, so that both indices exist.
TAUS = [round(0.05 * k, 2) for k in range(1, 13)]
SIZES = [100 + k for k in range(13)]


@pytest.fixture(scope="module")
def sweep():
    return load_sweep(
        {
            "replicates": 3,
            "spec": {"model": "quantile"},
            "grid": {"tau": TAUS, "n": SIZES},
            "methods": {"sn": {}},
        },
        name="index-keys",
    )


def _point(sweep, index):
    (point,) = [p for p in sweep.points() if p.index == index]
    return point


def test_chunk_keys_keep_indices_apart(sweep, tmp_path):
    key_a, key_b = chunk_key("ab12", A, 0), chunk_key("ab12", B, 0)
    assert key_a != key_b
    # A key reads back as its own index (`ldpsim errors` orders and names records so).
    for index, key in ((A, key_a), (B, key_b)):
        assert tuple(int(i) for i in CHUNK_KEY.fullmatch(key)["index"].split("-")) == index
    # Every chunk of the whole grid gets its own key.
    layout = layout_for(sweep, rep_chunk=1)
    work, _ = plan_layout(sweep, layout, tmp_path / "s.zarr")
    assert len(work) == len(sweep.points()) * sweep.replicates
    assert len({w.key for w in work}) == len(work)


def test_error_records_keep_indices_apart(sweep, tmp_path):
    # The store's own writer names the files; the reader gives each back its index.
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    for index in (A, B):
        store.write_error(index, 3, {"rep": 3, "error": "planted"})
    assert len(list((store.path / META_GROUP / "errors").iterdir())) == 2
    assert recorded_failures(store.path) == {A: {3}, B: {3}}


def test_block_manifests_keep_indices_apart():
    array = zarr.create_array(
        store={},
        shape=(12, 13, 4),
        chunks=(1, 1, 4),
        dtype="f8",
        dimension_names=("tau", "n", "rep"),
    )
    assert block_manifest(array, (*A, 0)) != block_manifest(array, (*B, 0))


def test_grid_points_land_at_distinct_store_positions(sweep):
    a, b = _point(sweep, A), _point(sweep, B)
    assert (a.values["tau"], a.values["n"]) == (TAUS[1], SIZES[12])
    assert (b.values["tau"], b.values["n"]) == (TAUS[11], SIZES[2])
    for layout in (layout_for(sweep), layout_for(sweep, shards=None)):
        assert store_index(layout, a) == A and store_index(layout, b) == B
        results = [(A, 0, {"reps": range(3)}), (B, 0, {"reps": range(3)})]
        spots = [
            tuple(g.start + o for g, o in zip(block.grid, offset, strict=True))
            for block in placed_blocks(layout, 3, results)
            for offset, _, _ in block.spots
        ]
        assert sorted(spots) == [A, B]


def test_grid_points_draw_from_distinct_streams(sweep):
    a, b = (GridPointSetup.of(_point(sweep, i).spec) for i in (A, B))
    assert a.path_words != b.path_words
    assert not np.array_equal(a.data_states([0, 1]), b.data_states([0, 1]))


def test_a_plan_covers_every_replicate_of_a_last_partial_chunk(tmp_path):
    # 5 replicates in chunks of 2: chunks 0, 1 and a last one of replicate 4 alone.
    small = load_sweep(
        {"replicates": 5, "spec": {"model": "quantile", "n": 100}, "methods": {"sn": {}}},
        name="partial",
    )
    layout = layout_for(small, rep_chunk=2)
    work, done = plan_layout(small, layout, tmp_path / "s.zarr")
    assert done == 0
    assert [(w.chunk, w.reps) for w in work] == [(0, [0, 1]), (1, [2, 3]), (2, [4])]
    assert layout.task_chunks() == 3 and layout.task_chunk_reps(2) == range(4, 5)


def test_keys_of_three_axes_and_of_none_read_back(tmp_path):
    # `ldpsim errors` names a failure record's grid point from its key: a grid of three
    # axes, and one of none (its keys say 0), read back too. A pattern of at most two
    # axes, and an empty index in the key, passed every test (a mutation hunt, h19a).
    for suffix in ("", KEY_SUFFIX):
        match = CHUNK_KEY.fullmatch(chunk_key("ab12", (1, 0, 12), 7, suffix))
        assert match and (match["index"], match["chunk"]) == ("1-0-12", "7")
        # A chunk number of several digits (before: one digit passed, h23d).
        match = CHUNK_KEY.fullmatch(chunk_key("ab12", (3,), 12, suffix))
        assert match and (match["index"], match["chunk"]) == ("3", "12")
    small = load_sweep(
        {"replicates": 3, "spec": {"model": "quantile", "n": 100}, "methods": {"sn": {}}},
        name="no-axes",
    )
    work, _ = plan_layout(small, layout_for(small, rep_chunk=2), tmp_path / "s.zarr")
    assert [w.index for w in work] == [(), ()]
    for chunk, w in enumerate(work):
        match = CHUNK_KEY.fullmatch(w.key)
        assert match and (match["index"], match["chunk"]) == ("0", str(chunk))
