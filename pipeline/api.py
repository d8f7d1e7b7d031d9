"""ldpsim's stable Python interface: load a sweep, run it, open, summarize and plot its store.

Everything a notebook needs is here, and nothing else is promised to stay::

    from distributed import Client, LocalCluster
    from ldpsim.pipeline.api import load_sweep, run, summarize, plot

    client = Client(LocalCluster(n_workers=2))
    ds = run(load_sweep("demo", replicates=20), "demo.zarr", client=client)
    summarize(ds)  # a tidy pandas DataFrame
    plot(ds, "coverage")  # a matplotlib Figure, shown inline

The ``ldpsim`` command line is a thin layer over these functions (:mod:`ldpsim.pipeline.cli`):
``ldpsim run`` is :func:`run`, ``ldpsim summarize`` formats :func:`summarize`'s Dataset,
``ldpsim plot`` saves :func:`plot`'s figures. Bad input, a store held by another run and a
damaged store raise :class:`InputError` with the message the command line prints; an
argument of a wrong type raises its subclass :class:`InputTypeError`, also a TypeError.
Heavy libraries (distributed, xarray, matplotlib, pandas) are imported by the functions
that use them, so importing this module is fast.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ldpsim.pipeline.errors import InputError

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr
    from distributed import Client
    from matplotlib.figure import Figure

    from ldpsim.pipeline.sweep import Sweep

__all__ = [
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "REPORT_ATTR",
    "InputError",
    "InputTypeError",
    "check_adapt",
    "check_seconds",
    "load_sweep",
    "open_store",
    "outcome",
    "plot",
    "run",
    "run_report",
    "summarize",
]

#: Exit codes of ``ldpsim run``, ``status`` and ``errors`` for a sweep's replicates; the
#: ``exit_code`` of :func:`run`'s report (see :func:`outcome`).
EXIT_OK = 0  # every replicate done; no replicate and no interval method failed
EXIT_FAILED = 1  # some replicate or interval method failed (recorded: `ldpsim errors`)
EXIT_INCOMPLETE = 3  # replicates not computed yet, none failed (`ldpsim run` resumes)
#: Exit code of ``status`` (and ``summarize``, ``plot``, ``report``, which refuse) for a
#: store whose finished replicates' data is missing or corrupt, or whose coordinates or
#: truths differ from its sweep's: ``run`` recomputes them. Damaged metadata too, in
#: every verb, ``run`` included (it cannot rebuild them).
EXIT_DAMAGED = 4
#: The report's ``status`` for each exit code of :func:`outcome`.
STATUS = {EXIT_OK: "complete", EXIT_FAILED: "failed", EXIT_INCOMPLETE: "incomplete"}
#: The key of :func:`run`'s report in the attributes of the Dataset it returns.
REPORT_ATTR = "run_report"
#: How :func:`summarize` shows the coordinates: a row each, or their means.
SummaryCoords = Literal["all", "mean"]


class InputTypeError(InputError, TypeError):
    """An argument of a wrong type: an :class:`InputError` (the command line's one line)
    that is also a TypeError, as scikit-learn's ``InvalidParameterError`` is both."""


def _shown(value: object) -> str:
    """A value as a message shows it: its repr on one line, or its type for a longer one."""
    text = repr(value)
    return text if len(text) <= 80 and "\n" not in text else f"a {type(value).__name__}"


def _optional_path(value: object, name: str, function: str) -> str | None:
    """A path argument (str or os.PathLike) as a str, or None.

    Raises
    ------
    InputTypeError
        Anything else.
    """
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise InputTypeError(
            f"The {name!r} parameter of {function} must be a path (str or os.PathLike) or "
            f"None. Got {_shown(value)}."
        )
    return os.fspath(value)


def _optional_count(value: object, name: str) -> int | None:
    """An int >= 1 argument of :func:`run`, or None.

    Raises
    ------
    InputTypeError
        Not an integer (bools are refused).
    InputError
        An integer below 1.
    """
    if value is None:
        return None
    message = f"The {name!r} parameter of run must be an int >= 1 or None. Got {_shown(value)}."
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(message)
    if value < 1:
        raise InputError(message)
    return int(value)


def _check_bool(value: object, name: str, function: str) -> bool:
    """A bool argument, refusing truthy stand-ins ("no" is true)."""
    if not isinstance(value, bool):
        raise InputTypeError(
            f"The {name!r} parameter of {function} must be True or False. Got {_shown(value)}."
        )
    return value


def check_adapt(value: object) -> tuple[int, int]:
    """Adaptive scaling bounds of a batch cluster, as ``--adapt MIN:MAX`` and :func:`run`
    take them.

    Parameters
    ----------
    value : object
        A pair (minimum, maximum) of ints with 0 <= minimum <= maximum and maximum >= 1.

    Returns
    -------
    tuple of (int, int)

    Raises
    ------
    InputTypeError
        Not a pair of ints.
    InputError
        Out of order, or a maximum of 0.
    """
    message = (
        "The 'adapt' parameter of run must be a pair (minimum, maximum) of job counts with "
        f"0 <= minimum <= maximum and maximum >= 1, or None. Got {_shown(value)}."
    )
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InputTypeError(message)
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in value):
        raise InputTypeError(message)
    if len(value) != 2 or not 0 <= value[0] <= value[1] or value[1] < 1:
        raise InputError(message)
    return int(value[0]), int(value[1])


def check_seconds(value: object, name: str) -> float:
    """A number of seconds for :func:`run`, as ``--start-timeout`` and ``--task-timeout``
    take them: the cluster files' check of ``start_timeout``
    (:func:`ldpsim.pipeline.clusters.check_start_timeout`).

    Parameters
    ----------
    value : object
        Seconds, in (0, inf] (inf: wait for ever).
    name : str
        The parameter of :func:`run`, for the message: ``start_timeout`` or
        ``task_timeout``.

    Returns
    -------
    float

    Raises
    ------
    InputError
        Not a number (bools are refused), or not positive.
    """
    from ldpsim.pipeline.clusters import check_start_timeout

    return check_start_timeout(value, f"{name!r} parameter of run")


def _check_target_se(value: object) -> float:
    """:func:`ldpsim.pipeline.summary.check_target_se` (``--target-se``'s check), its
    errors as InputError."""
    from ldpsim.pipeline.summary import check_target_se

    try:
        return check_target_se(value)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None


def outcome(*, replicates_failed: int, methods_failed: int, missing: int) -> int:
    """The exit code for a store's replicates (or a sweep's share of them).

    Parameters
    ----------
    replicates_failed : int
        Replicates that raised (>= 0).
    methods_failed : int
        (Replicate, interval method) pairs whose interval could not be computed (>= 0).
    missing : int
        Replicates neither done nor failed (>= 0).

    Returns
    -------
    int
        :data:`EXIT_FAILED` if anything failed, else :data:`EXIT_INCOMPLETE` if anything is
        missing, else :data:`EXIT_OK`.
    """
    if replicates_failed or methods_failed:
        return EXIT_FAILED
    if missing:
        return EXIT_INCOMPLETE
    return EXIT_OK


def load_sweep(
    name_or_path: str | os.PathLike[str],
    /,
    *,
    replicates: int | None = None,
    set: Sequence[str] = (),
    **overrides: Any,
) -> Sweep:
    """Load a built-in sweep or a sweep file, apply overrides and validate it.

    The same as ``ldpsim run NAME --set KEY=VALUE ... --replicates R``.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A built-in sweep's name (``ldpsim list``: ``demo``, ``paper-table1``, ...) or the
        path of a TOML sweep file.
    replicates : int or None, default None
        Replicates per grid point, in [1, 1e7], replacing the sweep's (``--replicates``).
    set : sequence of str, default ()
        Overrides exactly as the command line's ``--set`` takes them: ``"KEY=VALUE"``
        with a TOML value, e.g. ``["eps=2", "grid.n=[1e4, 1e5]"]``. Applied first.
    **overrides
        The same overrides with Python values, applied after ``set`` in the order given.
        A key is a spec key (``eps=2.0``), a top-level key (``seed=3``), or a dotted key,
        written with ``__`` in place of each dot (``grid__n=[1000, 10000]``,
        ``methods__bb__B=100``) or passed as ``**{"grid.n": [1000]}``.

    Returns
    -------
    Sweep
        The validated sweep, expanded and checked grid point by grid point (nothing is
        computed or written).

    Raises
    ------
    InputError
        An unknown name, a missing or unreadable file, a TOML syntax error, an unknown
        key or an invalid value; the message names the key and what is allowed. A
        ``name_or_path`` or ``set`` of a wrong type raises :class:`InputTypeError`.

    Examples
    --------
    >>> sweep = load_sweep("demo", replicates=20, grid__n=[1000, 10000])
    >>> sweep.replicates, sweep.grid["n"]
    (20, [1000, 10000])
    """
    from ldpsim.pipeline.sweep import load_sweep as load

    if not isinstance(name_or_path, str | os.PathLike):
        raise InputTypeError(
            "The 'name_or_path' parameter of load_sweep must be a built-in sweep's name or a "
            f"sweep file's path (str or os.PathLike). Got {_shown(name_or_path)}."
        )
    if isinstance(set, str):  # one string would be applied character by character
        set = [set]
    if not isinstance(set, Sequence) or not all(isinstance(item, str) for item in set):
        raise InputTypeError(
            "The 'set' parameter of load_sweep must be a list of 'KEY=VALUE' strings, as "
            f"--set takes them. Got {_shown(set)}."
        )
    items = [*set, *((key.replace("__", "."), value) for key, value in overrides.items())]
    return load(os.fspath(name_or_path), items, replicates)


def run(
    sweep: Sweep | str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    *,
    client: Client | None = None,
    workers: int | None = None,
    progress: bool | Literal["auto"] = True,
    scheduler: str | None = None,
    cluster: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    cluster_options: Mapping[str, Any] | None = None,
    start_timeout: float | None = None,
    allow_long: bool = False,
    max_failures: int | None = None,
    task_timeout: float | None = None,
) -> xr.Dataset:
    """Compute every replicate of a sweep that its store does not hold yet.

    ``ldpsim run``: the store is created, resumed or extended (more replicates, more grid
    values) and keeps every result it holds; a store of another specification is refused
    with the difference shown. The run holds the store's lock (a second run on the same
    store is refused while the first lives). Each replicate's numbers are fixed by the
    sweep, so they are bit-identical whatever the cluster, the order or the interruptions.
    A second call with the same sweep and store computes nothing.

    Parameters
    ----------
    sweep : Sweep or str or os.PathLike
        A sweep from :func:`load_sweep`, or a built-in sweep's name or a sweep file
        (loaded without overrides).
    store : str or os.PathLike or None, default None
        The Zarr store's path; default ``outputs/<sweep name>.zarr`` under the current
        folder.
    client : distributed.Client or None, default None
        Run on this client's workers (a ``LocalCluster``, a dask-jobqueue cluster or a
        shared scheduler built in the notebook). No cluster is started, and the client is
        left open. Without it, ldpsim starts a local cluster of ``workers`` processes (or
        the one ``scheduler`` or ``cluster`` names) and closes it at the end.
    workers : int or None, default None
        Worker processes of the local cluster ldpsim starts, >= 1 (default: the cores).
    progress : bool or "auto", default True
        True: a ``tqdm.auto`` bar (a widget in Jupyter, updated while the cell runs) and
        the run's messages on stdout; False: nothing but the theory warnings; "auto": the
        command line's display (a bar on a terminal, else a line every 10 s).
    scheduler : str or None, default None
        Address of a running Dask scheduler to attach to (``--scheduler``).
    cluster : str or os.PathLike or None, default None
        A cluster configuration's name (``local``, ``slurm``, ``pbs``) or YAML file
        (``--cluster``).
    jobs : int or None, default None
        Batch clusters: a fixed number of jobs, >= 1 (``--jobs``).
    adapt : tuple of (int, int) or None, default None
        Batch clusters: adaptive (minimum, maximum) jobs, 0 <= minimum <= maximum,
        maximum >= 1 (``--adapt MIN:MAX``; :func:`check_adapt`).
    cluster_options : mapping of str to object, or None, default None
        Options replacing single keys of the cluster file's ``options``
        (``--cluster-option KEY=VALUE``); needs ``cluster``.
    start_timeout : float or None, default None
        Seconds, in (0, inf], to wait for the first worker (``--start-timeout``; default
        the cluster file's, else 120 s for local clusters, schedulers and ``client``,
        600 s for slurm and pbs).
    allow_long : bool, default False
        Start a sweep estimated at more than a day of one core's work (``--yes``);
        without it such a sweep is refused before anything starts.
    max_failures : int >= 1 or None, default None
        Stop the run once this many replicates of one grid point have failed (the
        replicate, or one of its interval methods), as SimDesign's ``max_errors`` stops
        a condition; what finished is kept and a new call resumes. None: never stop.
    task_timeout : float or None, default None
        Seconds, in (0, inf], a task may run before its worker is taken as hung,
        restarted, and the task run again (``--task-timeout``; inf: never); default from
        the cost model, max(120 s, 20 times the task's estimate). Tasks past 5 times
        their estimate (and 30 s) show in the progress line.

    Returns
    -------
    xarray.Dataset
        The store, opened lazily (:func:`open_store`), with the run's report in
        ``ds.attrs["run_report"]`` (:data:`REPORT_ATTR`), a dict of the sweep's
        replicates after the run: ``store`` (its path), ``total``, ``done``, ``failed``
        (replicates that raised), ``missing`` (neither), ``method_failures`` (interval
        method label -> replicates in which it failed), ``computed`` and ``already_done``
        (this run's work), ``seconds`` (wall time of this run), ``exit_code`` (what
        ``ldpsim run`` would exit with: 0, 1 or 3, see :func:`outcome`) and ``status``
        (``"complete"``, ``"failed"`` or ``"incomplete"``). Failures are recorded in the
        store, not raised: see them with ``ldpsim errors STORE``.

    Raises
    ------
    InputError
        Bad arguments, a bad store path, a store of another specification, a damaged
        store, a store held by another run, a cluster or client without workers, a
        plugin's callback that does not compile or reuses its random state
        (:func:`check_plugin_callbacks`); the store is then unchanged (and none is
        created).
    InputTypeError
        An argument of a wrong type (an :class:`InputError` and a TypeError), before
        anything is started.
    KeyboardInterrupt
        Interrupted; the finished replicates are written and kept, and a new call
        resumes. Raised as :class:`ldpsim.pipeline.signals.Interrupted` (a
        KeyboardInterrupt) with ``store`` and ``kept``, the sweep's replicates done in
        the store; ``ldpsim run`` also stops so on SIGTERM (exit code 143).
    ldpsim.pipeline.errors.RunStopped
        The store's disk filled up (ENOSPC); one line saying how many replicates the
        store keeps, and the exit code ``ldpsim run`` gives (its ``exit_code``: 3, or 1
        with failures recorded). Free some space and call again to resume.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
    >>> ds = run(load_sweep("demo", replicates=20), "demo.zarr", client=client)  # doctest: +SKIP
    >>> ds.attrs["run_report"]["status"]  # doctest: +SKIP
    'complete'
    """
    report = run_report(
        sweep,
        store,
        client=client,
        workers=workers,
        progress=progress,
        scheduler=scheduler,
        cluster=cluster,
        jobs=jobs,
        adapt=adapt,
        cluster_options=cluster_options,
        start_timeout=start_timeout,
        allow_long=allow_long,
        max_failures=max_failures,
        task_timeout=task_timeout,
    )
    ds = open_store(report["store"])
    ds.attrs[REPORT_ATTR] = report
    return ds


def run_report(
    sweep: Sweep | str | os.PathLike[str],
    store: str | os.PathLike[str] | None = None,
    *,
    client: Client | None = None,
    workers: int | None = None,
    progress: bool | Literal["auto"] = True,
    scheduler: str | None = None,
    cluster: str | os.PathLike[str] | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    cluster_options: Mapping[str, Any] | None = None,
    start_timeout: float | None = None,
    allow_long: bool = False,
    max_failures: int | None = None,
    task_timeout: float | None = None,
) -> dict[str, Any]:
    """Run a sweep as :func:`run` does and return its report, without opening the store.

    ``ldpsim run`` calls this: a command that only needs the exit code does not pay for
    opening the store. The parameters, the exceptions and the report (a dict, with the
    store's path under ``store``) are :func:`run`'s.
    """
    from ldpsim.pipeline.clusters import check_options, load_cluster_config
    from ldpsim.pipeline.runner import run_sweep
    from ldpsim.pipeline.sweep import Sweep

    if isinstance(sweep, str | os.PathLike):
        sweep = load_sweep(sweep)
    if not isinstance(sweep, Sweep):
        raise InputTypeError(
            "The 'sweep' parameter of run must be a Sweep (from load_sweep), a sweep name or "
            f"a sweep file. Got {_shown(sweep)}."
        )
    # Every argument is checked before anything is estimated, started or written.
    store = _optional_path(store, "store", "run")
    if store == "":
        raise InputError("The store path is an empty string; give a path (or None).")
    path = Path(store) if store is not None else Path("outputs") / f"{sweep.name}.zarr"
    if not isinstance(progress, bool) and not (isinstance(progress, str) and progress == "auto"):
        raise InputTypeError(
            f"The 'progress' parameter of run must be a bool or 'auto'. Got {_shown(progress)}."
        )
    workers = _optional_count(workers, "workers")
    jobs = _optional_count(jobs, "jobs")
    max_failures = _optional_count(max_failures, "max_failures")
    adapt = None if adapt is None else check_adapt(adapt)
    if client is not None:
        from distributed import Client

        if not isinstance(client, Client):
            raise InputTypeError(
                "The 'client' parameter of run must be a distributed.Client or None. Got "
                f"{_shown(client)}."
            )
    if scheduler is not None and not isinstance(scheduler, str):
        raise InputTypeError(
            "The 'scheduler' parameter of run must be a Dask scheduler's address (a str, "
            f"e.g. 'tcp://HOST:8786') or None. Got {_shown(scheduler)}."
        )
    cluster = _optional_path(cluster, "cluster", "run")
    if cluster_options is not None and (
        not isinstance(cluster_options, Mapping)
        or not all(isinstance(key, str) for key in cluster_options)
    ):
        raise InputTypeError(
            "The 'cluster_options' parameter of run must be a mapping of option names to "
            f"values (as --cluster-option KEY=VALUE gives them) or None. Got "
            f"{_shown(cluster_options)}."
        )
    if start_timeout is not None:
        start_timeout = check_seconds(start_timeout, "start_timeout")
    if task_timeout is not None:
        task_timeout = check_seconds(task_timeout, "task_timeout")
    allow_long = _check_bool(allow_long, "allow_long", "run")
    check_run_length(sweep, confirmed=allow_long)
    if client is not None:
        given = {
            "workers": workers,
            "scheduler": scheduler,
            "cluster": cluster,
            "jobs": jobs,
            "adapt": adapt,
            "cluster_options": cluster_options,
        }
        extra = [name for name, value in given.items() if value]
        if extra:
            raise InputError(
                f"With a client, run uses that client's workers; leave out {', '.join(extra)}."
            )
    if scheduler is not None and not scheduler.strip():
        raise InputError(
            "--scheduler needs the address of a running Dask scheduler, e.g. "
            "tcp://HOST:8786; got an empty string. Leave it out to run on a local cluster."
        )
    # Everything about the cluster is checked here; connecting comes before any write.
    kind = load_cluster_config(cluster)["kind"] if cluster else None
    if client is None and scheduler is None and kind is None:
        kind = "local"
    if (jobs or adapt) and kind in (None, "local"):
        raise InputError(
            "--jobs and --adapt scale the jobs of a batch cluster (--cluster slurm or pbs, "
            "or a file of that kind); a local cluster takes --workers N, and --scheduler "
            "uses the workers already attached to it."
        )
    if workers and kind != "local":
        raise InputError("--workers applies to the local cluster only.")
    options = dict(cluster_options or {})
    if options and not cluster:
        raise InputError("--cluster-option needs --cluster (the file whose options it changes).")
    if cluster:
        check_options(kind, options, "--cluster-option")
    check_plugin_callbacks(sweep)
    for message in sweep.check_theory():
        print(f"warning: {message}", file=sys.stderr)
    report = run_sweep(
        sweep,
        path,
        workers=workers,
        scheduler=scheduler,
        cluster=cluster,
        jobs=jobs,
        adapt=adapt,
        options=options,
        start_timeout=start_timeout,
        client=client,
        max_failures=max_failures,
        progress="auto" if progress == "auto" else "bar" if progress else "none",
        task_timeout=task_timeout,
        log=print if progress else _quiet,
    )
    code = outcome(
        replicates_failed=report.replicates_failed,
        methods_failed=sum(report.method_failures.values()),
        missing=report.missing,
    )
    if report.computed or report.failed:  # the run wrote replicates: `ldpsim report` lists it
        from ldpsim.pipeline.provenance import record_run

        where = kind or (f"scheduler {scheduler}" if scheduler else "the caller's client")
        record_run(
            path,
            wall_seconds=report.seconds,
            computed=report.computed,
            failed=report.failed,
            cluster=where,
            command=list(sys.argv) if Path(sys.argv[0]).name == "ldpsim" else None,
        )
    return {
        "store": str(path),
        "total": report.total,
        "done": report.total - report.replicates_failed - report.missing,
        "failed": report.replicates_failed,
        "missing": report.missing,
        "method_failures": dict(report.method_failures),
        "computed": report.computed,
        "already_done": report.already_done,
        "seconds": report.seconds,
        "exit_code": code,
        "status": STATUS[code],
    }


def check_plugin_callbacks(sweep: Sweep) -> None:
    """Compile and probe the callbacks of the plugin models and mechanisms ``sweep`` uses.

    Each kernel a plugin takes part in is compiled for the sweep's d on this process
    (cached on disk, so the workers load it) and its callbacks are called on a few
    random states (:func:`ldpsim.tasks.callback_check.check_plugin_callbacks`); the
    built-in units are known good and not checked.

    Raises
    ------
    InputError
        A callback does not compile (one line naming the plugin, the file and line), or
        it draws random numbers but hands back the state it was given.
    """
    from ldpsim.tasks.callback_check import CallbackError
    from ldpsim.tasks.callback_check import check_plugin_callbacks as check

    try:
        check(point.normalized for point in sweep.points())
    except CallbackError as exc:
        raise InputError(str(exc)) from None


def _quiet(message: str) -> None:
    """A log that drops its messages (``run(..., progress=False)``)."""


def check_run_length(sweep: Sweep, *, confirmed: bool) -> None:
    """Refuse a sweep estimated above a day of one core's work unless ``confirmed``.

    With ``confirmed`` the estimate is printed as a warning and the run goes on.

    Raises
    ------
    InputError
        The estimate exceeds :data:`ldpsim.pipeline.cost.LONG_RUN_SECONDS` and
        ``confirmed`` is false (nothing has been started or written).
    """
    from ldpsim.pipeline.cost import LONG_RUN_SECONDS, duration_text, sweep_seconds

    seconds = sweep_seconds(sweep)
    if seconds <= LONG_RUN_SECONDS:
        return
    largest = max(point.normalized.n for point in sweep.points())
    what = (
        f"sweep {sweep.name!r} is about {duration_text(seconds)} of one core's work "
        f"({len(sweep.points())} grid points x {sweep.replicates} replicates, n up to "
        f"{largest:.3g}; estimate from the kernel's measured time per step)"
    )
    if not confirmed:
        raise InputError(
            f"The {what}; nothing was started. Add --yes to run it anyway (divide by the "
            "number of workers for the wall time), or lower n or --replicates."
        )
    print(f"warning: the {what}; finished replicates are kept if you stop it.", file=sys.stderr)


def open_store(path: str | os.PathLike[str], *, load: bool = False) -> xr.Dataset:
    """Open a sweep's store as an xarray Dataset.

    Parameters
    ----------
    path : str or os.PathLike
        A store written by :func:`run` or ``ldpsim run``.
    load : bool, default False
        Read every array into memory (numpy) at once; otherwise the Dataset is lazy
        (dask arrays, read when used).

    Returns
    -------
    xarray.Dataset
        Dimensions: the grid axes, ``method``, ``rep``, ``coord`` (and ``checkpoint``);
        variables ``estimate``, ``last``, ``lower``, ``upper``, ``truth``,
        ``pseudo_truth``, ``done``, ``failed``, ``method_failed``, ``seconds``,
        ``job_id``; the sweep and the library versions in its attributes. Select a
        method with ``ds.sel({"method": "bb"})`` (``method`` is also a keyword of
        ``.sel``).

    Raises
    ------
    InputError
        ``path`` is not a path (:class:`InputTypeError`) or not an ldpsim store.
    StoreDamage
        The store is damaged (:class:`ldpsim.pipeline.errors.StoreDamage`, a subclass
        of InputError; the CLI exits with :data:`EXIT_DAMAGED`), naming the damaged
        file: a ``zarr.json`` (restore a copy), a missing variable, an error record,
        coordinates or truths that differ from the sweep's or, with ``load``, a chunk or
        a missing data file of finished replicates (``ldpsim run`` recomputes them).
    """
    from ldpsim.pipeline.reading import check_store, load_dataset, open_dataset

    if not isinstance(path, str | os.PathLike):
        raise InputTypeError(
            "The 'path' parameter of open_store must be a store's path (str or os.PathLike). "
            f"Got {_shown(path)}."
        )
    load = _check_bool(load, "load", "open_store")
    check_store(path, read_chunks=False)
    if not load:
        return open_dataset(path)
    from ldpsim.pipeline.damage import refuse_damage

    refuse_damage(path)  # Zarr would read a missing file's values as NaN, silently
    return load_dataset(path)


def _check_dataset(ds: object, function: str) -> None:
    """Refuse a ``ds`` argument that is neither a Dataset nor a path, before any reading.

    Raises
    ------
    InputTypeError
        Anything else (a DataArray, a summary DataFrame, None).
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset | str | os.PathLike):
        raise InputTypeError(
            f"The 'ds' parameter of {function} must be a store's xarray Dataset (from run or "
            f"open_store) or its path. Got {_shown(ds)}."
        )


def _loaded(ds: xr.Dataset | str | os.PathLike[str]) -> xr.Dataset:
    """A store's Dataset in memory: read from a path, or computed from a lazy Dataset."""
    if isinstance(ds, str | os.PathLike):
        return open_store(ds, load=True)
    # A new Dataset (the caller's stays lazy), read by local threads: through a default
    # distributed client, every small chunk would be a task on the cluster.
    return ds.compute(scheduler="threads")


def summarize(
    ds: xr.Dataset | str | os.PathLike[str],
    *,
    coords: SummaryCoords = "all",
    as_dataset: bool = False,
    target_se: float | None = None,
) -> pd.DataFrame | xr.Dataset:
    """Coverage, length and diagnostics of a store, as a tidy table.

    Only replicates marked done count; a partly computed store can be summarized at any
    time (a cell without replicates has NaN statistics and ``n_done`` 0).

    Parameters
    ----------
    ds : xarray.Dataset or str or os.PathLike
        The store's Dataset (from :func:`run` or :func:`open_store`) or its path.
    coords : {"all", "mean"}, default "all"
        ``"all"``: a row per grid point, method, [checkpoint,] coordinate; ``"mean"``: a
        row per grid point, method [and checkpoint] with the coverage and length
        averaged over the coordinates and the joint coverage (the csv records of
        ``ldpsim summarize --coords``).
    as_dataset : bool, default False
        Return the summary Dataset instead
        (:func:`ldpsim.pipeline.summary.summarize`, every statistic with its grid,
        method, checkpoint and coordinate dimensions); ``coords`` is then ignored.
    target_se : float, optional
        The coverage standard error that the ``replicates_needed`` column plans for, in
        (0, 1) (default: :data:`ldpsim.pipeline.summary.TARGET_SE`, 0.005).

    Returns
    -------
    pandas.DataFrame or xarray.Dataset
        One column per grid axis, ``method``, (``checkpoint``,) ``coord`` (with
        ``coords="all"``), then the statistics of ``ldpsim summarize --format csv``:
        ``coverage``, ``coverage_se``, ``length``, ``length_se``, ``n_done``, the
        diagnostics (``predicted_coverage``, ``bias_over_sd``, ``variance_ratio``, each
        with ``_se``) and the mean squared errors (``mse``, ``mse_last``, with ``_se``
        and ``_n_done``). Statistics without replicates are NaN.

    Raises
    ------
    InputError
        A path that is not a store, or a damaged store; an unknown ``coords``, a
        ``target_se`` outside (0, 1); an argument of a wrong type (:class:`InputTypeError`,
        also a TypeError).
    """
    import numpy as np
    import pandas as pd

    from ldpsim.pipeline.summary import TARGET_SE
    from ldpsim.pipeline.summary import summarize as summary_of
    from ldpsim.pipeline.tables import coord_mean_records, records

    _check_dataset(ds, "summarize")
    if not isinstance(coords, str) or coords not in ("all", "mean"):
        raise InputError(
            f"The 'coords' parameter of summarize must be 'all' or 'mean'. Got {_shown(coords)}."
        )
    as_dataset = _check_bool(as_dataset, "as_dataset", "summarize")
    target_se = TARGET_SE if target_se is None else _check_target_se(target_se)
    summary = summary_of(_loaded(ds), target_se)
    if as_dataset:
        return summary
    rows = records(summary) if coords == "all" else coord_mean_records(summary)
    frame = pd.DataFrame.from_records(rows)
    for column in frame.columns:  # the records' None (NaN in JSON) back to NaN
        if frame[column].dtype == object and frame[column].map(_is_number_or_none).all():
            frame[column] = frame[column].astype(np.float64)
    return frame


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def plot(
    ds: xr.Dataset | str | os.PathLike[str], kind: str = "coverage"
) -> Figure | dict[str, Figure]:
    """Draw one of a store's figures (those ``ldpsim plot`` saves), or all of them.

    Parameters
    ----------
    ds : xarray.Dataset or str or os.PathLike
        The store's Dataset (from :func:`run` or :func:`open_store`) or its path.
    kind : str, default "coverage"
        One of :data:`ldpsim.pipeline.plots.FIGURE_KINDS`: ``coverage`` (with +-2 SE
        bars and the nominal level), ``length``, ``diagnostics`` (bias / sd and
        variance ratio), ``privacy-length``, ``privacy-coverage``, ``errors`` (mean
        squared errors at the checkpoints), ``sparsity``, ``running`` (the running
        interval of one replicate); or ``"all"`` for every figure the store has data for.

    Returns
    -------
    matplotlib.figure.Figure or dict of str to matplotlib.figure.Figure
        The figure, which Jupyter shows inline as the value of a cell, or for ``"all"``
        kind -> figure. The figures are made without pyplot and are not registered with
        it; save one with ``fig.savefig(path)``.

    Raises
    ------
    InputError
        An unknown kind, a kind the store has no data for (e.g. ``errors`` without
        checkpoints), a ``ds`` that is neither a Dataset nor a path
        (:class:`InputTypeError`), a path that is not a store, or a damaged store.
    """
    from ldpsim.pipeline.plots import FIGURE_KINDS, store_figures

    _check_dataset(ds, "plot")
    if not isinstance(kind, str) or (kind != "all" and kind not in FIGURE_KINDS):
        raise InputError(
            f"Unknown figure kind {_shown(kind)}. Kinds are: all, {', '.join(FIGURE_KINDS)}."
        )
    data = _loaded(ds)
    figures = store_figures(data, None if kind == "all" else [kind])
    if kind == "all":
        return figures
    if kind not in figures:
        available = ", ".join(store_figures(data))
        raise InputError(
            f"This store has no data for the {kind!r} figure; its figures are: {available}."
        )
    return figures[kind]
