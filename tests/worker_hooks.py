"""A Dask worker plugin for the tests: it logs computed replicates and injects faults."""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

from distributed import WorkerPlugin

#: Exit status of a worker killed by an ``exit`` fault (as an out-of-memory kill would).
FAULT_EXIT_STATUS = 70


class InjectedFault(RuntimeError):
    """Raised for a replicate listed under ``raise`` in the fault file."""


class ComputeLogAndFaults(WorkerPlugin):
    """Wrap the chunk function of ``ldpsim.pipeline.compute.worker`` and the chains of
    ``ldpsim.tasks.chunk``.

    Registered on a cluster (``client.register_plugin``), it is set up on every worker,
    also on one that a nanny restarts after a kill, and so it is seen by a run from any
    client, an ``ldpsim run --scheduler`` subprocess included. When a chunk's chains
    run, it appends ``"CHUNK_KEY REP"`` for each of its replicates to ``compute_log``
    (tests count computations), and when a client has fetched a task's result (the
    worker releases it) the task's key to :func:`fetched_log`; it reads ``faults``, a JSON file
    ``{"raise": [[KEY_SUBSTRING, REP], ...], "exit": [...]}`` (absent: no fault): a
    listed replicate of a chunk whose key contains the substring fails with
    :class:`InjectedFault` as if its chain had raised it (``raise``: that replicate
    alone), or kills its worker process (``exit``). No input of a real sweep fails only
    at run time on every platform, so the tests of failure handling (recorded errors,
    KilledWorker) need this.

    Parameters
    ----------
    compute_log, faults : path
        Files on a file system that the workers share with the tests.
    """

    name = "ldpsim-test-hooks"

    def __init__(self, compute_log: Path, faults: Path) -> None:
        self.compute_log = str(compute_log)
        self.faults = str(faults)

    def setup(self, worker) -> None:
        import ldpsim.pipeline.compute.worker as module
        import ldpsim.tasks.chunk as chunk_module

        self.modules = module, chunk_module
        self.originals = module.run_chunk, chunk_module.run_chains
        run_chunk_original, run_chains_original = self.originals
        compute_log, faults = self.compute_log, self.faults
        current = {"key": ""}  # the chunk being computed (a task runs several)

        def run_chunk(spec, reps, methods, d, key, *more):
            current["key"] = key
            return run_chunk_original(spec, reps, methods, d, key, *more)

        def run_chains(setup, reps):
            key = current["key"]
            with open(compute_log, "a") as f:
                f.writelines(f"{key} {rep}\n" for rep in reps)
            outputs, errors = run_chains_original(setup, reps)
            for i, rep in enumerate(reps):
                try:
                    inject_fault(faults, key, rep)
                except InjectedFault as exc:
                    errors[i] = (exc, traceback.format_exc())
            return outputs, errors

        module.run_chunk, chunk_module.run_chains = run_chunk, run_chains

    def transition(self, key, start: str, finish: str, **kwargs) -> None:
        # A result released from the worker's memory: its client fetched it (a run's
        # collector fetches a result, then releases it).
        if start == "memory" and finish == "released":
            with open(fetched_log(self.compute_log), "a") as f:
                f.write(f"{key}\n")

    def teardown(self, worker) -> None:
        module, chunk_module = self.modules
        module.run_chunk, chunk_module.run_chains = self.originals


def fetched_log(compute_log: str | Path) -> Path:
    """The file of the task keys whose results the run's client fetched, beside
    ``compute_log``: a key is written once its worker releases the result."""
    return Path(f"{compute_log}.fetched")


def inject_fault(faults: str, key: str, rep: int) -> None:
    """Raise or exit if the fault file lists replicate ``rep`` of task ``key``."""
    if not os.path.exists(faults):
        return
    with open(faults) as f:
        listed = json.load(f)
    for action in ("raise", "exit"):
        for substring, fault_rep in listed.get(action, []):
            if substring in key and int(fault_rep) == rep:
                if action == "exit":
                    os._exit(FAULT_EXIT_STATUS)  # the worker process dies at once
                raise InjectedFault(f"fault injected for tests: {key} rep {rep}")


def dask_setup(worker) -> None:
    """Set the hooks up on a worker as its preload (``--preload tests/worker_hooks.py``).

    For a cluster that a run starts itself (``ldpsim run --workers 1``), where no test
    client can register the plugin: the files are named by ``LDPSIM_TEST_COMPUTE_LOG``
    and ``LDPSIM_TEST_FAULTS`` in the run's environment, which its workers inherit.
    """
    plugin = ComputeLogAndFaults(
        Path(os.environ["LDPSIM_TEST_COMPUTE_LOG"]), Path(os.environ["LDPSIM_TEST_FAULTS"])
    )
    plugin.setup(worker)
    worker.plugins[plugin.name] = plugin  # its transitions seen, as a registered plugin's
