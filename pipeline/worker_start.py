"""How a local cluster's worker processes start: forked from one process that imported
ldpsim's worker modules once.

Dask starts a local worker with Python's 'spawn' method by default: a new interpreter that
imports distributed, numpy, numba and ldpsim's task modules before it can take a task,
about 1.5 CPU-seconds each. Sixteen workers import side by side, and the machine's cores
and disk are shared by all of them: on the 2-core development machine (under a load of
about 4), 16 workers took 7.4-14.1 s until each had run a first task, 18.4 CPU-seconds.
With the 'forkserver' method, one server process imports those modules once and forks
every worker from itself: the same 16 workers took 2.0-2.9 s (benchmarks/scaling.py
measures ``first_task_s`` on the machine at hand).

:func:`forked_workers` switches a local cluster's start to the forkserver, where the
platform has one and Dask's ``distributed.worker.multiprocessing-method`` is at its
default ('spawn'; a user's other choice is kept). The local cluster's option
``worker_start: spawn`` (``--cluster-option worker_start=spawn``) keeps Dask's start.
The server is started once per driver process, by its first cluster, and serves later
ones. Its workers therefore see the environment of that moment: numba reads its
``NUMBA_*`` variables as the server imports it, and :func:`worker_environment` passes the
``LDPSIM_*`` variables of each cluster's start to its workers. A worker a nanny restarts
later is spawned, as before.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterator

#: Dask's configuration key for the start method of its worker processes.
START_METHOD_KEY = "distributed.worker.multiprocessing-method"
#: The modules the forkserver imports before it forks a worker: distributed's (it
#: preloads distributed itself) and what a task of ldpsim imports (numpy, numba, the
#: kernels' modules).
WORKER_MODULES = (
    "distributed",
    "ldpsim.pipeline.worker",
    "ldpsim.pipeline.worker_setup",
    "ldpsim.pipeline.added_methods",
)
#: Prefix of the environment variables passed to each cluster's workers as they start.
PASSED_PREFIX = "LDPSIM_"
#: The local cluster's option (cluster/local.yaml, ``--cluster-option``) that chooses how
#: its workers start, and its values: the forkserver (default) or Dask's own method.
WORKER_START_OPTION = "worker_start"
WORKER_STARTS = ("forkserver", "spawn")


@contextlib.contextmanager
def forked_workers(wanted: bool = True) -> Iterator[bool]:
    """Within the block, Dask starts worker processes from a forkserver that imported
    :data:`WORKER_MODULES`; yields whether it does (False: not ``wanted``, or Dask's
    start method is kept).
    """
    import dask

    method = dask.config.get(START_METHOD_KEY, "spawn")
    if (
        not wanted
        or method != "spawn"
        or "forkserver" not in multiprocessing.get_all_start_methods()
    ):
        yield False
        return
    with dask.config.set({START_METHOD_KEY: "forkserver"}):
        from distributed.utils import get_mp_context

        # distributed sets its own preload list at its first forkserver context; ours
        # replaces it, before the server starts (later calls leave a running one as is).
        get_mp_context().set_forkserver_preload(list(WORKER_MODULES))
        yield True


def worker_environment() -> dict[str, str]:
    """The driver's ``LDPSIM_*`` environment variables now: a forked worker gets them
    set as it starts (distributed's ``env`` of a nanny), not the server's older ones."""
    return {key: value for key, value in os.environ.items() if key.startswith(PASSED_PREFIX)}
