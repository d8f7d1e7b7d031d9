"""Workers encode whole write blocks; the driver only moves them into place (issue 42 item 6).

The driver then no longer encodes, checksums or even receives a replicate's values.
These tests hold the handed write to the driver's own: the same bytes in every file,
the same record and order (so a run killed between any two of its steps is settled and
repaired as before), the same driver work for 60 replicates as for 600, and the
fallback to the driver's write wherever a worker cannot write a block whole.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import done_count, kill_when, scheduler, tree_hash, write_sweep
from test_driver_work import LARGE, lines_run, with_failures

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute import runner
from ldpsim.pipeline.compute.plan import Task, Work, plan, plan_layout, whole_block_tasks
from ldpsim.pipeline.compute.worker import run_chunk
from ldpsim.pipeline.store import digests, handoff
from ldpsim.pipeline.store.chunk_writes import placed_blocks, replicate_positions
from ldpsim.pipeline.store.damage import find_damage, repair
from ldpsim.pipeline.store.digests import settle
from ldpsim.pipeline.store.handoff import (
    HANDED,
    KEPT,
    HandedFiles,
    Handoff,
    NotWhole,
    hand_off,
    whole_files,
)
from ldpsim.pipeline.store.layout import META_GROUP, Layout, layout_for
from ldpsim.pipeline.store.lock import RunLock
from ldpsim.pipeline.store.reading import open_arrays, open_dataset
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

#: Where the two chunks of the sweep's one grid point go: one shard holds both.
PLACES = (((0,), 0), ((0,), 1))


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """A sweep of one grid point whose one shard holds its two chunks of LARGE
    replicates, and a real worker's results for both, with failures planted in the
    second."""
    folder = tmp_path_factory.mktemp("handoff")
    sweep_file = write_sweep(
        folder / "cheap.toml", replicates=2 * LARGE, rep_chunk=LARGE, grid={"n": [100]}
    )
    sweep = load_sweep(sweep_file)
    layout = layout_for(sweep)
    assert layout.write_block() == ((1,), 2 * LARGE)  # the premise: one block, two chunks
    point = sweep.points()[0]
    args = (list(layout.methods), layout.d, "in-process")
    chunks = [
        run_chunk(point.spec, list(range(c * LARGE, (c + 1) * LARGE)), *args) for c in (0, 1)
    ]
    chunks[1] = with_failures(chunks[1], LARGE)
    return sweep, chunks


#: The token of the run that holds the tests' stores.
TOKEN = "a-run"


@pytest.fixture
def held():
    """``held(store)``: the store's run lock taken with :data:`TOKEN`, as a run holds it
    while its workers encode; released at the test's end."""
    locks: list[RunLock] = []

    def take(store: Store) -> Store:
        lock = RunLock(store.path / META_GROUP, token=TOKEN)
        lock.acquire(log=lambda *_: None)
        locks.append(lock)
        return store

    yield take
    for lock in locks:
        lock.release()


def handoff_of(store: Store, places=PLACES, token=TOKEN) -> Handoff:
    return Handoff(str(store.path), token, store.layout, store.code_version, places)


def placed(results: list) -> list:
    return [(*place, result) for place, result in zip(PLACES, results, strict=True)]


def data_files(store: Path) -> dict[str, str]:
    """Hashes of the store's files but the root metadata (its creation's attributes)."""
    return {k: v for k, v in tree_hash(store).items() if k != "zarr.json"}


def test_a_handed_block_is_byte_for_byte_the_driver_s_write(computed, tmp_path, held):
    sweep, chunks = computed
    driver, _ = Store.open_or_create(tmp_path / "driver.zarr", sweep)
    worker = held(Store.open_or_create(tmp_path / "worker.zarr", sweep)[0])
    driver.write_chunks(placed(chunks))
    handed = hand_off(handoff_of(worker), chunks)
    # What goes back to the driver: flags and failure records, not the values.
    assert isinstance(handed[0][HANDED], HandedFiles) and handed[1][HANDED] is None
    assert all(set(result) == {*KEPT, HANDED} for result in handed)
    partials = sorted(p.relative_to(worker.path) for p in worker.path.rglob("*.partial"))
    # A file of every variable's shard but those all fill values (NaN last, projected).
    files = [p for p in handed[0][HANDED].partials.values() if p is not None]
    assert sorted(map(Path, files)) == partials and len(partials) >= 8
    assert not (worker.path / "lower/c/0/0/0/0").exists()  # nothing in place before the driver
    worker.write_handed(placed(handed))
    assert not list(worker.path.rglob("*.partial"))
    # Data, manifests, failure records; the lock is the run's own.
    ours = {k: v for k, v in data_files(worker.path).items() if k != "ldpsim/lock.json"}
    assert ours == data_files(driver.path)
    assert find_damage(worker.path) is None or not find_damage(worker.path)
    done = open_dataset(worker.path)["done"].values
    assert done.sum() == 2 * LARGE - 2 and not done[0, LARGE] and not done[0, LARGE + 2]


def test_a_handed_chunk_counts_for_the_run_as_its_arrays_do(computed, tmp_path, held):
    # The driver counts failures (--max-failures: replicates failed, or with a method
    # failed) and warm-up time from what a handed chunk keeps (a mutation hunt, h16a:
    # KEPT without 'method_failed' or 'warm_up_seconds' passed every test; a run with
    # --max-failures then raised KeyError on its first handed chunk).
    from ldpsim.pipeline.compute.runner import FailureLimit

    sweep, chunks = computed
    method_failed = chunks[0]["method_failed"].copy()
    method_failed.reshape(-1, LARGE)[0, 5] = True  # a method of replicate 5 failed
    chunks = [dict(chunks[0], method_failed=method_failed), chunks[1]]
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    handed = hand_off(handoff_of(store), chunks)
    assert HANDED in handed[0]
    works = [Work(None, index, chunk, [], f"c{chunk}") for index, chunk in PLACES]
    limits = {"arrays": FailureLimit(10**6), "handed": FailureLimit(10**6)}
    for work, array, hand in zip(works, chunks, handed, strict=True):
        limits["arrays"].add(work, array)
        limits["handed"].add(work, hand)
        assert hand["warm_up_seconds"] == array["warm_up_seconds"]
        assert hand["errors"] == array["errors"]
        np.testing.assert_array_equal(hand["failed"], array["failed"])
    assert limits["handed"].counts == limits["arrays"].counts == {(0,): 3}


def test_chunks_that_fill_part_of_a_block_keep_their_arrays(computed, tmp_path, held):
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    before = tree_hash(store.path)
    assert hand_off(handoff_of(store, PLACES[:1]), chunks[:1]) == chunks[:1]
    assert tree_hash(store.path) == before


def test_a_region_that_ends_inside_a_file_is_not_whole():
    # A shard of two zarr chunks along 'rep': results that fill the first chunk alone
    # fill part of the file, and encoding it alone would lose the second.
    with pytest.raises(NotWhole, match="covers part of a file"):
        whole_files("estimate", (1, 1200), (1, 1200), (slice(0, 1), slice(0, 600)))
    with pytest.raises(NotWhole, match="covers part of a file"):
        whole_files("estimate", (1, 1200), (1, 1200), (slice(0, 1), slice(600, 1200)))
    whole_files("estimate", (1, 1000), (1, 600), (slice(0, 1), slice(600, 1000)))  # its end


def test_a_block_smaller_than_the_store_s_files_is_not_encoded(computed, tmp_path, held):
    # A task's layout whose write block is half of the store's files (shards of 2 x LARGE
    # replicates): the block is covered, but encoding its files alone would lose the
    # other half of each; the driver writes it (a mutation hunt, h16a: encoding without
    # the check of whole files passed every other test).
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    half = dataclasses.replace(store.layout, shard_reps=LARGE, chunk_reps=LARGE)
    assert half.write_block() == ((1,), LARGE)
    before = tree_hash(store.path)
    task = Handoff(str(store.path), TOKEN, half, store.code_version, PLACES[:1])
    assert hand_off(task, chunks[:1]) == chunks[:1]
    assert tree_hash(store.path) == before


def full_after_one(monkeypatch) -> list[str]:
    """Make a worker's disk full after its first encoded file; the names it was asked
    to encode, in order."""
    encoded, calls = handoff.encoded_files, []

    def encode(write):
        calls.append(write.name)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return encoded(write)

    monkeypatch.setattr(handoff, "encoded_files", encode)
    return calls


def test_a_worker_whose_write_fails_leaves_no_partial_file(computed, tmp_path, held, monkeypatch):
    # A full disk after the first file: the files written so far are removed, and the
    # driver writes the chunks from their arrays.
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    before = tree_hash(store.path)
    calls = full_after_one(monkeypatch)
    assert hand_off(handoff_of(store), chunks) == chunks
    assert len(calls) == 2 and tree_hash(store.path) == before


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_file_that_fails_half_written_is_removed(computed, tmp_path, held, monkeypatch, error):
    # The disk fills (or the worker is interrupted) inside the second file's write: that
    # file, half written, goes with the first (a mutation hunt, h16a: the name recorded
    # after the write, or only Exceptions cleaned up, passed every other test).
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    before = tree_hash(store.path)
    write_bytes, calls = Path.write_bytes, []

    def fails_in_the_second(self, data):
        calls.append(self)
        if len(calls) == 2:
            write_bytes(self, data[: len(data) // 2])
            raise error
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", fails_in_the_second)
    if isinstance(error, OSError):
        assert hand_off(handoff_of(store), chunks) == chunks
    else:
        with pytest.raises(KeyboardInterrupt):
            hand_off(handoff_of(store), chunks)
    monkeypatch.undo()
    assert len(calls) == 2 and tree_hash(store.path) == before


def test_a_failed_attempt_leaves_another_attempt_s_files(computed, tmp_path, held, monkeypatch):
    # One task run twice in one worker process (a retry): the attempt that fails
    # removes its own files, not those of the attempt the driver moves in.
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    first = hand_off(handoff_of(store), chunks)
    full_after_one(monkeypatch)
    assert hand_off(handoff_of(store), chunks) == chunks
    monkeypatch.undo()
    store.write_handed(placed(first))
    assert not list(store.path.rglob("*.partial"))
    assert store.done_mask().sum() == 2 * LARGE - 2


class FailingWrites:
    """A zarr array whose writes are interrupted (a run killed while writing it)."""

    def __init__(self, array):
        self.array = array

    def __getattr__(self, name):
        return getattr(self.array, name)

    def __getitem__(self, region):
        return self.array[region]

    def __setitem__(self, region, values):
        raise KeyboardInterrupt


def test_a_driver_write_interrupted_in_its_values_marks_nothing_done(computed, tmp_path):
    # ``done`` is written last: a write stopped in its values leaves its replicates not
    # done (a mutant that wrote ``done`` first survived every other test).
    sweep, chunks = computed
    store = Store.open_or_create(tmp_path / "s.zarr", sweep)[0]
    store._arrays["upper"] = FailingWrites(store._arrays["upper"])
    with pytest.raises(KeyboardInterrupt):
        store.write_chunks(placed(chunks))
    assert not store.done_mask().any()


def test_a_task_with_a_chunk_that_raised_returns_its_results(computed, tmp_path, held):
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    before = tree_hash(store.path)
    results = [chunks[0], RuntimeError("the chunk raised")]
    assert hand_off(handoff_of(store), results) == results
    assert tree_hash(store.path) == before


def test_a_worker_that_cannot_see_the_store_returns_its_arrays(computed, tmp_path, held):
    # A worker on another file system, or a new store not created yet.
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    elsewhere = Handoff(str(tmp_path / "elsewhere.zarr"), TOKEN, store.layout, 0, PLACES)
    assert hand_off(elsewhere, chunks) == chunks
    assert not (tmp_path / "elsewhere.zarr").exists()


@pytest.mark.parametrize("holder", ["no run", "another run"])
def test_a_store_the_run_does_not_hold_gets_no_files(computed, tmp_path, held, holder):
    # A store at the same path that is not the run's (a copy on the worker's own disk,
    # another run's), or the run's before it took the lock: the worker writes nothing.
    sweep, chunks = computed
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    if holder == "another run":
        held(store)
    before = tree_hash(store.path)
    assert hand_off(handoff_of(store, token="this-run"), chunks) == chunks
    assert tree_hash(store.path) == before


@pytest.mark.parametrize(
    "tamper",
    [
        "a file left out",
        "a done file left out",
        "a file not in the store",
        "a file not recorded",
        "a file too many",
    ],
)
def test_files_that_are_not_the_planned_ones_are_refused(computed, tmp_path, held, tamper):
    # A mutation hunt (h17c): a done file left out of the list of those moved last, and
    # the message's name of the file not in the store, passed every test.
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    handed = hand_off(handoff_of(store), chunks)
    files = handed[0][HANDED]
    if tamper == "a file left out":
        files.values.remove("lower/c/0/0/0/0")
    elif tamper == "a done file left out":
        files.done.remove("done/c/0/0")
    elif tamper == "a file not in the store":
        (store.path / files.partials["upper/c/0/0/0/0"]).unlink()
    elif tamper == "a file too many":  # a partial file for a place these chunks do not fill
        files.partials["estimate/c/1/0/0"] = files.partials["estimate/c/0/0/0"]
    else:
        for places in files.planned.values():
            places.pop("estimate/c/0/0/0", None)
    before = {k: v for k, v in tree_hash(store.path).items() if not k.endswith(".partial")}
    with pytest.raises(RuntimeError, match="not those of the chunks they computed") as info:
        store.write_handed(placed(handed))
    after = {k: v for k, v in tree_hash(store.path).items() if not k.endswith(".partial")}
    assert after == before
    if tamper == "a file not in the store":
        assert f"({files.partials['upper/c/0/0/0/0']!r} is not in the store)" in str(info.value)


@pytest.mark.parametrize("stop", ["before any move", "after one", "before done", "before digests"])
def test_a_commit_killed_at_any_step_is_settled_and_repaired(
    computed, tmp_path, monkeypatch, held, stop
):
    """The commit stops at ``stop``, its record left as a killed run leaves it. The next
    run settles the record, repairs what it must and computes the rest: the store then
    equals the driver's."""
    sweep, chunks = computed
    driver, _ = Store.open_or_create(tmp_path / "driver.zarr", sweep)
    driver.write_chunks(placed(chunks))
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    handed = hand_off(handoff_of(store), chunks)
    files = handed[0][HANDED]
    values = sum(files.partials[place] is not None for place in files.values)
    moves = {"before any move": 0, "after one": 1, "before done": values}.get(stop)
    replace, count = os.replace, [0]

    def killed(source, target):
        if str(source).endswith(".partial"):  # a worker's file moved (not a manifest)
            if count[0] == moves:
                raise KeyboardInterrupt  # the run stops here: nothing after runs
            count[0] += 1
        replace(source, target)

    def no_digest(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    if stop == "before digests":
        monkeypatch.setattr(digests, "place_digest", no_digest)
    with pytest.raises(KeyboardInterrupt):
        store.write_handed(placed(handed))
    monkeypatch.undo()
    # The next run, as runner._execute starts it: settle, find the damage, repair.
    settle(store.path, open_arrays(store.path))
    damage = find_damage(store.path)
    if damage:
        repair(store.path, damage)
    reopened = Store(store.path, store.layout)
    done = reopened.done_mask()
    assert done.sum() in (0, 2 * LARGE - 2)  # all of the block, or none of it
    assert done.any() == (stop == "before digests")
    if not done.any():  # what the next run computes again
        reopened.write_chunks(placed(chunks))
    assert not find_damage(store.path)
    ours = {
        k: v
        for k, v in data_files(store.path).items()
        if not k.endswith(".partial") and k != "ldpsim/lock.json"
    }
    assert ours == data_files(driver.path)
    assert count[0] == moves or stop == "before digests"


def test_a_file_of_fill_values_only_replaces_the_file_that_was_there(computed, tmp_path, held):
    # The block was written with failures (a 'failed' file); computed again without, its
    # 'failed' flags are all the fill value: zarr writes no file, and the old one goes.
    sweep, chunks = computed
    run_again = dict(chunks[1], failed=np.zeros(LARGE, bool), errors={})
    clean = [chunks[0], run_again]
    driver, _ = Store.open_or_create(tmp_path / "driver.zarr", sweep)
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    for each in (driver, store):
        each.write_chunks(placed(chunks))
    assert (store.path / "failed/c/0/0").is_file()
    driver.write_chunks(placed(clean))
    handed = hand_off(handoff_of(store), clean)
    assert handed[0][HANDED].partials["failed/c/0/0"] is None
    store.write_handed(placed(handed))
    assert not (store.path / "failed/c/0/0").exists()
    ours = {k: v for k, v in data_files(store.path).items() if k != "ldpsim/lock.json"}
    assert ours == data_files(driver.path)
    assert not find_damage(store.path)


def test_two_tasks_that_encoded_one_file_are_refused(computed, tmp_path, held):
    sweep, chunks = computed
    store = held(Store.open_or_create(tmp_path / "s.zarr", sweep)[0])
    first, second = hand_off(handoff_of(store), chunks), hand_off(handoff_of(store), chunks)
    before = {k: v for k, v in tree_hash(store.path).items() if not k.endswith(".partial")}
    with pytest.raises(RuntimeError, match="Two tasks encoded the same file"):
        store.write_handed([*placed(first), *placed(second)])
    after = {k: v for k, v in tree_hash(store.path).items() if not k.endswith(".partial")}
    assert after == before


def test_committing_handed_files_runs_the_same_python_for_60_replicates_as_for_600(tmp_path, held):
    counts = []
    for reps in (60, 600):
        sweep_file = write_sweep(
            tmp_path / f"s{reps}.toml", replicates=2 * reps, rep_chunk=reps, grid={"n": [100]}
        )
        sweep = load_sweep(sweep_file)
        store = held(Store.open_or_create(tmp_path / f"s{reps}.zarr", sweep)[0])
        point = sweep.points()[0]
        args = (list(store.layout.methods), store.layout.d, "in-process")
        chunks = [
            run_chunk(point.spec, list(range(c * reps, (c + 1) * reps)), *args) for c in (0, 1)
        ]
        chunks[1] = with_failures(chunks[1], reps)
        handed = hand_off(handoff_of(store), chunks)
        counts.append(
            lines_run(lambda store=store, handed=handed: store.write_handed(placed(handed)))
        )
    assert counts[0] == counts[1], counts


def test_whole_blocks_are_those_one_task_fills_alone(tmp_path):
    # scale with 2,000 replicates: one shard holds its 4 grid points.
    sweep = load_sweep("scale", replicates=2000)
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    assert store.layout.write_block() == ((2, 2), 2000)
    work, _ = plan(sweep, store)
    assert len(work) == 4
    one = [Task(work, "all")]
    assert whole_block_tasks(one, store.layout) == {"all"}
    apart = [Task([w], f"t{i}") for i, w in enumerate(work)]  # a quarter of the shard each
    assert whole_block_tasks(apart, store.layout) == set()
    split = [Task(work[:3], "three"), Task(work[3:], "one")]  # two tasks share the shard
    assert whole_block_tasks(split, store.layout) == set()
    # A resumed store: one replicate done, the block's others in one task.
    done = np.zeros((2, 2, 2000), dtype=bool)
    done[1, 1, 7] = True
    resumed, _ = plan_layout(sweep, store.layout, store.path, done)
    assert whole_block_tasks([Task(resumed, "rest")], store.layout) == set()


def test_a_block_at_the_grid_s_end_is_whole_with_the_points_it_holds():
    # 3 grid points in shards of 2: the second shard holds the third point alone. A task
    # of all its replicates fills that block whole, on its worker (a mutation hunt,
    # 2026-12-02: the block's grid slice not cut at the grid's end passed these tests;
    # the end block's task then never handed off and was read before its write).
    layout = Layout(
        axes=["n"],
        axis_values={"n": [100, 200, 300]},
        methods=["oracle"],
        replicates=4,
        d=1,
        checkpoints=None,
        rep_chunk=2,
        shard_reps=4,
        shard_grid=(2,),
        chunk_reps=4,
    )
    assert layout.block_of((2,), 1) == (1, 0)
    assert layout.block_slices((1, 0)) == ((slice(2, 3),), slice(0, 4))
    works = [Work(None, (2,), chunk, [2 * chunk, 2 * chunk + 1], f"c{chunk}") for chunk in (0, 1)]
    assert whole_block_tasks([Task(works, "end")], layout) == {"end"}
    results = [((2,), w.chunk, {"reps": range(w.reps[0], w.reps[-1] + 1)}) for w in works]
    [block] = placed_blocks(layout, 4, results)
    assert block.grid == (slice(2, 3),) and block.covered


def test_a_write_region_spans_the_zarr_chunks_its_results_touch():
    # Shards of 8 replicates in zarr chunks of 2, tasks of one replicate, a 'rep' axis
    # of 7. Results for replicates 4 and 3 rewrite the chunks [2, 4) and [4, 6) of the
    # shard, no more; each lands at its own position there; replicate 6 alone fills the
    # last chunk, cut at the axis's end. Regions off by a chunk at either end, or not
    # cut at the end, passed the store's tests (a mutation hunt, h16k).
    layout = Layout(
        axes=["n"],
        axis_values={"n": [100]},
        methods=["oracle"],
        replicates=7,
        d=1,
        checkpoints=None,
        rep_chunk=1,
        shard_reps=8,
        shard_grid=(1,),
        chunk_reps=2,
    )
    results = [((0,), rep, {"reps": [rep]}) for rep in (4, 3)]
    [block] = placed_blocks(layout, 7, results)
    assert block.reps == slice(2, 6) and not block.covered
    assert [where for _, where, _ in block.spots] == [slice(2, 3), slice(1, 2)]
    [end] = placed_blocks(layout, 7, [((0,), 6, {"reps": range(6, 7)})])
    assert end.reps == slice(6, 7) and end.covered
    assert layout.block_slices((0, 0)) == ((slice(0, 1),), slice(0, 7))
    assert replicate_positions({"reps": range(1, 7, 2)}).tolist() == [1, 3, 5]


#: Wide replicates (d = 200): a grid point's 600 replicates are one chunk and one shard,
#: so that each task fills its shard whole.
WIDE = """\
replicates = 600
seed = 3
[spec]
model = "sparse_mean"
magnitude = 1.0
coef = 0.0
n = 10
d = 200
sparsity = 1
mechanism = "laplace"
calibration = "sparse"
[grid]
eps = [1.0, 2.0]
[methods.oracle]
[methods.bm]
"""


def test_a_run_hands_off_its_blocks_and_writes_what_the_driver_writes(
    tmp_path, local_cluster, monkeypatch
):
    from distributed import Client

    (tmp_path / "wide.toml").write_text(WIDE)
    sweep = load_sweep(str(tmp_path / "wide.toml"))
    assert layout_for(sweep).write_block() == ((1,), 600)  # the premise: a shard a task
    handed: list[int] = []
    write_handed = Store.write_handed

    def counted(self, results):
        handed.append(len(results))
        return write_handed(self, results)

    monkeypatch.setattr(Store, "write_handed", counted)
    stores = {}
    with Client(local_cluster.scheduler_address, set_as_default=False) as client:
        for name in ("handed", "driver"):
            if name == "driver":  # no task hands off: the driver writes everything
                monkeypatch.setattr(runner, "whole_block_tasks", lambda tasks, layout: set())
            path = tmp_path / f"{name}.zarr"
            Store.open_or_create(path, sweep)  # an existing store: no task starts before it
            report = runner.run_sweep(sweep, path, client=client, log=lambda *a: None)
            assert report.computed == 2 * 600
            stores[name] = open_dataset(path).load()
    assert sum(handed) == 2  # both tasks handed off
    timings = ("seconds", "method_seconds")
    for name, values in stores["driver"].data_vars.items():
        if name not in timings:
            np.testing.assert_array_equal(stores["handed"][name].values, values.values, name)
    assert not list(Path(tmp_path / "handed.zarr").rglob("*.partial"))


#: Four grid points of WIDE, each a task of one whole shard that takes a fraction of a
#: second (n = 300): the kill lands while workers encode and the driver commits (at 600
#: replicates done of 2,400, the first shard committed, in 4 runs of 2026-11-30).
WIDE_KILLED = WIDE.replace("n = 10\n", "n = 300\n").replace(
    "eps = [1.0, 2.0]", "eps = [1.0, 1.5, 2.0, 2.5]"
)


def _running_tasks(dask_worker) -> int:
    """Tasks running on a worker (``Client.run``), released ones that still run included."""
    return dask_worker.state.executing_count + len(dask_worker.state.long_running)


def test_a_run_killed_while_workers_hand_off_resumes_to_the_uninterrupted_store(
    tmp_path, local_cluster
):
    """SIGKILL to the whole `ldpsim run` process group once a shard is committed, then
    `ldpsim run` again: the store equals an uninterrupted run's, with no file left over."""
    from distributed import Client

    sweep_file = tmp_path / "wide.toml"
    sweep_file.write_text(WIDE_KILLED)
    sweep = load_sweep(str(sweep_file))
    assert layout_for(sweep).write_block() == ((1,), 600)  # the premise: a shard a task
    baseline, killed = tmp_path / "baseline.zarr", tmp_path / "killed.zarr"
    for path in (baseline, killed):  # existing stores: every task hands off
        Store.open_or_create(path, sweep)
    with Client(local_cluster.scheduler_address, set_as_default=False) as client:
        runner.run_sweep(sweep, baseline, client=client, log=lambda *a: None)
    args = [str(sweep_file), "--store", str(killed), *scheduler(local_cluster)]
    command = [sys.executable, "-m", "ldpsim.pipeline", "run", *args]
    env = {**os.environ, "LDPSIM_WRITE_EVERY": "0"}  # each task's result committed alone
    kill_when(command, lambda: done_count(killed) >= 600, env)
    at_kill = done_count(killed)
    assert 600 <= at_kill < 4 * 600, at_kill
    # The killed run's tasks end first (a task runs to its end when its client is gone):
    # a file one of them wrote after the next run started would stay until the run after.
    # The scheduler forgets a gone client's tasks at once, so ask the workers: a released
    # task that is still running counts in its worker's executing_count (Dask's state
    # machine calls it cancelled). Waiting on the scheduler's `processing()` alone let
    # such a task write its files after the next run's clean-up (2 of 11 runs on a fast
    # machine, 2026-11-30).
    deadline = time.monotonic() + 60
    with Client(local_cluster.scheduler_address, set_as_default=False) as client:
        while time.monotonic() < deadline and (
            any(client.processing().values()) or any(client.run(_running_tasks).values())
        ):
            time.sleep(0.05)
    assert main(["run", *args]) == 0  # in this process: no second interpreter to start
    final, base = open_dataset(killed).load(), open_dataset(baseline).load()
    for name, values in base.data_vars.items():
        if name not in ("seconds", "method_seconds"):
            np.testing.assert_array_equal(final[name].values, values.values, name)
    assert not [p for pattern in ("*.partial", "*.tmp") for p in killed.rglob(pattern)]
    assert not find_damage(killed)
