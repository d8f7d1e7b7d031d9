"""Compiled code made one process at a time: the cache folder and its locks.

numba compiles a function at its first call in each process, or loads the machine code
that an earlier process saved (``cache=True``). Processes that reach the same function
together before any has saved it, as a cluster's workers do on their first chunk with a
new ldpsim or a new kernel, would each compile it side by side: one compile's CPU time
per process instead of one in all. :func:`compile_signature` compiles under an advisory
lock, so that the others wait for the machine code and load it; :func:`in_turn` does
the same at the first call, from Python, of one of the package's compiled functions.

Where the lock file cannot be made or locked (an unwritable cache folder, some network
file systems), or on a system without ``fcntl``, processes compile without waiting, as
numba alone does. A lock goes with its process: one killed while compiling holds no one
up; one stopped or stuck holds others up for at most :data:`LOCK_WAIT_S`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; processes then compile side by side
    fcntl = None  # type: ignore[assignment]

import numba

#: Environment variable that names the cache folder (default: see :func:`cache_folder`).
CACHE_DIR_VARIABLE = "LDPSIM_CACHE_DIR"
#: The subfolder of the cache folder that holds the locks of the package's own compiled
#: functions (a generated kernel's lock lies beside its module).
LOCK_SUBFOLDER = "locks"
#: The package whose modules' locks go into :data:`LOCK_SUBFOLDER`.
PACKAGE = "ldpsim."
#: Seconds a process waits for a lock before it compiles without it: longer than any
#: compile (2 to 10 s a kernel, up to a minute on a loaded machine).
LOCK_WAIT_S = 120.0


def cache_folder() -> Path:
    """The folder of ldpsim's compiled kernels and their locks.

    ``$LDPSIM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/ldpsim``, else
    ``~/.cache/ldpsim``. Nothing is created here; a folder that cannot be created or
    written makes :func:`ldpsim.tasks.kernel.cache.compile_template` compile in memory.

    Raises
    ------
    OSError
        Where the folder is under a home folder that cannot be found: ``HOME`` unset and
        the user without an entry in the password database (a container run under an
        arbitrary user id). Its callers then compile in memory, as for a folder that
        cannot be written.
    """
    try:
        chosen = os.environ.get(CACHE_DIR_VARIABLE)
        if chosen:
            return Path(chosen).expanduser()
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    except RuntimeError:  # pathlib's "Could not determine home directory."
        raise OSError(
            "no home folder: HOME is unset and the user has no home folder in the password "
            "database"
        ) from None
    return base / "ldpsim"


def compile_signature(dispatcher: Any, signature: object) -> None:
    """Compile ``dispatcher`` for ``signature``, one process at a time per module.

    A process that finds another compiling in the same module waits for it and then
    loads the machine code the other saved, instead of compiling it as well. The lock is
    a file beside a generated kernel's module
    (:func:`ldpsim.tasks.kernel.cache.compile_template`), or
    ``locks/<module>@<host>.lock`` in :func:`cache_folder` for a module of the package
    (:func:`package_lock`). A dispatcher compiled in memory compiles without waiting.

    Parameters
    ----------
    dispatcher : numba dispatcher
    signature : tuple of numba types, or a signature numba accepts
    """
    with _module_lock(dispatcher):
        dispatcher.compile(signature)


def in_turn(dispatcher: Any) -> Any:
    """``dispatcher`` (a ``cache=True`` function of the package, or a generated loop of
    :func:`ldpsim.tasks.kernel.cache.compile_template`) ready to be called from Python,
    its first call in this process compiling in turn with other processes.

    The first call reads its arguments' types with ``numba.typeof`` (as numba's own
    call does) and compiles them by :func:`compile_signature` before it runs. Two
    processes that make their first call of a chunk's functions at once on an empty
    cache (bb, bm, sn and the oracle: 6 to 10 CPU-seconds of compiling) then spend that
    once, not twice. Once it has been called so in this process, this returns the
    dispatcher itself: a later call, or a call with other types, goes straight to numba.

    Parameters
    ----------
    dispatcher : numba dispatcher

    Returns
    -------
    callable
        Called with the dispatcher's arguments.
    """
    if dispatcher in _called:
        return dispatcher
    return functools.partial(_first_call, dispatcher)


#: The dispatchers :func:`in_turn` has called in this process (a set's lookup: 0.05 us
#: a call, where numba's ``signatures`` took 2 us, as much as seeding a stream).
_called: set[Any] = set()


def _first_call(dispatcher: Any, *args: object) -> Any:
    compile_signature(dispatcher, tuple(numba.typeof(arg) for arg in args))
    _called.add(dispatcher)
    return dispatcher(*args)


@contextlib.contextmanager
def package_lock(name: str = "ldpsim") -> Iterator[None]:
    """Hold the lock ``locks/<name>@<host>.lock`` of :func:`cache_folder` (exclusive,
    across the processes of this host) for the block; without it where it cannot be
    made or locked, or after :data:`LOCK_WAIT_S`.

    The default is the lock under which ldpsim's own interval methods make their first
    calls in a process (:func:`ldpsim.tasks.chunk.compute_rows`): the functions they
    reach compile once for processes that start together. Per host: numba saves the
    package's machine code per CPU model (in the cache folder's ``package/<key>``,
    :mod:`ldpsim.tasks.compiled`), which other nodes may not share, so the workers of other
    nodes, which a cache folder in a shared home would otherwise make wait, compile
    their own beside them.
    """
    try:
        path = cache_folder() / LOCK_SUBFOLDER / f"{name}@{socket.gethostname()}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield
        return
    with _file_lock(path):
        yield


@contextlib.contextmanager
def _module_lock(dispatcher: Any) -> Iterator[None]:
    module = sys.modules.get(getattr(dispatcher.py_func, "__module__", ""))
    path = getattr(module, "__file__", None)
    if path is None:  # compiled in memory
        yield
    elif module.__name__.startswith(PACKAGE):  # never a lock file beside the package's
        with package_lock(module.__name__):
            yield
    else:
        with _file_lock(Path(f"{path}.lock")):
            yield


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    try:
        handle = open(path, "a")
    except OSError:
        yield
        return
    with handle:
        locked = _wait_for(handle)
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _wait_for(handle: Any) -> bool:
    """Lock ``handle``'s file, waiting at most :data:`LOCK_WAIT_S`; whether it is locked.

    A holder that is stopped (a suspended job) or stuck would otherwise hold everyone up:
    past the wait, the process compiles beside it, as it would without the lock. A file
    system without locks (some network file systems) locks nothing.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    pause = 0.001
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:  # held by another process (or thread)
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        except OSError:
            return False
