"""Where results come from: the software, the machine and every run that wrote to a store."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import socket
import subprocess
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psutil

from ldpsim.pipeline.store.layout import META_GROUP

#: Packages whose versions a report and a run record name.
PACKAGES = (
    "ldpsim",
    "numpy",
    "scipy",
    "numba",
    "dask",
    "distributed",
    "xarray",
    "zarr",
    "matplotlib",
    "jinja2",
)
#: Inside the store's META_GROUP: one JSON file per run that wrote to the store.
RUNS_FOLDER = "runs"
#: The name of a run record, ``YYYYMMDDTHHMMSS-PID.json`` as :func:`record_run` writes
#: it (digits, ``T`` and ``-``). Anything else in the folder is none: a sync tool's copy
#: of a record (``NAME (conflicted copy 2026-12-02).json``, ``NAME-HOST.json``,
#: ``NAME.sync-conflict-....json``), macOS's ``._NAME.json``, an editor's swap file.
RUN_RECORD = re.compile(r"[0-9T-]+\.json")


def package_versions() -> dict[str, str]:
    """Python's version and those of :data:`PACKAGES` ('not installed' where missing)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def source_commit() -> str | None:
    """The git commit of the checkout ldpsim runs from, '+ changes' if it has any.

    None where ldpsim is not installed from a git checkout (a wheel), or git is missing.
    """
    source = Path(__file__).resolve().parents[2]  # the folder holding pipeline/
    if not (source / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head} + uncommitted changes" if dirty else head


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """Host name, operating system, CPU model and logical cores of this machine."""
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
    }


def environment() -> dict[str, Any]:
    """ldpsim's version and commit, the library versions and the machine, now."""
    return {
        "versions": package_versions(),
        "commit": source_commit(),
        **machine(),
    }


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(seconds))


def record_run(
    store: str | Path,
    *,
    wall_seconds: float,
    computed: int,
    failed: int,
    cluster: str,
    command: list[str] | None = None,
    code_changes: list[dict[str, Any]] | None = None,
    warm_up_seconds: float | None = None,
    methods_computed: int = 0,
    ended: str = "finished",
) -> Path | None:
    """Record a run that wrote to ``store``: its dates, wall time, cluster and software.

    One JSON file per run in the store's ``ldpsim/runs/`` folder, written atomically
    (a temporary file renamed into place), so that runs never overwrite each other's
    records. A store that cannot be written keeps its results; the record is then
    skipped (None is returned), since it only describes them.

    Parameters
    ----------
    store : path
        The store the run wrote to.
    wall_seconds : float
        The run's wall time in seconds, >= 0; it ended now.
    computed, failed : int
        Replicates the run computed and that failed.
    cluster : str
        Where it ran: a cluster kind (``local``, ``slurm``, ``pbs``) or a scheduler address.
    command : list of str, optional
        The command line.
    code_changes : list of dict, optional
        The unit changes the run accepted (``--accept-code-change``): ``unit``, the
        ``old`` and ``new`` origin and ``code_version``, the generation of the store's
        ``units`` its replicates got (:mod:`ldpsim.pipeline.store.code_identity`).
    warm_up_seconds : float, optional
        The workers' seconds, >= 0, spent setting up grid points and on the methods'
        first calls (compiling or loading kernels), counted in no replicate's time
        (:mod:`ldpsim.tasks.warm_up`).
    methods_computed : int, default 0
        Finished replicates for which the run computed the intervals of methods added
        to the store (:mod:`ldpsim.pipeline.compute.added_methods`), >= 0.
    ended : str, default "finished"
        How the run ended: ``"finished"`` (its work done, or stopped by
        ``--max-failures``), ``"interrupted (SIGINT)"`` (a signal; what it wrote is
        kept) or ``"stopped (scheduler lost)"`` / ``"stopped (lock lost)"`` /
        ``"stopped (disk full)"`` (:class:`ldpsim.pipeline.errors.RunStopped`).

    Returns
    -------
    pathlib.Path or None
        The record's file, None where it could not be written.
    """
    end = time.time()
    record = {
        "started": _timestamp(end - wall_seconds),
        "finished": _timestamp(end),
        "wall_seconds": round(float(wall_seconds), 3),
        "computed": int(computed),
        "failed": int(failed),
        "methods_computed": int(methods_computed),
        "ended": ended,
        "cluster": cluster,
        "command": command,
        **environment(),
    }
    if warm_up_seconds is not None:
        record["warm_up_seconds"] = round(float(warm_up_seconds), 3)
    if code_changes:
        record["code_changes"] = code_changes
    folder = Path(store) / META_GROUP / RUNS_FOLDER
    target = folder / f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(end))}-{os.getpid()}.json"
    # The host in the temporary name: another host's record being written is not ours
    # to judge by its pid (_remove_abandoned_records).
    temporary = target.with_name(f"{target.stem}@{socket.gethostname()}.json.partial")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_records(folder)
        temporary.write_text(json.dumps(record, indent=1, sort_keys=True))
        temporary.replace(target)
    except OSError:
        # The temporary file's removal fails the same way on such a store (a read-only
        # mount, a path through a file): nothing is left to remove then.
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        return None
    return target


def _remove_abandoned_records(folder: Path) -> None:
    """Delete the ``TIME-PID@HOST.json.partial`` records that runs of this host were
    killed while writing (their process is gone); a record being written by a live run,
    or by a run of another host, is kept."""
    for partial in folder.glob("*.json.partial"):
        stem, _, host = partial.name.removesuffix(".json.partial").partition("@")
        pid = stem.rsplit("-", 1)[-1]
        if host == socket.gethostname() and not (pid.isdigit() and psutil.pid_exists(int(pid))):
            partial.unlink(missing_ok=True)


def read_runs(store: str | Path) -> list[dict[str, Any]]:
    """The run records of a store, oldest first, checked; [] for a store older than them.

    Only files named as records (:data:`RUN_RECORD`) are read; one that cannot be read
    as a JSON object is listed as ``{"unreadable": name}``.
    A field of :data:`RUN_FIELDS` whose value is not of its type (a hand edit, a tool
    that rewrote the file) is left out of the record and named in its ``unknown``
    list, so that a reader shows it as unknown instead of failing on it
    (:func:`checked_run`).
    """
    folder = Path(store) / META_GROUP / RUNS_FOLDER
    if not folder.is_dir():
        return []
    out = []
    for file in sorted(f for f in folder.glob("*.json") if RUN_RECORD.fullmatch(f.name)):
        try:
            record = json.loads(file.read_text())
        except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep
            record = None
        out.append(checked_run(record) if isinstance(record, dict) else {"unreadable": file.name})
    return out


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: object) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int beyond the floats
        return False


def _is_optional_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_command(value: object) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _is_versions(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


#: The fields of a run record (:func:`record_run`) that a report reads, each with the
#: test of its type.
RUN_FIELDS: dict[str, Callable[[object], bool]] = {
    "started": _is_text,
    "finished": _is_text,
    "wall_seconds": _is_seconds,
    "warm_up_seconds": _is_seconds,
    "computed": _is_count,
    "failed": _is_count,
    "methods_computed": _is_count,
    "ended": _is_text,
    "cluster": _is_text,
    "command": _is_command,
    "host": _is_text,
    "os": _is_text,
    "cpu": _is_text,
    "cores": _is_count,
    "commit": _is_optional_text,
    "versions": _is_versions,
}


def checked_run(record: dict[str, Any]) -> dict[str, Any]:
    """A run record with each field of :data:`RUN_FIELDS` of its type.

    A field whose value is not (``wall_seconds: null``, a string of seconds, a command
    that is not a list of strings) is left out, and ``unknown`` lists their names
    (sorted; empty for a sound record). Other fields are kept as they are.

    Examples
    --------
    >>> checked_run({"wall_seconds": None, "computed": 3, "cluster": "local"})
    {'computed': 3, 'cluster': 'local', 'unknown': ['wall_seconds']}
    """
    bad = sorted(
        name for name, fits in RUN_FIELDS.items() if name in record and not fits(record[name])
    )
    out = {name: value for name, value in record.items() if name not in bad}
    out["unknown"] = bad
    return out
