"""A Dask worker preload for the tests: every replicate's chain takes a fixed wall time.

Passed to a worker as ``--preload /path/to/paced_worker.py`` (Dask's own preload
mechanism: :func:`dask_setup` runs when the worker starts), it wraps
``ldpsim.tasks.chunk.run_chains`` so that a chunk's chains, once computed, sleep
:data:`SECONDS_PER_REPLICATE` for each of its replicates. The sleep holds no core and
releases the interpreter lock. A test of what happens when workers retire partway
through a run (the SLURM walltime test) then sizes its work in seconds, the same on a
fast idle machine and on a slow busy one, rather than in CPU time that the machine and
its load decide. The numbers computed are unchanged.
"""

from __future__ import annotations

import time

#: Wall time added to each replicate, in seconds.
SECONDS_PER_REPLICATE = 0.5


def dask_setup(worker) -> None:
    import ldpsim.tasks.chunk as chunk_module

    computed = chunk_module.run_chains

    def run_chains(setup, reps):
        result = computed(setup, reps)
        time.sleep(SECONDS_PER_REPLICATE * len(reps))
        return result

    chunk_module.run_chains = run_chains
