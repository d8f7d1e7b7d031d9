"""ldpsim's stable Python interface: load a sweep, run it, open, summarize and plot its store.

Everything a notebook needs is here, and nothing else is promised to stay::

    from distributed import Client, LocalCluster
    from ldpsim.pipeline.api import load_sweep, run, summarize, plot

    client = Client(LocalCluster(n_workers=2))
    ds = run(load_sweep("demo", replicates=20), "demo.zarr", client=client)
    bb = ds.ldpsim.sel(method="bb", tau=0.5)  # the same as ds.sel({"method": "bb", "tau": 0.5})
    summarize(ds)  # a tidy pandas DataFrame
    plot(ds, "coverage")  # a matplotlib Figure, shown inline

Select a method with ``ds.ldpsim.sel`` (:class:`~ldpsim.pipeline.accessor.LdpsimAccessor`),
``open_store(path, method="bb")`` or a dict, never ``ds.sel(method="bb")``: ``method`` is
the fill-method keyword of xarray's ``sel``, so that returns every method (and, beside
another label, raises "Invalid fill method").

The ``ldpsim`` command line is a thin layer over these functions (:mod:`ldpsim.pipeline.cli`):
``ldpsim run`` is :func:`run`, ``ldpsim summarize`` formats :func:`summarize`'s Dataset,
``ldpsim plot`` saves :func:`plot`'s figures. Bad input, a store held by another run and a
damaged store raise :class:`InputError` with the message the command line prints; an
argument of a wrong type raises its subclass :class:`InputTypeError`, also a TypeError.
Heavy libraries (distributed, xarray, matplotlib, pandas) are imported by the functions
that use them, so importing this module is fast.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import signal
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ldpsim.pipeline import accessor as _accessor  # ds.ldpsim (registered if xarray is in)
from ldpsim.pipeline.errors import (
    EXIT_DAMAGED,
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_OK,
    STATUS,
    InputError,
    InputTypeError,
    RunStopped,
    is_absent,
    outcome,
    shown_value,
)

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr
    from distributed import Client
    from matplotlib.figure import Figure

    from ldpsim.pipeline.summary.cell_statistics import Cell
    from ldpsim.pipeline.sweep import Sweep
    from ldpsim.tasks.replicate import ReplicateResult
    from ldpsim.tasks.spec import ReplicateSpec

__all__ = [
    "EXIT_DAMAGED",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "REPORT_ATTR",
    "InputError",
    "InputTypeError",
    "check_adapt",
    "check_seconds",
    "compare",
    "load_sweep",
    "open_store",
    "outcome",
    "plot",
    "register",
    "replay",
    "run",
    "run_report",
    "summarize",
]

#: The key of :func:`run`'s report in the attributes of the Dataset it returns.
REPORT_ATTR = "run_report"
#: How :func:`summarize` shows the coordinates: a row each, or their means.
SummaryCoords = Literal["all", "mean"]


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
            f"None. Got {shown_value(value)}."
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
    message = (
        f"The {name!r} parameter of run must be an int >= 1 or None. Got {shown_value(value)}."
    )
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(message)
    if value < 1:
        raise InputError(message)
    return int(value)


def _check_bool(value: object, name: str, function: str) -> bool:
    """A bool argument, refusing truthy stand-ins ("no" is true)."""
    if not isinstance(value, bool):
        raise InputTypeError(
            f"The {name!r} parameter of {function} must be True or False. "
            f"Got {shown_value(value)}."
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

    Examples
    --------
    >>> check_adapt((0, 4))
    (0, 4)
    >>> check_adapt((5, 2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ldpsim.pipeline.errors.InputError: The 'adapt' parameter of run must be a pair ...
    """
    message = (
        "The 'adapt' parameter of run must be a pair (minimum, maximum) of job counts with "
        f"0 <= minimum <= maximum and maximum >= 1, or None. Got {shown_value(value)}."
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
    (:func:`ldpsim.pipeline.compute.clusters.check_start_timeout`).

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

    Examples
    --------
    >>> check_seconds(30, "start_timeout")
    30.0
    >>> check_seconds(float("inf"), "task_timeout")  # never restart a task's worker
    inf
    """
    from ldpsim.pipeline.compute.clusters import check_start_timeout

    return check_start_timeout(value, f"{name!r} parameter of run")


def _check_target_se(value: object) -> float:
    """:func:`ldpsim.pipeline.summary.summary.check_target_se` (``--target-se``'s check), its
    errors as InputError."""
    from ldpsim.pipeline.summary.summary import check_target_se

    try:
        return check_target_se(value)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None


def load_sweep(
    name_or_path: str | os.PathLike[str] | Mapping[str, Any],
    /,
    *,
    name: str | None = None,
    replicates: int | None = None,
    set: Sequence[str] = (),
    **overrides: Any,
) -> Sweep:
    """Load a built-in sweep, a sweep file or a sweep's tables, apply overrides and
    validate it.

    The same as ``ldpsim run NAME --set KEY=VALUE ... --replicates R``. The sweep's
    description keeps the file's words and, when the overrides change the sweep, notes
    what they changed: ``(as run: replicates = 20, grid.n = [1000, 10000])``. See
    :doc:`sweep-format` for the format.

    Parameters
    ----------
    name_or_path : str or os.PathLike or Mapping
        A built-in sweep's name (``ldpsim list``: ``demo``, ``paper-table1``, ...), the
        path of a TOML sweep file, or the sweep file's tables as a dict (what
        :func:`tomllib.loads` gives for the file; tuples, numpy arrays and numpy numbers
        stand for TOML's lists and numbers), validated as the file would be, with the
        same messages.
    name : str or None, default None
        The sweep's name, which names its default store ``outputs/<name>.zarr`` and its
        reports: a file name of 1 to 200 bytes, without ``/ \\ : * ? " < > |``, control
        characters or a space at either end. Default: the built-in's name or the file's
        name without ``.toml``; required for a dict.
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
        ``name_or_path``, ``name`` or ``set`` of a wrong type, and a dict without
        ``name``, raise :class:`InputTypeError`.

    Examples
    --------
    >>> sweep = load_sweep("demo", replicates=20, grid__n=[1000, 10000])
    >>> sweep.replicates, sweep.grid["n"]
    (20, [1000, 10000])
    >>> sweep.description[sweep.description.index("(as run"):]
    '(as run: replicates = 20, grid.n = [1000, 10000])'

    A sweep as a dict, with a name of its own:

    >>> mine = load_sweep(
    ...     {
    ...         "replicates": 50,
    ...         "spec": {"model": "quantile", "tau": 0.5, "eps": 1.0},
    ...         "grid": {"n": [1000, 10000]},
    ...         "methods": {"bb": {}, "oracle": {}},
    ...     },
    ...     name="quantile-small",
    ... )
    >>> mine.name, mine.methods["bb"]
    ('quantile-small', {'form': 't'})
    >>> print(mine.to_toml().splitlines()[0])
    # sweep 'quantile-small'
    """
    from ldpsim.pipeline.sweep import check_sweep_name
    from ldpsim.pipeline.sweep import load_sweep as load

    if not isinstance(name_or_path, str | os.PathLike | Mapping):
        raise InputTypeError(
            "The 'name_or_path' parameter of load_sweep must be a built-in sweep's name, a "
            "sweep file's path (str or os.PathLike) or a sweep's tables (a dict). "
            f"Got {shown_value(name_or_path)}."
        )
    if name is not None:
        try:
            name = check_sweep_name(name)
        except TypeError as exc:
            raise InputTypeError(str(exc)) from None
        except ValueError as exc:
            raise InputError(str(exc)) from None
    elif isinstance(name_or_path, Mapping):
        raise InputTypeError(
            "load_sweep needs a 'name' for a sweep given as a dict, as a file has its file "
            "name: it names the default store outputs/<name>.zarr."
        )
    if isinstance(set, str):  # one string would be applied character by character
        set = [set]
    if not isinstance(set, Sequence) or not all(isinstance(item, str) for item in set):
        raise InputTypeError(
            "The 'set' parameter of load_sweep must be a list of 'KEY=VALUE' strings, as "
            f"--set takes them. Got {shown_value(set)}."
        )
    items = [*set, *((key.replace("__", "."), value) for key, value in overrides.items())]
    source = name_or_path if isinstance(name_or_path, Mapping) else os.fspath(name_or_path)
    return load(source, items, replicates, name=name)


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
    accept_code_change: bool = False,
    backend: Literal["cpu", "gpu"] | None = None,
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
        the run's messages on stdout; False: nothing but the theory warnings and the
        notes on stderr; "auto": the command line's display (a bar on a terminal, else a
        line every 10 s). A new store gets a note on stderr for each method given a
        default that an earlier release set otherwise, e.g. ``note: bb: no form given,
        so the t form (ldpsim >= 0.2; before: basic). Set methods.bb.form = "basic" for
        the old intervals.`` (:func:`ldpsim.pipeline.store.identity.moved_default_lines`); a
        resumed store keeps the methods it recorded and gets none.
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
    accept_code_change : bool, default False
        Compute into a store one of whose units (model, mechanism, interval method)
        changed its source since the store was written (``--accept-code-change``): the
        change goes into the run record and the new replicates get a new
        ``code_version``, so that summaries mark the cells that mix code versions.
        Without it such a run is refused (:mod:`ldpsim.pipeline.store.code_identity`).
    backend : {"cpu", "gpu"} or None, default None
        Where the SGD chains run (``--backend``): None keeps the sweep's own (its
        ``backend`` key, else "cpu"); "gpu" runs each chunk of a grid point's replicates
        as one CUDA launch on a worker that holds a GPU (the Dask worker resource
        "GPU": ``cluster="local-gpu"`` or ``"slurm-gpu"``) and the interval methods on
        any worker. A store holds one backend: its streams differ from the CPU's.

    Returns
    -------
    xarray.Dataset
        The sweep's part of the store, opened lazily (:func:`open_store`): its grid
        values and methods, in its order, and its first ``sweep.replicates`` replicates
        (every dimension kept), with the run's report in ``ds.attrs["run_report"]``
        (:data:`REPORT_ATTR`), a dict of the sweep's replicates after the run: ``store``
        (its path), ``total``, ``done``, ``failed`` (replicates that raised), ``missing``
        (neither), ``method_failures`` (interval method label -> replicates in which it
        failed), ``computed`` and ``already_done`` (this run's work),
        ``methods_computed`` (finished replicates for which this run computed interval
        methods added to the store, :func:`run`'s other work), ``seconds`` (wall
        time of this run), ``warm_up_seconds`` (the workers' set-up of grid points and
        first method calls, in no replicate's time: :mod:`ldpsim.tasks.warm_up`),
        ``exit_code`` (what ``ldpsim run`` would exit with: 0, 1 or
        3, see :func:`outcome`), ``status`` (``"complete"``, ``"failed"`` or
        ``"incomplete"``) and ``store_holds``: None when the store holds just this
        sweep, else what it holds (``replicates`` per grid point, ``methods``, ``grid``
        axis -> values; a line with ``progress`` says so too), all of which
        :func:`open_store` gives. Failures are recorded in the store, not raised: see
        them with ``ldpsim errors STORE``.

    Raises
    ------
    InputError
        Bad arguments, a bad store path, a store of another specification, a damaged
        store, a store held by another run, a cluster or client without workers, a
        plugin's callback that does not compile or reuses its random state
        (:func:`check_plugin_callbacks`), a plugin model's truth that is not d finite
        floats or that raises (:func:`check_plugin_truths`), two method labels that
        make the same method in a new store (``bb = {}`` beside ``bb_t = {method =
        "bb", form = "t"}``;
        :func:`ldpsim.pipeline.store.identity.check_distinct_methods`); the store is then
        unchanged (and none is created).
    InputTypeError
        An argument of a wrong type (an :class:`InputError` and a TypeError), before
        anything is started.
    KeyboardInterrupt
        Interrupted; the finished replicates are written and kept, and a new call
        resumes. Raised as :class:`ldpsim.pipeline.compute.signals.Interrupted` (a
        KeyboardInterrupt) with ``store`` and ``kept``, the sweep's replicates done in
        the store; ``ldpsim run`` also stops so on SIGTERM (exit code 143). In the
        main thread the run handles SIGINT itself, as ``ldpsim run`` does: it stops at
        the next safe point (within a second, then up to 2 s for the results already
        finished), and a second Ctrl-C while it writes them and closes its cluster is
        ignored.
    ldpsim.pipeline.errors.RunStopped
        The store's disk filled up (ENOSPC), or the client lost its Dask scheduler; one
        line saying how many replicates the store keeps, and the exit code ``ldpsim
        run`` gives (its ``exit_code``: 3, or 1 with failures recorded). Free some space
        (start the scheduler again) and call again to resume.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))  # doctest: +SKIP
    >>> ds = run(load_sweep("demo", replicates=20), "demo.zarr", client=client)  # doctest: +SKIP
    >>> ds.attrs["run_report"]["status"]  # doctest: +SKIP
    'complete'
    """
    from ldpsim.pipeline.accessor import store_holds_text, sweep_part
    from ldpsim.pipeline.sweep import Sweep

    if isinstance(sweep, str | os.PathLike):
        sweep = load_sweep(sweep)  # loaded here: the sweep's part of the store is returned
    if backend is not None and isinstance(sweep, Sweep):
        sweep = _on_backend(sweep, backend, "run")
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
        accept_code_change=accept_code_change,
    )
    ds, holds = sweep_part(open_store(report["store"]), sweep)
    report["store_holds"] = holds
    if holds is not None:
        (print if progress else _quiet)(store_holds_text(holds, sweep, report["store"]))
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
    accept_code_change: bool = False,
    backend: Literal["cpu", "gpu"] | None = None,
) -> dict[str, Any]:
    """Run a sweep as :func:`run` does and return its report, without opening the store.

    ``ldpsim run`` calls this: a command that only needs the exit code does not pay for
    opening the store. The parameters, the exceptions and the report (a dict, with the
    store's path under ``store``) are :func:`run`'s, but for the report's ``store_holds``.

    Examples
    --------
    >>> report = run_report("demo", "demo.zarr", workers=2)  # doctest: +SKIP
    >>> report["exit_code"], report["status"]  # doctest: +SKIP
    (0, 'complete')
    """
    from ldpsim.pipeline.compute.clusters import (
        check_options,
        load_cluster_config,
        small_memory_warning,
    )
    from ldpsim.pipeline.compute.runner import run_sweep
    from ldpsim.pipeline.compute.signals import Interrupted, handle_signals
    from ldpsim.pipeline.store.identity import new_store_notes
    from ldpsim.pipeline.sweep import Sweep, check_sweep_name

    if isinstance(sweep, str | os.PathLike):
        sweep = load_sweep(sweep)
    if not isinstance(sweep, Sweep):
        raise InputTypeError(
            "The 'sweep' parameter of run must be a Sweep (from load_sweep), a sweep name or "
            f"a sweep file. Got {shown_value(sweep)}."
        )
    if backend is not None:
        sweep = _on_backend(sweep, backend, "run_report")
    # Every argument is checked before anything is estimated, started or written.
    store = _optional_path(store, "store", "run")
    if store == "":
        raise InputError("The store path is an empty string; give a path (or None).")
    if store is None:  # the name makes a path: checked as one (a file's name is not)
        try:
            check_sweep_name(sweep.name)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{exc} It would name the default store outputs/{sweep.name}.zarr: give "
                "--store PATH (store= in Python), or rename the sweep's file."
            ) from None
    path = Path(store) if store is not None else Path("outputs") / f"{sweep.name}.zarr"
    if not isinstance(progress, bool) and not (isinstance(progress, str) and progress == "auto"):
        raise InputTypeError(
            "The 'progress' parameter of run must be a bool or 'auto'. "
            f"Got {shown_value(progress)}."
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
                f"{shown_value(client)}."
            )
    if scheduler is not None and not isinstance(scheduler, str):
        raise InputTypeError(
            "The 'scheduler' parameter of run must be a Dask scheduler's address (a str, "
            f"e.g. 'tcp://HOST:8786') or None. Got {shown_value(scheduler)}."
        )
    if isinstance(cluster, os.PathLike):  # a file (Path("./local") would print as 'local')
        cluster = str(Path(cluster).absolute())
    cluster = _optional_path(cluster, "cluster", "run")
    if cluster == "":  # not the default cluster, silently
        raise InputError(
            "The cluster is an empty string; give a cluster name (ldpsim list) or a YAML "
            "file, or None for the local cluster."
        )
    if cluster_options is not None and (
        not isinstance(cluster_options, Mapping)
        or not all(isinstance(key, str) for key in cluster_options)
    ):
        raise InputTypeError(
            "The 'cluster_options' parameter of run must be a mapping of option names to "
            f"values (as --cluster-option KEY=VALUE gives them) or None. Got "
            f"{shown_value(cluster_options)}."
        )
    if start_timeout is not None:
        start_timeout = check_seconds(start_timeout, "start_timeout")
    if task_timeout is not None:
        task_timeout = check_seconds(task_timeout, "task_timeout")
    allow_long = _check_bool(allow_long, "allow_long", "run")
    accept_code_change = _check_bool(accept_code_change, "accept_code_change", "run")
    # A new store: two labels of one method refused; the defaults that moved, to print.
    notes = new_store_notes(sweep, path)
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
    config = load_cluster_config(cluster) if cluster else None
    kind = config["kind"] if config else None
    if client is None and scheduler is None and kind is None:
        kind = "local"
    if (jobs or adapt) and kind in (None, "local", "local-gpu"):
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
    if cluster and options:  # with the file's: processes <= cores holds for the two
        check_options(kind, {**config["options"], **options}, "--cluster-option")
    if workers:  # with the file's options: the memory each worker gets
        local = (config or load_cluster_config("local"))["options"]
        check_options("local", {**local, **options, "n_workers": workers}, "--workers")
    if kind in ("local", "local-gpu") and is_absent(path):
        # The workers' forkserver imports on another core while the checks below and the
        # store's inspection run (a second of imports on a 2-core machine).
        from ldpsim.pipeline.compute.worker_start import forks, start_server_early

        # Without --cluster, cluster/local.yaml's default: the forkserver.
        start_server_early(forks({**config["options"], **options} if config else {}))
    check_plugin_callbacks(sweep)
    check_plugin_truths(sweep)
    check_batched_methods(sweep)
    for message in [*sweep.unused, *sweep.check_theory()]:
        print(f"warning: {message}", file=sys.stderr)
    if kind in ("local", "local-gpu") and (small := small_memory_warning()):
        print(f"warning: {small}", file=sys.stderr)
    if notes:  # said once the store's path is known to be usable: bad input is one line
        from ldpsim.pipeline.store.store_path import check_store_path

        check_store_path(Path(path))
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    grown = _small_shards_warning(Path(path), sweep)
    if grown:
        print(f"warning: {grown}", file=sys.stderr)
    where = kind or (f"scheduler {scheduler}" if scheduler else "the caller's client")
    # Ctrl-C (a notebook's interrupt) stops the run where it is safe, as it stops
    # ``ldpsim run``, and a second one while the run writes its results, records itself
    # and closes its cluster is ignored: raised anywhere, it cut that short, and each
    # interrupted run left its local cluster running in the process (a hunt, 2026-12-01).
    with handle_signals((signal.SIGINT,)):
        try:
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
                accept_code_change=accept_code_change,
            )
        except Interrupted as stopped:  # what it wrote is kept: so is its record
            if getattr(stopped, "report", None) is not None:
                _record_run(path, stopped.report, where, f"interrupted ({stopped.signal_name})")
            raise
        except RunStopped as stopped:  # a lost scheduler, a full disk: recorded where it can be
            if stopped.report is not None and stopped.ended is not None:
                with contextlib.suppress(OSError):  # a full disk may refuse the record too
                    _record_run(path, stopped.report, where, stopped.ended)
            raise
    code = outcome(
        replicates_failed=report.replicates_failed,
        methods_failed=sum(report.method_failures.values()),
        missing=report.missing,
    )
    _record_run(path, report, where, "finished")
    return {
        "store": str(path),
        "total": report.total,
        "done": report.total - report.replicates_failed - report.missing,
        "failed": report.replicates_failed,
        "missing": report.missing,
        "method_failures": dict(report.method_failures),
        "computed": report.computed,
        "already_done": report.already_done,
        "methods_computed": report.methods_computed,
        "seconds": report.seconds,
        "warm_up_seconds": report.warm_up_seconds,
        "exit_code": code,
        "status": STATUS[code],
    }


def _small_shards_warning(path: Path, sweep: Sweep) -> str | None:
    """:func:`ldpsim.pipeline.store.layout.small_shards_warning` for the store at
    ``path``, if it is one; its own checks follow (a store that cannot be read: None)."""
    from ldpsim.pipeline.store.layout import small_shards_warning
    from ldpsim.pipeline.store.reading import stored_layout

    try:
        if not (path / "zarr.json").is_file():
            return None
        return small_shards_warning(stored_layout(path), sweep)
    except Exception:  # damage, bad input: said by the run's checks, in one line
        return None


def _record_run(path: str | Path, report: Any, where: str, ended: str) -> None:
    """Record a run that wrote replicates or added methods' intervals to the store
    (:func:`ldpsim.pipeline.store.provenance.record_run`): ``ldpsim report`` lists it."""
    if not (report.computed or report.failed or report.methods_computed):
        return
    from ldpsim.pipeline.store.provenance import record_run

    record_run(
        path,
        wall_seconds=report.seconds,
        computed=report.computed,
        failed=report.failed,
        methods_computed=report.methods_computed,
        ended=ended,
        cluster=where,
        command=list(sys.argv) if Path(sys.argv[0]).name == "ldpsim" else None,
        code_changes=report.code_changes,
        warm_up_seconds=report.warm_up_seconds,
    )


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
        it draws random numbers but hands back the state it was given; or the plugin's
        Python code raised (its ``params()``: one line naming the plugin, the function,
        the file and line, :func:`ldpsim.tasks.plugins.plugin_code_errors`).
    """
    from ldpsim.tasks.callback_check import CallbackError
    from ldpsim.tasks.callback_check import check_plugin_callbacks as check
    from ldpsim.tasks.plugins import PluginCodeError, plugin_code_errors

    try:
        with plugin_code_errors():
            check(point.normalized for point in sweep.points())
    except (CallbackError, PluginCodeError) as exc:
        raise InputError(str(exc)) from None


def check_plugin_truths(sweep: Sweep) -> None:
    """Compute the truths of the plugin models ``sweep`` uses, as its store holds them.

    Before a cluster is started or reached: the store's creation or extension computes
    them too (:func:`ldpsim.pipeline.store.layout.truth_array`), but only once the
    first worker is up (a batch job's start) and, for a new store, its tasks are
    submitted; and a truth that raised there was a traceback. The built-in models'
    truths are known good and not computed here.

    Raises
    ------
    InputError
        A ``truth()`` or ``pseudo_truth()`` that is not d finite floats, or that
        raised (one line naming the plugin, the function, the file and line,
        :func:`ldpsim.tasks.plugins.plugin_code_errors`).
    """
    from ldpsim.pipeline.store.layout import layout_for, truth_array
    from ldpsim.tasks.chunk import is_builtin
    from ldpsim.tasks.plugins import PluginCodeError, plugin_code_errors

    if all(is_builtin(point.normalized.model) for point in sweep.points()):
        return
    layout = layout_for(sweep)
    try:
        with plugin_code_errors():
            truth_array(sweep, layout)
            truth_array(sweep, layout, pseudo=True)
    except PluginCodeError as exc:
        raise InputError(str(exc)) from None


def check_batched_methods(sweep: Sweep) -> None:
    """Check each plugin method's ``intervals_batch`` against its ``interval``.

    The first replicates (up to :data:`ldpsim.tasks.chunk.CHECKED_REPLICATES`, the start
    of the run's first chunk) of the sweep's first grid point of each dimension d (a
    batched path may be right at d = 1 only) that can be set up (the next one of that d
    where one cannot) are computed both ways on this process
    (:func:`ldpsim.tasks.chunk.check_batch_api`); the built-in methods are known good
    and not checked.

    Raises
    ------
    InputError
        The two ways disagree (one line naming the method, replicate and bound), or the
        plugin's Python code raised (:func:`ldpsim.tasks.plugins.plugin_code_errors`).
    """
    from ldpsim.tasks.chunk import CHECKED_REPLICATES, BatchDisagreement, check_batch_api
    from ldpsim.tasks.plugins import PluginCodeError, plugin_code_errors

    by_dim: dict[int, list[ReplicateSpec]] = {}
    for point in sweep.points():
        by_dim.setdefault(point.normalized.model.dim, []).append(point.normalized)
    reps = range(min(sweep.replicates, CHECKED_REPLICATES))
    try:
        with plugin_code_errors(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for points in by_dim.values():
                for rs in points:  # the first that can be set up (None: it cannot)
                    checked = check_batch_api(rs, reps)
                    if checked == 0:
                        return  # no plugin method with intervals_batch (at any point)
                    if checked is not None:
                        break
    except (BatchDisagreement, PluginCodeError) as exc:
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


def open_store(
    path: str | os.PathLike[str],
    *,
    load: bool = False,
    method: str | Sequence[str] | None = None,
    **selection: Any,
) -> xr.Dataset:
    """Open a sweep's store as an xarray Dataset, all of it or some methods and grid values.

    Parameters
    ----------
    path : str or os.PathLike
        A store written by :func:`run` or ``ldpsim run``.
    load : bool, default False
        Read every array into memory (numpy) at once; otherwise the Dataset is lazy
        (dask arrays, read when used).
    method : str or sequence of str or None, default None
        The method label, or labels (each once), to keep (``ds.ldpsim.sel(method=...)``);
        None: every method.
    **selection
        Grid axis -> the value, or values, to keep (``tau=0.5``, ``n=[1000, 10000]``);
        a slice of values keeps a range. Checked as by ``ds.ldpsim.sel``
        (:class:`~ldpsim.pipeline.accessor.LdpsimAccessor`), but every dimension is
        kept: a single value keeps a dimension of length 1, so :func:`summarize` and
        :func:`plot` take the result as they take a whole store.

    Returns
    -------
    xarray.Dataset
        Dimensions: the grid axes, ``method``, ``rep``, ``coord`` (and ``checkpoint``);
        variables ``estimate``, ``last``, ``projected``, ``lower``, ``upper``,
        ``method_estimate``, ``truth``, ``pseudo_truth``, ``done``, ``failed``,
        ``method_failed``, ``seconds``, ``method_seconds``, ``job_id`` (each with its
        ``long_name``); the sweep and the library versions in its attributes. Select a
        method with ``ds.ldpsim.sel(method="bb")`` or ``ds.sel({"method": "bb"})``, not
        ``ds.sel(method="bb")`` (``method`` is the fill-method keyword of ``.sel``).

    Raises
    ------
    InputError
        ``path`` is not a path (:class:`InputTypeError`) or not an ldpsim store; a
        selection on a dimension other than ``method`` and the grid axes, of a label
        the store lacks (one line listing what there is), of a label twice, or of
        an empty list of labels.
    StoreDamage
        The store is damaged (:class:`ldpsim.pipeline.errors.StoreDamage`, a subclass
        of InputError; the CLI exits with :data:`EXIT_DAMAGED`), naming the damaged
        file: a ``zarr.json`` (restore a copy), a missing variable, an error record,
        coordinates or truths that differ from the sweep's or, with ``load``, a chunk or
        a missing data file of finished replicates (``ldpsim run`` recomputes them).

    Examples
    --------
    >>> ds = open_store("outputs/demo.zarr", method="bb", tau=0.5)  # doctest: +SKIP
    >>> dict(ds.sizes)  # doctest: +SKIP
    {'tau': 1, 'n': 3, 'rep': 500, 'coord': 1, 'method': 1}
    >>> open_store("outputs/demo.zarr", method="BB")  # doctest: +SKIP
    Traceback (most recent call last):
    ...
    ldpsim.pipeline.errors.InputError: Cannot select method = 'BB' (open_store): no such label; ...
    """
    from ldpsim.pipeline.store.reading import check_store, load_dataset, open_dataset

    if not isinstance(path, str | os.PathLike):
        raise InputTypeError(
            "The 'path' parameter of open_store must be a store's path (str or os.PathLike). "
            f"Got {shown_value(path)}."
        )
    load = _check_bool(load, "load", "open_store")
    check_store(path, read_chunks=False)
    ds = open_dataset(path, chunks="auto" if not load else None)  # opened once
    _accessor.register()  # xarray is imported now: ds.ldpsim on what the caller gets
    if method is not None:
        selection = {"method": method, **selection}
    if selection:  # checked before anything is loaded
        from ldpsim.pipeline.accessor import check_labels
        from ldpsim.pipeline.summary.variables import grid_axes

        selectable = ["method", *grid_axes(ds)]
        selection = check_labels(
            ds,
            selection,
            "open_store",
            dims=selectable,
            dims_text="it selects on the method and the grid axes only",
            keep_dims=True,
        )
    if not load:
        return ds.sel(selection) if selection else ds
    from ldpsim.pipeline.store.damage import refuse_damage

    refuse_damage(path)  # Zarr would read a missing file's values as NaN, silently
    ds = load_dataset(path, dataset=ds)
    return ds.sel(selection) if selection else ds


def _check_dataset(ds: object, function: str) -> None:
    """Refuse a ``ds`` argument that is neither a store's Dataset nor a path, before any
    reading.

    Raises
    ------
    InputTypeError
        Anything else (a DataArray, a summary DataFrame, None).
    InputError
        A Dataset that is not a store's
        (:func:`ldpsim.pipeline.accessor.check_store_dataset`).
    """
    import xarray as xr

    _accessor.register()  # xarray is imported now: ds.ldpsim for what the caller holds
    if not isinstance(ds, xr.Dataset | str | os.PathLike):
        raise InputTypeError(
            f"The 'ds' parameter of {function} must be a store's xarray Dataset (from run or "
            f"open_store) or its path. Got {shown_value(ds)}."
        )
    if isinstance(ds, xr.Dataset):
        from ldpsim.pipeline.accessor import check_store_dataset

        check_store_dataset(ds, function)


def _loaded(ds: xr.Dataset | str | os.PathLike[str]) -> xr.Dataset:
    """A store's Dataset in memory: read from a path, or computed from a Dataset whose
    store (xarray's ``source`` encoding) is not damaged."""
    if isinstance(ds, str | os.PathLike):
        return open_store(ds, load=True)
    source = ds.encoding.get("source")
    if isinstance(source, str) and Path(source).is_dir():
        from ldpsim.pipeline.store.damage import refuse_damage

        # A Dataset read from a store (lazily, or loaded by xarray) read a missing data
        # file as NaN, silently: refused as its path is (the files compared with their
        # digests, a few milliseconds).
        refuse_damage(source)
    # A new Dataset (the caller's stays lazy), read by local threads: through a default
    # distributed client, every small chunk would be a task on the cluster.
    return ds.compute(scheduler="threads")


def summarize(
    ds: xr.Dataset | str | os.PathLike[str],
    *,
    coords: SummaryCoords = "all",
    as_dataset: bool = False,
    target_se: float | None = None,
    statistics: Mapping[str, Callable[[Cell], Any]] | None = None,
) -> pd.DataFrame | xr.Dataset:
    """Coverage, length and diagnostics of a store, as a tidy table.

    Only replicates marked done count; a partly computed store can be summarized at any
    time (a cell without replicates has NaN statistics and ``n_done`` 0).

    Parameters
    ----------
    ds : xarray.Dataset or str or os.PathLike
        The store's Dataset (from :func:`run` or :func:`open_store`) or its path. A
        selection of some replicates (``ds.isel(rep=...)``) is counted against the
        sweep's replicates: every cell of it is marked partial, and its footnote says
        how many replicates the selection left out.
    coords : {"all", "mean"}, default "all"
        ``"all"``: a row per grid point, method, [checkpoint,] coordinate; ``"mean"``: a
        row per grid point, method [and checkpoint] with the coverage and length
        averaged over the coordinates and the joint coverage (the csv records of
        ``ldpsim summarize --coords``).
    as_dataset : bool, default False
        Return the summary Dataset instead
        (:func:`ldpsim.pipeline.summary.summary.summarize`, every statistic with its grid,
        method, checkpoint and coordinate dimensions); ``coords`` is then ignored.
    target_se : float, optional
        The coverage standard error that the ``replicates_needed`` column plans for, in
        (0, 1) (default: :data:`ldpsim.pipeline.summary.summary.TARGET_SE`, 0.005).
    statistics : mapping of str to callable, optional
        Your own statistics beside coverage: name -> ``fn(cell)``, where ``cell`` is a
        read-only :class:`~ldpsim.pipeline.summary.cell_statistics.Cell` of one grid point, one
        method, [one checkpoint,] one coordinate, holding numpy arrays ``lower``,
        ``upper``, ``estimate`` and ``truth`` of the replicates that the cell's
        coverage counts (``n_done``: done, with this method's bounds), and ``level``.
        ``fn`` returns one value per replicate (an array of shape (R,)) whose mean is
        the statistic, with coverage's Monte-Carlo standard error sd / sqrt(R) (sd of
        ddof 0); or one number (shape () or (1,)), whose standard error is then the sd
        over 1000 bootstrap resamples of the cell's replicates (seeded per cell). Each
        becomes the columns ``NAME``, ``NAME_se`` and ``NAME_se_method`` (``sd /
        sqrt(R)`` or ``bootstrap, B = 1000``), and the variables ``NAME`` and
        ``NAME_se`` of the Dataset. They are per coordinate: with ``coords="mean"``
        (and not ``as_dataset``) they are refused before anything is computed.
        ``ldpsim summarize --statistic NAME`` takes the ones installed packages declare
        (entry-point group ``ldpsim.statistics``).

    Returns
    -------
    pandas.DataFrame or xarray.Dataset
        One column per grid axis, ``method``, (``checkpoint``,) ``coord`` (with
        ``coords="all"``), then the statistics of ``ldpsim summarize --format csv``:
        ``coverage``, ``coverage_se``, ``length``, ``length_se``, ``n_done``, the
        diagnostics (``predicted_coverage``, ``bias_over_sd``, ``variance_ratio``, each
        with ``_se``) and the mean squared errors (``mse``, ``mse_last``, with ``_se``
        and ``_n_done``), then your ``statistics``. Statistics without replicates are NaN.

    Raises
    ------
    InputError
        A path that is not a store, or a damaged store (also behind a lazy Dataset); a
        Dataset that is not a store's: a variable or dimension missing (a selection of
        one label drops its dimension), an empty selection, a label twice; an unknown
        ``coords``, a ``target_se`` outside (0, 1); a statistic's name that is not an identifier or
        is the summary's own, a statistic that raises or returns neither a number nor R
        numbers (one message naming it and the cell), statistics with ``coords="mean"``;
        an argument of a wrong type
        (:class:`InputTypeError`, also a TypeError).

    Examples
    --------
    One-sided coverage, a mean of per-replicate values (se sd / sqrt(R)), and the median
    length, one number per cell (a bootstrap se):

    >>> import numpy as np
    >>> table = summarize(  # doctest: +SKIP
    ...     "demo.zarr",
    ...     statistics={
    ...         "upper_cover": lambda c: c.upper >= c.truth,
    ...         "median_length": lambda c: np.median(c.upper - c.lower),
    ...     },
    ... )
    >>> table[["method", "upper_cover", "median_length_se_method"]]  # doctest: +SKIP
    """
    import numpy as np
    import pandas as pd

    from ldpsim.pipeline.summary.cell_statistics import check_statistics
    from ldpsim.pipeline.summary.summary import TARGET_SE
    from ldpsim.pipeline.summary.summary import summarize as summary_of
    from ldpsim.pipeline.summary.tables import check_statistics_shown, summary_records

    _check_dataset(ds, "summarize")
    try:  # the names again against the store's axes, in summary_of
        statistics = check_statistics(statistics)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    if not isinstance(coords, str) or coords not in ("all", "mean"):
        raise (InputError if isinstance(coords, str) else InputTypeError)(
            "The 'coords' parameter of summarize must be 'all' or 'mean'. "
            f"Got {shown_value(coords)}."
        )
    as_dataset = _check_bool(as_dataset, "as_dataset", "summarize")
    if not as_dataset:  # statistics the table would leave out, before computing them
        check_statistics_shown(statistics, coords, coords)
    target_se = TARGET_SE if target_se is None else _check_target_se(target_se)
    summary = summary_of(_loaded(ds), target_se, statistics=statistics)
    if as_dataset:
        return summary
    rows = summary_records(summary, coord_means=coords == "mean")
    frame = pd.DataFrame.from_records(rows)
    for column in frame.columns:  # the records' None (NaN in JSON) back to NaN
        if frame[column].dtype == object and frame[column].map(_is_number_or_none).all():
            frame[column] = frame[column].astype(np.float64)
    return frame


def _is_number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def compare(
    ds: xr.Dataset | str | os.PathLike[str],
    a: str,
    b: str,
    *,
    as_dataset: bool = False,
) -> pd.DataFrame | xr.Dataset:
    """Paired comparison of two methods: coverage difference and length ratio.

    The Python side of ``ldpsim summarize STORE --compare A,B``. Both methods are
    computed on the same replicates, so the standard errors are those of the
    per-replicate differences (:func:`ldpsim.pipeline.summary.compare.compare_methods`), smaller
    than the two binomial errors combined. Only replicates that are done and where both
    methods have finite bounds count (``n_paired``).

    Parameters
    ----------
    ds : xarray.Dataset or str or os.PathLike
        A store's Dataset (:func:`open_store`, :func:`run`) or its path.
    a, b : str
        Two different method labels of the store: ``coverage_diff`` is a's coverage
        minus b's, ``length_ratio`` a's mean length over b's.
    as_dataset : bool, default False
        Return the xarray Dataset (per grid point, [checkpoint,] coordinate, with the
        means over the coordinates prefixed ``coord_mean_``) instead of a DataFrame of
        one row per grid point, [checkpoint and] coordinate.

    Returns
    -------
    pandas.DataFrame or xarray.Dataset
        ``coverage_diff``, ``coverage_diff_se``, ``length_ratio``, ``length_ratio_se``
        and ``n_paired``.

    Raises
    ------
    InputError
        ``a`` or ``b`` is not a method of the store, or they are the same; ``ds`` is
        not a Dataset or a path (:class:`InputTypeError`), not a readable store, a
        damaged store (also behind a lazy Dataset), or a Dataset that is not a store's
        (as for :func:`summarize`).

    Examples
    --------
    >>> table = compare("outputs/demo.zarr", "bb", "sn")  # doctest: +SKIP
    >>> table[["tau", "n", "coverage_diff", "coverage_diff_se"]].head(2)  # doctest: +SKIP
    """
    from ldpsim.pipeline.summary.compare import check_pair, compare_methods

    _check_dataset(ds, "compare")
    as_dataset = _check_bool(as_dataset, "as_dataset", "compare")
    for name, label in (("a", a), ("b", b)):
        if not isinstance(label, str):
            raise InputTypeError(
                f"The {name!r} parameter of compare must be a method label (str). "
                f"Got {shown_value(label)}."
            )
    ds = _loaded(ds)
    try:
        a, b = check_pair(a, b, [str(m) for m in ds["method"].values], "compare")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    comparison = compare_methods(ds, a, b)
    if as_dataset:
        return comparison
    per_coord = [name for name in comparison.data_vars if not name.startswith("coord_mean_")]
    frame = comparison[per_coord].to_dataframe().reset_index()
    # Only the coordinates a grid point has, as summarize's rows and the csv records: a
    # case of d = 1 beside one of d = 3 has one row per grid point, not three.
    return frame[frame["coord_exists"].to_numpy(dtype=bool)].reset_index(drop=True)


def plot(
    ds: xr.Dataset | str | os.PathLike[str],
    kind: str = "coverage",
    *,
    zip_plots: bool = False,
    zip_coord: int = 0,
) -> Figure | dict[str, Figure]:
    """Draw one of a store's figures (those ``ldpsim plot`` saves), or all of them.

    Parameters
    ----------
    ds : xarray.Dataset or str or os.PathLike
        The store's Dataset (from :func:`run` or :func:`open_store`) or its path.
    kind : str, default "coverage"
        One of :data:`ldpsim.pipeline.report.plots.FIGURE_KINDS`: ``coverage`` (with +-2 SE
        bars and the nominal level), ``length``, ``diagnostics`` (bias / sd and
        variance ratio), ``privacy-length``, ``privacy-coverage``, ``errors`` (mean
        squared errors at the checkpoints), ``sparsity``, ``running`` (the running
        interval of one replicate); or ``"all"`` for every figure the store has data for.
    zip_plots : bool, default False
        With ``kind="all"`` (``ldpsim plot --zip``), add a zip plot per grid point
        (Morris, White & Crowther 2019, section 5.2): every replicate's interval as a
        horizontal line ranked by the centile of ``|z|``, coloured by whether it covers,
        one panel per method (:func:`ldpsim.pipeline.report.zip_plot.store_zip_plots`). Their
        keys are their file stems, ``zip-<grid point>`` (``zip`` without grid axes); a
        grid point without a done replicate has none.
    zip_coord : int, default 0
        The coordinate the zip plots draw, in [0, d).

    Returns
    -------
    matplotlib.figure.Figure or dict of str to matplotlib.figure.Figure
        The figure, which Jupyter shows inline as the value of a cell, or for ``"all"``
        kind -> figure. The figures are made without pyplot and are not registered with
        it; save one with ``fig.savefig(path)``.

    Raises
    ------
    InputError
        An unknown kind (a ``kind`` or ``zip_coord`` of a wrong type:
        :class:`InputTypeError`), a kind the store has no data for (e.g. ``errors``
        without checkpoints), a ``ds`` that is neither a Dataset nor a path
        (:class:`InputTypeError`), a path that is not a store, a damaged store (also
        behind a lazy Dataset), a Dataset that is not a store's (as for
        :func:`summarize`);
        ``zip_plots`` with a kind other than ``"all"``, a ``zip_coord`` that is not
        one of the store's coordinates, or one other than 0 without ``zip_plots`` (as
        ``ldpsim plot`` refuses ``--zip-coord`` without ``--zip``).

    Examples
    --------
    >>> fig = plot("outputs/demo.zarr", "coverage")  # doctest: +SKIP
    >>> fig.savefig("coverage.png", dpi=150)  # doctest: +SKIP
    """
    from ldpsim.pipeline.report.plots import FIGURE_KINDS, store_figures

    _check_dataset(ds, "plot")
    if not isinstance(kind, str):
        raise InputTypeError(
            f"The 'kind' parameter of plot must be a figure kind (str): all, "
            f"{', '.join(FIGURE_KINDS)}. Got {shown_value(kind)}."
        )
    if isinstance(zip_coord, bool) or not isinstance(zip_coord, numbers.Integral):
        raise InputTypeError(
            f"The 'zip_coord' parameter of plot must be an int, a coordinate in [0, d). "
            f"Got {shown_value(zip_coord)}."
        )
    if kind != "all" and kind not in FIGURE_KINDS:
        raise InputError(
            f"Unknown figure kind {shown_value(kind)}. Kinds are: all, {', '.join(FIGURE_KINDS)}."
        )
    zip_plots = _check_bool(zip_plots, "zip_plots", "plot")
    if zip_plots and kind != "all":
        raise InputError(
            "zip_plots adds the zip plots to every figure: give kind='all' with it. "
            f"Got kind={kind!r}."
        )
    if not zip_plots and zip_coord != 0:
        raise InputError(
            f"zip_coord chooses the zip plots' coordinate: give zip_plots=True with it. "
            f"Got zip_coord={shown_value(zip_coord)} without it."
        )
    data = _loaded(ds)
    figures = store_figures(data, None if kind == "all" else [kind])
    if kind == "all":
        if zip_plots:
            from ldpsim.pipeline.report.zip_plot import store_zip_plots

            drawn = store_zip_plots(data, coord=zip_coord)
            figures.update({p.stem: p.figure for p in drawn.plots})
        return figures
    if kind not in figures:
        available = ", ".join(store_figures(data))
        raise InputError(
            f"This store has no data for the {kind!r} figure; its figures are: {available}."
        )
    return figures[kind]


def replay(
    store: str | os.PathLike[str],
    *,
    rep: int,
    point: Mapping[str, Any] | None = None,
    pdb: bool = False,
) -> ReplicateResult:
    """Rerun one replicate of a store in this process, to see or debug its failure.

    ``ldpsim replay STORE --rep R [--point AXIS=VALUE ...] [--pdb]``. The replicate is
    computed from its failure record's spec and seed (``STORE/ldpsim/errors/``) as its
    task computed it, so a recorded failure happens again: a failed replicate raises its
    exception (a non-finite run's ``NonFiniteRun``, a plugin's bug), a failed interval
    method raises the method's own. A line saying which record is replayed, and one
    saying whether the failure happened again, are printed. A replicate that did not
    fail is rerun the same way from the stored sweep and returns its values; a line
    says whether they equal the stored ones bit for bit, or what differs and which
    code versions computed the stored ones and runs now (a unit changed since, with
    ``accept_code_change``). A store that used units registered at run time
    (:func:`register`) needs them registered in this process first.

    Parameters
    ----------
    store : str or os.PathLike
        A store written by :func:`run` or ``ldpsim run``.
    rep : int
        The replicate, in [0, R) for R replicates per grid point.
    point : mapping of str to object, or None, default None
        The grid point: axis -> value, a value or its text as the tables write it
        (``{"tau": 0.5, "n": "1e4"}``). Axes left out may take any value as long as
        one grid point is left, or one with a recorded failure (of ``rep``, else of
        any replicate); so a store with one failed grid point needs none.
    pdb : bool, default False
        On a failure, print the traceback and enter pdb's post-mortem debugger where
        it was raised (``--pdb``), then raise it.

    Returns
    -------
    ldpsim.tasks.replicate.ReplicateResult
        The replicate's values (``estimate``, ``lower`` and ``upper`` per method, ...),
        when it runs without failing.

    Raises
    ------
    InputError
        Not a store, a ``rep`` out of range, an axis or value the store lacks, or
        several grid points to choose from (the message lists them); a store that used
        units registered at run time that this process has not registered (the message
        gives the calls); a recorded spec that no longer validates (a plugin
        uninstalled, a parameter renamed); a damaged store
        (:class:`ldpsim.pipeline.errors.StoreDamage`); arguments of a wrong type
        (:class:`InputTypeError`).
    Exception
        The failure replayed: the replicate's or the interval method's own exception.

    Examples
    --------
    >>> replay("outputs/demo.zarr", rep=3, point={"tau": 0.9, "n": "1e4"})  # doctest: +SKIP
    Replaying outputs/demo.zarr/ldpsim/errors/1_0__3.json (replicate failure of rep 3 at
    tau = 0.9, n = 1e4, seed 7, ...): NonFiniteRun: non-finite theta_bar: ...
    The replicate failed again, with the recorded error.
    Traceback (most recent call last):
    ...
    NonFiniteRun: non-finite theta_bar: ...
    >>> good = replay("outputs/demo.zarr", rep=0, point={"tau": 0.5, "n": "1e4"})  # doctest: +SKIP
    Replaying rep 0 of tau = 0.5, n = 1e4 (seed 7): no failure is recorded for it.
    Equal to the store, bit for bit: the estimate, the last iterate, ...
    >>> good.estimate  # doctest: +SKIP
    array([0.01174905])
    """
    from ldpsim.pipeline.compute.replay import find_target
    from ldpsim.pipeline.compute.replay import replay as rerun

    path = _optional_path(store, "store", "replay")
    if path is None:
        raise InputTypeError("The 'store' parameter of replay must be a store's path. Got None.")
    message = f"The 'rep' parameter of replay must be an int >= 0. Got {shown_value(rep)}."
    if isinstance(rep, bool) or not isinstance(rep, numbers.Integral):
        raise InputTypeError(message)
    if rep < 0:
        raise InputError(message)
    if point is not None and (
        not isinstance(point, Mapping) or not all(isinstance(axis, str) for axis in point)
    ):
        raise InputTypeError(
            "The 'point' parameter of replay must be a mapping of grid axes to values, or "
            f"None. Got {shown_value(point)}."
        )
    pdb = _check_bool(pdb, "pdb", "replay")
    return rerun(find_target(path, int(rep), point), pdb=pdb)


def _on_backend(sweep: Sweep, backend: object, function: str) -> Sweep:
    """``sweep`` on ``backend`` (the ``backend`` parameter of ``function``), checked."""
    if not isinstance(backend, str) or backend not in ("cpu", "gpu"):
        raise (InputError if isinstance(backend, str) else InputTypeError)(
            f"The 'backend' parameter of {function} must be 'cpu', 'gpu' or None. Got "
            f"{shown_value(backend)}."
        )
    from ldpsim.pipeline.sweep import with_backend

    return with_backend(sweep, backend)


def register(unit: type) -> type:
    """Make a model, mechanism or interval method class usable by sweeps, without a package.

    For a unit written in a notebook or a script: it is checked as an installed plugin
    is (``docs/extending.md``), known by its ``name`` in every sweep this process loads
    afterwards, and sent to the Dask workers of every :func:`run` whose sweep uses it (a
    worker plugin, so workers that join later get it too; ``client=`` and ``scheduler=``
    clusters alike). Registering a class of the same name again (the cell edited and run
    again) replaces it, without restarting the kernel. Its source is hashed (the class's
    and its compiled callbacks'; in a notebook, where Python cannot read a class's
    source, each of its functions' and its attributes'; a function made by ``exec`` of
    a string, which has no source, by its code object), and a store records the hash,
    as it does a plugin's: computing into a store written with another version of it is
    refused unless ``accept_code_change``. A module of yours that the class imports is
    not hashed: an edit there is not seen (``docs/extending.md``).

    Parameters
    ----------
    unit : type
        A frozen, keyword-only dataclass deriving from
        :class:`~ldpsim.tasks.models.base.Model`,
        :class:`~ldpsim.tasks.mechanisms.base.Mechanism` or
        :class:`~ldpsim.tasks.intervals.base.IntervalMethod`, defined at the top level
        of the notebook or script (the workers get it pickled by value).

    Returns
    -------
    type
        ``unit`` itself, so that ``@register`` decorates a class.

    Raises
    ------
    InputTypeError
        ``unit`` is not a subclass of one of the three bases.
    InputError
        It breaks a rule of its kind (no compiled callback, a parameter named like a
        spec key, ...), or has the name of a built-in unit or an installed plugin; one
        line saying which.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> import numpy as np
    >>> from scipy import stats
    >>> from ldpsim.tasks.intervals.base import IntervalMethod
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Wald(IntervalMethod):
    ...     \"\"\"theta_bar +- z sd, the sd from the oracle's asymptotic covariance.\"\"\"
    ...     name = "wald"
    ...     def interval(self, stats_, level, rng):
    ...         sd = np.sqrt(np.diag(stats_.asymptotic_cov) / stats_.n)
    ...         half = stats.norm.ppf(0.5 + level / 2) * sd
    ...         return stats_.theta_bar - half, stats_.theta_bar + half
    >>> register(Wald)  # doctest: +SKIP
    <class '__main__.Wald'>
    >>> sweep = load_sweep({"replicates": 20, "spec": {"model": "quantile", "n": 1000},
    ...                     "methods": {"wald": {}}}, name="mine")  # doctest: +SKIP
    """
    from ldpsim.tasks.plugins import register as register_unit

    try:
        register_unit(unit)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return unit
