"""plan: the replicates a task carries, and the store token in its keys."""

from __future__ import annotations

import re

from ldpsim.pipeline.compute.plan import store_token, task_reps


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
