"""The run's control flow: what each way of stopping writes, counts and reports.

Found by a mutation hunt (h13d, 2026-12-02): each test here fails on a plausible
mutant of pipeline/compute/runner.py or pipeline/errors.py that every other test
passed. The stop paths are made deterministic by a collector that hands the run its
first result only once every task has finished (:func:`finished_first`): the rest are
then fetched but not yet taken, which is what a stop must still write.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from conftest import done_count, write_sweep

import ldpsim.pipeline.compute.collect as collect_module
from ldpsim.pipeline.compute.collect import ClientLost, Collector
from ldpsim.pipeline.compute.plan import GridPoint, Work
from ldpsim.pipeline.compute.runner import FailureLimit, run_sweep
from ldpsim.pipeline.compute.signals import Interrupted, handle_signals
from ldpsim.pipeline.compute.task_keys import store_token
from ldpsim.pipeline.errors import EXIT_FAILED, EXIT_INCOMPLETE, RunStopped, outcome
from ldpsim.pipeline.store.reading import open_dataset
from ldpsim.pipeline.sweep import load_sweep


def quiet(line: str) -> None:
    pass


def finished_first(stop: BaseException | None) -> Callable[..., Any]:
    """A stand-in for :func:`ldpsim.pipeline.compute.collect.collect` whose collector
    yields nothing until every task's result is fetched; then the first result, and
    ``stop`` raised (None: the others too)."""

    def collect(futures, client, tick=None):
        real = Collector(futures, client, tick)
        deadline = time.monotonic() + 120
        while real.fetched.qsize() < len(futures):
            assert time.monotonic() < deadline, "the tasks did not finish within 120 s"
            time.sleep(0.02)

        class AllFetched:
            def __iter__(self) -> Iterator[Any]:
                items = iter(real)
                if stop is None:
                    yield from items
                    return
                yield next(items)
                raise stop

            drain, close = real.drain, real.close

        return AllFetched()

    return collect


def sweep_of_16(tmp_path):
    """4 grid points of 4 replicates, a task per replicate (16 tasks)."""
    return load_sweep(write_sweep(tmp_path / "s.toml", replicates=4, rep_chunk=1))


def test_a_failed_last_replicate_is_failed_and_each_result_is_counted_once(
    tmp_path, local_cluster, faults, monkeypatch
):
    # Each result written as it comes (LDPSIM_WRITE_EVERY=0): a write that kept its
    # batch counted and wrote it again at every later write. The last replicate of a
    # grid point failed: counted as failed, not missing, and not left out.
    monkeypatch.setenv("LDPSIM_WRITE_EVERY", "0")
    store = tmp_path / "S.zarr"
    faults(**{"raise": [[f"{store_token(store)}-1-0-", 3]]})  # tau = 0.9, n = 2e3, rep 3
    report = run_sweep(
        sweep_of_16(tmp_path), store, scheduler=local_cluster.scheduler_address, log=quiet
    )
    assert (report.computed, report.failed) == (15, 1)
    assert (report.missing, report.replicates_failed, report.already_done) == (0, 1, 0)
    assert done_count(store) == 15


def test_an_interrupted_run_writes_and_counts_every_finished_result(
    tmp_path, local_cluster, faults, monkeypatch
):
    store = tmp_path / "S.zarr"
    faults(**{"raise": [[f"{store_token(store)}-0-1-", 2]]})
    monkeypatch.setattr(collect_module, "collect", finished_first(Interrupted(signal.SIGINT)))
    with handle_signals(), pytest.raises(Interrupted) as raised:
        run_sweep(
            sweep_of_16(tmp_path), store, scheduler=local_cluster.scheduler_address, log=quiet
        )
    # The signal came after the first result: the 15 others had finished, and are kept.
    assert done_count(store) == 15 and int(open_dataset(store)["failed"].sum()) == 1
    # "kept" counts the replicates done, not the one that failed.
    assert raised.value.kept == 15
    assert (raised.value.report.computed, raised.value.report.failed) == (15, 1)


def test_the_failure_limit_writes_the_chunks_finished_as_it_stops(
    tmp_path, local_cluster, faults, monkeypatch
):
    store = tmp_path / "S.zarr"
    token = store_token(store)
    faults(**{"raise": [[f"{token}-", rep] for rep in range(4)]})  # every replicate
    monkeypatch.setattr(collect_module, "collect", finished_first(None))
    lines: list[str] = []
    report = run_sweep(
        sweep_of_16(tmp_path),
        store,
        scheduler=local_cluster.scheduler_address,
        max_failures=1,
        log=lines.append,
    )
    assert any(line.startswith("Stopped: ") for line in lines), lines
    # The first result reached the limit; the 15 fetched meanwhile are written too.
    assert int(open_dataset(store)["failed"].sum()) == 16 == report.failed


def test_a_lost_scheduler_reports_what_the_store_keeps_after_writing_it(
    tmp_path, local_cluster, monkeypatch
):
    monkeypatch.setenv("LDPSIM_WRITE_EVERY", "3600")  # the finished result is still held
    lost = ClientLost(RuntimeError("scheduler-connection-lost"))
    monkeypatch.setattr(collect_module, "collect", finished_first(lost))
    store = tmp_path / "S.zarr"
    with pytest.raises(RunStopped) as stopped:
        run_sweep(
            sweep_of_16(tmp_path), store, scheduler=local_cluster.scheduler_address, log=quiet
        )
    assert done_count(store) == 1
    message = str(stopped.value)
    assert "keeps 1 of the sweep's 16 replicates (1 written by this run)" in message, message
    assert stopped.value.ended == "stopped (scheduler lost)"
    assert stopped.value.exit_code == EXIT_INCOMPLETE


def test_the_failure_limit_is_reached_at_exactly_max_failures():
    point = GridPoint(index=(0,), values={"n": 1000}, spec={}, normalized=None)
    work = Work(point=point, index=(0,), chunk=0, reps=[0, 1], key="w")
    limit = FailureLimit(2)
    failed = np.array([True, True])
    limit.add(work, {"failed": failed, "method_failed": np.zeros((3, 2), dtype=bool)})
    assert limit.reached is work


def test_one_missing_replicate_is_incomplete():
    assert outcome(replicates_failed=0, methods_failed=0, missing=1) == EXIT_INCOMPLETE
    assert outcome(replicates_failed=0, methods_failed=1, missing=1) == EXIT_FAILED
