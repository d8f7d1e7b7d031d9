"""The cores and the memory this process may use: its CPU affinity, and its cgroups'
CPU quota and memory limit.

A container or a batch job may restrict a process below the machine's resources in ways
that ``os.cpu_count()`` and the machine's memory do not show. A cpuset (SLURM's usual
way, Docker's ``--cpuset-cpus``) shows in the CPU affinity. A CPU quota (Docker's
``--cpus``, a Kubernetes pod's CPU limit, systemd's ``CPUQuota``) does not: the process
sees every core and is throttled to its quota's share of each period. A memory limit
(Docker's ``--memory``, a pod's, SLURM's ``--mem`` where the site constrains memory
with cgroups, systemd's ``MemoryMax``) ends in the kernel's OOM killer, not in Dask's
pausing, if Dask does not know it. A local cluster that started a worker per core there
would start, say, 64 workers in a pod limited to 2 CPUs, each with 1/64 of its memory.

The limits are read from the process's own cgroup and each group above it (the smallest
counts: a parent's limit bounds its children), in cgroup v1 (``cpu.cfs_quota_us`` over
``cpu.cfs_period_us``; ``memory.limit_in_bytes``) and v2 (``cpu.max``; ``memory.max``
and ``memory.high``), wherever the hierarchies are mounted (``/proc/self/mountinfo``).
Dask reads only the group at the mount's root (``dask.system.cpu_count``,
``distributed.system.MEMORY_LIMIT``), which is a container's own group with a cgroup
namespace, but not a group below it (a systemd slice, a SLURM job's step).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

#: The files of this process's cgroups and mounts (Linux, see proc(5)).
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


def usable_memory() -> int:
    """The bytes of memory this process may use: Dask's reading of the machine's
    (``distributed.system.MEMORY_LIMIT``: its memory, the root cgroup's limit, the RSS
    limit), or less where a cgroup of the process sets less (:func:`memory_cap`)."""
    from distributed.system import MEMORY_LIMIT

    cap = memory_cap()
    return MEMORY_LIMIT if cap is None else min(MEMORY_LIMIT, cap)


def cpu_quota() -> float | None:
    """The smallest CPU quota, in CPUs (quota over period), of this process's cgroups and
    the groups above them, or None where none is set or none can be read (not Linux, no
    cgroup file system mounted)."""
    return _smallest("cpu", folder_cpu_quota)


def memory_cap() -> int | None:
    """The smallest memory limit, in bytes, of this process's cgroups and the groups
    above them, or None (as :func:`cpu_quota`)."""
    return _smallest("memory", folder_memory_cap)


def _smallest(controller: str, read: Callable[[int, Path], float | None]) -> float | None:
    try:
        groups = PROC_CGROUP.read_text()
        mounts = PROC_MOUNTINFO.read_text()
    except OSError:
        return None
    limits = [
        limit
        for version, folder, top in cgroup_folders(groups, mounts, controller)
        for limit in folder_limits(read, version, folder, top)
    ]
    return min(limits, default=None)


def cgroup_folders(groups: str, mounts: str, controller: str) -> list[tuple[int, Path, Path]]:
    """The folders of this process's cgroups that can hold a limit of ``controller``
    ("cpu", "memory"): ``(version, folder, mount point)`` for v1's hierarchy of that
    controller and for v2's, from the texts of ``/proc/self/cgroup`` (``groups``) and
    ``/proc/self/mountinfo`` (``mounts``, see proc(5)). A group outside a mount's root
    (another cgroup namespace's path) is read at the mount point."""
    paths: dict[int, str] = {}
    for line in groups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and not controllers:
            paths[2] = path
        elif controller in controllers.split(","):
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
        elif kind == "cgroup" and options and controller in options[0].split(","):
            version = 1
        else:
            continue
        if version not in paths:
            continue
        top = Path(_unescape(point))
        try:
            below = Path(paths[version]).relative_to(_unescape(root))
        except ValueError:
            below = Path()
        folders.append((version, top / below, top))
    return folders


def folder_limits(
    read: Callable[[int, Path], float | None], version: int, folder: Path, top: Path
) -> list[float]:
    """The limits that ``read`` (:func:`folder_cpu_quota`, :func:`folder_memory_cap`)
    finds in cgroup ``folder`` and each folder above it up to the mount point ``top``."""
    limits = []
    for level in [folder, *folder.parents]:
        limit = read(version, level)
        if limit is not None:
            limits.append(limit)
        if level == top or top not in level.parents:
            break
    return limits


def folder_cpu_quota(version: int, folder: Path) -> float | None:
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


#: cgroup v1 writes "no memory limit" as the largest multiple of the page size below
#: 2**63; a limit at or above this counts as none.
NO_MEMORY_LIMIT = 2**62


def folder_memory_cap(version: int, folder: Path) -> int | None:
    """The memory limit set in one cgroup folder, in bytes (v2: the smaller of
    ``memory.max`` and ``memory.high``, past which the kernel throttles the group), or
    None (none set, unreadable)."""
    names = ["memory.limit_in_bytes"] if version == 1 else ["memory.max", "memory.high"]
    limits = []
    for name in names:
        try:
            text = (folder / name).read_text().strip()
            limits.append(int(text) if text != "max" else NO_MEMORY_LIMIT)
        except (OSError, ValueError):
            continue
    limit = min(limits, default=NO_MEMORY_LIMIT)
    return limit if 0 < limit < NO_MEMORY_LIMIT else None


def _unescape(field: str) -> str:
    """A path of ``/proc/self/mountinfo``, with its octal escapes (``\\040`` for a
    space) decoded."""
    return (
        field.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
    )
