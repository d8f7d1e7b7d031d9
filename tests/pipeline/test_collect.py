"""Results leave the cluster as soon as their tasks finish, however slow the caller is."""

from __future__ import annotations

import queue
import threading
import time

import pytest
from distributed import Client
from distributed.client import FutureCancelledError

from ldpsim.pipeline.compute.collect import ClientLost, collect


def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative: {x}")
    return x * x


def square_after(gate: object, x: int) -> int:
    """``square`` once the task ``gate`` has run."""
    return square(x)


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


def test_a_drained_collection_fetches_nothing_more(local_cluster):
    # A run that stops drains, then closes its client: a fetch after the drain found
    # the results released and distributed logged "Couldn't gather 1 keys".
    with Client(local_cluster, set_as_default=False) as client:
        futures = {client.submit(time.sleep, 0.3, key=f"nap-{i}"): i for i in range(3)}
        collector = collect(futures, client)
        assert collector.drain() == []  # nothing finished yet
        deadline = time.monotonic() + 30
        while not all(future.done() for future in futures) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # time enough for the thread to fetch, were it still fetching
        assert not collector.taken and collector.drain() == []
        with pytest.raises(RuntimeError, match="closed"):  # iterating it raises, never waits
            next(iter(collector))
        assert all(future.status == "finished" for future in futures)  # left on the cluster


class SlowQueue(queue.Queue):
    """A queue whose every put takes 0.3 s: a fetching thread that lags behind."""

    def put(self, item, block=True, timeout=None):
        time.sleep(0.3)
        super().put(item, block, timeout)


def test_a_drain_with_grace_keeps_every_result_finished_by_then(local_cluster):
    # A run stopped by a signal keeps the results of all the tasks finished when it
    # stopped, not only the first the thread fetched (a mutant waited for any one).
    with Client(local_cluster, set_as_default=False) as client:
        # All three finish together, 0.3 s on: after the collector's queue is replaced.
        gate = client.submit(time.sleep, 0.3, key="gate")
        futures = {client.submit(square_after, gate, i, key=f"sq-{i}"): i for i in range(3)}
        collector = collect(futures, client)
        collector.fetched = SlowQueue()
        deadline = time.monotonic() + 30
        while not all(future.done() for future in futures) and time.monotonic() < deadline:
            time.sleep(0.01)
        drained = collector.drain(grace=10.0)
        assert sorted(drained) == [(0, 0), (1, 1), (2, 4)]


def test_a_closed_client_stops_the_collection(local_cluster):
    client = Client(local_cluster, set_as_default=False)
    # the session's cluster: a worker stays busy 3 s after the client is gone
    futures = {client.submit(time.sleep, 3, key="sleep-3"): "slow"}
    results = collect(futures, client)
    client.close()
    # Named as such (a run then says it lost its scheduler), decided by the fetching
    # thread when its fetch failed. (Before: `next(results)` of the Collector itself, a
    # TypeError whatever happened.)
    with pytest.raises(ClientLost):
        next(iter(results))


class StandInClient:
    """What the Collector reads of a client: its status and its loop."""

    def __init__(self, status: str) -> None:
        self.status, self.loop = status, None


def test_a_failed_wait_is_client_lost_only_once_the_client_stopped(monkeypatch):
    # A mutation hunt (c02): the fetching thread's own error (as_completed failing, as
    # when the client closes under it) was no longer named ClientLost once the client
    # had stopped; no test noticed (a closed client's fetch fails in future.result()).
    import ldpsim.pipeline.compute.collect as collect_module

    def broken(futures, loop=None):
        raise OSError("comm closed")

    monkeypatch.setattr(collect_module, "as_completed", broken)
    with pytest.raises(ClientLost, match="comm closed") as lost:
        next(iter(collect({object(): "task"}, StandInClient("closed"))))
    assert isinstance(lost.value.cause, OSError)
    # While the client runs, the error is its own.
    with pytest.raises(OSError, match="comm closed"):
        next(iter(collect({object(): "task"}, StandInClient("running"))))


def wait_for_event(name: str) -> str:
    """A task that waits (at most 10 s) until the client sets the event ``name``."""
    from distributed import Event

    Event(name).wait(timeout=10)
    return name


def test_a_wait_longer_than_a_tick_yields_none_meanwhile(local_cluster):
    # A run acts on time while its tasks run (a Ctrl-C, its writes every so often): the
    # collection hands it None each tick without a result, not only when one comes.
    from distributed import Event

    with Client(local_cluster, set_as_default=False) as client:
        futures = {client.submit(wait_for_event, "tick-go", key="gated"): "gated"}
        items = iter(collect(futures, client, tick=0.05))
        assert next(items) is None  # the task waits for the event: nothing came yet
        Event("tick-go", client=client).set()
        assert [item for item in items if item is not None] == [("gated", "tick-go")]


class PausedQueue(queue.Queue):
    """A queue whose put says it began, then takes 0.3 s: a fetch under way."""

    def __init__(self) -> None:
        super().__init__()
        self.putting = threading.Event()

    def put(self, item, block=True, timeout=None):
        self.putting.set()
        time.sleep(0.3)
        super().put(item, block, timeout)


def test_a_drain_keeps_the_result_whose_fetch_is_under_way(local_cluster):
    # A run that stops (its failure limit reached) drains at once, without grace: a
    # result the thread is fetching then is waited for and kept, not lost to the run.
    with Client(local_cluster, set_as_default=False) as client:
        gate = client.submit(time.sleep, 0.3, key="late-gate")
        futures = {client.submit(square_after, gate, 5, key="sq-late"): 5}
        collector = collect(futures, client)
        collector.fetched = PausedQueue()
        assert collector.fetched.putting.wait(30)
        assert collector.drain() == [(5, 25)]


def test_a_collection_whose_client_is_lost_drains_no_results(local_cluster):
    # What stopped the thread is raised by iterating, never handed over as a result.
    client = Client(local_cluster, set_as_default=False)
    futures = {client.submit(time.sleep, 3, key="sleep-3-drained"): "slow"}
    collector = collect(futures, client)
    client.close()
    collector.thread.join(30)
    assert not collector.thread.is_alive()
    assert collector.drain() == []


def test_client_lost_says_in_one_line_why():
    # `ldpsim run` prints it in its one line about the lost scheduler.
    cancelled = FutureCancelledError("task-1", "scheduler-connection-lost", "details\nbelow")
    assert str(ClientLost(cancelled)) == "scheduler-connection-lost"
    assert str(ClientLost(OSError("comm\n  closed"))) == "comm closed"
    lost = ClientLost(OSError())
    assert str(lost) == "OSError" and isinstance(lost.cause, OSError)
