"""End to end on a real single-node SLURM (cluster/slurm-local.sh): `--cluster slurm`.

What this proves: the shipped cluster/slurm.yaml submits real sbatch jobs, the
replicates run inside them (SLURM_JOB_ID recorded per replicate, the ids known to
`scontrol` and named in the worker logs), the store they write is bit-identical to a
LocalCluster run, a run whose jobs are cancelled (scancel) and whose driver is then
killed resumes on another cluster to the same numbers, and Ctrl-C of the driver stops a
run with its one line and exit code 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import paced_worker
import pytest
from conftest import done_count

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.store.reading import open_dataset

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


def _script(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running single-node SLURM for this module.

    Afterwards only the daemons this fixture's start started are stopped (the start
    records them): a SLURM that was running stays running (`make test` starts it before
    pytest and stops it after; a concurrent session may be using it too).
    """
    record = tmp_path_factory.mktemp("slurm") / "started"
    start = _script("start", "--record", str(record))
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
        _script("stop", "--record", str(record))  # cancels the jobs of a SLURM it stops


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
    from ldpsim.pipeline.compute.worker import run_chunk
    from ldpsim.pipeline.store.layout import layout_for
    from ldpsim.pipeline.sweep import load_sweep

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


def _each_jobs_replicates(sweep_path: Path, stored: dict[str, np.ndarray]) -> int:
    """Each job's first and last replicate of each grid point, recomputed in this process
    (:func:`ldpsim.pipeline.compute.worker.run_chunk`, as a worker computes a chunk), are
    bit-identical to ``stored``; returns how many replicates were compared."""
    from ldpsim.pipeline.compute.worker import run_chunk
    from ldpsim.pipeline.store.layout import layout_for
    from ldpsim.pipeline.sweep import load_sweep

    sweep = load_sweep(sweep_path)
    layout = layout_for(sweep)
    compared = 0
    for index, point in enumerate(sweep.points()):
        jobs = stored["job_id"][index]
        reps = sorted(
            {int(np.flatnonzero(jobs == job)[end]) for job in np.unique(jobs) for end in (0, -1)}
        )
        chosen = {
            "done": stored["done"][index, reps],
            "estimate": stored["estimate"][index, reps],
            **{name: stored[name][index][:, reps] for name in ("lower", "upper")},
        }
        out = run_chunk(point.spec, reps, list(layout.methods), layout.d, "reference")
        _assert_same_numbers(chosen, {**out, "done": np.ones(len(reps), dtype=bool)})
        compared += len(reps)
    return compared


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


def test_scancel_then_kill_driver_then_resume_locally(slurm, local_cluster, tmp_path):
    # rep_chunk = 1 and each replicate paced to 0.5 s on its worker (tests/paced_worker.py;
    # the chain, n = 1e5, takes milliseconds): 20 s of work after the first replicate
    # lands, so the cancel falls in the middle of the run on any machine. Sized in CPU
    # time (n = 1e6, 6 ms a replicate) a fast machine finished the run before the cancel
    # reached the jobs; n = 1e7 made the local resume compute 79 long replicates.
    sweep = _write_sweep(tmp_path, replicates=40, n=100_000)
    store = tmp_path / "cancelled.zarr"
    total = 2 * 40
    log = (tmp_path / "driver.log").open("w")
    cmd = [
        *LDPSIM, "run", str(sweep), "--store", str(store), "--cluster", "slurm", "--jobs", "2",
        "--cluster-option", f'worker_extra_args=["--preload", "{paced_worker.__file__}"]',
    ]  # fmt: skip
    # Results written as they come (not every 2 s): the first lands early in the run.
    env = {**os.environ, "LDPSIM_WRITE_EVERY": "0"}
    driver = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while done_count(store) < 1:
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.monotonic() < deadline, "no replicate done within 120 s"
            time.sleep(0.05)
        jobs = _squeue_ids()
        subprocess.run(["scancel", *jobs], check=True)
        print(f"\nscancel {jobs} after {done_count(store)} of {total} replicates")
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
    assert resumed["done"].all()
    compared = _each_jobs_replicates(sweep, resumed)  # the local resume is job 0
    print(f"each job's first and last replicates recomputed here: {compared}, bit-identical")


def test_ctrl_c_stops_a_slurm_run_with_one_line_and_it_resumes(slurm, local_cluster, tmp_path):
    """Ctrl-C (SIGINT to the driver's process group) stops a `--cluster slurm` run as it
    stops a local one: the finished results written, one line, exit 130, a run record.
    dask_jobqueue, imported once the run had set its handler, replaced it with
    sys.exit(): the driver left with exit code 0, no line and no record, the sweep not
    finished."""
    sweep = _write_sweep(tmp_path, replicates=40, n=100_000)
    store = tmp_path / "interrupted.zarr"
    log_path = tmp_path / "driver.log"
    cmd = [
        *LDPSIM, "run", str(sweep), "--store", str(store), "--cluster", "slurm", "--jobs", "2",
        "--cluster-option", f'worker_extra_args=["--preload", "{paced_worker.__file__}"]',
    ]  # fmt: skip
    env = {**os.environ, "LDPSIM_WRITE_EVERY": "0"}
    with log_path.open("w") as log:
        driver = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env=env,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while done_count(store) < 1:
                assert driver.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "no replicate done within 120 s"
                time.sleep(0.05)
            os.killpg(driver.pid, signal.SIGINT)
            code = driver.wait(timeout=60)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
            _cancel_all()
    out = log_path.read_text()
    assert code == 130, out
    assert "Traceback" not in out, out
    assert out.strip().splitlines()[-1].startswith("ldpsim: interrupted (SIGINT): "), out
    records = list((store / "ldpsim" / "runs").glob("*.json"))
    assert len(records) == 1 and '"interrupted (SIGINT)"' in records[0].read_text()
    kept = _values(store)
    assert 0 < int(kept["done"].sum()) < 2 * 40
    resume = ["run", str(sweep), "--store", str(store), "--cluster", str(local_cluster)]
    assert main(resume) == 0
    resumed = _values(store)
    assert resumed["done"].all()
    np.testing.assert_array_equal(resumed["job_id"][kept["done"]], kept["job_id"][kept["done"]])


# -- walltime retirement -----------------------------------------------------------------
#: The shortest walltime SLURM knows (it counts in minutes). SLURM kills a job at the
#: limit, or up to 30 s later (slurmctld checks limits periodically).
WALLTIME = "00:01:00"
#: Each worker closes itself gracefully after 15 s +- 2 s from its start (its imports
#: done), and its job ends about 6 s later, well before the walltime; --adapt starts
#: new jobs in place of the retired ones.
LIFETIME, STAGGER = "15s", "2s"
MAX_JOBS = 2
#: 2 x 50 replicates, each made to take 0.5 s of wall time on its worker by a Dask
#: preload (tests/paced_worker.py; the chain itself, n = 1e5, takes milliseconds): 50 s
#: of work, whatever the machine's speed and load. A worker lives 13 to 17 s, so the
#: two jobs of the first generation do at most 68 replicates (both for 17 s from the
#: same start, with nothing but the pace), and those of the second (and, when the
#: cores are busy, of later ones) finish the run. Until 2026-11-30 the replicates were
#: sized in CPU time (n = 2e7, 0.42 s each on this project's 2-core machine); on a
#: faster, idle machine the first two jobs finished all 100 before either retired.
#: The reference is not the whole sweep run again beside it in this process, but each
#: job's first and last replicate of each grid point, recomputed once the run is over
#: (:func:`_each_jobs_replicates`).
RETIRE_REPLICATES, RETIRE_N = 50, 100_000
#: Generous: the 2 cores are shared with the rest of `make test`.
RETIRE_DEADLINE = 480


class JobWatcher(threading.Thread):
    """Polls squeue every second: when each SLURM job was first and last seen running."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.start_time = time.monotonic()
        self.seen: dict[int, list[float]] = {}
        self.most_running = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(1.0):
            out = subprocess.run(
                ["squeue", "-h", "-t", "running", "-o", "%i"], capture_output=True, text=True
            )
            now = time.monotonic() - self.start_time
            running = [int(j) for j in out.stdout.split()]
            self.most_running = max(self.most_running, len(running))
            for job in running:
                self.seen.setdefault(job, [now, now])[1] = now


def _job_logs(folder: Path) -> dict[int, dict[str, bool]]:
    """Per SLURM job (from dask-worker-<JOBID>.err): retired by lifetime, killed at walltime."""
    out = {}
    for err in folder.glob("dask-worker-*.err"):
        text = err.read_text(errors="replace")
        out[int(err.stem.rsplit("-", 1)[1])] = {
            "retired": "Reason: worker-lifetime-reached" in text,
            "time_limit": "DUE TO TIME LIMIT" in text,  # slurmstepd's line on a walltime kill
        }
    return dict(sorted(out.items()))


@pytest.mark.timeout(RETIRE_DEADLINE + 120)
def test_walltime_retirement_with_adapt(slurm, tmp_path):
    """1-minute jobs whose workers retire after 15 s, --adapt 0:2: every replicate done.

    A minimum of 0 jobs: Dask's adaptive scaling submits no job while no task is
    queued, and ldpsim queues its tasks once a worker is there; until 2026-12-01 such a
    run waited out its start timeout and said no worker had connected (a hunt). It now
    runs as a minimum of 1.

    A worker reaching its --lifetime asks the scheduler to retire it: its running task is
    handed back (`Scheduler.remove_worker(expected=True)` does not count it towards
    `allowed-failures`, so there is no KilledWorker) and its results not yet fetched are
    copied to another worker or recomputed. Adaptive scaling then submits a new job in
    its place. Every job's first and last replicate of each grid point are then
    recomputed in this process, and must be bit-identical.
    """
    sweep = _write_sweep(tmp_path, replicates=RETIRE_REPLICATES, n=RETIRE_N)
    store = tmp_path / "retire.zarr"
    lifetime = (
        f'["--lifetime", "{LIFETIME}", "--lifetime-stagger", "{STAGGER}", '
        f'"--preload", "{paced_worker.__file__}"]'
    )
    cmd = [
        *LDPSIM, "run", str(sweep), "--store", str(store), "--cluster", "slurm",
        "--adapt", f"0:{MAX_JOBS}", "--cluster-option", f"walltime={WALLTIME}",
        "--cluster-option", f"worker_extra_args={lifetime}",
    ]  # fmt: skip
    print(f"\n{' '.join(cmd[2:])}")
    watcher = JobWatcher()
    watcher.start()
    driver_log = tmp_path / "driver.log"
    with driver_log.open("w") as log:
        driver = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        try:
            code = driver.wait(timeout=RETIRE_DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the SLURM run did not finish in {RETIRE_DEADLINE} s ({done_count(store)} "
                f"of {2 * RETIRE_REPLICATES} done); driver log:\n"
                f"{driver_log.read_text()[-3000:]}\n{_script('logs').stdout}"
            )
    finally:
        watcher.halt.set()
        watcher.join()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        _cancel_all()
    seconds = time.monotonic() - watcher.start_time
    assert code == 0, driver_log.read_text()[-3000:]
    on_slurm = _values(store)
    failed = open_dataset(store)["failed"].values
    jobs = _job_logs(tmp_path / "logs" / "dask-jobqueue")
    done_by = {j: int((on_slurm["job_id"] == j).sum()) for j in sorted(jobs)}

    print(
        f"SLURM run: {on_slurm['done'].sum()} of {on_slurm['done'].size} replicates done, "
        f"{failed.sum()} failed, in {seconds:.0f} s; walltime {WALLTIME}, lifetime "
        f"{LIFETIME} +- {STAGGER}"
    )
    retired = [j for j, info in jobs.items() if info["retired"]]
    # A kill after the retirement only cuts the job's shutdown short: its worker had
    # already left the scheduler. A kill before it takes a running task down.
    killed = [j for j, info in jobs.items() if info["time_limit"] and not info["retired"]]
    print(
        f"jobs started: {len(jobs)}, at most {watcher.most_running} running at once; retired "
        f"at their lifetime: {len(retired)}; killed at the walltime first: {len(killed)}"
    )
    for job, info in jobs.items():
        first, last = watcher.seen.get(job, [float("nan")] * 2)
        end = {
            (True, False): "retired at its lifetime",
            (True, True): "retired, then killed at the walltime while shutting down",
            (False, True): "KILLED AT THE WALLTIME",
            (False, False): "closed by the driver at the end",
        }[info["retired"], info["time_limit"]]
        print(
            f"  job {job}: running {first:5.0f} s .. {last:5.0f} s, {done_by[job]:3d} "
            f"replicates done, {end}"
        )
    assert on_slurm["done"].all() and not failed.any()
    compared = _each_jobs_replicates(sweep, on_slurm)
    print(f"  each job's first and last replicates recomputed here: {compared}, bit-identical")
    assert set(np.unique(on_slurm["job_id"])) <= set(jobs)
    # at most MAX_JOBS run at once, so jobs started in place of retired ones did work
    assert len(retired) >= MAX_JOBS, jobs
    assert sum(1 for j in jobs if done_by[j] > 0) >= 2 * MAX_JOBS, done_by
    assert not killed, "a job reached its walltime before its lifetime retired it"
    assert watcher.most_running <= MAX_JOBS
