"""When a local cluster's workers fork from the forkserver and when they are spawned
(ldpsim.pipeline.compute.worker_start), decided in this process: no cluster starts.

tests/pipeline/test_clusters.py starts the clusters (a driver of its own); these pin the
decisions one by one: the option, a user's own start method, and the fingerprint that
sends a driver whose code or environment changed to spawned workers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import dask
import pytest

from ldpsim.pipeline.compute import worker_start
from ldpsim.pipeline.compute.worker_start import (
    START_METHOD_KEY,
    forked_workers,
    forks,
    imports_refused,
    start_fingerprint,
    start_server_early,
    usable_server,
)
from ldpsim.tasks.kernel import compile_errors


def test_a_local_cluster_forks_unless_told_to_spawn():
    assert forks({}) and forks({"worker_start": None}) and forks({"worker_start": "forkserver"})
    assert not forks({"worker_start": "spawn"})
    # A hunt (h21d): only 'forkserver' forks, not whatever is not 'spawn'.
    assert not forks({"worker_start": "fork"})


@pytest.fixture
def no_server(monkeypatch):
    """This process as if it had started no forkserver yet (restored after)."""
    monkeypatch.setattr(worker_start, "_server_fingerprint", None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_a_users_own_start_method_is_kept(no_server):
    assert usable_server() is not None and usable_server(wanted=False) is None
    assert start_server_early(wanted=False) is False  # starts none (a hunt, h21d)
    with dask.config.set({START_METHOD_KEY: "forkserver"}):
        assert usable_server() is None  # a user's forkserver: distributed's own preloads
    with dask.config.set({START_METHOD_KEY: "fork"}):
        assert usable_server() is None
        with forked_workers() as forked:
            assert not forked and dask.config.get(START_METHOD_KEY) == "fork"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_a_cluster_after_the_environment_changed_spawns(no_server, monkeypatch):
    # The first cluster (no early server, as in a notebook) forks and fixes the server's
    # fingerprint; once a variable changed, a later one spawns, and forks again once the
    # environment is back as the server has it.
    monkeypatch.setenv("LDPSIM_START_PROBE", "first")
    with forked_workers() as forked:
        assert forked and dask.config.get(START_METHOD_KEY) == "forkserver"
    assert dask.config.get(START_METHOD_KEY, "spawn") == "spawn"
    monkeypatch.setenv("LDPSIM_START_PROBE", "second")
    assert usable_server() is None
    with forked_workers() as forked:
        assert not forked
    monkeypatch.setenv("LDPSIM_START_PROBE", "first")
    assert usable_server() is not None


def test_the_fingerprint_covers_what_a_forked_worker_inherits(monkeypatch, tmp_path):
    before = start_fingerprint()
    # What Dask's nanny sets in the driver itself, and pytest's own variable: no change.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONHASHSEED", "6")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another")
    assert start_fingerprint() == before
    # Every prefix that changes what a worker computes or where it caches (a hunt, h21d).
    prefixed = ("XDG_PROBE", "PYTHONPROBE", "OMP_PROBE", "MKL_PROBE", "OPENBLAS_PROBE")
    for name in ("LDPSIM_PROBE", "NUMBA_PROBE", "CUDA_PROBE", "DASK_PROBE", *prefixed):
        with monkeypatch.context() as changed:
            changed.setenv(name, "1")
            assert start_fingerprint() != before, name
    for name in ("HOME", "TMPDIR"):
        with monkeypatch.context() as changed:
            changed.setenv(name, str(tmp_path))
            assert start_fingerprint() != before, name
    with monkeypatch.context() as changed:
        changed.syspath_prepend(str(tmp_path))
        assert start_fingerprint() != before
    # A source file edited, its size kept: its modification time tells; ldpsim.tasks'
    # files too (a hunt, h21d).
    for source in (worker_start.__file__, compile_errors.__file__):
        stat = os.stat(source)
        try:
            os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
            assert start_fingerprint() != before, source
        finally:
            os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert start_fingerprint() == before


def test_a_refused_import_is_refused_only_within_the_block():
    # distributed's first forkserver context imports pandas if it can; the driver
    # refuses it then, and must import it as usual afterwards. A module imported
    # already stays as it is.
    name = "tabnanny"  # a standard module nothing here imports
    if name in sys.modules:
        pytest.skip(f"{name} is imported already")
    json_module = sys.modules.get("json") or __import__("json")
    with imports_refused((name, "json")):
        with pytest.raises(ImportError):
            __import__(name)
        assert __import__("json") is json_module
    assert __import__(name).__name__ == name
    assert sys.modules["json"] is json_module


#: A driver that starts the server early, as `ldpsim run` does, then changes a variable.
EARLY_SCRIPT = """
import os
import sys
from ldpsim.pipeline.compute.worker_start import (
    forked_workers, server_processes, start_server_early, stop_server, usable_server
)

os.environ["LDPSIM_START_PROBE"] = "first"
print(start_server_early(), usable_server() is not None)
os.environ["LDPSIM_START_PROBE"] = "second"
print(usable_server() is None)
os.environ["LDPSIM_START_PROBE"] = "first"
with forked_workers() as forked:
    print(forked, "pandas" not in sys.modules)
(server,) = server_processes()  # the forkserver alone, not the resource tracker
stop_server()
server.wait(timeout=30)
print(not server.is_running())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only")
def test_a_server_started_early_is_not_forked_from_once_the_environment_changed():
    # Its workers would run with the environment of its start (a driver of its own).
    # A hunt (h21d): the first cluster's context imports no pandas, and stop_server
    # finds the forkserver alone among the driver's children and ends it.
    done = subprocess.run(
        [sys.executable, "-c", EARLY_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 6
