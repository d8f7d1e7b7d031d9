"""Issue 6: crash-safe resume, the run lock, bad input, loopback-only defaults."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import computed, done_count, kill_when, tree_hash, write_sweep

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute.runner import run_sweep
from ldpsim.pipeline.store.damage import find_damage
from ldpsim.pipeline.store.layout import META_GROUP
from ldpsim.pipeline.store.lock import LOCK_NAME, RunLock
from ldpsim.pipeline.store.provenance import read_runs
from ldpsim.pipeline.store.reading import open_dataset
from ldpsim.pipeline.sweep import load_sweep

VALUES = ("estimate", "lower", "upper", "truth", "done", "failed", "method_failed")


def test_crash_safe_resume(tmp_path, local_cluster, cluster_files):
    """SIGKILL the whole `ldpsim run` process group at several moments, then resume.

    The sweep is the built-in `scale` (1e6 replicates) reduced to 20 replicates of each
    of its 4 grid points, a chunk per replicate (tasks then hold several chunks); the
    resumed store must equal an uninterrupted run's, bit for bit.
    """
    reduced = ["--replicates", "20", "--set", "rep_chunk=1"]
    baseline = tmp_path / "baseline.zarr"
    run_sweep(
        load_sweep("scale", ["rep_chunk=1"], 20),
        baseline,
        scheduler=local_cluster.scheduler_address,
        log=lambda m: 0,
    )
    store = tmp_path / "crash.zarr"
    total = 80
    log = cluster_files["compute_log"]
    args = ["run", "scale", *reduced, "--store", str(store)]
    args += ["--scheduler", local_cluster.scheduler_address]
    command = [sys.executable, "-m", "ldpsim.pipeline", *args]
    kills = []
    done_at_kill: list[tuple[int, set]] = []  # (log length, replicates done) at each kill
    # Each task's results written as they come (a chunk of one replicate per task):
    # the store fills step by step, and kills land between and during writes.
    env = {**os.environ, "LDPSIM_WRITE_EVERY": "0"}
    for moment, when in (("early", 0), ("mid", 20), ("late", 64)):
        kill_when(command, lambda when=when: done_count(store) >= when, env)
        kills.append((moment, done_count(store)))
        if store.exists():
            # A kill between a file and its digest is not damage (ldpsim.pipeline.store.digests).
            assert not find_damage(store), moment
            ds = open_dataset(store)  # opens with xarray at every intermediate point
            done = ds["done"].values
            done_at_kill.append(
                (
                    len(computed(log, store)),
                    {(tuple(i[:-1]), int(i[-1])) for i in np.argwhere(done)},
                )
            )
    # Resume to the end, in this process (the killed runs were processes of their own).
    assert main(args) == 0
    final = open_dataset(store).load()
    base = open_dataset(baseline).load()
    for name in VALUES:
        np.testing.assert_array_equal(final[name].values, base[name].values, err_msg=name)
    assert int(final["done"].sum()) == total
    lines = computed(log, store)
    for length, done in done_at_kill:
        again = [item for item in lines[length:] if item in done]
        assert not again, f"recomputed after being marked done: {again}"
    leftovers = [p for pat in ("*.partial", "*.tmp") for p in store.rglob(pat)]
    assert not leftovers
    # Every write's record of its digests was completed, by its run or the next.
    for manifest in (store / META_GROUP / "digests").glob("*.json"):
        assert "writing" not in json.loads(manifest.read_text()), manifest.name
    assert not find_damage(store)
    assert not (store / META_GROUP / LOCK_NAME).exists()
    # The mid and late kills left work done and work to do.
    assert 0 < kills[1][1] < total and kills[1][1] <= kills[2][1] < total, kills


def test_a_lost_scheduler_stops_the_run_with_one_line(tmp_path, local_cluster):
    """The scheduler of `--scheduler` killed mid-run: one line, exit 3, the store kept.

    distributed cancels a client's tasks once its scheduler is gone; the run stopped with
    that FutureCancelledError's traceback after distributed's own logged one, and exit
    code 1 (replicates failed), though none had. A resume computes the rest and keeps
    what the first run wrote.
    """
    import paced_worker

    sweep = write_sweep(tmp_path / "s.toml", replicates=10, rep_chunk=1)
    store = tmp_path / "lost.zarr"
    address_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m"]
    loopback = ["--host", "127.0.0.1", "--no-dashboard"]
    serve = ["distributed.cli.dask_scheduler", *loopback, "--port", "0"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [*dask, *serve, "--scheduler-file", str(address_file)], start_new_session=True, **quiet
    )
    worker, driver = None, None
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        address = json.loads(address_file.read_text())["address"]
        paced = ["--nthreads", "1", "--preload", paced_worker.__file__]
        work = ["distributed.cli.dask_worker", address, *loopback, *paced]
        worker = subprocess.Popen([*dask, *work], start_new_session=True, **quiet)
        run = [*dask, "ldpsim.pipeline", "run", str(sweep), "--store", str(store)]
        driver = subprocess.Popen(
            [*run, "--scheduler", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "LDPSIM_WRITE_EVERY": "0"},
        )
        deadline = time.monotonic() + 120
        while done_count(store) < 1:
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "no replicate done within 120 s"
            time.sleep(0.05)
        scheduler.kill()
        out, err = driver.communicate(timeout=120)
    finally:
        for process in (driver, worker, scheduler):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert driver.returncode == 3, (out, err)
    assert "Traceback" not in err and "ERROR" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("note: ")]
    assert len(lines) == 1 and lines[0].startswith("ldpsim: error: The run lost its Dask "), err
    kept = open_dataset(store).load()
    assert 0 < int(kept["done"].sum()) < 40 and not kept["failed"].any()
    # Recorded as the run it was (the second read: a stopped run left no record).
    (record,) = read_runs(store)
    written = int(kept["done"].sum())
    assert (record["ended"], record["computed"]) == ("stopped (scheduler lost)", written)
    resume = ["run", str(sweep), "--store", str(store), "--scheduler"]
    assert main([*resume, local_cluster.scheduler_address]) == 0
    resumed = open_dataset(store).load()
    assert resumed["done"].all()
    for name in VALUES:
        before = kept[name].where(kept["done"])
        after = resumed[name].where(kept["done"])
        np.testing.assert_array_equal(before.values, after.values)


def test_lock_refuses_live_process(tmp_path, capsys):
    sweep_file = write_sweep(tmp_path / "tiny.toml")
    store = tmp_path / "locked.zarr"
    # Create the store (the spec is checked, then the lock taken) without computing.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from ldpsim.pipeline.store.store import Store

        Store.open_or_create(store, load_sweep(sweep_file))
        record = {
            "pid": holder.pid,
            "hostname": socket.gethostname(),
            "started": time.time(),
            "started_iso": "now",
            "command": "ldpsim run x",
        }
        (store / META_GROUP / LOCK_NAME).write_text(json.dumps(record))
        before = tree_hash(store)
        code = main(["run", str(sweep_file), "--store", str(store), "--workers", "1"])
        err = capsys.readouterr().err
        assert code == 2
        assert f"pid {holder.pid}" in err and socket.gethostname() in err
        assert len(err.strip().splitlines()) == 1
        assert tree_hash(store) == before
    finally:
        holder.kill()
        holder.wait()


def test_lock_stale_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "meta"
    folder.mkdir()
    record = {
        "pid": dead.pid,
        "hostname": socket.gethostname(),
        "started": time.time() - 5,
        "started_iso": "then",
        "command": "ldpsim run x",
    }
    (folder / LOCK_NAME).write_text(json.dumps(record))
    notes = []
    lock = RunLock(folder)
    lock.acquire(log=notes.append)
    assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and "stale" in notes[0] and str(dead.pid) in notes[0]
    second = RunLock(folder)
    with pytest.raises(ValueError, match=f"pid {os.getpid()}"):
        second.acquire()
    lock.release()
    assert not (folder / LOCK_NAME).exists()
    assert sorted(p.name for p in folder.iterdir()) == []


def test_lock_released_after_run(tmp_path, local_cluster):
    sweep = load_sweep(write_sweep(tmp_path / "tiny.toml", replicates=1, rep_chunk=1))
    store = tmp_path / "released.zarr"
    run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, log=lambda m: 0)
    assert not (store / META_GROUP / LOCK_NAME).exists()


# -- bad input -----------------------------------------------------------------------------
BASE = """replicates = 2
seed = 1
[spec]
model = "quantile"
eps = 1.0
n = 2000
[grid]
tau = [0.5]
[methods.bm]
"""

#: (case id, sweep file text or None for the valid BASE, CLI arguments after the sweep,
#:  cluster YAML or None, words the one stderr line must contain)
CASES = [
    ("unknown-top-key", BASE + "\n", ["--set", "colour=1"], None, ["colour"]),
    ("toml-syntax", "replicates = = 2", [], None, ["not valid TOML"]),
    ("unknown-section-key", BASE.replace("[spec]", "[spec]\nfoo = 1"), [], None, ["'foo'"]),
    ("unknown-top", "bogus = 1\n" + BASE, [], None, ["'bogus'", "Allowed keys"]),
    ("eps-zero", BASE.replace("eps = 1.0", "eps = 0.0"), [], None, ["eps"]),
    ("eps-negative", BASE, ["--set", "eps=-1"], None, ["eps"]),
    ("eps-string", BASE.replace("eps = 1.0", 'eps = "big"'), [], None, ["eps"]),
    ("tau-one", BASE.replace("tau = [0.5]", "tau = [1.0]"), [], None, ["tau"]),
    ("n-zero", BASE.replace("n = 2000", "n = 0"), [], None, ["'n'"]),
    ("n-string", BASE.replace("n = 2000", 'n = "many"'), [], None, ["'n'"]),
    (
        "replicates-negative",
        BASE.replace("replicates = 2", "replicates = -3"),
        [],
        None,
        ["replicates"],
    ),
    (
        "replicates-float",
        BASE.replace("replicates = 2", "replicates = 2.5"),
        [],
        None,
        ["replicates"],
    ),
    ("B-zero", BASE + "[methods.bb]\nB = 0\n", [], None, ["B"]),
    ("unknown-method", BASE + "[methods.magic]\n", [], None, ["magic"]),
    ("unknown-model", BASE.replace('"quantile"', '"banana"'), [], None, ["banana"]),
    ("level-one", BASE.replace("[spec]", "[spec]\nlevel = 1.0"), [], None, ["level"]),
    ("level-negative", BASE, ["--set", "level=-0.1"], None, ["level"]),
    ("grid-empty", BASE.replace("tau = [0.5]", "tau = []"), [], None, ["tau", "non-empty"]),
    (
        "grid-unknown-axis",
        BASE.replace("tau = [0.5]", "tau = [0.5]\nwho = [1]"),
        [],
        None,
        ["who"],
    ),
    ("seed-negative", BASE.replace("seed = 1", "seed = -1"), [], None, ["seed"]),
    ("bad-set-syntax", BASE, ["--set", "eps"], None, ["key=value"]),
    ("workers-zero", BASE, ["--workers", "0"], None, ["--workers"]),
    ("workers-word", BASE, ["--workers", "two"], None, ["--workers"]),
    ("replicates-flag-zero", BASE, ["--replicates", "0"], None, ["--replicates"]),
    ("adapt-bad", BASE, ["--cluster", "local", "--adapt", "5:1"], None, ["--adapt"]),
    ("jobs-without-cluster", BASE, ["--jobs", "2"], None, ["--cluster"]),
    (
        "scheduler-and-cluster",
        BASE,
        ["--scheduler", "x:1", "--cluster", "local"],
        None,
        ["--cluster"],
    ),
    ("cluster-missing", BASE, ["--cluster", "nowhere"], None, ["nowhere", "Cluster names"]),
    ("cluster-unknown-key", BASE, [], "kind: local\ncolour: red\n", ["colour", "Allowed"]),
    ("cluster-bad-kind", BASE, [], "kind: cloud\n", ["kind", "'local'"]),
    ("cluster-invalid-yaml", BASE, [], "kind: [local\n", ["not valid YAML"]),
    ("cluster-not-mapping", BASE, [], "- local\n", ["mapping"]),
    (
        "cluster-option-unknown",
        BASE,
        ["--cluster", "slurm", "--cluster-option", "colour=red"],
        None,
        ["colour", "Allowed options"],
    ),
]


@pytest.fixture(scope="module")
def existing_store(tmp_path_factory, local_cluster):
    folder = tmp_path_factory.mktemp("existing")
    (folder / "base.toml").write_text(BASE)
    store = folder / "base.zarr"
    run_sweep(
        load_sweep(folder / "base.toml"),
        store,
        scheduler=local_cluster.scheduler_address,
        log=lambda m: 0,
    )
    return store


def check_one_line(capsys, code, words) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1, lines
    assert "Traceback" not in captured.err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, tmp_path, existing_store, capsys):
    _, text, args, cluster_yaml, words = case
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(text)
    if cluster_yaml is not None:
        (tmp_path / "c.yaml").write_text(cluster_yaml)
        args = [*args, "--cluster", str(tmp_path / "c.yaml")]
    before = tree_hash(existing_store)
    new_store = tmp_path / "new.zarr"
    for store in (existing_store, new_store):
        code = main(["run", str(sweep_file), "--store", str(store), *args])
        check_one_line(capsys, code, words)
    assert tree_hash(existing_store) == before
    assert not new_store.exists()


def test_bad_paths(tmp_path, existing_store, capsys):
    (tmp_path / "sweep.toml").write_text(BASE)
    sweep = str(tmp_path / "sweep.toml")
    a_file = tmp_path / "file.txt"
    a_file.write_text("not a store")
    cases = [
        (["run", str(tmp_path / "missing.toml")], ["missing.toml", "built-in sweep name (demo"]),
        (["run", str(tmp_path)], ["is a folder, not a TOML file"]),
        (["run", sweep, "--store", str(a_file)], ["is a file; a store is a folder"]),
        (["run", sweep, "--store", str(a_file / "store.zarr")], ["store.zarr"]),
        (["run", sweep, "--store", "/proc/ldpsim.zarr"], ["/proc"]),
        (["status", str(tmp_path / "nothing.zarr")], ["not an ldpsim store"]),
        (["errors", str(a_file)], ["not an ldpsim store"]),
        (["frobnicate"], ["invalid choice"]),
        (["run"], ["sweep"]),
    ]
    before = tree_hash(existing_store)
    for argv, words in cases:
        check_one_line(capsys, main(argv), words)
    assert a_file.read_text() == "not a store"
    assert tree_hash(existing_store) == before
    # A spec that changes the existing store.
    (tmp_path / "changed.toml").write_text(BASE.replace("eps = 1.0", "eps = 3.0"))
    code = main(["run", str(tmp_path / "changed.toml"), "--store", str(existing_store)])
    check_one_line(capsys, code, ["spec.eps: 1.0 -> 3.0"])
    assert tree_hash(existing_store) == before


# -- security defaults ---------------------------------------------------------------------
def test_local_cluster_listens_on_loopback_only():
    from urllib.parse import urlparse

    from ldpsim.pipeline.compute.clusters import connect

    with connect(workers=1, log=lambda m: 0) as client:
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        info = client.scheduler_info()
        assert info["address"].startswith("tcp://127.0.0.1:")
        assert info["workers"]
        for address in info["workers"]:
            assert address.startswith("tcp://127.0.0.1:"), address
        assert urlparse(client.dashboard_link).hostname == "127.0.0.1"
