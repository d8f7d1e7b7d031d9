"""What a worker's task gives back (ldpsim.pipeline.compute.worker): each chunk's own
statistics, in the methods' order the store asked for and padded to its d, the batch job
and seconds of its replicates, and a record of each failure that says where it happened.

Computed in this process, on a cheap sweep (n = 100): no cluster. The GPU backend's half
of a task (its launch) is stood in for by the CPU's chains, as tests/tasks/test_chunk.py
does: what the worker does with a launch's outputs, its seconds or its error is the same.
"""

from __future__ import annotations

import dataclasses
import socket
import time

import numpy as np
import pytest
from conftest import write_sweep
from worker_hooks import ComputeLogAndFaults

from ldpsim.pipeline.compute import worker
from ldpsim.pipeline.sweep import load_sweep
from ldpsim.tasks import plugins
from ldpsim.tasks.chunk import compute_chunk, run_chains
from ldpsim.tasks.grid_point import setup_of
from ldpsim.tasks.intervals.base import IntervalMethod

#: The methods in another order than the sweep's (bb, bm, oracle), as a store may ask.
METHODS = ["oracle", "bb", "bm"]
#: A store's d above the model's (quantile: 1): the rest of each row stays NaN.
D = 2


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("worker")
    sweep = load_sweep(
        write_sweep(folder / "s.toml", replicates=4, rep_chunk=2, grid={"tau": [0.5], "n": [100]})
    )
    return sweep.points()[0].spec


@pytest.fixture
def no_batch_job(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("PBS_JOBID", raising=False)


def test_a_chunk_holds_its_replicates_statistics_in_the_stores_order(spec, no_batch_job):
    out = worker.run_chunk(spec, [2, 3], METHODS, D, "k-0")
    alone = compute_chunk(setup_of(spec), [2, 3])
    assert out["reps"] == [2, 3] and out["errors"] == {}
    for name in ("estimate", "last", "projected"):
        assert out[name].shape == (2, D), name
        np.testing.assert_array_equal(out[name][:, :1], alone[name], err_msg=name)
        assert np.isnan(out[name][:, 1:]).all(), name
    assert np.isfinite(out["estimate"][:, 0]).all()
    rows = [alone["methods"].index(label) for label in METHODS]
    for name in ("lower", "upper", "method_estimate"):
        assert out[name].shape == (3, 2, D), name
        np.testing.assert_array_equal(out[name][..., :1], alone[name][rows], err_msg=name)
        assert np.isnan(out[name][..., 1:]).all(), name
    assert np.isfinite(out["lower"][..., 0]).all()
    assert rows != [0, 1, 2]  # the store's order is not the chunk's
    assert out["method_failed"].shape == (3, 2) and not out["method_failed"].any()
    assert out["method_seconds"].shape == (3, 2) and (out["method_seconds"] > 0).all()
    assert not out["failed"].any()
    assert (out["seconds"] > 0).all()
    assert out["job_id"].tolist() == [0, 0]


def test_a_model_with_an_l1_ball_keeps_its_last_and_projected_estimates(no_batch_job):
    # The estimates of the last iterate and the projected average, besides the average.
    spec = {
        "model": "sparse_mean",
        "d": 3,
        "sparsity": 1,
        "magnitude": 1.0,
        "coef": 0.0,
        "mechanism": "laplace",
        "eps": 1.0,
        "n": 100,
        "seed": 3,
        "methods": {"oracle": {}},
    }
    out = worker.run_chunk(spec, [0, 1], ["oracle"], 4, "k-0")
    alone = compute_chunk(setup_of(spec), [0, 1])
    for name in ("estimate", "last", "projected"):
        assert np.isfinite(out[name][:, :3]).all() and np.isnan(out[name][:, 3]).all(), name
        np.testing.assert_array_equal(out[name][:, :3], alone[name], err_msg=name)


def test_a_chunk_with_checkpoints_holds_each_checkpoints_values(spec, no_batch_job):
    # (R, K, d) and (M, R, K, d): a value per checkpoint, each the chunk's own.
    spec = {**spec, "checkpoints": [50, 100]}
    out = worker.run_chunk(spec, [0, 1, 2], METHODS, D, "k-0")
    alone = compute_chunk(setup_of(spec), [0, 1, 2])
    rows = [alone["methods"].index(label) for label in METHODS]
    assert out["estimate"].shape == (3, 2, D) and out["lower"].shape == (3, 3, 2, D)
    np.testing.assert_array_equal(out["estimate"][..., :1], alone["estimate"])
    np.testing.assert_array_equal(out["upper"][..., :1], alone["upper"][rows])
    assert out["method_failed"].shape == out["method_seconds"].shape == (3, 3, 2)
    assert np.isfinite(out["estimate"][..., 0]).all()
    assert not np.array_equal(out["estimate"][:, 0], out["estimate"][:, 1])


@pytest.mark.parametrize(
    "variable, value, job",
    [
        ("SLURM_JOB_ID", "4417", 4417),
        ("PBS_JOBID", "4417.pbs-server", 4417),
        ("PBS_JOBID", "4417[12].pbs-server", 4417),  # an array job's element
        ("PBS_JOBID", "x", 0),
    ],
)
def test_each_replicate_records_the_batch_job_it_ran_in(
    spec, no_batch_job, monkeypatch, variable, value, job
):
    # SLURM's job id is a number; PBS's is "NUMBER.SERVER": the number is recorded.
    monkeypatch.setenv(variable, value)
    out = worker.run_chunk(spec, [0, 1], METHODS, D, "k-0")
    assert out["job_id"].tolist() == [job, job] and out["job_id"].dtype == np.int64


@pytest.fixture
def fault_in_replicate_3(tmp_path):
    """The tests' worker hooks (tests/worker_hooks.py), set up in this process: the
    chain of replicate 3 of a chunk whose key holds "k-" fails."""
    faults = tmp_path / "faults.json"
    faults.write_text('{"raise": [["k-", 3]]}')
    hooks = ComputeLogAndFaults(tmp_path / "computed.log", faults)
    hooks.setup(None)
    yield
    hooks.teardown(None)


def test_a_failed_replicate_is_recorded_with_where_it_ran(spec, fault_in_replicate_3):
    # The record is what `ldpsim errors` shows and `ldpsim replay` runs again: its chunk,
    # replicate, seed, grid point, host and time.
    out = worker.run_chunk(spec, [2, 3], METHODS, D, "k-7")
    assert out["failed"].tolist() == [False, True]
    assert np.isnan(out["estimate"][1]).all() and np.isfinite(out["estimate"][0, 0])
    assert np.isnan(out["lower"][:, 1]).all()
    (rep,) = out["errors"]
    record = out["errors"][rep]
    assert rep == 3 and record["rep"] == 3 and record["key"] == "k-7"
    assert record["kind"] == "replicate" and "InjectedFault" in record["error"]
    assert "Traceback" in record["traceback"]
    assert record["spec"] == spec and record["seed"] == spec["seed"]
    assert record["host"] == socket.gethostname()
    time.strptime(record["time"], "%Y-%m-%dT%H:%M:%S%z")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Flaky(IntervalMethod):
    """theta_bar +- 1, or a ZeroDivisionError when theta_bar_0 > 0."""

    name = "flaky"

    def interval(self, stats, level, rng):
        centre = stats.theta_bar
        if centre[0] > 0:
            return 1 / 0
        return centre - 1.0, centre + 1.0


@pytest.fixture
def flaky(monkeypatch):
    monkeypatch.setattr(plugins, "_REGISTERED", {kind: {} for kind in plugins.GROUPS})
    plugins.register(Flaky)


def test_a_failed_method_is_recorded_as_the_methods_failure(spec, flaky):
    # The replicate is done, only the method's bounds are missing; its record is of kind
    # "method" and names the method.
    flaky_spec = {**spec, "methods": {**spec["methods"], "flaky": {}}}
    reps = list(range(8))
    out = worker.run_chunk(flaky_spec, reps, ["flaky", *METHODS], D, "k-3")
    failed = [rep for i, rep in enumerate(reps) if out["method_failed"][0, i]]
    assert 0 < len(failed) < len(reps)
    assert not out["failed"].any() and not out["method_failed"][1:].any()
    assert sorted(out["errors"]) == failed
    for rep in failed:
        record = out["errors"][rep]
        assert record["kind"] == "method" and record["key"] == "k-3" and record["rep"] == rep
        assert record["error"].startswith("flaky: ZeroDivisionError")
        assert (
            list(record["methods"]) == ["flaky"] and "Traceback" in record["tracebacks"]["flaky"]
        )
        assert record["seed"] == spec["seed"] and record["spec"] == flaky_spec


def test_a_chunk_that_cannot_be_set_up_fails_alone_in_its_place(spec, no_batch_job):
    # A task of several chunks: the one whose grid point cannot be set up gives its
    # error where its result would be; the others are computed, in their order.
    broken = {**spec, "model": "no_such_model"}
    chunks = [(spec, [0, 1], "k-a"), (broken, [2, 3], "k-b"), (spec, [2, 3], "k-c")]
    results = worker.run_task(chunks, METHODS, D, "task")
    assert isinstance(results[1], Exception) and "no_such_model" in str(results[1])
    assert [r["reps"] for r in (results[0], results[2])] == [[0, 1], [2, 3]]
    np.testing.assert_array_equal(
        results[2]["estimate"], worker.run_chunk(spec, [2, 3], METHODS, D, "k-c")["estimate"]
    )


def test_a_chunk_whose_units_differ_from_the_clients_is_refused(spec):
    # A worker that imported a unit before its files changed must not compute with it.
    units = {"model:quantile": {"source_sha256": "0" * 64}}
    (result,) = worker.run_task([(spec, [0], "k-0")], METHODS, D, "task", units)
    assert isinstance(result, RuntimeError)
    assert "another copy of the model 'quantile'" in str(result)


def test_a_launch_s_outputs_its_seconds_and_its_failure_reach_the_store(spec, no_batch_job):
    # The GPU backend: the methods run on each chunk's launched chains, each replicate's
    # seconds include its share of its chunk's launch, and a chunk whose launch failed
    # fails all its replicates with the launch's error, its other arrays left empty.
    gpu = {**spec, "backend": "gpu"}
    raw, _ = run_chains(setup_of(spec), [0, 1, 2, 3])
    try:  # as launch_gpu catches it: raised, with its traceback
        raise RuntimeError("the launch failed")
    except RuntimeError as exc:
        failure = exc
    launched = [worker.Launch(raw, 1000.0), failure]
    chunks = [(gpu, [0, 1, 2, 3], "k-0"), (gpu, [4, 5], "k-1")]
    done, lost = worker.run_task(chunks, METHODS, D, "task", launched=launched)
    cpu = worker.run_chunk(spec, [0, 1, 2, 3], METHODS, D, "k-0")
    for name in ("estimate", "lower", "upper", "method_failed"):
        np.testing.assert_array_equal(done[name], cpu[name], err_msg=name)
    assert ((done["seconds"] >= 250.0) & (done["seconds"] < 500.0)).all()
    assert lost["failed"].all() and sorted(lost["errors"]) == [4, 5]
    for rep in (4, 5):
        record = lost["errors"][rep]
        assert (
            record["kind"] == "replicate" and record["error"] == "RuntimeError: the launch failed"
        )
        assert "Traceback" in record["traceback"] and record["key"] == "k-1"
    for name in ("estimate", "lower", "upper", "method_estimate", "seconds", "method_seconds"):
        assert np.isnan(lost[name]).all(), name
    assert not lost["method_failed"].any()
