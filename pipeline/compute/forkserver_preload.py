"""Imported by the workers' forkserver, last of its preloads: numba set up before any fork.

A worker's first chunk used to spend 0.5 to 1 s setting up numba's compiler (its target
context and the registries it imports) before it loaded the chunk's kernels from the
cache. The forkserver (:mod:`ldpsim.pipeline.compute.worker_start`) does that once, here,
by computing the streams fingerprint (:func:`ldpsim.tasks.streams.seeding.streams_fingerprint`:
the compiled samplers every sweep's data streams use); each worker it forks inherits the
set-up compiler, and its first chunk only loads its own kernels (about 0.25 s instead of
0.7 to 1 s, on the 2-core machine). With an empty kernel cache the samplers are compiled
here once, instead of in every worker.

The server runs this while the driver imports its own modules and checks the run
(:func:`ldpsim.pipeline.compute.worker_start.start_server_early`). Nothing here starts a
thread: numba's parallel threading layers are not used by ldpsim's kernels.
"""

from __future__ import annotations

from ldpsim.pipeline.compute.forkserver_signals import restore_interrupts
from ldpsim.tasks.streams.seeding import streams_fingerprint

#: The fingerprint the server computed (its value is not used: the call sets numba up).
SERVER_FINGERPRINT = streams_fingerprint()

# The last preload: Python's SIGINT handler back for what the server forks (the first
# preload ignored SIGINT while the others were imported).
restore_interrupts()
