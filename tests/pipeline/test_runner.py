"""run_sweep: order and worker independence, failures recorded, lost workers."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import computed, write_sweep

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute.runner import RunReport, _log_failures, run_sweep
from ldpsim.pipeline.compute.task_keys import store_token
from ldpsim.pipeline.store.reading import iter_errors, open_dataset
from ldpsim.pipeline.sweep import load_sweep

#: Variables that are a pure function of the sweep (seconds and job_id are not).
VALUES = ("estimate", "lower", "upper", "truth", "done", "failed", "method_failed")


def quiet(message: str) -> None:
    pass


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, local_cluster):
    """A sweep run in the natural order on the 2-worker session cluster."""
    folder = tmp_path_factory.mktemp("baseline")
    sweep = load_sweep(write_sweep(folder / "tiny.toml", replicates=6, rep_chunk=1))
    run_sweep(sweep, folder / "base.zarr", scheduler=local_cluster.scheduler_address, log=quiet)
    return sweep, open_dataset(folder / "base.zarr").load()


def assert_same_values(a, b) -> None:
    for name in VALUES:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


@pytest.mark.parametrize("shuffle", [1, 2])
def test_shuffled_order_bit_identical(baseline, tmp_path, local_cluster, shuffle):
    sweep, base = baseline
    store = tmp_path / "shuffled.zarr"
    run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, shuffle=shuffle, log=quiet)
    assert_same_values(open_dataset(store), base)


def test_one_worker_bit_identical(baseline, tmp_path):
    # A fresh 1-worker local cluster from cluster/local.yaml (the default `ldpsim run`).
    sweep, base = baseline
    store = tmp_path / "one.zarr"
    report = run_sweep(sweep, store, workers=1, shuffle=3, log=quiet)
    assert report.computed == 24
    assert_same_values(open_dataset(store), base)


def test_failed_replicate_recorded(tmp_path, local_cluster, cluster_files, faults, capsys):
    sweep_file = write_sweep(tmp_path / "tiny.toml", replicates=3, rep_chunk=3)
    store = tmp_path / "fail.zarr"
    token = store_token(store)
    faults(**{"raise": [[f"{token}-1-0-", 1]]})  # tau = 0.9, n = 2000, rep 1
    sched = ["--scheduler", local_cluster.scheduler_address]
    assert main(["run", str(sweep_file), "--store", str(store), *sched]) == 1
    out = capsys.readouterr().out
    assert "11 replicates, 1 failed" in out and "ldpsim errors" in out
    ds = open_dataset(store)
    assert int(ds["done"].sum()) == 11
    assert bool(ds["failed"].isel(tau=1, n=0, rep=1)) and not bool(ds["done"][1, 0, 1])
    assert np.isnan(ds["estimate"].values[1, 0, 1]).all()
    (record,) = list(iter_errors(store))
    assert record["rep"] == 1 and record["kind"] == "replicate"
    assert "InjectedFault" in record["error"] and "Traceback" in record["traceback"]

    assert main(["status", str(store)]) == 1
    out = capsys.readouterr().out
    assert "11/12 replicates done, 1 failed" in out
    assert "tau = 0.9, n = 2e3: 2/3 done, 1 failed" in out
    assert main(["errors", str(store)]) == 1
    out = capsys.readouterr().out
    assert "replicate failure" in out and "rep 1" in out and "InjectedFault" in out
    assert '"tau": 0.9' in out

    # A run that meets the same failure again keeps its record (it was written, then
    # removed as a record of a replicate done now; a mutation hunt, 2026-12-02).
    assert main(["run", str(sweep_file), "--store", str(store), *sched]) == 1
    assert "Computed 0 replicates, 1 failed" in capsys.readouterr().out
    (again,) = list(iter_errors(store))
    assert again["rep"] == 1 and "InjectedFault" in again["error"]

    # Once the cause is gone, a second run computes only the failed replicate.
    faults()
    n_before = len(computed(cluster_files["compute_log"], store))
    assert main(["run", str(sweep_file), "--store", str(store), *sched]) == 0
    assert "Computed 1 replicates, 0 failed" in capsys.readouterr().out
    assert computed(cluster_files["compute_log"], store)[n_before:] == [((1, 0), 1)]
    assert main(["status", str(store)]) == 0
    assert "12/12 replicates done, 0 failed" in capsys.readouterr().out
    assert main(["errors", str(store)]) == 0
    assert "No failures recorded" in capsys.readouterr().out


def test_worker_killing_replicate_fails_cleanly(tmp_path, local_cluster, faults, monkeypatch):
    # The task kills its worker every time: after allowed-failures (1 in conftest) the
    # scheduler gives up with KilledWorker; the sweep must record it, not hang.
    from ldpsim.pipeline.compute import progress

    monkeypatch.setattr(progress, "PLAIN_PROGRESS_EVERY", 0.0)  # a line at every tick
    sweep = load_sweep(write_sweep(tmp_path / "tiny.toml", replicates=2, rep_chunk=1))
    store = tmp_path / "killer.zarr"
    faults(exit=[[f"{store_token(store)}-0-1-", 0]])
    start = time.monotonic()
    lines: list[str] = []
    report = run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, log=lines.append)
    assert time.monotonic() - start < 120
    # A task queued on the dying worker may be given up with it (allowed-failures = 1).
    assert report.failed >= 1 and report.computed + report.failed == 8
    # The worker died twice with the task (its nanny restarted it between), and the run
    # said so at its end (worker_losses.py; before: not a word).
    assert report.workers_lost >= 2
    said = [line for line in lines if "lost while running this run's tasks" in line]
    assert len(said) == 1 and said[0].startswith(f"{report.workers_lost} workers lost"), lines
    # The task given up (KilledWorker) did not run again: said as failed, not run again.
    assert "failed (KilledWorker)" in said[0], said
    # The progress line said the losses while the run went on, joined to no empty note
    # of the watchdog's (a mutation hunt, h24d).
    shown = [line for line in lines if line.startswith("progress: ")]
    assert any(" workers lost (process ended: out of memory?), " in line for line in shown)
    assert not any(line.endswith("; ") or "; ;" in line for line in shown), shown
    records = list(iter_errors(store))
    assert len(records) == report.failed
    assert all("KilledWorker" in r["error"] and "died repeatedly" in r["error"] for r in records)
    ds = open_dataset(store)
    assert bool(ds["failed"][0, 1, 0]) and not bool(ds["done"][0, 1, 0])
    assert int(ds["done"].sum()) == report.computed


def test_lost_worker_sweep_completes(baseline, tmp_path, local_cluster, cluster_files):
    sweep, base = baseline
    store = tmp_path / "lost.zarr"
    log = cluster_files["compute_log"]
    result = {}

    def target():
        result["report"] = run_sweep(
            sweep, store, scheduler=local_cluster.scheduler_address, log=quiet
        )

    from distributed import Client

    with Client(local_cluster.scheduler_address) as client:
        # An earlier test may have killed a worker whose nanny is still restarting it.
        client.wait_for_workers(2, timeout=300)
        pids = client.run(os.getpid)
        thread = threading.Thread(target=target)
        thread.start()
        deadline = time.monotonic() + 60
        while len(computed(log, store)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(computed(log, store)) >= 4, "the sweep did not start"
        os.kill(next(iter(pids.values())), signal.SIGKILL)
        thread.join(180)
        assert not thread.is_alive()
        client.wait_for_workers(2, timeout=300)
    report = result["report"]
    assert report.failed == 0 and report.computed == 24
    assert_same_values(open_dataset(store), base)


def test_store_token_names_the_store_by_its_absolute_path(tmp_path, monkeypatch):
    # Two stores of one name in other folders get other task keys: one cluster running
    # both would otherwise take one's task for the other's (a mutation hunt, 2026-12-02:
    # a token of the store's name alone passed the tests). The same store by a relative
    # path is the same token.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert store_token(tmp_path / "a" / "S.zarr") != store_token(tmp_path / "b" / "S.zarr")
    monkeypatch.chdir(tmp_path)
    assert store_token("a/S.zarr") == store_token(tmp_path / "a" / "S.zarr")
    # A link is named by the store it leads to: one link name moved from a's store to
    # b's while a's run is on the cluster must not give b's run a's task keys.
    link = tmp_path / "current.zarr"
    tokens = []
    for target in ("a", "b"):
        (tmp_path / target / "S.zarr").mkdir()
        link.unlink(missing_ok=True)
        link.symlink_to(tmp_path / target / "S.zarr", target_is_directory=True)
        tokens.append(store_token(link))
        assert tokens[-1] == store_token(tmp_path / target / "S.zarr")
    assert tokens[0] != tokens[1]


def test_the_failures_line_quotes_the_store_path_for_a_shell():
    # Before: "ldpsim errors /data/my runs/a&b.zarr", which a shell splits (and runs a
    # command at the &) when pasted, unlike replay's quoted "Rerun one here" line.
    lines: list[str] = []
    report = RunReport(store=Path("/data/my runs/a&b.zarr"), total=2, already_done=0)
    report.replicates_failed = 1
    _log_failures(report, lines.append)
    assert lines == ["See the failures with: ldpsim errors '/data/my runs/a&b.zarr'"]
    lines.clear()
    _log_failures(RunReport(store=Path("/data/s.zarr"), total=2, already_done=0), lines.append)
    assert lines == []
