"""The driver handles a chunk's arrays whole (issue 42 item 6).

One driver takes the results of every worker, so its work per replicate caps a run:
before, it ran Python once per replicate when it submitted a task (Dask walked the
list of its replicates), placed a result in the store and looked for failure records.
These tests count the Python lines the driver runs (``sys.settrace``, no clock) for a
chunk of 60 replicates and for one of 600 with the same failures: the counts are equal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr
from conftest import write_sweep

import ldpsim.pipeline
import ldpsim.tasks
from ldpsim.pipeline.compute.runner import submit
from ldpsim.pipeline.compute.worker import run_chunk
from ldpsim.pipeline.store.code_identity import sweep_units
from ldpsim.pipeline.store.layout import TASK_BYTES, layout_for, result_bytes
from ldpsim.pipeline.store.store import Store
from ldpsim.pipeline.sweep import load_sweep

#: The replicates of the small and the large chunk (the sweep's chunks hold LARGE).
SMALL, LARGE = 60, 600
#: The packages whose lines count: ldpsim's, and the module in which Dask walks a
#: task's arguments (``dask._task_spec``).
TRACED = (
    str(Path(ldpsim.pipeline.__file__).parent),
    str(Path(ldpsim.tasks.__file__).parent),
    "_task_spec.py",
)


def lines_run(action: Callable[[], object]) -> int:
    """Python lines of :data:`TRACED` files that ``action()`` runs in this thread."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        name = frame.f_code.co_filename
        traced = name.startswith(TRACED[:2]) or name.endswith(TRACED[2])
        return local if traced else None

    sys.settrace(calls)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


@pytest.fixture(scope="module")
def sweep_and_chunks(tmp_path_factory):
    """A cheap sweep with chunks of LARGE replicates, and a real worker's result for the
    first SMALL replicates of chunk 0 and for all of chunk 1."""
    folder = tmp_path_factory.mktemp("driver")
    sweep_file = write_sweep(
        folder / "cheap.toml", replicates=2 * LARGE, rep_chunk=LARGE, grid={"n": [100]}
    )
    sweep = load_sweep(sweep_file)
    layout = layout_for(sweep)
    point = sweep.points()[0]
    args = (list(layout.methods), layout.d, "in-process")
    small = run_chunk(point.spec, list(range(SMALL)), *args)
    large = run_chunk(point.spec, list(range(LARGE, 2 * LARGE)), *args)
    return sweep, folder, small, large


def with_failures(result: dict, first: int) -> dict:
    """``result`` with its replicates ``first`` and ``first + 2`` failed, each with its
    record (the failures a worker reports)."""
    out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in result.items()}
    out["errors"] = {}
    for rep in (first, first + 2):
        out["failed"][rep - first] = True
        out["errors"][rep] = {"rep": rep, "kind": "replicate", "error": "planted"}
    return out


def test_a_write_runs_the_same_python_for_60_replicates_as_for_600(sweep_and_chunks, tmp_path):
    sweep, _, small, large = sweep_and_chunks
    index = (0,)
    counts = []
    for chunk, result in ((0, with_failures(small, 0)), (1, with_failures(large, LARGE))):
        store, _ = Store.open_or_create(tmp_path / f"c{chunk}.zarr", sweep)
        # Unmeasured, the store's first write: it creates the folders and manifests that
        # the measured write then finds, and two failure records.
        store.write_chunks([(index, 0, with_failures(small, 0))])
        # A failure recorded before in the chunk, done now: its record is removed.
        first = result["reps"][0]
        store.write_error(index, first + 5, {"rep": first + 5, "error": "earlier"})
        counts.append(lines_run(lambda: store.write_chunks([(index, chunk, result)])))  # noqa: B023
    assert counts[0] == counts[1], counts
    errors = sorted(p.name for p in (tmp_path / "c1.zarr" / "ldpsim" / "errors").iterdir())
    assert errors == [f"0__{rep}.json" for rep in (0, 2, LARGE, LARGE + 2)]
    done = zarr.open_array(str(tmp_path / "c1.zarr" / "done"), mode="r")[...]
    want = np.zeros(2 * LARGE, dtype=bool)
    want[:SMALL] = want[LARGE:] = True
    want[[0, 2, LARGE, LARGE + 2]] = False
    np.testing.assert_array_equal(done[0], want)


def test_submitting_a_task_runs_the_same_python_for_60_replicates_as_for_600(
    sweep_and_chunks, local_cluster
):
    from distributed import Client

    sweep, folder, _, _ = sweep_and_chunks
    units = sweep_units(sweep)
    with Client(local_cluster.scheduler_address, set_as_default=False) as client:
        counts = []
        # The first, unmeasured, fills the caches Dask fills once a process (a class's
        # slots in dask._task_spec: 9 lines more when this test runs alone).
        for reps, name in ((SMALL, "first"), (SMALL, "small"), (LARGE, "large")):
            sized = load_sweep(str(folder / "cheap.toml"), [f"rep_chunk={reps}"], reps)
            submitted: list = []

            def plan_and_submit(sized=sized, path=folder / f"{name}.zarr", out=submitted):
                out.append(
                    submit(client, sized, layout_for(sized), path, None, None, units, 0, "t")
                )

            counts.append(lines_run(plan_and_submit))
            submitted[0].cancel(client)
            assert [len(t.works[0].reps) for t in submitted[0].tasks] == [reps]
    assert counts[1] == counts[2], counts


def test_a_chunk_written_in_pieces_equals_it_written_whole(sweep_and_chunks, tmp_path):
    """The pieces: a run with one replicate left out in its middle, that replicate, every
    other replicate (positions that are no slice), the rest; the whole chunk then fills
    its region and is written unread.

    The first piece's positions span one more place than they are many: read as a slice,
    they crashed the write (a mutation of ``as_slice`` that took them for one passed
    every test, 2026-12-02)."""
    sweep, _, _, large = sweep_and_chunks
    whole, _ = Store.open_or_create(tmp_path / "whole.zarr", sweep)
    pieces, _ = Store.open_or_create(tmp_path / "pieces.zarr", sweep)
    index = whole.index_of(sweep.points()[0])
    whole.write_chunk(index, 1, large)
    positions = np.arange(LARGE)
    first, every_other = positions < 100, (positions >= 100) & (positions % 2 == 0)
    left_out = positions == 50
    for chosen in (first & ~left_out, left_out, every_other, ~(first | every_other)):
        pieces.write_chunk(index, 1, piece(large, chosen))
    for name, array in whole.arrays.items():
        np.testing.assert_array_equal(pieces.arrays[name][...], array[...], err_msg=name)


def test_a_written_chunk_reads_back_as_the_worker_s_arrays(sweep_and_chunks, tmp_path):
    """Every variable of a written chunk holds the worker's array for it, at the chunk's
    replicates, ``done`` the replicates that did not fail and ``code_version`` the
    store's generation. The tests compared writes with writes only: ``method_estimate``
    filled with the lower bounds, or ``job_id`` and ``code_version`` with 0, passed them
    (a mutation hunt, h16k)."""
    sweep, _, _, large = sweep_and_chunks
    result = with_failures(large, LARGE)
    result["job_id"] = np.arange(7, 7 + LARGE, dtype=np.int64)
    store, _ = Store.open_or_create(tmp_path / "s.zarr", sweep)
    store.code_version = 3
    index = store.index_of(sweep.points()[0])
    store.write_chunk(index, 1, result)
    reps = slice(LARGE, 2 * LARGE)
    m = len(sweep.methods)
    for name in ("estimate", "last", "projected", "seconds", "job_id", "failed"):
        got = store.arrays[name][(*index, reps)]
        np.testing.assert_array_equal(got, result[name], err_msg=name)
    for name in ("lower", "upper", "method_estimate", "method_seconds", "method_failed"):
        got = store.arrays[name][(*index, slice(None), reps)]
        np.testing.assert_array_equal(got, result[name][:m], err_msg=name)
    done = store.arrays["done"][(*index, reps)]
    np.testing.assert_array_equal(done, ~result["failed"])
    assert done.sum() == LARGE - 2
    np.testing.assert_array_equal(store.arrays["code_version"][(*index, reps)], 3)
    assert not store.arrays["done"][(*index, slice(0, LARGE))].any()


def piece(result: dict, chosen: np.ndarray) -> dict:
    """The replicates ``chosen`` (a mask over ``result['reps']``) of a chunk's result."""
    reps = np.asarray(result["reps"])[chosen]
    out = {"reps": reps.tolist(), "errors": {}}
    for name, value in result.items():
        if not isinstance(value, np.ndarray):
            out.setdefault(name, value)
        elif value.shape[:1] == (len(chosen),):  # (R, ...)
            out[name] = value[chosen]
        else:  # (M, R, ...)
            out[name] = value[:, chosen]
    return out


#: A sweep of cheap replicates with many coordinates: a second of them (2,903 by the cost
#: model) would be 2,903 x 96 KB = 280 MB of results in one task, held by the driver.
WIDE = """\
replicates = 5000
seed = 1
[spec]
model = "sparse_mean"
magnitude = 1.0
coef = 0.0
eps = 1.0
n = 10
d = 1000
sparsity = 1
mechanism = "laplace"
calibration = "sparse"
[methods.oracle]
[methods.bm]
"""


def test_a_task_holds_at_most_task_bytes_of_results(sweep_and_chunks, tmp_path):
    _, _, _, large = sweep_and_chunks
    # The bytes per replicate of a real chunk (3 methods, no checkpoints, d = 1).
    arrays = sum(v.nbytes for v in large.values() if isinstance(v, np.ndarray))
    assert arrays == LARGE * result_bytes(3, 1, 1)
    (tmp_path / "wide.toml").write_text(WIDE)
    wide = load_sweep(str(tmp_path / "wide.toml"))
    rep_chunk = layout_for(wide).rep_chunk
    assert rep_chunk * result_bytes(2, 1, 1000) <= TASK_BYTES
    assert (rep_chunk + 1) * result_bytes(2, 1, 1000) > TASK_BYTES
