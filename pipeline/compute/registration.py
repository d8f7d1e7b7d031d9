"""Units registered at run time (a notebook's or a script's classes), shipped to the Dask
workers of a run with the sweep."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from distributed import WorkerPlugin

if TYPE_CHECKING:
    from distributed import Client

    from ldpsim.pipeline.sweep import Sweep
    from ldpsim.tasks.plugins import Plugin


class RegisteredUnits(WorkerPlugin):
    """A Dask worker plugin that registers units in every worker process.

    The scheduler keeps it while the run lasts (:func:`shipped_units`) and sets it up on
    every worker that joins meanwhile (one restarted by its nanny included). The classes
    travel pickled by value where they live in ``__main__`` (a notebook, a script), with
    the hash of their source as the client read it, which the workers register as it is
    (they may not be able to read the source) and which their check of each task
    compares (:func:`ldpsim.pipeline.store.code_identity.check_running_units`).

    Parameters
    ----------
    units : list of (type, str)
        The classes and their source hashes.
    """

    def __init__(self, units: list[tuple[type, str]]) -> None:
        self.units = units
        text = ";".join(f"{u.__module__}.{u.__qualname__}:{sha}" for u, sha in units)
        # One plugin per set of classes and versions: an edited class registered again
        # is set up after the old one, and wins on every worker, present or to come.
        self.name = f"ldpsim-registered-{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    def setup(self, worker: object) -> None:
        from ldpsim.tasks.plugins import register

        for unit, sha in self.units:
            register(unit, source_sha256=sha)  # the client's hash, not read again here


def used_registered(sweep: Sweep) -> list[Plugin]:
    """The units registered at run time that ``sweep`` uses."""
    from ldpsim.pipeline.store.code_identity import spec_units
    from ldpsim.tasks.plugins import registered

    classes = {cls for point in sweep.points() for cls in spec_units(point.normalized).values()}
    return [p for p in registered() if p.unit in classes]


def ship_registered(client: Client, sweep: Sweep) -> str | None:
    """Register the run-time units that ``sweep`` uses on ``client``'s workers (all of
    them, and those that join later), before any task is submitted.

    Returns
    -------
    str or None
        The name of the worker plugin registered (None: the sweep uses no such unit),
        which the run unregisters when it ends (:func:`shipped_units`).

    Raises
    ------
    InputError
        A unit cannot be pickled (e.g. it holds a lock or an open file, or lives in a
        module the workers cannot import).
    """
    from ldpsim.pipeline.errors import InputError

    units = used_registered(sweep)
    if not units:
        return None
    # register() refuses a unit without a hash: each has the one the client read.
    plugin = RegisteredUnits([(p.unit, str(p.source_sha256)) for p in units])
    try:
        client.register_plugin(plugin)
    except Exception as exc:  # pickling (cloudpickle's own error types) or the scheduler
        names = ", ".join(f"{p.kind} {p.name!r}" for p in units)
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise InputError(
            f"The units registered at run time ({names}) could not be sent to the Dask "
            f"workers ({reason}). Most often a unit uses a module of yours that the "
            "workers cannot import: install it on them, or call "
            "cloudpickle.register_pickle_by_value(module) before the run; else define "
            "the units at the top level of your notebook or script, or install them as "
            "a plugin package."
        ) from None
    return plugin.name


@contextlib.contextmanager
def shipped_units(client: Client, sweep: Sweep) -> Iterator[None]:
    """:func:`ship_registered` for the time of a run: the worker plugin is unregistered
    from the scheduler when the run ends, however it ends (the workers keep the units
    registered; a later run ships its own)."""
    name = ship_registered(client, sweep)
    try:
        yield
    finally:
        if name is not None:
            # A scheduler gone with the run's end has nothing left to unregister.
            with contextlib.suppress(Exception):
                client.unregister_worker_plugin(name)
