"""The run records of :mod:`ldpsim.pipeline.store.provenance`: what they say of the run,
the software and the machine, and a store that cannot take one."""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import re
import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ldpsim.pipeline.store import provenance
from ldpsim.pipeline.store.layout import META_GROUP
from ldpsim.pipeline.store.provenance import (
    PACKAGES,
    RUN_RECORD,
    RUNS_FOLDER,
    checked_run,
    cpu_model,
    machine,
    package_versions,
    read_runs,
    record_run,
    source_commit,
)


def test_a_store_that_cannot_be_written_gets_no_record_and_no_error(tmp_path):
    # A hunt (h20c): on a store the run cannot write (a read-only mount, or a path that
    # runs through a file) the temporary record's clean-up raised the same OSError
    # again, so a finished `ldpsim run` ended in a traceback. The results are kept; the
    # record, which only describes them, is skipped.
    through_a_file = tmp_path / "file"
    through_a_file.write_text("not a store")
    assert (
        record_run(through_a_file, wall_seconds=1.0, computed=1, failed=0, cluster="local") is None
    )
    assert through_a_file.read_text() == "not a store"
    # A store that can be written gets its record, read back as written.
    store = tmp_path / "store.zarr"
    written = record_run(store, wall_seconds=2.0, computed=3, failed=1, cluster="local")
    assert written is not None and written.parent.parent.parent == store
    (run,) = read_runs(store)
    assert (run["computed"], run["failed"], run["cluster"]) == (3, 1, "local")


# A hunt (h21c): what a run record says of the software and the machine, checked against
# the sources it names; a record's fields as record_run is given them; the abandoned
# temporary records a new record clears; what read_runs and checked_run make of files.


def test_package_versions_are_the_installed_distributions(monkeypatch):
    versions = package_versions()
    assert list(versions) == ["python", *PACKAGES]
    assert versions["python"] == platform.python_version()
    for name in PACKAGES:
        assert versions[name] == importlib.metadata.version(name), name
    monkeypatch.setattr(provenance, "PACKAGES", ("numpy", "ldpsim-no-such-package"))
    assert package_versions()["ldpsim-no-such-package"] == "not installed"


def test_the_source_commit_is_the_checkout_s_head():
    source = Path(provenance.__file__).resolve().parents[2]
    if not (source / ".git").exists():  # installed from a wheel
        assert source_commit() is None
        return

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(source), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    head = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    assert source_commit() == (f"{head} + uncommitted changes" if dirty else head)
    assert (source / "pipeline" / "store" / "provenance.py").is_file()


def test_the_machine_is_described_from_the_system():
    described = machine()
    assert described == {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
    }
    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"^model name\s*:\s*(.*?)\s*$", cpuinfo.read_text(), re.M)
    if names:
        assert cpu_model() == names[0]
    else:
        assert cpu_model() == (platform.processor() or platform.machine() or "unknown")


def test_a_record_holds_what_the_run_gave(tmp_path):
    store = tmp_path / "s.zarr"
    before = time.time()
    written = record_run(
        store,
        wall_seconds=3600.1254,
        computed=7,
        failed=2,
        cluster="slurm",
        command=["ldpsim", "run", "demo"],
        code_changes=[{"unit": "u", "old": "a", "new": "b", "code_version": 1}],
        warm_up_seconds=1.23456,
        methods_computed=4,
        ended="stopped (lock lost)",
    )
    assert written.parent == store / META_GROUP / RUNS_FOLDER
    assert RUN_RECORD.fullmatch(written.name) and written.stem.endswith(f"-{os.getpid()}")
    (run,) = read_runs(store)
    assert run["unknown"] == []
    assert (run["wall_seconds"], run["warm_up_seconds"]) == (3600.125, 1.235)
    assert (run["computed"], run["failed"], run["methods_computed"]) == (7, 2, 4)
    assert (run["ended"], run["cluster"]) == ("stopped (lock lost)", "slurm")
    assert run["command"] == ["ldpsim", "run", "demo"]
    assert run["code_changes"] == [{"unit": "u", "old": "a", "new": "b", "code_version": 1}]
    assert run["versions"] == package_versions() and run["host"] == socket.gethostname()
    started, finished = (
        time.mktime(time.strptime(run[k], "%Y-%m-%dT%H:%M:%S%z")) for k in ("started", "finished")
    )
    assert finished - started in (3600, 3601)  # an hour apart, to the second
    assert int(before) <= finished <= time.time() + 1
    # Without them: no warm-up seconds, no code changes, 0 methods computed, "finished".
    plain = tmp_path / "p.zarr"
    record_run(plain, wall_seconds=0.0, computed=0, failed=0, cluster="local", code_changes=[])
    (run,) = read_runs(plain)
    assert "warm_up_seconds" not in run and "code_changes" not in run
    assert (run["methods_computed"], run["ended"], run["command"]) == (0, "finished", None)


def test_a_new_record_clears_this_host_s_abandoned_temporary_records(tmp_path):
    store = tmp_path / "s.zarr"
    folder = store / META_GROUP / RUNS_FOLDER
    folder.mkdir(parents=True)
    host = socket.gethostname()
    dead = 2**31 - 1  # above any pid the system gives
    assert not psutil.pid_exists(dead)
    names = {
        "dead": f"20260101T000000-{dead}@{host}.json.partial",
        "no pid": f"20260101T000000-x@{host}.json.partial",
        "live": f"20260101T000000-{os.getpid()}@{host}.json.partial",
        "other host": f"20260101T000000-{dead}@{host}-other.json.partial",
        "no host": f"20260101T000000-{dead}.json.partial",
    }
    for name in names.values():
        (folder / name).write_text("{")
    record_run(store, wall_seconds=1.0, computed=1, failed=0, cluster="local")
    left = {label for label, name in names.items() if (folder / name).exists()}
    assert left == {"live", "other host", "no host"}
    assert len(read_runs(store)) == 1  # a temporary record is no record


def test_read_runs_lists_records_oldest_first_and_names_the_unreadable(tmp_path):
    store = tmp_path / "s.zarr"
    assert read_runs(store) == []  # no folder of records
    folder = store / META_GROUP / RUNS_FOLDER
    folder.mkdir(parents=True)
    (folder / "20260102T000000-2.json").write_text(json.dumps({"computed": 2}))
    (folder / "20260101T000000-1.json").write_text(json.dumps({"computed": 1}))
    (folder / "20260103T000000-3.json").write_text("[1, 2]")  # JSON, not an object
    (folder / "20260104T000000-4.json").write_text("{not json")
    (folder / "20260105T000000-5.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "20260106T000000-6.json").mkdir()  # cannot be read as a file
    (folder / "20260107T000000-7.json").write_bytes(b"\xff\xfe")  # not UTF-8
    (folder / "20260108T000000-8.JSON").write_text(json.dumps({"computed": 8}))
    (folder / "a20260109T000000-9.json").write_text(json.dumps({"computed": 9}))
    # A copy named after a record, its whole name first: no record either.
    (folder / "20260110T000000-1.json.orig.json").write_text(json.dumps({"computed": 10}))
    runs = read_runs(store)
    assert runs[:2] == [{"computed": 1, "unknown": []}, {"computed": 2, "unknown": []}]
    assert runs[2:] == [{"unreadable": f"2026010{i}T000000-{i}.json"} for i in range(3, 8)]
    # A store path that is a file holds no records.
    (tmp_path / "file").write_text("")
    assert read_runs(tmp_path / "file") == []


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        (0, True),
        (2.5, True),
        (-1, False),
        (-0.5, False),
        (True, False),
        (math.inf, False),
        (math.nan, False),
        (10**400, False),
        ("3", False),
        (None, False),
    ],
)
def test_checked_run_keeps_seconds_only_as_finite_non_negative_numbers(value, fits):
    for field in ("wall_seconds", "warm_up_seconds"):
        out = checked_run({field: value})
        assert (field in out, out["unknown"]) == ((True, []) if fits else (False, [field]))


def test_checked_run_checks_each_field_s_type():
    sound = {
        "started": "s",
        "finished": "f",
        "computed": 0,
        "failed": 3,
        "methods_computed": 1,
        "cores": 8,
        "ended": "finished",
        "cluster": "local",
        "host": "h",
        "os": "o",
        "cpu": "c",
        "command": None,
        "commit": None,
        "versions": {},
        "extra": object(),  # not a field of RUN_FIELDS: kept as it is
    }
    assert checked_run(sound) == {**sound, "unknown": []}
    assert checked_run({**sound, "command": ["a", "b"], "commit": "abc"})["unknown"] == []
    wrong = {
        "started": 1,
        "finished": None,
        "computed": -1,
        "failed": True,
        "methods_computed": 1.0,
        "cores": "8",
        "ended": 0,
        "cluster": ["local"],
        "host": None,
        "os": 1,
        "cpu": 1,
        "command": ["a", 1],
        "commit": 5,
        "versions": {"numpy": 2},
    }
    out = checked_run(wrong)
    assert out == {"unknown": sorted(wrong)}
    assert checked_run({"command": "ldpsim run"})["unknown"] == ["command"]
    assert checked_run({"versions": ["numpy"]})["unknown"] == ["versions"]
