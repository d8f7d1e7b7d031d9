"""A local cluster starts a worker per core a cgroup's CPU quota allows, not only per core
of the affinity, no more than the memory holds, and tells them a cgroup's memory limit.

The first tests put a real process into real cgroups (v1, where the machine mounts the
``cpu`` and ``memory`` controllers so and lets root make groups); cgroup v2's files,
which this machine's kernel does not give those controllers to, are read from a folder
laid out as the kernel lays them (cgroup-v2(7)).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ldpsim.pipeline.compute import limits
from ldpsim.pipeline.compute.limits import (
    PROC_CGROUP,
    PROC_MOUNTINFO,
    affinity_cores,
    cgroup_folders,
    cpu_quota,
    folder_cpu_quota,
    folder_limits,
    folder_memory_cap,
    memory_cap,
    usable_cores,
)

PERIOD = 100_000  # microseconds, the kernel's default CFS period


def _v1_folder(controller: str, control_file: str) -> Path | None:
    """This process's folder in a writable cgroup-v1 hierarchy of ``controller``."""
    try:
        found = cgroup_folders(PROC_CGROUP.read_text(), PROC_MOUNTINFO.read_text(), controller)
    except OSError:
        return None
    for version, folder, _top in found:
        if version == 1 and os.access(folder, os.W_OK) and (folder / control_file).exists():
            return folder
    return None


def test_a_quota_of_the_process_group_or_one_above_limits_its_cores():
    """A process in a group of 1.5 CPUs may use 2 cores; below a group of 1 CPU, 1."""
    folder = _v1_folder("cpu", "cpu.cfs_quota_us")
    if folder is None or affinity_cores() < 2 or (cpu_quota() or 2) < 1.5:
        pytest.skip("needs a writable cgroup-v1 cpu hierarchy (root), 1.5 CPUs, 2 cores")
    parent = folder / f"ldpsim-test-{os.getpid()}"
    child = parent / "job"
    child.mkdir(parents=True)
    code = (
        "from ldpsim.pipeline.compute.limits import cpu_quota, usable_cores; "
        "print(cpu_quota(), usable_cores())"
    )
    # The shell joins the child group, then becomes the Python that reads it.
    script = f'echo $$ > "{child}/cgroup.procs" && exec "{sys.executable}" -c "{code}"'
    try:
        # Rounded up: two workers throttled to 0.75 CPUs each.
        (child / "cpu.cfs_quota_us").write_text(str(PERIOD * 3 // 2))
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["1.5", "2"]
        # The parent's limit bounds the child's group, which has none of its own (v1
        # refuses a child's quota above its parent's; v2 takes it).
        (child / "cpu.cfs_quota_us").write_text("-1")
        (parent / "cpu.cfs_quota_us").write_text(str(PERIOD))
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
        assert done.stdout.split() == ["1.0", "1"], done.stderr
    finally:
        child.rmdir()
        parent.rmdir()


def test_a_memory_limit_of_the_process_group_sizes_the_local_cluster():
    """In a group of 350 MB: one worker (two would get 175 MB each), told the limit, and
    a warning that this is less than a worker needs (the kernel may stop the run)."""
    folder = _v1_folder("memory", "memory.limit_in_bytes")
    if folder is None or (memory_cap() or 10**12) < 10**9:
        pytest.skip("needs a writable cgroup-v1 memory hierarchy (root) and 1 GB")
    group = folder / f"ldpsim-test-{os.getpid()}"
    group.mkdir()
    code = (
        "from ldpsim.pipeline.compute.clusters import local_size, memory_share, "
        "small_memory_warning; "
        "from ldpsim.pipeline.compute.limits import memory_cap; "
        "print(memory_cap(), local_size({}), local_size({'n_workers': 2}), "
        "memory_share({'memory_limit': '1GB'}, 3)); print(small_memory_warning())"
    )
    script = f'echo $$ > "{group}/cgroup.procs" && exec "{sys.executable}" -c "{code}"'
    try:
        (group / "memory.limit_in_bytes").write_text(str(350 * 10**6))
        limit = int((group / "memory.limit_in_bytes").read_text())  # in whole pages
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    finally:
        group.rmdir()
    assert done.returncode == 0, done.stderr
    sizes, warning = done.stdout.strip().split("\n")
    assert sizes == (
        f"{limit} {{'n_workers': 1, 'memory_limit': {limit}}} "
        f"{{'n_workers': 2, 'memory_limit': {limit // 2}}} {{}}"
    )
    assert warning.startswith("this process may use 334 MiB of memory")
    assert "less than the 384 MiB one local worker needs" in warning


def test_the_default_worker_count_fits_the_memory():
    """Dask shares the memory out among a local cluster's workers: by default no more
    start than get 384 MiB each. The memory is set low with the RSS limit, which
    distributed reads (``distributed.system.MEMORY_LIMIT``) and Linux does not enforce:
    no worker's limit is set then, Dask's is right."""
    memory = 800 * 10**6  # two workers' worth would be 805 MB
    code = (
        f"import resource; resource.setrlimit(resource.RLIMIT_RSS, ({memory}, {memory}))\n"
        "from ldpsim.pipeline.compute.clusters import local_size\n"
        "print([local_size(options) for options in "
        "({}, {'memory_limit': '1GB'}, {'processes': False}, {'n_workers': 3})])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # A set memory_limit is each worker's own: per core. Threads of one process get
    # their parts too, each measured against the whole process's memory.
    # No memory_limit is set: Dask reads this limit itself (its part is right).
    counts = [{"n_workers": count} for count in (1, usable_cores(), 1, 3)]
    assert done.stdout.strip() == str(counts)


def test_cgroup_v2_limits_are_read_up_to_the_mount_point(tmp_path):
    top = tmp_path / "cgroup"
    group = top / "kubepods.slice" / "pod-7" / "container-3"
    group.mkdir(parents=True)
    (top / "cpu.max").write_text("max 100000\n")  # (the root group has none: any file)
    (top / "kubepods.slice" / "cpu.max").write_text("max 100000\n")
    (top / "kubepods.slice" / "pod-7" / "cpu.max").write_text("250000 100000\n")
    (group / "cpu.max").write_text("max 100000\n")
    assert folder_limits(folder_cpu_quota, 2, group, top) == [2.5]
    (group / "cpu.max").write_text("50000 100000\n")
    assert folder_limits(folder_cpu_quota, 2, group, top) == [0.5, 2.5]
    # Above the mount point nothing is read: the quota of tmp_path's own file is not.
    (tmp_path / "cpu.max").write_text("10000 100000\n")
    assert min(folder_limits(folder_cpu_quota, 2, group, top)) == 0.5
    (group / "cpu.max").write_text("garbage\n")
    assert folder_limits(folder_cpu_quota, 2, group, top) == [2.5]
    # Memory: memory.max, and memory.high (the kernel throttles past it) where lower.
    (group / "memory.max").write_text("max\n")
    (group / "memory.high").write_text("max\n")
    (top / "kubepods.slice" / "memory.max").write_text("4294967296\n")
    assert folder_limits(folder_memory_cap, 2, group, top) == [2**32]
    (group / "memory.high").write_text("1073741824\n")
    assert folder_limits(folder_memory_cap, 2, group, top) == [2**30, 2**32]


def test_cgroup_v1_files_without_a_limit(tmp_path):
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # none
    assert folder_cpu_quota(1, tmp_path) is None
    assert folder_memory_cap(1, tmp_path) is None
    (tmp_path / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "memory.limit_in_bytes").write_text("2147483648\n")
    assert folder_cpu_quota(1, tmp_path) == 3.0
    assert folder_memory_cap(1, tmp_path) == 2**31


#: /proc/self/mountinfo lines (proc(5)) of the mounts a process may see.
V2_MOUNT = (
    "31 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate"
)
V1_CPU_MOUNT = (
    "35 30 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:14 - cgroup cgroup "
    "rw,cpu,cpuacct"
)
V1_MEMORY_MOUNT = "36 30 0:31 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory"
ROOT_MOUNT = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"


@pytest.mark.parametrize(
    ("groups", "mounts", "expected"),
    [
        # cgroup v2 on a host: a systemd scope below the mount's root
        (
            "0::/user.slice/user-1000.slice/session-3.scope\n",
            [ROOT_MOUNT, V2_MOUNT],
            [(2, "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope", "/sys/fs/cgroup")],
        ),
        # cgroup v2 in a container with its own cgroup namespace: its group is the root
        ("0::/\n", [V2_MOUNT], [(2, "/sys/fs/cgroup", "/sys/fs/cgroup")]),
        # cgroup v1 in a Docker container: the mount's root is the container's group
        (
            "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
            [ROOT_MOUNT, V1_MEMORY_MOUNT, V1_CPU_MOUNT],
            [(1, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct")],
        ),
        # a group outside the mount's root (another namespace's path): the mount point
        (
            "4:cpu,cpuacct:/other/xyz\n",
            [V1_CPU_MOUNT],
            [(1, "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct")],
        ),
        # a mount point with a space (mountinfo writes it \040)
        (
            "0::/a b\n",
            ["31 23 0:26 / /mnt/my\\040cgroups rw - cgroup2 none rw"],
            [(2, "/mnt/my cgroups/a b", "/mnt/my cgroups")],
        ),
        # a host's cpuset group listed after its cpu group, and its cpuset hierarchy
        # mounted: "cpu" is not "cpuset" (before: a substring passed, h23d)
        (
            "4:cpu,cpuacct:/user.slice\n3:cpuset:/\n",
            [
                "35 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct",
                "34 30 0:29 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset",
            ],
            [(1, "/sys/fs/cgroup/cpu,cpuacct/user.slice", "/sys/fs/cgroup/cpu,cpuacct")],
        ),
        # no cpu controller mounted, and nothing readable at all
        ("12:memory:/docker/abc\n", [V1_MEMORY_MOUNT], []),
        ("", [], []),
    ],
)
def test_the_cpu_cgroup_folders_of_a_process(groups, mounts, expected):
    found = cgroup_folders(groups, "\n".join(mounts) + "\n", "cpu")
    assert [(version, str(folder), str(top)) for version, folder, top in found] == expected


def test_the_memory_cgroup_folders_of_a_process():
    groups = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
    mounts = "\n".join([ROOT_MOUNT, V1_MEMORY_MOUNT, V1_CPU_MOUNT])
    found = cgroup_folders(groups, mounts, "memory")
    assert found == [(1, Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/memory"))]


def test_the_refusal_of_too_many_workers_counts_those_that_fit(monkeypatch):
    """Where one worker fits (a group of 500 MiB): "at most 1 worker fits", not "1 workers
    fit"; the count is of the memory this process may use."""
    from ldpsim.pipeline.compute import clusters
    from ldpsim.pipeline.errors import InputError

    for memory, words in (
        (500 * 2**20, "at most 1 worker fits."),
        (2**30, "at most 2 workers fit."),
    ):
        monkeypatch.setattr(clusters, "usable_memory", lambda memory=memory: memory)
        with pytest.raises(InputError) as refused:
            clusters.check_options("local", {"n_workers": 3}, "--workers")
        assert words in str(refused.value)
    # One worker in less than it needs is not refused ("at most 1 worker fits. Got 1."
    # before): the run warns, as it does where it starts one by default.
    monkeypatch.setattr(clusters, "usable_memory", lambda: 300 * 2**20)
    clusters.check_options("local", {"n_workers": 1}, "--workers")
    assert clusters.small_memory_warning() is not None


def test_the_smallest_limit_of_the_groups_and_hierarchies_counts(tmp_path, monkeypatch):
    """A child's quota below its parent's, and a v1 hierarchy's memory limit below v2's:
    the smallest of each counts (read through this process's files, here laid out in
    ``tmp_path``). Before: the largest passed every test (a mutation hunt, h23d)."""
    v2, v1 = tmp_path / "unified", tmp_path / "memory"
    group = v2 / "job" / "step"
    group.mkdir(parents=True)
    (v2 / "job" / "cpu.max").write_text("100000 100000\n")
    (group / "cpu.max").write_text("50000 100000\n")
    (v2 / "job" / "memory.max").write_text(f"{2**33}\n")
    (v1 / "job").mkdir(parents=True)
    (v1 / "job" / "memory.limit_in_bytes").write_text(f"{2**31}\n")
    (tmp_path / "cgroup").write_text("4:memory:/job\n0::/job/step\n")
    (tmp_path / "mountinfo").write_text(
        f"31 23 0:26 / {v2} rw - cgroup2 cgroup2 rw\n"
        f"36 30 0:31 / {v1} rw - cgroup cgroup rw,memory\n"
    )
    monkeypatch.setattr(limits, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(limits, "PROC_MOUNTINFO", tmp_path / "mountinfo")
    assert cpu_quota() == 0.5
    assert memory_cap() == 2**31


def test_a_share_of_exactly_a_workers_minimum_is_enough(monkeypatch):
    """384 MiB each is what a worker needs, not less: two workers in 768 MiB start
    without a refusal, and 384 MiB in all draws no warning (a byte less does). A set
    memory_limit is each worker's own: no share of this process's memory is checked.
    Before: '<=' for '<', and no check of a set memory_limit, passed every test (a
    mutation hunt, h23d)."""
    from ldpsim.pipeline.compute import clusters
    from ldpsim.pipeline.compute.clusters import WORKER_MEMORY_MIN
    from ldpsim.pipeline.errors import InputError

    monkeypatch.setattr(clusters, "usable_memory", lambda: 2 * WORKER_MEMORY_MIN)
    clusters.check_options("local", {"n_workers": 2}, "--workers")
    with pytest.raises(InputError, match="at most 2 workers fit"):
        clusters.check_options("local", {"n_workers": 3}, "--workers")
    clusters.check_options("local", {"n_workers": 3, "memory_limit": "1GB"}, "--workers")
    monkeypatch.setattr(clusters, "usable_memory", lambda: WORKER_MEMORY_MIN)
    assert clusters.small_memory_warning() is None
    monkeypatch.setattr(clusters, "usable_memory", lambda: WORKER_MEMORY_MIN - 1)
    assert clusters.small_memory_warning() is not None


def test_the_built_local_clusters_get_their_size_and_memory_share(monkeypatch):
    """The shipped local.yaml's ``n_workers: null`` becomes the count that fits (Dask's
    own, on None, is a worker per core of the machine); local-gpu shares the memory out
    among its GPU and CPU workers together. The clusters are recorded, not started.
    Before: the file's null winning over the count, and local-gpu's share over its GPU
    workers only, passed every test (a mutation hunt, h23d)."""
    import contextlib

    import distributed
    from distributed.system import MEMORY_LIMIT

    from ldpsim.pipeline.compute import clusters

    built: dict[str, dict] = {}
    monkeypatch.setattr(distributed, "LocalCluster", lambda **kw: built.setdefault("local", kw))
    monkeypatch.setattr(distributed, "SpecCluster", lambda **kw: built.setdefault("gpu", kw))
    monkeypatch.setattr(clusters, "forked_workers", lambda wanted: contextlib.nullcontext())
    memory = MEMORY_LIMIT // 2  # a cgroup's limit, below what Dask reads
    monkeypatch.setattr(clusters, "usable_memory", lambda: memory)
    monkeypatch.setattr(clusters, "usable_cores", lambda: 3)
    clusters.BACKENDS["local"]({"n_workers": None, "processes": True})
    fit = min(3, memory // clusters.WORKER_MEMORY_MIN)
    assert built["local"]["n_workers"] == fit
    assert built["local"]["memory_limit"] == memory // fit
    clusters.BACKENDS["local-gpu"]({"gpu_workers": 1, "cpu_workers": 2})
    workers = built["gpu"]["workers"]
    assert sorted(workers) == ["cpu-0", "cpu-1", "gpu-0"]
    assert {w["options"]["memory_limit"] for w in workers.values()} == {memory // 3}


def test_an_auto_memory_limit_is_split_between_the_workers(monkeypatch):
    """``memory_limit: "auto"`` is the memory split evenly between a local cluster's
    workers (distributed's LocalCluster documents it so), fitted and checked as without
    one. Before: Dask's worker read it as its part over the machine's cores, so one
    worker of four cores got a quarter of the memory, and nothing was fitted or refused."""
    import contextlib

    import distributed
    from distributed.system import MEMORY_LIMIT

    from ldpsim.pipeline.compute import clusters
    from ldpsim.pipeline.errors import InputError

    monkeypatch.setattr(clusters, "usable_cores", lambda: 4)
    monkeypatch.setattr(clusters, "usable_memory", lambda: 2 * clusters.WORKER_MEMORY_MIN)
    assert clusters.local_size({"memory_limit": "auto"}) == {
        "n_workers": 2,
        "memory_limit": clusters.WORKER_MEMORY_MIN,
    }
    with pytest.raises(InputError, match="at most 2 workers fit"):
        clusters.check_options("local", {"n_workers": 3, "memory_limit": "auto"}, "--workers")
    monkeypatch.setattr(clusters, "usable_memory", lambda: MEMORY_LIMIT)
    built: dict[str, dict] = {}
    monkeypatch.setattr(distributed, "LocalCluster", lambda **kw: built.setdefault("local", kw))
    monkeypatch.setattr(clusters, "forked_workers", lambda wanted: contextlib.nullcontext())
    clusters.BACKENDS["local"]({"n_workers": 1, "memory_limit": "auto"})
    assert built["local"]["memory_limit"] == MEMORY_LIMIT


def test_the_auto_dashboard_weighs_the_work_over_the_workers_that_fit(monkeypatch):
    """``dashboard_address: auto`` judges the run's wall time over the workers that will
    start: 2 where only 2 fit the memory, not the 4 cores. Before: over the cores passed
    every test (a mutation hunt, h23d). The cluster is not started."""
    from ldpsim.pipeline.compute import clusters
    from ldpsim.pipeline.errors import InputError

    seen: list[float | None] = []

    class Stop(Exception):
        pass

    def record(seconds):
        seen.append(seconds)
        raise Stop

    monkeypatch.setattr(clusters, "auto_dashboard", record)
    monkeypatch.setattr(clusters, "usable_cores", lambda: 4)
    monkeypatch.setattr(clusters, "usable_memory", lambda: 2 * clusters.WORKER_MEMORY_MIN)
    with pytest.raises(InputError, match="could not start"), clusters.connect(work_seconds=100.0):
        pass
    assert seen == [50.0]


def test_an_auto_memory_limit_is_not_refused_as_too_small(monkeypatch):
    """``memory_limit: "auto"`` is not a size that can be too small: distributed reads it
    as a worker thread's part of the machine's memory over its cores, which passes under
    the least a worker needs on a machine of many cores; ldpsim shares the memory out
    itself (its workers checked by count). Before: refusing it passed every test (a
    mutation hunt, h24d)."""
    from distributed import system

    from ldpsim.pipeline.compute import clusters

    monkeypatch.setattr(system, "MEMORY_LIMIT", clusters.WORKER_MEMORY_MIN)
    monkeypatch.setattr(clusters, "usable_memory", lambda: clusters.WORKER_MEMORY_MIN)
    clusters.check_options("local", {"memory_limit": "auto"}, "--memory-limit")
    clusters.check_options("local", {"memory_limit": "auto", "n_workers": 1}, "--workers")
