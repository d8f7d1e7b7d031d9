"""Dask clusters by name: cluster/<NAME>.yaml (or a user's YAML file) -> a Client."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from distributed import Client, LocalCluster

from pipeline.errors import InputError

#: Where the shipped cluster configurations live (repository's cluster/ folder).
CLUSTER_DIR = Path(__file__).resolve().parent.parent / "cluster"
CONFIG_KEYS = ("kind", "options", "scale", "adapt")


def _local(options: dict[str, Any]):
    options = dict(options)
    if options.get("n_workers") is None:
        options["n_workers"] = os.cpu_count() or 1
    return LocalCluster(**options)


def _slurm(options: dict[str, Any]):
    from dask_jobqueue import SLURMCluster

    return SLURMCluster(**options)


def _pbs(options: dict[str, Any]):
    from dask_jobqueue import PBSCluster

    return PBSCluster(**options)


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
    return config


@contextlib.contextmanager
def connect(
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    cluster: str | None = None,
    jobs: int | None = None,
    adapt: tuple[int, int] | None = None,
    log=print,
) -> Iterator[Client]:
    """Yield a Client: attached to ``scheduler``, or on a cluster built from a config.

    ``workers`` overrides a local cluster's worker count; ``jobs`` (fixed) or
    ``adapt`` (minimum, maximum jobs) override the scaling of a batch cluster.
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
    options = dict(config["options"])
    kind = config["kind"]
    if kind == "local" and workers is not None:
        options["n_workers"] = workers
    try:
        dask_cluster = BACKENDS[kind](options)
    except TypeError as exc:
        raise InputError(f"Bad option in the {kind!r} cluster configuration: {exc}") from None
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
