"""The cores this process may use: its CPU affinity and its cgroups' CPU quota.

A container or a batch job may restrict a process below the machine's core count in two
ways. A cpuset (SLURM's usual way, Docker's ``--cpuset-cpus``) shows in the CPU
affinity. A CPU quota (Docker's ``--cpus``, a Kubernetes pod's CPU limit, systemd's
``CPUQuota``) does not: the process sees every core and is throttled to its quota's
share of each period. A local cluster that started a worker per core there would start,
say, 64 workers in a pod limited to 2 CPUs, each with 1/64 of its memory.

The quota is read from the process's own cgroup and each group above it (the smallest
counts: a parent's limit bounds its children), in cgroup v1 (``cpu.cfs_quota_us`` over
``cpu.cfs_period_us``) and v2 (``cpu.max``), wherever the hierarchies are mounted
(``/proc/self/mountinfo``). ``dask.system.cpu_count`` reads only the group a container
shows at the mount's root, not a group below it (a systemd slice, a job step).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: The files of this process's cgroups and mounts (Linux).
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")


def affinity_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this platform (macOS, Windows)
        return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores this process may use, at least 1: its CPU affinity, or fewer where a
    cgroup's CPU quota allows fewer (:func:`cpu_quota`, rounded up: 1.5 CPUs make 2, as
    Dask counts them, since two workers throttled to 0.75 each still do 1.5 CPUs' work
    where one does 1)."""
    cores = affinity_cores()
    quota = cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cpu_quota() -> float | None:
    """The smallest CPU quota, in CPUs (quota over period), of this process's cgroups and
    the groups above them, or None where none is set or none can be read (not Linux, no
    cgroup file system mounted)."""
    try:
        groups = PROC_CGROUP.read_text()
        mounts = PROC_MOUNTINFO.read_text()
    except OSError:
        return None
    quotas = [
        quota
        for version, folder, top in cgroup_folders(groups, mounts)
        for quota in folder_quotas(version, folder, top)
    ]
    return min(quotas, default=None)


def cgroup_folders(groups: str, mounts: str) -> list[tuple[int, Path, Path]]:
    """The folders of this process's CPU cgroups: ``(version, folder, mount point)`` for
    each mounted hierarchy that can hold a CPU quota (v1 with the ``cpu`` controller, and
    v2), from the texts of ``/proc/self/cgroup`` (``groups``) and ``/proc/self/mountinfo``
    (``mounts``, see proc(5)). A group outside a mount's root (another cgroup namespace's
    path) is read at the mount point."""
    paths: dict[int, str] = {}
    for line in groups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and not controllers:
            paths[2] = path
        elif "cpu" in controllers.split(","):
            paths[1] = path
    folders = []
    for line in mounts.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        root, point = fields[3], fields[4]
        kind, options = fields[dash + 1], fields[dash + 3 : dash + 4]
        if kind == "cgroup2":
            version = 2
        elif kind == "cgroup" and options and "cpu" in options[0].split(","):
            version = 1
        else:
            continue
        if version not in paths:
            continue
        top = Path(_unescape(point))
        inner = Path(paths[version])
        try:
            below = inner.relative_to(_unescape(root))
        except ValueError:
            below = Path()
        folders.append((version, top / below, top))
    return folders


def folder_quotas(version: int, folder: Path, top: Path) -> list[float]:
    """The CPU quotas (in CPUs) set in ``folder`` and each folder above it up to the
    mount point ``top``."""
    quotas = []
    for level in [folder, *folder.parents]:
        quota = _quota(version, level)
        if quota is not None:
            quotas.append(quota)
        if level == top or top not in level.parents:
            break
    return quotas


def _quota(version: int, folder: Path) -> float | None:
    """The CPU quota set in one cgroup folder, in CPUs, or None (none set, unreadable)."""
    try:
        if version == 1:
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            period = int((folder / "cpu.cfs_period_us").read_text())
        else:
            limit, period_text = (folder / "cpu.max").read_text().split()
            if limit == "max":
                return None
            quota, period = int(limit), int(period_text)
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo``, with its octal escapes (``\\040`` for a
    space) decoded."""
    return (
        field.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )
