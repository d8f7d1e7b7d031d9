"""Dask clusters by name: cluster/<NAME>.yaml (or a user's YAML file) -> a Client."""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import yaml

from ldpsim.pipeline.compute.limits import usable_cores, usable_memory
from ldpsim.pipeline.compute.signals import check as check_signals
from ldpsim.pipeline.compute.worker_start import (
    WORKER_START_OPTION,
    WORKER_STARTS,
    forked_workers,
    forks,
)
from ldpsim.pipeline.errors import InputError
from ldpsim.tasks.validation import did_you_mean

if TYPE_CHECKING:  # distributed is imported when a cluster is started or reached
    from distributed import Client

#: Where the shipped cluster configurations live (repository's cluster/ folder).
CLUSTER_DIR = Path(__file__).resolve().parents[2] / "cluster"  # ldpsim/cluster
CONFIG_KEYS = ("kind", "options", "scale", "adapt", "start_timeout")
#: Default seconds from the start of a cluster until its first worker has connected
#: (cluster-file key ``start_timeout``, option ``--start-timeout``). Local workers start
#: in seconds, even on a loaded machine; batch jobs may wait in the queue first.
START_TIMEOUT = {"local": 120.0, "local-gpu": 120.0, "slurm": 600.0, "pbs": 600.0}
#: The same for ``--scheduler``: reaching the scheduler and finding a worker there.
SCHEDULER_START_TIMEOUT = 120.0
#: Seconds to reach a running scheduler (distributed's default connect timeout).
SCHEDULER_CONNECT_TIMEOUT = 30.0


#: The preload module of every local cluster's workers: they leave Ctrl-C to the driver.
LOCAL_WORKER_PRELOAD = "ldpsim.pipeline.compute.worker_setup"
#: The local cluster's option (cluster/local.yaml, ``--cluster-option``) that turns
#: distributed's statistical profiler of the workers' tasks (the dashboard's Profile
#: page) on or off; null keeps Dask's setting (:data:`PROFILE_KEY`, on by default). Off
#: in local.yaml: it samples each task's Python stack every 10 ms, which cost the
#: 72,000-replicate probe 7% of its wall time (docs/performance.md), and ldpsim's tasks
#: spend their time in compiled code it cannot see into.
WORKER_PROFILE_OPTION = "worker_profile"
PROFILE_KEY = "distributed.worker.profile.enabled"
#: ``dashboard_address: auto`` (cluster/local.yaml): a dashboard on a free loopback port
#: (:data:`AUTO_DASHBOARD_ADDRESS`) for a run estimated at :data:`DASHBOARD_SECONDS` or
#: more on its workers (the cost model's core-seconds of the whole sweep, done
#: replicates included, over the worker count), none for a shorter one; ``local-gpu``
#: takes it too and always starts one. Starting it costs the driver about 0.3
#: CPU-seconds (bokeh's imports and pages) before the first task: 0.14 s of the
#: 72,000-replicate probe's 3.04 (docs/performance.md), and such a run is over before a
#: browser has loaded the page.
DASHBOARD_AUTO = "auto"
#: ``memory_limit: "auto"``: the memory this process may use, split evenly between a
#: local cluster's workers (:func:`shares_memory`), as without a ``memory_limit``.
AUTO_MEMORY = "auto"
DASHBOARD_SECONDS = 30.0
AUTO_DASHBOARD_ADDRESS = "127.0.0.1:0"
#: Dask's housekeeping intervals in a local cluster (its scheduler and nannies run in the
#: driver's event loop), each as distributed ships it and as ldpsim sets it: the event
#: loop's responsiveness check, the system monitor (the dashboard's CPU and memory
#: plots), and how often each nanny and worker reads its worker's memory (against the
#: memory limit: ldpsim's tasks hold no data to spill, and twice a second still stops a
#: runaway worker). At distributed's values the driver's loop used 0.07-0.09
#: CPU-seconds a second with 2 idle workers on the 2-core machine; the whole idle
#: cluster used 9.1 CPU-seconds a minute, 2.4-2.5 with the first two changed, 1.6 with
#: all three (docs/performance.md). A value the user configured otherwise is kept.
HOUSEKEEPING = {
    "distributed.admin.tick.interval": ("20ms", "200ms"),
    "distributed.admin.system-monitor.interval": ("500ms", "2s"),
    "distributed.worker.memory.monitor-interval": ("100ms", "500ms"),
}


def housekeeping_settings(profile: bool | None = None) -> dict[str, Any]:
    """The Dask configuration a local cluster is made under: :data:`HOUSEKEEPING`'s
    intervals where distributed's shipped value is still set (a value the user configured
    otherwise is kept), and the workers' profiler on or off (``profile``; None keeps
    Dask's setting, :data:`PROFILE_KEY`)."""
    import dask
    import distributed.config  # noqa: F401  (registers distributed's defaults with dask)

    settings = {
        key: ours
        for key, (shipped, ours) in HOUSEKEEPING.items()
        if dask.config.get(key) == shipped
    }
    if profile is not None:
        settings[PROFILE_KEY] = profile
    return settings


def local_size(options: dict[str, Any]) -> dict[str, Any]:
    """How large a local cluster of ``options`` is: its ``n_workers``, and its workers'
    ``memory_limit`` where ldpsim sets it.

    By default one worker per usable core
    (:func:`~ldpsim.pipeline.compute.limits.usable_cores`), fewer where the memory is
    shared out among them (:func:`shares_memory`) and each would get less than
    :data:`WORKER_MEMORY_MIN`; at least 1. Where it is shared out and a cgroup of this
    process allows less memory than Dask reads, each worker's limit is its share of that
    (:func:`~ldpsim.pipeline.compute.limits.usable_memory`): Dask's own would let the
    kernel kill the workers before Dask pauses them.
    """
    workers = options.get("n_workers") or usable_cores()
    if options.get("n_workers") is None and shares_memory(options):
        workers = min(workers, fitting_workers(usable_memory()))
    return {"n_workers": workers, **memory_share(options, workers)}


def fitting_workers(memory: int) -> int:
    """The most workers that ``memory`` bytes, shared out, give :data:`WORKER_MEMORY_MIN`
    each; at least 1."""
    return max(1, memory // WORKER_MEMORY_MIN)


def memory_share(options: dict[str, Any], workers: int) -> dict[str, int]:
    """``{"memory_limit": bytes}`` for each of the ``workers`` of a local cluster of
    ``options`` where it shares the memory out (:func:`shares_memory`) and a cgroup of
    this process allows less than Dask reads
    (:func:`~ldpsim.pipeline.compute.limits.usable_memory`), else ``{}`` (Dask's own
    share is right); also for ``local-gpu``'s workers, GPU and CPU together. A
    ``memory_limit: "auto"`` gets the share always: Dask's worker reads it as its
    threads' part over the machine's cores, not over the cluster's workers."""
    if not shares_memory(options):
        return {}
    from distributed.system import MEMORY_LIMIT

    memory = usable_memory()
    if memory < MEMORY_LIMIT or options.get("memory_limit") == AUTO_MEMORY:
        return {"memory_limit": memory // workers}
    return {}


def shares_memory(options: dict[str, Any]) -> bool:
    """Whether a local cluster of ``options`` shares the memory this process may use
    (:func:`~ldpsim.pipeline.compute.limits.usable_memory`) out among its workers, each
    its part as its limit: Dask's default without a ``memory_limit``, for process
    workers and for workers that are threads of this process alike (each of those
    compares the whole process's memory with its part). ``memory_limit: "auto"`` is
    that too, as distributed's ``LocalCluster`` documents it ("split evenly between
    the workers")."""
    return options.get("memory_limit", AUTO_MEMORY) == AUTO_MEMORY


def _local(options: dict[str, Any]):
    options = {**options, **local_size(options)}
    # As the shipped files and local-gpu: a worker that fails to start (a preload not
    # found) otherwise logs its traceback before ldpsim's one line saying so.
    options.setdefault("silence_logs", "CRITICAL")
    # The workers are in the driver's process group (a terminal's Ctrl-C reaches them):
    # distributed's preload runs ldpsim's set-up in each, also in one a nanny restarts.
    preload = options.get("preload") or []
    preload = [preload] if isinstance(preload, str) else list(preload)
    options["preload"] = [*preload, LOCAL_WORKER_PRELOAD]
    from distributed import LocalCluster

    forked = forks(options)
    options.pop(WORKER_START_OPTION, None)
    profile = options.pop(WORKER_PROFILE_OPTION, None)
    if options.get("dashboard_address") == DASHBOARD_AUTO:  # not resolved by connect()
        options["dashboard_address"] = auto_dashboard(None)
    if "dashboard_address" in options and options["dashboard_address"] is None:
        # No dashboard: distributed's scheduler still serves its health and metrics
        # pages, at port 8787 unless told otherwise: at a free loopback port instead.
        options["dashboard_address"] = AUTO_DASHBOARD_ADDRESS
        options["scheduler_kwargs"] = {
            **(options.get("scheduler_kwargs") or {}),
            "dashboard": False,
        }
    if options.get("processes") is False and "protocol" not in options:
        # Threads in this process: distributed would talk inproc://, which takes no host.
        options["protocol"] = "tcp://"
    import dask

    # Each nanny hands its worker the configuration of the moment it is made (here).
    with forked_workers(forked), dask.config.set(housekeeping_settings(profile)):
        return LocalCluster(**options)


#: The options of a ``local-gpu`` cluster (cluster/local-gpu.yaml).
LOCAL_GPU_OPTIONS = frozenset(
    {
        "gpu_workers",
        "cpu_workers",
        "launches_per_gpu",
        "threads_per_worker",
        "host",
        "dashboard_address",
        "silence_logs",
        "memory_limit",
        WORKER_START_OPTION,
    }
)


def visible_gpus() -> int:
    """How many CUDA devices this process sees (``CUDA_VISIBLE_DEVICES``, else the
    driver's count; numba's simulator counts one); 0 without a CUDA driver."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return len([d for d in listed.split(",") if d.strip() and d.strip() != "-1"])
    try:
        from numba import cuda

        return len(cuda.gpus)
    except Exception:  # no driver, no library: no GPU
        return 0


def _local_gpu(options: dict[str, Any]):
    """One worker per visible GPU and CPU workers for the interval methods, on this machine.

    A GPU worker sees its own device only (``CUDA_VISIBLE_DEVICES``) and declares the
    resource "GPU" = ``launches_per_gpu`` (default 4), each launch taking 1: so many
    launches (tasks of other grid points) run side by side on the device, each on its
    thread's own default CUDA stream (:func:`ldpsim.tasks.gpu.kernel.run_gpu_replicates`).
    """
    from distributed import Nanny, Scheduler, SpecCluster

    options = dict(options)
    gpus = options.get("gpu_workers")
    gpus = visible_gpus() if gpus is None else gpus
    if gpus < 1:
        raise InputError(
            "The local-gpu cluster found no GPU (CUDA_VISIBLE_DEVICES and the CUDA driver "
            "list none); run with --backend cpu on a local cluster, or on a machine with "
            "a GPU."
        )
    cpus = options.get("cpu_workers")
    cpus = max(0, usable_cores() - gpus) if cpus is None else cpus
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d.strip() for d in listed.split(",")] if listed else [str(i) for i in range(gpus)]
    silence = options.get("silence_logs", "CRITICAL")
    host = options.get("host", "127.0.0.1")
    base = {
        "host": host,
        "nthreads": options.get("threads_per_worker") or 1,
        "preload": [LOCAL_WORKER_PRELOAD],
        "silence_logs": silence,
        "dashboard": False,
        **({"memory_limit": options["memory_limit"]} if "memory_limit" in options else {}),
        **memory_share(options, gpus + cpus),
    }
    launches = options.get("launches_per_gpu") or 4
    workers = {
        f"gpu-{i}": {
            "cls": Nanny,
            "options": {
                **base,
                "nthreads": max(base["nthreads"], launches),
                "resources": {"GPU": launches},
                "env": {"CUDA_VISIBLE_DEVICES": devices[i % len(devices)]},
            },
        }
        for i in range(gpus)
    }
    workers.update({f"cpu-{j}": {"cls": Nanny, "options": dict(base)} for j in range(cpus)})
    dashboard = options.get("dashboard_address")
    dashboard = auto_dashboard(None) if dashboard == DASHBOARD_AUTO else dashboard
    scheduler = {
        "cls": Scheduler,
        "options": {
            "host": host,
            "dashboard": dashboard is not None,
            # Without one, the scheduler's health page on a free loopback port (not 8787).
            "dashboard_address": AUTO_DASHBOARD_ADDRESS if dashboard is None else dashboard,
        },
    }
    # Forked from the server that imported ldpsim's worker modules, as the local
    # cluster's: each worker then starts without importing them (a GPU worker imports
    # numba's CUDA target itself, after the fork: the server never touches CUDA).
    with forked_workers(forks(options)):
        return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=silence)


def _batch_options(options: dict[str, Any]) -> dict[str, Any]:
    """Defaults for a batch cluster: the driver's Python, an absolute log directory."""
    options = dict(options)
    if options.get("python") is None:
        options["python"] = sys.executable
    for key in ("log_directory", "local_directory"):
        value = options.get(key)
        if isinstance(value, str) and "$" not in value:
            # relative to where `ldpsim run` starts; absolute in the job script
            options[key] = str(Path(value).expanduser().absolute())
    return options


def jobqueue() -> ModuleType:
    """``dask_jobqueue``, imported without taking Ctrl-C from ldpsim.

    Its module ``dask_jobqueue.runner`` (imported with its SLURM cluster) sets the
    process's SIGINT handler to ``sys.exit()`` when it is first imported. Imported
    after ``ldpsim run`` had set its own handler
    (:func:`ldpsim.pipeline.compute.signals.handle_signals`), it replaced it: Ctrl-C
    stopped a ``--cluster slurm`` run with exit code 0, no line and no run record,
    whatever was left to compute (and in a notebook, the kernel's interrupt raised
    SystemExit). The handler in place before the import is put back (in the main
    thread, the only one where Python sets handlers).
    """
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT) if main else None
    try:
        import dask_jobqueue
        import dask_jobqueue.slurm  # the module that sets the handler
    finally:
        if before is not None and signal.getsignal(signal.SIGINT) is not before:
            signal.signal(signal.SIGINT, before)
    return dask_jobqueue


def _slurm(options: dict[str, Any]):
    return jobqueue().SLURMCluster(**_batch_options(options))


def _pbs(options: dict[str, Any]):
    return jobqueue().PBSCluster(**_batch_options(options))


#: Backends by name (the ``kind`` of a cluster file).
BACKENDS = {"local": _local, "local-gpu": _local_gpu, "slurm": _slurm, "pbs": _pbs}


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key written twice in one mapping (the safe
    loader keeps the last: ``kind: local`` then ``kind: slurm`` would run on SLURM).

    Merge keys (``<<: *defaults``) work as in the safe loader, and a key written in the
    mapping may override a merged one.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        # The keys as written, before the safe loader flattens the merged ones in (and
        # refuses a key that cannot be hashed, such as a list).
        written = [key for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        mapping = super().construct_mapping(node, deep=deep)
        seen: set[Any] = set()
        for key_node in written:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:  # (true and 1 are one key to Python: named as written)
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key_node.value!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return mapping


def available_clusters() -> list[str]:
    return sorted(p.stem for p in CLUSTER_DIR.glob("*.yaml"))


def load_cluster_config(name_or_path: str) -> dict[str, Any]:
    """Read cluster/<NAME>.yaml or a YAML file; validate its keys.

    A bare name without a suffix (``local``) is a shipped cluster's where there is one;
    anything with a folder (``./local``, ``sub/x``) or a suffix is the user's file.

    Raises
    ------
    InputError
        Unknown name, missing file, a file that is not UTF-8 or cannot be read, YAML
        error, unknown key or kind, a bad option (:func:`check_options`).
    """
    path = Path(name_or_path)
    bare = not path.suffix and "/" not in name_or_path and os.sep not in name_or_path
    if bare and (CLUSTER_DIR / f"{name_or_path}.yaml").exists():
        path = CLUSTER_DIR / f"{name_or_path}.yaml"
    elif not bare:  # named in messages by its absolute path (Path("./local") is 'local')
        path = Path(os.path.abspath(name_or_path))
    if not path.is_file():
        names = available_clusters()
        raise InputError(
            f"--cluster {name_or_path!r}{did_you_mean(name_or_path, names)} is neither a "
            f"cluster name nor a YAML file. Cluster names are: {', '.join(names)}."
        )
    try:
        with path.open(encoding="utf-8") as stream:  # PyYAML's messages name the file
            config = yaml.load(stream, Loader=UniqueKeyLoader) or {}
    except yaml.YAMLError as exc:
        text = " ".join(str(exc).split())  # PyYAML's lines and the caret, on one line
        raise InputError(f"Cluster file {str(path)!r} is not valid YAML: {text}") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"Cluster file {str(path)!r} is not UTF-8 text (byte {exc.start}): save it as UTF-8."
        ) from None
    except OSError as exc:
        raise InputError(f"Cannot read cluster file {str(path)!r}: {exc.strerror}.") from None
    if not isinstance(config, dict):
        raise InputError(f"Cluster file {str(path)!r} must be a mapping with keys {CONFIG_KEYS}.")
    for key in config:
        if key not in CONFIG_KEYS:
            raise InputError(
                f"Unknown key {key!r}{did_you_mean(key, CONFIG_KEYS)} in cluster file "
                f"{str(path)!r}. Allowed keys are: {', '.join(CONFIG_KEYS)}."
            )
    kind = config.get("kind")
    if kind not in BACKENDS:
        raise InputError(
            f"The 'kind' of cluster file {str(path)!r} must be one of "
            f"{', '.join(repr(k) for k in BACKENDS)}. Got {kind!r}{did_you_mean(kind, BACKENDS)}."
        )
    options = config.get("options") or {}
    if not isinstance(options, dict):
        raise InputError(f"The 'options' of cluster file {str(path)!r} must be a mapping.")
    config["options"] = options
    check_options(kind, options, f"cluster file {str(path)!r}")
    check_scaling(config, f"cluster file {str(path)!r}")
    if "start_timeout" in config:
        config["start_timeout"] = check_start_timeout(
            config["start_timeout"], f"'start_timeout' of cluster file {str(path)!r}"
        )
    return config


#: Keys of a cluster file's ``scale`` and ``adapt`` mappings: name -> (smallest value, meaning).
SCALING_KEYS = {
    "scale": {"jobs": (1, "number of batch jobs")},
    "adapt": {
        "minimum_jobs": (0, "fewest batch jobs"),
        "maximum_jobs": (1, "most batch jobs"),
    },
}


def check_scaling(config: dict[str, Any], source: str) -> None:
    """Refuse an incomplete or mistyped ``scale`` or ``adapt`` mapping of a cluster file.

    ``scale: {jobs: N}`` with N >= 1; ``adapt: {minimum_jobs: A, maximum_jobs: B}`` with
    0 <= A <= B, B >= 1. Both apply to batch clusters (slurm, pbs) only.

    Raises
    ------
    InputError
        A missing or unknown key, a value that is not such an integer, or either
        mapping in the file of a local cluster.
    """
    for section, keys in SCALING_KEYS.items():
        if section not in config:
            continue
        value = config[section]  # an empty `adapt:` (None) is refused: it meant something
        form = ", ".join(
            f"{key}: int >= {low} ({meaning})" for key, (low, meaning) in keys.items()
        )
        expected = f"'{section}' of {source} must be a mapping {{{form}}}"
        if config["kind"] in ("local", "local-gpu"):
            raise InputError(
                f"The '{section}' key of {source} applies to batch clusters (slurm, pbs) "
                "only; a local cluster's size is set by --workers or options.n_workers."
            )
        if not isinstance(value, dict) or set(value) != set(keys):
            raise InputError(f"The {expected}. Got {value!r}.")
        for key, (low, _) in keys.items():
            item = value[key]
            if isinstance(item, bool) or not isinstance(item, int) or item < low:
                raise InputError(f"The {expected}. Got {key}: {item!r}.")
        if section == "adapt" and value["minimum_jobs"] > value["maximum_jobs"]:
            raise InputError(f"The {expected}, minimum_jobs <= maximum_jobs. Got {value!r}.")


def check_start_timeout(value: Any, source: str) -> float:
    """A start timeout in seconds, in (0, inf] (``.inf``: wait for ever).

    Raises
    ------
    InputError
        Not a number, or not positive.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InputError(f"The {source} must be a number of seconds in (0, inf]. Got {value!r}.")
    return float(value)


def parse_cluster_options(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> a dict of cluster options; VALUE is read as YAML.

    ``queue=short``, ``cores=8``, ``account=null``,
    ``worker_extra_args=["--lifetime", "25m"]``, ``scheduler_options={port: 8786}``.

    Raises
    ------
    InputError
        An item without ``=``, an empty key or a VALUE that is not valid YAML.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InputError(f"Expected KEY=VALUE for a cluster option, got {item!r}.")
        try:
            out[key] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise InputError(f"The value of cluster option {key!r} is not valid YAML.") from None
    return out


def allowed_options(kind: str) -> set[str]:
    """Option names a cluster kind accepts: its class's and its workers' keywords."""
    from distributed import LocalCluster, Nanny, Worker

    if kind == "local-gpu":
        return set(LOCAL_GPU_OPTIONS)
    if kind == "local":
        # LocalCluster passes the keywords it does not know on to its Nanny and Worker;
        # worker_start is ldpsim's (ldpsim.pipeline.compute.worker_start).
        inits = (LocalCluster.__init__, Nanny.__init__, Worker.__init__)
        exclude = {"self", "loop", "asynchronous", "start", "worker_class", "scheduler_ip"}
        return _parameters(inits) - exclude | {WORKER_START_OPTION, WORKER_PROFILE_OPTION}
    else:
        queues = jobqueue()
        from dask_jobqueue.core import Job, JobQueueCluster

        cls = {"slurm": queues.SLURMCluster, "pbs": queues.PBSCluster}[kind]
        inits = (cls.__init__, JobQueueCluster.__init__, cls.job_cls.__init__, Job.__init__)
        exclude = {"self", "scheduler", "job_cls", "job_kwargs", "base_class_kwargs"}
    return _parameters(inits) - exclude


def _parameters(inits: tuple[Callable, ...]) -> set[str]:
    """The keyword parameter names of ``inits``."""
    names: set[str] = set()
    for init in inits:
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.add(p.name)
    return names


#: dask-jobqueue's old option names (deprecated), which it ignores where the new one is
#: set (the shipped files set job_script_prologue and worker_extra_args): refused,
#: naming the new one.
RENAMED_BATCH_OPTIONS = {
    "env_extra": "job_script_prologue",
    "job_extra": "job_extra_directives",
    "extra": "worker_extra_args",
    "header_skip": "job_directives_skip",
}
#: Batch options that are lists of strings (a string would give a line per character).
BATCH_LIST_OPTIONS = (
    "job_script_prologue",
    "job_extra_directives",
    "job_directives_skip",
    "worker_extra_args",
)


def check_options(kind: str, options: dict[str, Any], source: str) -> None:
    """Refuse option names the cluster class does not know, and bad values.

    Raises
    ------
    InputError
        An unknown option, or one of dask-jobqueue's old names
        (:data:`RENAMED_BATCH_OPTIONS`); for a local cluster also ``n_workers`` or
        ``threads_per_worker`` not an integer >= 1 (or null), a ``memory_limit`` that is
        not a size, a fraction or "auto", a ``dashboard_address`` that is not
        "[HOST]:PORT" with PORT in [0, 65535] (or null), ``processes`` not true or
        false; for a batch cluster a SLURM ``walltime`` that is not a string, ``cores`` or
        ``processes`` not an integer >= 1 (or more processes than cores), a list option
        (:data:`BATCH_LIST_OPTIONS`) that is not a list of strings, a ``memory`` that is
        not a quoted size; for either a memory that gives a worker less than
        :data:`WORKER_MEMORY_MIN`.
    """
    allowed = allowed_options(kind)
    for key in options:
        if kind in ("slurm", "pbs") and key in RENAMED_BATCH_OPTIONS:
            raise InputError(
                f"The option {key!r} of a {kind} cluster ({source}) is dask-jobqueue's old "
                f"name, ignored where the new one is set: write "
                f"{RENAMED_BATCH_OPTIONS[key]!r}."
            )
        if key not in allowed:
            raise InputError(
                f"Unknown option {key!r}{did_you_mean(key, allowed)} for a {kind} cluster "
                f"({source}). Allowed options are: {', '.join(sorted(allowed))}."
            )
    if kind in ("local", "local-gpu"):
        _check_local_values(kind, options, source)
    else:
        _check_batch_values(kind, options, source)


def _check_counts(
    options: dict[str, Any], lows: dict[str, int], cluster: str, source: str
) -> None:
    """Refuse an option of ``lows`` that is not an integer >= its value there (bools
    refused; null: the default)."""
    for key, low in lows.items():
        value = options.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < low
        ):
            raise InputError(
                f"The {key!r} option of the {cluster} cluster ({source}) must be an integer "
                f">= {low}, or null for the default. Got {value!r}."
            )


def _check_batch_values(kind: str, options: dict[str, Any], source: str) -> None:
    walltime = options.get("walltime")
    if kind == "slurm" and walltime is not None and not isinstance(walltime, str):
        # (PBS reads a bare number as seconds: there a number means what it says.)
        raise InputError(
            f"The 'walltime' option of the slurm cluster ({source}) must be a quoted "
            f'string such as "02:00:00". Got {walltime!r}: YAML reads 2:00:00 unquoted as '
            "a number of seconds (7200), which SLURM takes as minutes."
        )
    _check_counts(options, {"cores": 1, "processes": 1}, kind, source)
    cores, processes = options.get("cores"), options.get("processes")
    if cores is not None and processes is not None and processes > cores:
        raise InputError(
            f"The {kind} cluster ({source}) has processes: {processes} > cores: {cores}; "
            "each worker process needs a core (processes <= cores)."
        )
    memory = options.get("memory")
    if memory is not None:
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(memory) if isinstance(memory, str) else -1
        except ValueError:
            size = -1
        if size <= 0:
            # dask-jobqueue formats only a string (a number: "TypeError: not all
            # arguments converted during string formatting").
            raise InputError(
                f"The 'memory' option of the {kind} cluster ({source}) must be a quoted "
                f'size with its unit, such as "4GB" (the memory of one job). Got {memory!r}.'
            )
        # Each of a job's worker processes gets its share (dask-jobqueue's memory_limit).
        share = size / (processes or 1)
        if share < WORKER_MEMORY_MIN:
            shared = f" (the job's over its {processes} processes)" if processes else ""
            raise InputError(_memory_too_small("memory", kind, source, memory, share, shared))
    for key in BATCH_LIST_OPTIONS:
        value = options.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise InputError(
                f"The {key!r} option of the {kind} cluster ({source}) must be a list of "
                f'strings, e.g. ["source ~/venv/bin/activate"]. Got {value!r}.'
            )


#: The least memory a worker may be given, in bytes (384 MiB): a worker of ldpsim holds
#: about 180 to 240 MB before its first replicate (``ldpsim run demo`` on the project's
#: machine, 2026-12-04), and Dask pauses a worker at 80% of its limit (307 MiB here)
#: and its nanny restarts it at 95%. ``memory_limit: 2``, meant as 2 GB, is 2 bytes to
#: distributed: every worker restarted at once and the run waited without a word; at
#: 300 MB the demo's last task waited on a paused worker, at 320 MB it ran through.
WORKER_MEMORY_MIN = 384 * 2**20


def small_memory_warning() -> str | None:
    """A warning where the memory this process may use
    (:func:`~ldpsim.pipeline.compute.limits.usable_memory`) is less than one worker needs
    (:data:`WORKER_MEMORY_MIN`), else None: the driver, the workers' forkserver and a
    worker share it (``ldpsim run demo`` used 226 MB of a cgroup of 300 MB, and in one of
    150 MB the kernel killed it)."""
    memory = usable_memory()
    if memory >= WORKER_MEMORY_MIN:
        return None
    return (
        f"this process may use {memory / 2**20:.0f} MiB of memory (a container's or a "
        f"job's limit), less than the {WORKER_MEMORY_MIN // 2**20} MiB one local worker "
        "needs beside the driver: Dask may pause the worker, or the kernel stop the run "
        "('Killed')."
    )


def _memory_too_small(
    key: str,
    kind: str,
    source: str,
    value: Any,
    limit: float,
    shared: str = "",
    hint: str | None = None,
) -> str:
    """The refusal of an option ``value`` that gives a worker ``limit`` bytes
    (``shared``: how they were shared out; ``hint``: what to do, by default for a memory
    option)."""
    if hint is None and isinstance(value, (int, float)) and value > 1:
        hint = '; a number counts bytes: write a size with its unit, such as "4GB"'
    elif hint is None:
        hint = "; a fraction is of this machine's memory" if isinstance(value, float) else ""
    size = f"{limit / 2**20:.3g} MiB" if limit >= 2**20 else f"{limit:.3g} bytes"
    return (
        f"The {key!r} option of the {kind} cluster ({source}) gives each worker "
        f"{size}{shared}, less than the {WORKER_MEMORY_MIN // 2**20} MiB "
        f"a worker needs (Dask pauses a worker at 80% of its limit){hint}. Got {value!r}."
    )


#: For distributed's parser while checking a value: the cluster itself warns later.
_SILENT = logging.getLogger("ldpsim.pipeline.compute.clusters.check")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def _check_local_values(kind: str, options: dict[str, Any], source: str) -> None:
    from distributed.utils import clean_dashboard_address
    from distributed.worker_memory import parse_memory_limit

    counts = ("n_workers", "threads_per_worker", "gpu_workers", "launches_per_gpu")
    _check_counts(options, {**dict.fromkeys(counts, 1), "cpu_workers": 0}, kind, source)
    start = options.get(WORKER_START_OPTION)
    if start is not None and start not in WORKER_STARTS:
        raise InputError(
            f"The {WORKER_START_OPTION!r} option of the {kind} cluster ({source}) must be "
            f"{' or '.join(repr(w) for w in WORKER_STARTS)}, or null for the default. "
            f"Got {start!r}."
        )
    processes = options.get("processes")
    if processes is not None and not isinstance(processes, bool):
        raise InputError(
            f"The 'processes' option of the {kind} cluster ({source}) must be true (a "
            f"process per worker) or false (threads in this process). Got {processes!r}."
        )
    profile = options.get(WORKER_PROFILE_OPTION)
    if profile is not None and not isinstance(profile, bool):
        raise InputError(
            f"The {WORKER_PROFILE_OPTION!r} option of the {kind} cluster ({source}) must be "
            f"true or false, or null for Dask's setting. Got {profile!r}."
        )
    if options.get("memory_limit") is not None:
        value = options["memory_limit"]
        try:
            limit = parse_memory_limit(value, 1, logger=_SILENT)
        except Exception:  # also OverflowError (.inf): any error is a bad value
            limit = -1
        # A number above 1 is a count of bytes: 1.5 is neither that nor a fraction
        # (distributed reads it as 1 byte).
        fractional = isinstance(value, float) and value > 1 and not value.is_integer()
        if isinstance(value, bool) or fractional or (limit is not None and limit < 0):
            raise InputError(
                f"The 'memory_limit' option of the {kind} cluster ({source}) must be a size "
                f'such as "4GB", a fraction of the memory in (0, 1], "auto", or 0 or '
                f"null for no limit. Got {value!r}."
            )
        if limit and limit < WORKER_MEMORY_MIN and value != AUTO_MEMORY:
            raise InputError(_memory_too_small("memory_limit", kind, source, value, limit))
    workers = options.get("n_workers")
    if kind == "local" and workers and shares_memory(options):
        # One worker is never refused: where even it gets less, the run warns
        # (small_memory_warning), as it starts one by default.
        memory = usable_memory()
        fit = fitting_workers(memory)
        if workers > fit:
            shared = (
                f" ({memory / 2**30:.3g} GiB, the memory this process may use, over {workers})"
            )
            hint = f"; at most {fit} worker{'s fit' if fit > 1 else ' fits'}"
            raise InputError(
                _memory_too_small(
                    "n_workers", kind, source, workers, memory / workers, shared, hint
                )
            )
    if options.get("dashboard_address") not in (None, DASHBOARD_AUTO):
        value = options["dashboard_address"]
        try:
            ports = [a["port"] for a in clean_dashboard_address(value)]
        except Exception:  # also UnboundLocalError ("host:", a mapping): a bad value
            ports = [-1]
        if isinstance(value, bool) or not all(0 <= int(p) <= 65535 for p in ports):
            raise InputError(
                f"The 'dashboard_address' option of the {kind} cluster ({source}) must be "
                f'"[HOST]:PORT" with PORT in [0, 65535] (0: a free port), "auto" (one for '
                f"a run estimated at {DASHBOARD_SECONDS:.0f} s or more), or null for none. "
                f"Got {value!r}."
            )


def build_cluster(config: dict[str, Any], overrides: dict[str, Any] | None = None):
    """The Dask cluster object of a loaded config, ``overrides`` replacing its options.

    Raises
    ------
    InputError
        The cluster could not start: a bad option value, a network interface this host
        does not have, a scheduler that cannot listen, ...
    """
    kind = config["kind"]
    options = {**config["options"], **(overrides or {})}
    try:
        return BACKENDS[kind](options)
    except InputError:
        raise
    except Exception as exc:  # a bad value, an interface, a worker that failed to start
        raise InputError(
            f"The {kind} cluster could not start: {_root_cause(exc)}{_start_hint(kind)}"
        ) from None


#: An ``if __name__ == "__main__":`` line (either order of the comparison).
MAIN_GUARD = re.compile(
    r"""^\s*if\s+(__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)""",
    re.MULTILINE,
)


def unguarded_main_script() -> str | None:
    """The path of the main module if each spawned process runs it again, unguarded.

    With the 'spawn' or 'forkserver' start method (Dask's default for its workers), a
    new process imports the main module again (as ``__mp_main__``); a script that calls
    ldpsim at its top level, not under ``if __name__ == "__main__":``, then starts a
    cluster inside each worker's start-up, which fails ("Nanny failed to start worker
    process"). None for an interactive session, a notebook, ``python -m package``, a
    script with the guard, or the 'fork' method.
    """
    import dask

    method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    path = getattr(main, "__file__", None)
    # multiprocessing does not run a package's __main__ again (spawn._fixup_main_from_name).
    if method == "fork" or not path or name == "__main__" or name.endswith(".__main__"):
        return None
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None
    return None if MAIN_GUARD.search(text) else str(path)


def _start_hint(kind: str) -> str:
    """What to add to the one line of a local cluster that could not start: the usual
    cause when the main module is a script without a ``__main__`` guard."""
    script = unguarded_main_script() if kind in ("local", "local-gpu") else None
    if script is None:
        return ""
    return (
        f'; if this is a script, put the call under `if __name__ == "__main__":` (each '
        f"worker process runs {script} again, as Python's 'spawn' start method does)"
    )


def _root_cause(exc: BaseException) -> str:
    """The first line of the innermost explicitly chained cause (the useful message)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class StartProblems(logging.Filter):
    """Collect and drop the errors Dask only logs while a cluster starts.

    A batch job that cannot be submitted (sbatch or qsub fails) raises in Dask's event
    loop, which logs a traceback and goes on waiting for a worker that never comes.
    Attached to the handlers of the ``distributed`` and ``tornado`` loggers, this
    filter keeps the first line of each such error for a one-line message instead.
    """

    LOGGERS = ("distributed", "tornado", "tornado.application")

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.handlers: list[logging.Handler] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            self.messages.append(_submit_error(exc) or _root_cause(exc))
        return False  # reported by ldpsim in one line if the start fails

    def __enter__(self) -> StartProblems:
        logging.getLogger("tornado.application").addFilter(self)
        for name in self.LOGGERS:
            for handler in logging.getLogger(name).handlers:
                if handler not in self.handlers:
                    handler.addFilter(self)
                    self.handlers.append(handler)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("tornado.application").removeFilter(self)
        for handler in self.handlers:
            handler.removeFilter(self)


def _submit_error(exc: BaseException) -> str | None:
    """The batch system's own error line if ``exc`` is a failed job submission."""
    text = str(exc)
    if "Command exited with non-zero exit code" not in text:  # dask_jobqueue's wording
        return None
    _, _, stderr = text.partition("stderr:")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return "; ".join(lines) if lines else text.splitlines()[0]


@contextlib.contextmanager
def quiet_distributed() -> Iterator[None]:
    """Silence Dask's log below CRITICAL, e.g. while an ldpsim cluster shuts down.

    Closing workers that are slow to exit (a loaded machine, many workers) logs
    warnings and tracebacks about a shutdown that went as intended.
    """
    # distributed's configuration gives some of its loggers a level of their own
    # (distributed.client: warning), which the parent's does not override: a client
    # closed while it tried to reconnect to a lost scheduler logged its traceback there.
    known = list(logging.root.manager.loggerDict.items())
    loggers = [logging.getLogger("distributed")]
    loggers += [
        logger
        for name, logger in known
        if name.startswith("distributed.") and isinstance(logger, logging.Logger) and logger.level
    ]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def wait_for_first_worker(
    client: Client, deadline: float, problems: StartProblems, where: str
) -> None:
    """Return once a worker is connected; raise InputError at a start error or the deadline.

    ``deadline`` is a :func:`time.monotonic` time (``inf``: none).
    """
    while True:
        check_signals()  # Ctrl-C or SIGTERM (ldpsim run): stop here, the cluster started
        if problems.messages:
            raise InputError(
                f"The {where} could not start a worker: {problems.messages[0]}. Check the "
                "cluster options (e.g. queue, account, interface, python)."
            )
        try:
            client.wait_for_workers(1, timeout=min(1.0, max(deadline - time.monotonic(), 0.1)))
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise InputError(
                    f"No Dask worker of the {where} connected within the start timeout; "
                    "nothing was computed. Check that workers can start and reach the "
                    "scheduler (batch jobs: the queue and the worker logs), or raise "
                    "--start-timeout (cluster file: start_timeout)."
                ) from None


@contextlib.contextmanager
def connect(
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    options: dict[str, Any] | None = None,
    start_timeout: float | None = None,
    client: Client | None = None,
    log: Callable[[str], Any] = print,
    work_seconds: float | None = None,
) -> Iterator[Client]:
    """Yield a Client with at least one worker: attached to ``scheduler``, or on a cluster.

    With ``client`` (a running :class:`distributed.Client`, e.g. the user's own in a
    notebook) that client is yielded once a worker is connected to it (within
    ``start_timeout``, default :data:`SCHEDULER_START_TIMEOUT`); nothing is started, and
    the client is left open. The other arguments must then be left out.

    Command-line values override the file: ``workers`` a local cluster's worker count,
    ``jobs`` (fixed) or ``adapt`` (minimum, maximum jobs) the scaling of a batch
    cluster, ``options`` (see :func:`parse_cluster_options`) single keys of ``options``,
    ``start_timeout`` (seconds, in (0, inf]) the file's ``start_timeout``: how long to
    wait for the first worker (defaults: :data:`START_TIMEOUT`,
    :data:`SCHEDULER_START_TIMEOUT`). A cluster started here is shut down on exit.
    ``work_seconds``: the run's estimated work in core-seconds (the cost model's), which
    decides a local cluster's ``dashboard_address: auto`` (:data:`DASHBOARD_AUTO`); None:
    a dashboard.

    Raises
    ------
    InputError
        The cluster could not start, the scheduler could not be reached, a batch job
        could not be submitted, or no worker connected in time. Whatever was started
        is shut down again.
    ldpsim.pipeline.compute.signals.Interrupted
        SIGINT or SIGTERM came while the cluster started (under
        :func:`~ldpsim.pipeline.compute.signals.handle_signals`), also where the start
        then failed.
    """
    # The clients are never the default client: ldpsim submits to them explicitly, and a
    # default client whose start fails would leave dask's global scheduler setting
    # pointing at a client that does not exist (distributed sets it before connecting).
    started = time.monotonic()
    if client is not None:
        yield _wait_for_own(client, started + (start_timeout or SCHEDULER_START_TIMEOUT))
        return
    dask_cluster, kind, dashboard, auto = None, None, True, False
    where = f"scheduler {scheduler}" if scheduler is not None else "cluster"
    try:
        with StartProblems() as problems:
            try:
                if scheduler is not None:
                    timeout = start_timeout or SCHEDULER_START_TIMEOUT
                    client = _attach(scheduler, min(timeout, SCHEDULER_CONNECT_TIMEOUT))
                else:
                    config = load_cluster_config(cluster or "local")
                    kind = config["kind"]
                    timeout = start_timeout or config.get("start_timeout") or START_TIMEOUT[kind]
                    where = f"{kind} cluster"
                    overrides = dict(options or {})
                    if kind == "local" and workers is not None:
                        overrides["n_workers"] = workers
                    merged = {**config["options"], **overrides}
                    auto = merged.get("dashboard_address") == DASHBOARD_AUTO
                    if auto:
                        seconds = None if work_seconds is None or kind != "local" else (
                            work_seconds / local_size(merged)["n_workers"]
                        )  # fmt: skip
                        overrides["dashboard_address"] = auto_dashboard(seconds)
                        merged = {**config["options"], **overrides}
                    # An absent key: distributed's own dashboard.
                    dashboard = merged.get("dashboard_address", "") is not None
                    dask_cluster = build_cluster(config, overrides)
                    from distributed import Client

                    client = Client(dask_cluster, set_as_default=False)
                    if kind not in ("local", "local-gpu"):
                        _scale(dask_cluster, config, jobs, adapt)
                wait_for_first_worker(client, started + timeout, problems, where)
            except Exception as exc:  # anything that stops the start: one line too
                # A Ctrl-C or SIGTERM to the process group that stopped the start (its
                # workers died of it) is the reason: exit 130 or 143, not "could not start".
                check_signals()
                if isinstance(exc, InputError):
                    raise
                hint = _start_hint("local") if where == "local cluster" else ""
                raise InputError(
                    f"The {where} could not start: {_root_cause(exc)}{hint}"
                ) from None
        if kind in ("local", "local-gpu") and not dashboard:
            why = (
                f"a run estimated at under {DASHBOARD_SECONDS:.0f} s; dashboard_address: auto"
                if auto
                else "dashboard_address: null"
            )
            log(f"Dask {where}; no dashboard ({why}).")
        else:
            log(f"Dask {where}; dashboard: {client.dashboard_link}")
        yield client
    finally:
        with quiet_distributed():
            _shut_down(client, dask_cluster)


def auto_dashboard(seconds: float | None) -> str | None:
    """The dashboard address ``dashboard_address: auto`` stands for, for a run estimated
    at ``seconds`` of wall time on its workers (None: not estimated): a free loopback
    port, or None (no dashboard) below :data:`DASHBOARD_SECONDS`."""
    return AUTO_DASHBOARD_ADDRESS if seconds is None or seconds >= DASHBOARD_SECONDS else None


def _shut_down(client: Client | None, dask_cluster: Any) -> None:
    """Close the client, then the cluster started for it; ignore how that goes.

    The results are written by then, and a failed start leaves Dask objects that may
    not close cleanly (a batch job whose submission failed stays "created", which
    SpecCluster.close asserts against), so no error here may hide the run's outcome.
    """
    for closable in (client, dask_cluster):
        if closable is not None:
            with contextlib.suppress(Exception):
                closable.close()


def _wait_for_own(client: Client, deadline: float) -> Client:
    """The caller's own client, once a worker is connected to it (InputError otherwise)."""
    if client.status != "running":
        raise InputError(
            f"The Dask client given to ldpsim is {client.status}, not running; pass a "
            "connected distributed.Client."
        )
    with StartProblems() as problems:
        wait_for_first_worker(client, deadline, problems, f"scheduler {client.scheduler.address}")
    return client


def _attach(address: str, timeout: float) -> Client:
    try:
        from distributed import Client

        return Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # OSError (unreachable), ValueError (no port), TimeoutError
        cause = _root_cause(exc)
    # The Client that failed to connect is still referenced from the exception's frames.
    # Collect it now, outside them: left to a later collection, its __del__ may run while
    # the next Client's loop runner holds its (non-reentrant) lock, and stop() waits on
    # that lock forever.
    gc.collect()
    raise InputError(
        f"Cannot connect to the Dask scheduler {address!r}: {cause}. Give the address of a "
        "running scheduler, e.g. tcp://HOST:8786."
    )


def _scale(dask_cluster: Any, config: dict[str, Any], jobs: int | None, adapt) -> None:
    """Fixed jobs (``jobs``, else the file's ``scale``) or adaptive bounds.

    An adaptive minimum of 0 jobs runs as 1: Dask's adaptive scaling submits no job
    while no task is queued, and a run queues its tasks once a first worker has
    connected, so it would wait out its start timeout. A run's cluster lives only while
    the run has work (it is closed at the end), so 1 holds no job idle that 0 would
    release.
    """
    bounds = adapt or (
        (config["adapt"]["minimum_jobs"], config["adapt"]["maximum_jobs"])
        if config.get("adapt") and jobs is None
        else None
    )
    if bounds:
        dask_cluster.adapt(minimum_jobs=max(bounds[0], 1), maximum_jobs=bounds[1])
    else:
        dask_cluster.scale(jobs=jobs or (config.get("scale") or {}).get("jobs", 1))
