"""End to end on a real single-node SLURM (cluster/slurm-local.sh): `--cluster slurm`.

What this proves: the shipped cluster/slurm.yaml submits real sbatch jobs, the
replicates run inside them (SLURM_JOB_ID recorded per replicate, the ids known to
`scontrol` and named in the worker logs), the store they write is bit-identical to a
LocalCluster run, and a run whose jobs are cancelled (scancel) and whose driver is then
killed resumes on another cluster to the same numbers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store import open_dataset

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cluster" / "slurm-local.sh"
#: slurm-local.sh exit codes meaning "SLURM cannot be installed/run here": skip, not fail.
CANNOT_INSTALL = {3: "packages missing / install failed", 6: "not root, no sudo"}
LDPSIM = [sys.executable, "-m", "ldpsim.pipeline"]

SWEEP = """
description = "SLURM end-to-end test"
replicates = {replicates}
seed = 20240917
rep_chunk = 1

[spec]
model = "quantile"
mechanism = "randomized_response"
eps = 1.0
c = 1.0
gamma = 0.51
theta0 = 0.0
level = 0.9
n = {n}

[grid]
tau = [0.5, 0.9]

[methods.bb]
B = 200
beta = 0.75
multiplier = "uniform"

[methods.bm]

[methods.sn]

[methods.oracle]
"""


def _script(command: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def slurm():
    """A running single-node SLURM for this module.

    Stopped afterwards only if this fixture started it (`make test` starts it before
    pytest and stops it after; a concurrent session may be using it too).
    """
    was_up = _script("status").returncode == 0
    start = _script("start")
    if start.returncode in CANNOT_INSTALL and not os.environ.get("CI"):
        pytest.skip(
            f"SLURM unavailable ({CANNOT_INSTALL[start.returncode]}): {start.stderr[-500:]}"
        )
    if start.returncode != 0:
        pytest.fail(
            f"slurm-local.sh start failed (exit {start.returncode}):\n{start.stderr}\n"
            f"{_script('logs').stdout}"
        )
    print(start.stdout.strip())
    try:
        yield
    finally:
        if not was_up:
            _cancel_all()
            _script("stop")


def _run_driver(args: list[str], cwd: Path, timeout: float = 180) -> str:
    """`ldpsim run ...` in a subprocess: a driver whose jobs vanish hangs, time it out."""
    try:
        out = subprocess.run(
            [*LDPSIM, "run", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        _cancel_all()
        pytest.fail(
            f"ldpsim run did not finish in {timeout} s (SLURM jobs cancelled by someone "
            f"else?):\n{(exc.stdout or b'')[-3000:]!r}\n{_script('logs').stdout}"
        )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def _squeue_ids() -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    return out.stdout.split()


def _cancel_all() -> None:
    ids = _squeue_ids()
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True)


#: The reference runs: a LocalCluster with thread workers inside the pytest process, so
#: the numba kernels compile once per test session (a fresh worker process spends 10-20 s
#: compiling before its first replicate; two of them fight for the 2 cores).
LOCAL_INPROC = """
kind: local
options:
  n_workers: 1
  threads_per_worker: 2
  processes: false
  dashboard_address: "127.0.0.1:0"
"""


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory):
    """Path of the in-process LocalCluster file; the kernels compiled (warm) once."""
    from ldpsim.pipeline.store import layout_for
    from ldpsim.pipeline.sweep import load_sweep
    from ldpsim.pipeline.worker import run_chunk

    folder = tmp_path_factory.mktemp("local-cluster")
    path = folder / "local-inproc.yaml"
    path.write_text(LOCAL_INPROC)
    sweep = load_sweep(_write_sweep(folder, replicates=1, n=1000))
    layout = layout_for(sweep)
    run_chunk(sweep.points()[0].spec, [0], list(layout.methods), layout.d, "warm-up")
    return path


def _write_sweep(folder: Path, replicates: int, n: int) -> Path:
    path = folder / "slurm-e2e.toml"
    path.write_text(SWEEP.format(replicates=replicates, n=n))
    return path


def _values(store: Path) -> dict[str, np.ndarray]:
    ds = open_dataset(store)
    return {k: ds[k].values for k in ("estimate", "lower", "upper", "done", "job_id")}


def _assert_same_numbers(a: dict, b: dict) -> None:
    assert a["done"].all() and b["done"].all()
    for name in ("estimate", "lower", "upper"):
        assert np.isfinite(a[name]).any()
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)  # bit-identical


def _local_run(sweep: Path, store: Path, cluster: Path) -> dict:
    assert main(["run", str(sweep), "--store", str(store), "--cluster", str(cluster)]) == 0
    return _values(store)


def _scontrol(job_id: int) -> str:
    out = subprocess.run(
        ["scontrol", "show", "job", str(job_id)], capture_output=True, text=True, check=True
    )
    return out.stdout


def test_replicates_run_in_slurm_jobs_and_match_local(slurm, local_cluster, tmp_path):
    # cwd tmp_path: the shipped yaml logs to logs/dask-jobqueue (relative)
    sweep = _write_sweep(tmp_path, replicates=6, n=20_000)
    store = tmp_path / "slurm.zarr"
    t0 = time.monotonic()
    _run_driver([str(sweep), "--store", str(store), "--cluster", "slurm", "--jobs", "2"], tmp_path)
    seconds = time.monotonic() - t0
    on_slurm = _values(store)
    assert on_slurm["done"].all()
    job_ids = on_slurm["job_id"]
    assert (job_ids > 0).all(), f"replicates outside a SLURM job: {job_ids}"

    taus = open_dataset(store)["tau"].values
    print(f"\nSLURM run: {job_ids.size} replicates in {seconds:.1f} s")
    for i, tau in enumerate(taus):
        print(f"  tau={tau}: SLURM_JOB_ID per replicate {job_ids[i].tolist()}")
    distinct = sorted({int(j) for j in job_ids.ravel()})
    print(f"  distinct SLURM jobs: {distinct}")
    assert 1 <= len(distinct) <= 2  # --jobs 2

    logs = sorted(p.name for p in (tmp_path / "logs" / "dask-jobqueue").iterdir())
    for job_id in distinct:
        info = _scontrol(job_id)
        assert f"JobId={job_id} " in info and "Partition=debug" in info
        print(f"  scontrol: {' '.join(info.split()[:3])} {_field(info, 'JobState')}")
        assert any(str(job_id) in name for name in logs), (job_id, logs)
    print(f"  worker logs: {logs}")

    local = _local_run(sweep, tmp_path / "local.zarr", local_cluster)
    assert (local["job_id"] == 0).all()
    _assert_same_numbers(on_slurm, local)


def _field(info: str, name: str) -> str:
    return next((w for w in info.split() if w.startswith(f"{name}=")), f"{name}=?")


def _done_count(store: Path) -> int:
    try:
        return int(zarr.open_group(str(store), mode="r")["done"][...].sum())
    except Exception:  # not created yet, or being written
        return -1


def test_scancel_then_kill_driver_then_resume_locally(slurm, local_cluster, tmp_path):
    # rep_chunk = 1 and 0.05 s per replicate after compilation: a few seconds of work
    # after the first replicate lands, so the cancel falls in the middle of the run
    sweep = _write_sweep(tmp_path, replicates=30, n=1_000_000)
    store = tmp_path / "cancelled.zarr"
    total = 2 * 30
    log = (tmp_path / "driver.log").open("w")
    cmd = [*LDPSIM, "run", str(sweep), "--store", str(store), "--cluster", "slurm", "--jobs", "2"]
    driver = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while _done_count(store) < 1:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.monotonic() < deadline, "no replicate done within 120 s"
            time.sleep(0.05)
        jobs = _squeue_ids()
        subprocess.run(["scancel", *jobs], check=True)
        print(f"\nscancel {jobs} after {_done_count(store)} of {total} replicates")
        time.sleep(2)
        assert driver.poll() is None, "the driver should hang (futures pending), not exit"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
        log.close()
    partial = _values(store)
    n_done = int(partial["done"].sum())
    print(
        f"after killing the driver: {n_done}/{total} done, SLURM job ids of the done ones: "
        f"{sorted({int(j) for j in partial['job_id'][partial['done']]})}"
    )
    assert 0 < n_done < total, "cancel did not happen mid-run; make the sweep longer"
    assert (partial["job_id"][partial["done"]] > 0).all()
    # the dying driver may have asked for replacement jobs; without a scheduler they
    # would exit after death_timeout, cancel them now
    leftover = _squeue_ids()
    print(f"jobs left behind by the killed driver (cancelled): {leftover}")
    _cancel_all()

    resume = ["run", str(sweep), "--store", str(store), "--cluster", str(local_cluster)]
    assert main(resume) == 0
    resumed = _values(store)
    # replicates done under SLURM were kept (not recomputed), the rest computed locally
    np.testing.assert_array_equal(
        resumed["job_id"][partial["done"]], partial["job_id"][partial["done"]]
    )
    assert (resumed["job_id"][~partial["done"]] == 0).all()
    clean = _local_run(sweep, tmp_path / "clean.zarr", local_cluster)
    _assert_same_numbers(resumed, clean)
