"""Task results off the cluster as soon as the tasks finish, however slow the store is."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from distributed import Client, Future, as_completed

Label = TypeVar("Label")


class ClientLost(Exception):
    """The client stopped running while its tasks were fetched: it lost its scheduler
    (stopped, killed, its node gone), and distributed cancelled every task.

    Decided by the fetching thread at the moment a fetch failed, from the client's
    status then (it may run again later, reconnected: the tasks stay cancelled).
    ``cause`` is the fetch's own error (a ``FutureCancelledError`` whose ``reason`` is
    "scheduler-connection-lost", a closed comm, ...).
    """

    def __init__(self, cause: BaseException) -> None:
        reason = getattr(cause, "reason", None) or " ".join(str(cause).split())
        super().__init__(reason or type(cause).__name__)
        self.cause = cause


class _Stop:
    """What the fetching thread hands over when it cannot go on."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Collector(Generic[Label]):
    """Yield ``(futures[future], result)`` as the tasks finish, in the order they finish.

    With ``tick`` (seconds), also yield None whenever that long passes without a
    result, so that the caller can act on time (write what it holds) while it waits.

    ``result`` is the exception of a task that failed (``KilledWorker``, an error raised
    in the task, ...). A background thread fetches each result the moment its task
    finishes and then releases the task, so the cluster forgets it while the caller is
    still writing earlier results. Without that, results would wait on the workers
    whenever the caller is slower than the workers (a busy or slow file system), and a
    worker retiring at its ``--lifetime`` would first have to move them elsewhere: when
    it cannot (all other workers retiring too) it leaves anyway, its results are
    computed again and the tasks it was running count as killed by a failing worker
    (``distributed.scheduler.allowed-failures``), as if it had crashed.

    Parameters
    ----------
    futures : mapping of Future to any
        Every submitted task, and what the caller calls it (e.g. its chunk of work).
    client : distributed.Client
        The client the tasks were submitted with (it need not be the default client).
    tick : float or None
        Seconds without a result after which None is yielded; None: never.

    Raises
    ------
    ClientLost
        The client stopped running while a result was fetched (its scheduler lost).
    Exception
        What else stopped the fetching thread.
    """

    def __init__(
        self, futures: Mapping[Future, Label], client: Client, tick: float | None = None
    ) -> None:
        self.futures, self.client, self.tick = futures, client, tick
        self.fetched: queue.Queue = queue.Queue()
        self.remaining = len(futures)
        self.taken: set[Future] = set()  # the futures whose results the thread fetched
        # Held while the thread fetches a result; close() takes it so that no fetch is
        # under way when the caller closes the client.
        self.fetching = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._fetch, name="ldpsim-collect", daemon=True)
        self.thread.start()

    def _fetch(self) -> None:
        futures, client = self.futures, self.client
        try:
            for future in as_completed(list(futures), loop=client.loop):
                with self.fetching:
                    if self.closed:
                        return
                    try:
                        result = future.result()
                    except Exception as exc:  # the task failed: the caller records it
                        if client.status != "running":  # cancelled: the client stopped
                            raise ClientLost(exc) from exc
                        result = exc
                    self.fetched.put((futures[future], result))
                    self.taken.add(future)  # after the put: drain finds it queued
                    future.release()
        except BaseException as exc:  # e.g. the client closed under this thread
            if isinstance(exc, Exception) and not isinstance(exc, ClientLost):
                if client.status != "running":
                    exc = ClientLost(exc)
            self.fetched.put(_Stop(exc))

    def __iter__(self) -> Iterator[tuple[Label, Any] | None]:
        while self.remaining:
            if self.closed and self.fetched.empty():  # nothing will come: never wait
                raise RuntimeError("the collection was closed")
            try:
                item = self.fetched.get(timeout=self.tick)
            except queue.Empty:
                yield None
                continue
            if isinstance(item, _Stop):
                raise item.error
            self.remaining -= 1
            yield item

    def drain(self, grace: float = 0.0) -> list[tuple[Label, Any]]:
        """Stop fetching; the results fetched but not yet yielded (a run that stops
        writes them too).

        With ``grace`` (seconds), first waits up to that long for the thread to fetch
        the results of the tasks finished by now (a run stopped by a signal that came
        before it looked at the first results still keeps them). Then :meth:`close`.
        """
        deadline = time.monotonic() + grace
        finished = [f for f in list(self.futures) if f.status == "finished"]
        while (
            time.monotonic() < deadline
            and self.thread.is_alive()
            and not all(f in self.taken for f in finished)
        ):
            time.sleep(0.02)
        self.close()
        out = []
        while True:
            try:
                item = self.fetched.get_nowait()
            except queue.Empty:
                return out
            if not isinstance(item, _Stop):
                self.remaining -= 1
                out.append(item)

    def close(self, timeout: float = 10.0) -> None:
        """Fetch nothing more; return once no fetch is under way (at most ``timeout`` s).

        A run that stops calls this before its client closes. Closing the client
        releases the tasks and the workers drop their results, so a fetch still under
        way found them gone: distributed logged "Couldn't gather 1 keys, rescheduling"
        after the run's one line about the signal.
        """
        if self.closed:  # a fetch it waited for in vain is not waited for again
            return
        self.closed = True
        if self.fetching.acquire(timeout=timeout):
            self.fetching.release()


def collect(
    futures: Mapping[Future, Label], client: Client, tick: float | None = None
) -> Collector[Label]:
    """The :class:`Collector` of ``futures``: iterate over it for the results as they come."""
    return Collector(futures, client, tick)
