"""Task results off the cluster as soon as the tasks finish, however slow the store is."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from distributed import Client, Future, as_completed

Label = TypeVar("Label")


class _Stop:
    """What the fetching thread hands over when it cannot go on."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def collect(
    futures: Mapping[Future, Label], client: Client, tick: float | None = None
) -> Iterator[tuple[Label, Any] | None]:
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

    Raises
    ------
    Exception
        What stopped the fetching thread (e.g. the client was closed).
    """
    fetched: queue.Queue = queue.Queue()

    def fetch() -> None:
        try:
            for future in as_completed(list(futures), loop=client.loop):
                try:
                    result = future.result()
                except Exception as exc:  # the task failed: the caller records it
                    if client.status != "running":  # cancelled by closing the client
                        raise
                    result = exc
                fetched.put((futures[future], result))
                future.release()
        except BaseException as exc:  # e.g. the client closed under this thread
            fetched.put(_Stop(exc))

    threading.Thread(target=fetch, name="ldpsim-collect", daemon=True).start()
    remaining = len(futures)
    while remaining:
        try:
            item = fetched.get(timeout=tick)
        except queue.Empty:
            yield None
            continue
        if isinstance(item, _Stop):
            raise item.error
        remaining -= 1
        yield item
