"""Imported by the workers' forkserver first of its preloads: Ctrl-C is the driver's.

The forkserver runs in the driver's process group, so Ctrl-C in a terminal reaches it
too. Python's forkserver ignores SIGINT only once its preloads are imported (distributed,
numba and ldpsim's task modules: seconds), and a Ctrl-C before that stopped the import
under way and printed its KeyboardInterrupt traceback (10 to 40 lines) above the run's
one line. :func:`ldpsim.pipeline.compute.worker_start.start_server_early` starts the
server with SIGINT blocked (a blocked signal stays blocked across fork and exec), so
that none reaches it before this module runs; here SIGINT is ignored (a SIGINT that came
meanwhile is dropped with it) and unblocked. The last preload
(:mod:`.forkserver_preload`) puts Python's own handler back
(:func:`restore_interrupts`), so that the processes the server forks start with it, as
they did before (the workers then ignore SIGINT themselves, :mod:`.worker_setup`; any
other process a program forks from the same server keeps Ctrl-C).

Only in the forkserver, while it imports its preloads: imported anywhere else (a docs
build, a module walker), this module changes nothing.
"""

from __future__ import annotations

import inspect
import signal
import sys


def in_forkserver_preload() -> bool:
    """Whether this process is multiprocessing's forkserver importing its preloads (its
    ``main`` is on the stack)."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    code = getattr(getattr(forkserver, "main", None), "__code__", None)
    return code is not None and any(info.frame.f_code is code for info in inspect.stack(0))


def restore_interrupts() -> None:
    """In the forkserver's preloads: Python's own SIGINT handler back (the last preload
    calls it; the server then ignores SIGINT itself, and its children start with this)."""
    if in_forkserver_preload():
        signal.signal(signal.SIGINT, signal.default_int_handler)


if in_forkserver_preload():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
