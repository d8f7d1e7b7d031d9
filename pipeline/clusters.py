"""Dask clusters by name: cluster/<NAME>.yaml (or a user's YAML file) -> a Client."""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from distributed import Client, LocalCluster
from ldpsim.pipeline.errors import InputError

#: Where the shipped cluster configurations live (repository's cluster/ folder).
CLUSTER_DIR = Path(__file__).resolve().parent.parent / "cluster"
CONFIG_KEYS = ("kind", "options", "scale", "adapt")


def _local(options: dict[str, Any]):
    options = dict(options)
    if options.get("n_workers") is None:
        options["n_workers"] = os.cpu_count() or 1
    return LocalCluster(**options)


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


def _slurm(options: dict[str, Any]):
    from dask_jobqueue import SLURMCluster

    return SLURMCluster(**_batch_options(options))


def _pbs(options: dict[str, Any]):
    from dask_jobqueue import PBSCluster

    return PBSCluster(**_batch_options(options))


#: Backends by name (the ``kind`` of a cluster file).
BACKENDS = {"local": _local, "slurm": _slurm, "pbs": _pbs}


def available_clusters() -> list[str]:
    return sorted(p.stem for p in CLUSTER_DIR.glob("*.yaml"))


def load_cluster_config(name_or_path: str) -> dict[str, Any]:
    """Read cluster/<NAME>.yaml or a YAML file; validate its keys.

    Raises
    ------
    InputError
        Unknown name, missing file, YAML error, unknown key or kind.
    """
    path = Path(name_or_path)
    if not path.suffix and (CLUSTER_DIR / f"{name_or_path}.yaml").exists():
        path = CLUSTER_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise InputError(
            f"--cluster {name_or_path!r} is neither a cluster name nor a YAML file. "
            f"Cluster names are: {', '.join(available_clusters())}."
        )
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        message = f"Cluster file {str(path)!r} is not valid YAML: {exc}".replace("\n", " ")
        raise InputError(message) from None
    if not isinstance(config, dict):
        raise InputError(f"Cluster file {str(path)!r} must be a mapping with keys {CONFIG_KEYS}.")
    for key in config:
        if key not in CONFIG_KEYS:
            raise InputError(
                f"Unknown key {key!r} in cluster file {str(path)!r}. Allowed keys are: "
                f"{', '.join(CONFIG_KEYS)}."
            )
    kind = config.get("kind")
    if kind not in BACKENDS:
        raise InputError(
            f"The 'kind' of cluster file {str(path)!r} must be one of "
            f"{', '.join(repr(k) for k in BACKENDS)}. Got {kind!r}."
        )
    options = config.get("options") or {}
    if not isinstance(options, dict):
        raise InputError(f"The 'options' of cluster file {str(path)!r} must be a mapping.")
    config["options"] = options
    check_options(kind, options, f"cluster file {str(path)!r}")
    check_scaling(config, f"cluster file {str(path)!r}")
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
        if config["kind"] == "local":
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


def allowed_options(kind: str) -> set[str] | None:
    """Option names a batch cluster accepts (None for local: it forwards any to workers)."""
    if kind == "local":
        return None
    from dask_jobqueue import PBSCluster, SLURMCluster
    from dask_jobqueue.core import Job, JobQueueCluster

    cls = {"slurm": SLURMCluster, "pbs": PBSCluster}[kind]
    names: set[str] = set()
    for init in (cls.__init__, JobQueueCluster.__init__, cls.job_cls.__init__, Job.__init__):
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.add(p.name)
    return names - {"self", "scheduler", "job_cls", "job_kwargs", "base_class_kwargs"}


def check_options(kind: str, options: dict[str, Any], source: str) -> None:
    """Refuse option names the cluster class does not know, before anything runs."""
    allowed = allowed_options(kind)
    if allowed is None:
        return
    for key in options:
        if key not in allowed:
            raise InputError(
                f"Unknown option {key!r} for a {kind} cluster ({source}). Allowed options "
                f"are: {', '.join(sorted(allowed))}."
            )


def build_cluster(config: dict[str, Any], overrides: dict[str, Any] | None = None):
    """The Dask cluster object of a loaded config, ``overrides`` replacing its options.

    Raises
    ------
    InputError
        An option the cluster class does not accept.
    """
    kind = config["kind"]
    options = {**config["options"], **(overrides or {})}
    try:
        return BACKENDS[kind](options)
    except (TypeError, ValueError) as exc:  # unknown keyword, bad value or interface
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"Bad option in the {kind!r} cluster configuration: {message}") from None


@contextlib.contextmanager
def connect(
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    options: dict[str, Any] | None = None,
    log=print,
) -> Iterator[Client]:
    """Yield a Client: attached to ``scheduler``, or on a cluster built from a config.

    Command-line values override the file: ``workers`` a local cluster's worker count,
    ``jobs`` (fixed) or ``adapt`` (minimum, maximum jobs) the scaling of a batch
    cluster, ``options`` (see :func:`parse_cluster_options`) single keys of ``options``.
    """
    if scheduler:
        client = Client(scheduler, timeout="30s")
        log(f"Attached to scheduler {scheduler}; dashboard: {client.dashboard_link}")
        try:
            yield client
        finally:
            client.close()
        return
    config = load_cluster_config(cluster or "local")
    overrides = dict(options or {})
    kind = config["kind"]
    if kind == "local" and workers is not None:
        overrides["n_workers"] = workers
    dask_cluster = build_cluster(config, overrides)
    with dask_cluster, Client(dask_cluster) as client:
        if kind != "local":
            scale = config.get("scale") or {}
            bounds = adapt or (
                (config["adapt"]["minimum_jobs"], config["adapt"]["maximum_jobs"])
                if config.get("adapt") and jobs is None
                else None
            )
            if bounds:
                dask_cluster.adapt(minimum_jobs=bounds[0], maximum_jobs=bounds[1])
            else:
                dask_cluster.scale(jobs=jobs or scale.get("jobs", 1))
        log(f"Dask cluster: {kind}; dashboard: {client.dashboard_link}")
        yield client
