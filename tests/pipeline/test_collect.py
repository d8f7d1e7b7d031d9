"""Results leave the cluster as soon as their tasks finish, however slow the caller is."""

from __future__ import annotations

import time

import pytest
from distributed import Client

from ldpsim.pipeline.collect import collect


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def keys_in_memory(dask_scheduler) -> list[str]:
    return [str(key) for key, ts in dask_scheduler.tasks.items() if ts.state == "memory"]


def test_results_are_fetched_and_released_while_the_caller_is_busy(local_cluster):
    with Client(local_cluster, set_as_default=False) as client:
        futures = {client.submit(square, i, key=f"square-{i}"): i for i in range(12)}
        seen = {}
        for i, (label, result) in enumerate(collect(futures, client)):
            seen[label] = result
            if i == 0:
                # the caller is still writing its first result: the other tasks finish
                # meanwhile, and their results are fetched and forgotten by the cluster
                deadline = time.monotonic() + 30
                while client.run_on_scheduler(keys_in_memory) or not all(
                    f.done() for f in futures
                ):
                    assert time.monotonic() < deadline, client.run_on_scheduler(keys_in_memory)
                    time.sleep(0.05)
        assert seen == {i: i * i for i in range(12)}


def test_a_failed_task_gives_its_exception(local_cluster):
    with Client(local_cluster, set_as_default=False) as client:
        futures = {client.submit(square, x, key=f"square-x{x}"): x for x in (2, -3)}
        results = dict(collect(futures, client))
    assert results[2] == 4
    assert isinstance(results[-3], ValueError) and "negative: -3" in str(results[-3])


def test_a_closed_client_stops_the_collection(local_cluster):
    client = Client(local_cluster, set_as_default=False)
    futures = {client.submit(time.sleep, 30, key="sleep-30"): "slow"}
    results = collect(futures, client)
    client.close()
    with pytest.raises(Exception):  # noqa: B017 (whatever the closed client raises)
        next(results)
