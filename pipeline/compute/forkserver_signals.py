"""Imported by the workers' forkserver first of its preloads: Ctrl-C is the driver's.

The forkserver runs in the driver's process group, so Ctrl-C in a terminal reaches it
too. Python's forkserver ignores SIGINT only once its preloads are imported (distributed,
numba and ldpsim's task modules: seconds), and a Ctrl-C before that stopped the import
under way and printed its KeyboardInterrupt traceback (10 to 40 lines) above the run's
one line. :func:`ldpsim.pipeline.compute.worker_start.start_server_early` starts the
server with SIGINT blocked (a blocked signal stays blocked across fork and exec), so
that none reaches it before this module runs; here SIGINT is ignored (a SIGINT that came
meanwhile is dropped with it) and unblocked, so that the workers forked from the server
start with the signal mask the driver had. They ignore SIGINT themselves too
(:mod:`.worker_setup`): the driver stops them once it has written what finished.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
