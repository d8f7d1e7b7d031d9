"""Shared fixtures: one LocalCluster for the pipeline tests (numba compiles per worker)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# The GPU backend's kernel runs in numba's CUDA simulator in the tests (no GPU needed,
# the device code itself runs, as Python): set before numba is imported, and inherited
# by every process a test starts (Dask workers, the CLI).
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
if "numba" in sys.modules:  # a pytest plugin imported numba first: read the variable again
    from numba.core import config as numba_config

    numba_config.reload_config()

import numpy as np
import pytest
from worker_hooks import ComputeLogAndFaults

#: Fields of the old reference stores (tests/reference/*.npz, old-layout.tar.gz) whose
#: values passed through a BLAS product when they were written (bb's multipliers times
#: the block sums, bm's weighted sums). OpenBLAS picks its kernel by processor (and by
#: $OPENBLAS_CORETYPE, which some of our machines set), and its kernels sum in different
#: orders; today's methods sum in a fixed order of their own (issue 42), so against
#: those stores the bounds agree to the order of a sum, not bit for bit. A store written
#: by today's code is compared bit for bit, on any machine.
BLAS_FIELDS = ("lower", "upper")
#: Their tolerance, relative to the largest magnitude in the array compared.
BLAS_RTOL = 1e-12


def assert_same_values(got, want, field: str, err_msg: str = "") -> None:
    """``got`` equals the old reference ``want`` bit for bit (NaN where NaN), or for a
    field of :data:`BLAS_FIELDS` to :data:`BLAS_RTOL` of the array's largest magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    if field not in BLAS_FIELDS:
        np.testing.assert_array_equal(got, want, err_msg=err_msg, strict=True)
        return
    assert got.shape == want.shape and got.dtype == want.dtype, (err_msg, got.shape, want.shape)
    scale = np.nanmax(np.abs(want), initial=0.0)
    np.testing.assert_allclose(
        got, want, rtol=0.0, atol=BLAS_RTOL * scale, equal_nan=True, err_msg=err_msg
    )


#: Times a task may kill its worker before the scheduler gives up (KilledWorker).
ALLOWED_FAILURES = 1


@pytest.fixture(scope="session")
def cluster_files(tmp_path_factory) -> dict[str, Path]:
    """The compute log and the fault-injection file the session cluster's workers see."""
    folder = tmp_path_factory.mktemp("cluster")
    return {"compute_log": folder / "computed.log", "faults": folder / "faults.json"}


@pytest.fixture(scope="session")
def local_cluster(cluster_files):
    """2 process workers on loopback; they log computed replicates and honour faults."""
    import dask
    from distributed import Client, LocalCluster

    from ldpsim.pipeline.compute.clusters import housekeeping_settings

    # The housekeeping and profiler settings of ldpsim's own local clusters: at Dask's
    # defaults these 2 workers, their nannies and the scheduler use about 9 CPU-seconds
    # a minute while idle, about 2.5 at these (measured 2026-11-30), and this cluster
    # lives the whole session.
    quiet = housekeeping_settings(profile=False)
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES, **quiet}):
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
    with cluster:
        # The scheduler keeps the plugin and sets it up on every worker that joins, a
        # worker restarted by its nanny included, whichever client submits the tasks.
        with Client(cluster) as client:
            client.register_plugin(
                ComputeLogAndFaults(cluster_files["compute_log"], cluster_files["faults"])
            )
        yield cluster


@pytest.fixture
def faults(cluster_files):
    """Write fault-injection entries the session cluster's workers honour; clear after."""
    path = cluster_files["faults"]

    def inject(**entries):
        path.write_text(json.dumps(entries))

    yield inject
    path.unlink(missing_ok=True)


@contextlib.contextmanager
def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "2m") mounted at the new folder ``mount``.

    Root ignores file modes, not a tmpfs remounted read-only, and a small tmpfs fills up:
    how tests reach read-only and full file systems. Needs root and CAP_SYS_ADMIN; the
    test is skipped otherwise.
    """
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def key_prefix(store: Path) -> str:
    """The start of every task key of a run on ``store`` (``ldpsim-TOKEN-``)."""
    from ldpsim.pipeline.compute.task_keys import store_token

    return f"ldpsim-{store_token(store)}-"


def computed(log: Path, store: Path) -> list[tuple[tuple[int, ...], int]]:
    """(grid index, rep) of every replicate computed for ``store``, in log order."""
    if not log.exists():
        return []
    prefix = key_prefix(store)
    out = []
    for line in log.read_text().splitlines():
        key, rep = line.split()
        if key.startswith(prefix):
            label = key[len(prefix) :].rsplit("-c", 1)[0]
            out.append((tuple(int(i) for i in label.split("-")), int(rep)))
    return out


def tree_hash(path: Path) -> dict[str, str]:
    """Content hash of every file under ``path`` (a store left unchanged keeps them all)."""
    path = Path(path)
    if not path.exists():
        return {}
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def write_as_a_run(store: Path, name: str, region: tuple, values: object) -> None:
    """Write ``values`` into ``region`` of the array ``name`` as a run writes, its files'
    digests recorded (ldpsim.pipeline.store.digests): the state a run stopped half-way leaves,
    not damage."""
    import zarr

    from ldpsim.pipeline.store.digests import Write, writing

    array = zarr.open_array(str(store / name), mode="r+", zarr_format=3)
    region = tuple(slice(i, i + 1) if isinstance(i, int) else i for i in region)
    values = np.broadcast_to(np.asarray(values, dtype=array.dtype), array[region].shape)
    with writing(store, [Write(name, array, region, values)]):
        array[region] = values


def edit_root_attrs(store: Path, **changes) -> None:
    """Change root attributes of a store (a value None deletes one) and record the new
    digest of its metadata, as a store written so (by an older ldpsim, beside another
    numpy) holds it: the checks of the attributes' meaning are then reached."""
    from ldpsim.pipeline.store.integrity import seal

    root = json.loads((store / "zarr.json").read_text())
    for name, value in changes.items():
        if value is None:
            del root["attributes"][name]
        else:
            root["attributes"][name] = value
    (store / "zarr.json").write_text(json.dumps(root))
    seal(store)


def without_digests(store: Path) -> None:
    """Make ``store`` one of an ldpsim older than the digests of its files
    (ldpsim.pipeline.store.digests): what a test makes of a new store when it removes a variable
    that older stores lack (they lack the digests too)."""
    import shutil

    from ldpsim.pipeline.store.digests import DIGESTS_ATTR, FOLDER

    shutil.rmtree(store / "ldpsim" / FOLDER)
    edit_root_attrs(store, **{DIGESTS_ATTR: None})


def done_count(store: Path) -> int:
    """Replicates marked done in ``store``; -1 while it is not created yet or being created.

    A run creates its store whole (written aside, then renamed into place) and replaces
    each file whole, so the array ``done`` is read with zarr alone: :func:`kill_when`
    calls this every 20 ms while a run goes on, and opening the dataset with xarray (and
    summing through dask) took 42 to 51 ms of CPU a call, against 2.4 ms so (measured
    2026-11-30): most of a core, the whole time a test waited for its moment to kill.
    """
    import zarr

    try:
        done = zarr.open_array(str(Path(store) / "done"), mode="r", zarr_format=3)
        return int(done[...].sum())
    except Exception:  # not created yet
        return -1


def kill_when(command: list[str], ready: Callable[[], bool], env: dict[str, str]) -> None:
    """Run ``command`` in a process group of its own and SIGKILL the whole group (the run
    and any local cluster it started) as soon as ``ready()`` holds; fail if the run ends
    first, or if ``ready()`` does not hold within 120 s."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(command, start_new_session=True, env=env, **quiet)
    deadline = time.monotonic() + 120
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert proc.poll() is None, "the run finished before the kill"
        assert ready(), "not ready to kill within 120 s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def write_sweep(path: Path, *, replicates=4, rep_chunk=2, grid=None, spec=None, extra="") -> Path:
    """A tiny quantile sweep file."""
    grid = grid or {"tau": [0.5, 0.9], "n": [2000, 5000]}
    spec = {"model": '"quantile"', "eps": "1.0", **(spec or {})}
    lines = [f"replicates = {replicates}", "seed = 7", f"rep_chunk = {rep_chunk}", extra, "[spec]"]
    lines += [f"{k} = {v}" for k, v in spec.items()]
    lines.append("[grid]")
    lines += [f"{k} = {v!r}" for k, v in grid.items()]
    lines += ["[methods.bb]", "B = 50", "[methods.bm]", "[methods.oracle]"]
    path.write_text("\n".join(lines) + "\n")
    return path


#: How issue 10 builds its "finished store S": the demo at n = 1000, 2 replicates.
DEMO_ARGS = ["demo", "--replicates", "2", "--set", "grid.n=[1000]"]


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory, local_cluster) -> Path:
    """A finished `ldpsim run demo --replicates 2 --set 'grid.n=[1000]'` store; copy it."""
    from ldpsim.pipeline.cli import main

    store = tmp_path_factory.mktemp("demo") / "S.zarr"
    code = main(["run", *DEMO_ARGS, "--store", str(store), *scheduler(local_cluster)])
    assert code == 0
    return store


@pytest.fixture
def without_figures(monkeypatch):
    """Reports drawn without their figures, for the tests of the rest of the page:
    drawing them is most of a report's time, and test_report_of_a_store (and the browser
    tests) check them."""
    import ldpsim.pipeline.report.report as report

    monkeypatch.setattr(report, "figure_images", lambda ds, summary: [])


@pytest.fixture(scope="session")
def failing_report(tmp_path_factory) -> tuple[Path, Path, str]:
    """(store, page, what `ldpsim report STORE` printed): the report, figures drawn, of
    synthetic.failing_store with one run recorded (2 min 5 s, 36 computed).

    test_report.py reads the page and test_report_browser.py shows it in chromium: one
    report for both, since drawing its figures takes 8 to 10 CPU-seconds (measured
    2026-11-30) and neither changes the store or the page.
    """
    from synthetic import failing_store

    from ldpsim.pipeline.cli import main
    from ldpsim.pipeline.report.report import default_report_path
    from ldpsim.pipeline.store.provenance import read_runs, record_run

    store = failing_store(tmp_path_factory.mktemp("failing-report"))
    assert read_runs(store) == []  # an old store: no run recorded
    record_run(store, wall_seconds=125.0, computed=36, failed=0, cluster="local")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["report", str(store)]) == 0
    return store, default_report_path(store), printed.getvalue()


def scheduler(cluster) -> list[str]:
    """The `--scheduler ADDRESS` arguments of a running LocalCluster."""
    return ["--scheduler", cluster.scheduler_address]


def one_error_line(captured, code: int, words=(), exit_code: int = 2) -> str:
    """The single stderr line of a refused command (exit 2, a damaged store's 4; no
    traceback), with ``words``."""
    lines = captured.err.strip().splitlines()
    assert code == exit_code, captured
    assert len(lines) == 1, lines
    assert lines[0].startswith("ldpsim: error: ") and "Traceback" not in captured.err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def pip_install(source: Path, target: Path) -> None:
    """``pip install --no-deps --target target source``: a plugin package installed as
    a user's pip installs it, built by this environment's setuptools (the test extra's)
    rather than in an isolated build environment of its own (2.8 CPU-seconds a build)."""
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )


def ldpsim_with_site(args: list[str], site: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m ldpsim.pipeline ARGS`` in ``cwd`` with the packages installed in ``site``
    importable (a plugin's package installed with ``pip --target``)."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "ldpsim.pipeline", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
