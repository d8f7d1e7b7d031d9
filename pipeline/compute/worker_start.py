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

:func:`forked_workers` switches a local cluster's start to the forkserver on Linux, where
Dask's ``distributed.worker.multiprocessing-method`` is at its default ('spawn'; a user's
other choice is kept; other platforms keep 'spawn'). The option ``worker_start: spawn``
(``--cluster-option worker_start=spawn``) keeps Dask's start. Both local clusters fork:
``local`` and ``local-gpu``. On a GPU machine (one H200 and 15 CPU workers, 2026-11-30)
the forked workers' first chunks of interval methods took 1.0-1.5 s instead of 3.6-5.5 s
when spawned (docs/performance.md, with its caveat: an install there without bytecode;
``ldpsim run scale --backend gpu --cluster local-gpu`` took 16.2 s end to end forked,
15.4-23.8 s spawned, one run against three). The server imports no CUDA module, so a GPU
worker initializes CUDA after its fork, with its own ``CUDA_VISIBLE_DEVICES`` (which its
nanny sets in the forked process).

The server is started once per driver process, by its first cluster, and serves later
ones: its workers have the code and the environment of that moment. A later cluster
forks from it only while neither changed (:func:`start_fingerprint`: the environment
variables that matter, but those Dask's nanny sets itself, ``sys.path`` and the size
and modification time of ldpsim's source files); a
notebook that edited ldpsim or changed a variable gets spawned workers, which import the
code as it is now. A worker a nanny restarts is spawned too.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Dask's configuration key for the start method of its worker processes.
START_METHOD_KEY = "distributed.worker.multiprocessing-method"
#: The modules the forkserver imports before it forks a worker: distributed's (it
#: preloads distributed itself), what a task of ldpsim imports (numpy, numba, the
#: kernels' modules) and numba's compiler set up (:mod:`.forkserver_preload`).
WORKER_MODULES = (
    "ldpsim.pipeline.compute.forkserver_signals",  # first: Ctrl-C ignored (its docstring)
    "distributed",
    "ldpsim.pipeline.compute.worker",
    "ldpsim.pipeline.compute.worker_setup",
    "ldpsim.pipeline.compute.added_methods",
    "ldpsim.pipeline.compute.forkserver_preload",  # last: numba set up (its docstring)
)
#: The local cluster's option (cluster/local.yaml, ``--cluster-option``) that chooses how
#: its workers start, and its values: the forkserver (default) or Dask's own method.
WORKER_START_OPTION = "worker_start"
WORKER_STARTS = ("forkserver", "spawn")


def forks(options: Mapping[str, Any]) -> bool:
    """Whether a local cluster of these options starts its workers from the forkserver:
    its :data:`WORKER_START_OPTION` is 'forkserver' or not given (the default)."""
    return (options.get(WORKER_START_OPTION) or "forkserver") == "forkserver"


#: The packages whose source files :func:`start_fingerprint` covers (ldpsim's).
SOURCE_PACKAGES = ("ldpsim.pipeline", "ldpsim.tasks")
#: The environment variables :func:`start_fingerprint` covers, by prefix: those that
#: change what a worker computes or where it caches (pytest's per-test variable, for
#: one, does not).
ENVIRONMENT_PREFIXES = (
    "LDPSIM_",
    "NUMBA_",
    "PYTHON",
    "XDG_",
    "HOME",
    "TMPDIR",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "CUDA_",
    "DASK_",
)

#: Variables that Dask's nanny sets in the driver's environment when it starts its
#: first worker, and in every worker's, forked or spawned, whatever the driver had:
#: ``distributed.nanny.pre-spawn-environ`` (its defaults) and ``PYTHONHASHSEED``.
#: :func:`start_fingerprint` leaves them out, so that a driver's later clusters fork
#: from the server its first one started (they changed the driver's environment, not
#: what a worker gets).
NANNY_VARIABLES = frozenset(
    {
        "MALLOC_TRIM_THRESHOLD_",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "PYTHONHASHSEED",
    }
)

#: The fingerprint of the driver when it started the forkserver (None: not started).
_server_fingerprint: str | None = None


def start_fingerprint() -> str:
    """A hash of what a forked worker inherits from the moment its server started: the
    environment variables of :data:`ENVIRONMENT_PREFIXES` but :data:`NANNY_VARIABLES`,
    ``sys.path``, and the size and modification time of every source file of
    :data:`SOURCE_PACKAGES`."""
    import hashlib
    import importlib

    digest = hashlib.sha256()
    variables = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(ENVIRONMENT_PREFIXES) and k not in NANNY_VARIABLES
    }
    digest.update(repr(sorted(variables.items())).encode())
    digest.update(repr(sys.path).encode())
    for name in SOURCE_PACKAGES:
        folder = Path(importlib.import_module(name).__file__ or "").parent
        for path in sorted(folder.rglob("*.py")):
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def usable_server(wanted: bool = True) -> str | None:
    """The :func:`start_fingerprint` under which workers fork from the forkserver, or None
    where they are spawned: not ``wanted``, off Linux, Dask set to a method other than
    'spawn', or the driver's code or environment changed since its server started."""
    import dask

    method = dask.config.get(START_METHOD_KEY, "spawn")
    if not wanted or method != "spawn" or not sys.platform.startswith("linux"):
        return None
    fingerprint = start_fingerprint()
    if _server_fingerprint is not None and fingerprint != _server_fingerprint:
        return None  # the server's workers would run older code or another environment
    return fingerprint


@contextlib.contextmanager
def forked_workers(wanted: bool = True) -> Iterator[bool]:
    """Within the block, Dask starts worker processes from a forkserver that imported
    :data:`WORKER_MODULES`; yields whether it does (:func:`usable_server`).
    """
    global _server_fingerprint
    fingerprint = usable_server(wanted)
    if fingerprint is None:
        yield False
        return
    import dask

    # distributed's configuration first: leaving dask.config.set removes the keys of a
    # section that it created.
    from distributed.utils import get_mp_context

    with dask.config.set({START_METHOD_KEY: "forkserver"}):
        # distributed sets its own preload list at its first forkserver context; ours
        # replaces it before the server starts (the first cluster's first worker). To
        # make its list, distributed imports every package it knows in this process:
        # pandas, which the driver never uses (0.24-0.27 of its CPU-seconds on a slow
        # day of the 2-core machine).
        with imports_refused(DRIVER_UNUSED):
            context = get_mp_context()
        context.set_forkserver_preload(list(WORKER_MODULES))
        _server_fingerprint = fingerprint
        yield True


#: Packages that distributed's first forkserver context imports, which no driver uses.
DRIVER_UNUSED = ("pandas",)


@contextlib.contextmanager
def imports_refused(names: tuple[str, ...]) -> Iterator[None]:
    """Within the block, importing one of ``names`` that is not imported yet raises
    ImportError (a None in ``sys.modules``, Python's documented way); after it, they
    import as usual. For a short call that imports a package only if it can: the
    refusal is the whole process's, so another thread that imports one of ``names``
    meanwhile fails too (a driver's other threads import nothing then)."""
    refused = [name for name in names if name not in sys.modules]
    for name in refused:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in refused:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def start_server_early(wanted: bool = True) -> bool:
    """Start the forkserver now, so that it imports :data:`WORKER_MODULES` on another
    core while the driver imports its own modules and checks the run; the first local
    cluster then forks its workers from a server that is ready (about 2 s sooner on a
    2-core machine). Returns whether a server runs (:func:`usable_server`).

    ``ldpsim run`` calls it before it reads the sweep, for a store that does not exist
    yet on a local cluster whose workers fork; a run with nothing to do starts none. The
    driver stops the server when it exits (:func:`stop_server`): a refused run would
    otherwise leave it importing for seconds more, on a core of its own and holding the
    run's stdout and stderr open, so that a pipe reading them waited for it.
    Imports neither distributed nor ldpsim's tasks here: the server's own multiprocessing
    context is distributed's (one per start method).
    """
    global _server_fingerprint
    import atexit
    import multiprocessing
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker
    import signal

    fingerprint = usable_server(wanted)
    if fingerprint is None:
        return False
    multiprocessing.get_context("forkserver").set_forkserver_preload(list(WORKER_MODULES))
    # The server starts with SIGINT blocked, until its first preload ignores it
    # (forkserver_signals): a Ctrl-C while it imports printed the import's traceback.
    # The resource tracker first: its start unblocks SIGINT in this thread.
    multiprocessing.resource_tracker.ensure_running()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a Ctrl-C meanwhile comes now
    if _server_fingerprint is None:
        atexit.register(stop_server)
    _server_fingerprint = fingerprint
    return True


def server_processes() -> list:
    """This process's forkserver (a list of none or one ``psutil.Process``): its child
    whose command line runs ``multiprocessing.forkserver``."""
    import psutil

    found = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.forkserver" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # gone meanwhile
            pass
    return found


def stop_server() -> None:
    """Terminate this process's forkserver, whatever it is doing (importing
    :data:`WORKER_MODULES`, or waiting to fork). Workers forked from it before are not
    touched: their nannies own them."""
    import psutil

    for server in server_processes():
        try:
            server.terminate()
        except psutil.Error:  # gone meanwhile
            pass
