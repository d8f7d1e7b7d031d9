"""The writes :func:`chunk_writes` makes of a run's results: each variable's region and
merged values, ``done`` apart and last.

A hunt (h21c): the region arithmetic, the merge of results into what a block held and
the order of the variables were tested only through runs that write whole blocks, and
through :func:`placed_blocks` alone. Here a real (small) store's arrays take hand-made
results whose every value says where it belongs.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from ldpsim.pipeline.store.chunk_writes import (
    as_slice,
    chunk_writes,
    placed_blocks,
    replicate_positions,
    variables_of,
)
from ldpsim.pipeline.store.layout import layout_for
from ldpsim.pipeline.store.template import template, write_template
from ldpsim.pipeline.sweep import load_sweep

METHODS = 2


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store of 2 grid points x 7 replicates, in shards of both grid points x 8
    replicates and chunks of 2 replicates, tasks of one replicate: its arrays and layout."""
    sweep = load_sweep(
        {
            "replicates": 7,
            "rep_chunk": 1,
            "spec": {"model": "quantile", "n": 100},
            "grid": {"tau": [0.5, 0.9]},
            "methods": {"bb": {}, "oracle": {}},
        },
        name="small",
    )
    layout = layout_for(sweep, rep_chunk=1, shards=((2,), 2, 8))
    arrays, attrs = template(sweep, layout)
    path = tmp_path_factory.mktemp("chunk-writes") / "s.zarr"
    write_template(path, arrays, attrs)
    group = zarr.open_group(str(path), mode="r")  # the writes are only made, not written
    return variables_of(group), layout


def result(point: int, reps: list[int], failed=()) -> dict:
    """A result whose values are 100 * grid point + replicate (+ 0.5 * method)."""
    value = np.array([100.0 * point + r for r in reps])
    per_method = np.stack([value + 0.5 * k for k in range(METHODS)])
    return {
        "reps": reps,
        "estimate": value[:, None],
        "last": value[:, None] + 0.25,
        "projected": value[:, None] - 0.25,
        "lower": per_method[:, :, None],
        "upper": per_method[:, :, None] + 1,
        "method_estimate": per_method[:, :, None] + 2,
        "method_seconds": per_method,
        "method_failed": per_method < 0,
        "seconds": value,
        "job_id": value.astype(np.int64),
        "failed": np.isin(reps, failed),
    }


def stored(array, region):
    return array[region]


def test_a_partial_block_is_merged_into_what_it_holds(store):
    arrays, layout = store
    # Replicates 4 at grid point 1 and 3 at grid point 0: the chunks [2, 4) and [4, 6)
    # of the shard, at both grid points; replicate 3 failed.
    results = [((1,), 4, result(1, [4])), ((0,), 3, result(0, [3], failed=[3]))]
    writes, done = chunk_writes(arrays, layout, 5, results, read=stored)
    assert [w.name for w in writes] == [
        "estimate",
        "last",
        "projected",
        "lower",
        "upper",
        "method_failed",
        "seconds",
        "method_estimate",
        "method_seconds",
        "job_id",
        "code_version",
        "failed",
    ]
    assert [w.name for w in done] == ["done"]
    by_name = {w.name: w for w in [*writes, *done]}
    nan = np.nan
    assert by_name["estimate"].region == (slice(0, 2), slice(2, 6))
    np.testing.assert_array_equal(
        by_name["estimate"].values[..., 0], [[nan, 3, nan, nan], [nan, nan, 104, nan]]
    )
    np.testing.assert_array_equal(
        by_name["projected"].values[..., 0], [[nan, 2.75, nan, nan], [nan, nan, 103.75, nan]]
    )
    assert by_name["lower"].region == (slice(0, 2), slice(None), slice(2, 6))
    np.testing.assert_array_equal(
        by_name["upper"].values[1, :, :, 0], [[nan, nan, 105, nan], [nan, nan, 105.5, nan]]
    )
    np.testing.assert_array_equal(
        by_name["method_seconds"].values[0], [[nan, 3, nan, nan], [nan, 3.5, nan, nan]]
    )
    np.testing.assert_array_equal(by_name["job_id"].values, [[0, 3, 0, 0], [0, 0, 104, 0]])
    np.testing.assert_array_equal(by_name["code_version"].values, [[0, 5, 0, 0], [0, 0, 5, 0]])
    flags = [[False, True, False, False], [False, False, False, False]]
    np.testing.assert_array_equal(by_name["failed"].values, flags)
    np.testing.assert_array_equal(
        by_name["done"].values, [[False, False, False, False], [False, False, True, False]]
    )
    # Without a read, a block that is not covered whole is refused.
    with pytest.raises(ValueError, match="do not cover their write blocks whole"):
        chunk_writes(arrays, layout, 5, results)


def test_a_covered_block_is_written_whole_without_a_read(store):
    arrays, layout = store
    # Replicate 6 at both grid points fills the last chunk, cut at the axis's end.
    results = [((0,), 6, result(0, [6])), ((1,), 6, result(1, [6]))]
    writes, (done,) = chunk_writes(arrays, layout, 1, results)
    by_name = {w.name: w for w in writes}
    assert by_name["estimate"].region == (slice(0, 2), slice(6, 7))
    np.testing.assert_array_equal(by_name["estimate"].values[..., 0], [[6], [106]])
    np.testing.assert_array_equal(
        by_name["lower"].values[..., 0], [[[6], [6.5]], [[106], [106.5]]]
    )
    assert done.region == (slice(0, 2), slice(6, 7)) and done.values.all()
    # One grid point's replicate 6 alone leaves the other's unwritten: not covered.
    [block] = placed_blocks(layout, 7, results[:1])
    assert block.reps == slice(6, 7) and not block.covered
    # Results of no replicate write nothing.
    assert chunk_writes(arrays, layout, 1, [((0,), 5, result(0, []))]) == ([], [])


def test_the_region_spans_the_chunks_of_every_result_of_the_block(store):
    _, layout = store
    results = [((0,), 1, result(0, [1])), ((1,), 0, result(1, [0])), ((0,), 4, result(0, [4]))]
    [block] = placed_blocks(layout, 7, results)
    assert block.grid == (slice(0, 2),) and block.reps == slice(0, 6)
    assert [(offset, where) for offset, where, _ in block.spots] == [
        ((0,), slice(1, 2)),
        ((1,), slice(0, 1)),
        ((0,), slice(4, 5)),
    ]
    assert not block.covered


def test_positions_as_a_slice_only_when_consecutive():
    assert as_slice(np.array([2, 3, 4])) == slice(2, 5)
    assert as_slice(np.array([7])) == slice(7, 8)
    for positions in ([2, 4], [], [0, 1, 3]):
        out = as_slice(np.array(positions, dtype=np.int64))
        assert isinstance(out, np.ndarray) and out.tolist() == positions
    assert replicate_positions({"reps": range(2, 9, 3)}).tolist() == [2, 5, 8]
    assert replicate_positions({"reps": [4, 1]}).dtype == np.int64
