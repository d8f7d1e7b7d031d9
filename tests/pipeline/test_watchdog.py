"""Issue 23: a hung worker (SIGSTOP) is reported and restarted, and the run completes."""

from __future__ import annotations

import os
import signal

import psutil
import pytest
from conftest import key_prefix, write_sweep
from distributed import Client

from ldpsim.pipeline.cli import main
from ldpsim.pipeline.compute import progress, watchdog
from ldpsim.pipeline.compute.runner import run_sweep
from ldpsim.pipeline.compute.watchdog import default_timeout
from ldpsim.pipeline.store.reading import open_dataset
from ldpsim.pipeline.sweep import load_sweep


def test_default_timeout_is_generous():
    assert default_timeout(0.01) == 120.0  # a first task also compiles its kernels
    assert default_timeout(60.0) == 1200.0


def finished_tasks(prefix: str, dask_worker) -> int:
    """Tasks whose key starts with ``prefix`` that finished on this worker (``Client.run``)."""
    log = dask_worker.state.log
    return sum(
        1 for entry in log if entry[1] == "put-in-memory" and str(entry[0]).startswith(prefix)
    )


def test_stopped_worker_is_restarted_and_the_run_completes(tmp_path, local_cluster, monkeypatch):
    monkeypatch.setattr(watchdog, "LATE_MIN", 0.5)  # late after 0.5 s, not 30
    monkeypatch.setattr(progress, "PLAIN_PROGRESS_EVERY", 0.0)
    sweep = load_sweep(write_sweep(tmp_path / "hang.toml", replicates=6, rep_chunk=1))
    # Both workers compile the sweep's kernels first, in a run with the default timeouts
    # (a first task may compile for 600 s): at 3 s the healthy worker's first task,
    # compiling with an empty kernel cache on a loaded machine, was taken for a hang and
    # that worker restarted too (5 of 5 runs, 2 or 3 busy loops beside).
    warm = tmp_path / "warm.zarr"
    with Client(local_cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=300)  # an earlier test may have killed one
        seen: list = []
        client.subscribe_topic("all", seen.append)  # the user's own handler stays theirs
        run_sweep(sweep, warm, client=client, log=lambda line: None)
        assert any(event[1].get("action") == "gather" for event in seen), seen
        client.unsubscribe_topic("all")
        finished = client.run(finished_tasks, key_prefix(warm))
        assert len(finished) == 2 and all(finished.values()), finished  # both ran a task
        pids = client.run(os.getpid)
    worker, pid = sorted(pids.items())[0]
    os.kill(pid, signal.SIGSTOP)  # the scheduler still sends it tasks: they hang
    lines: list[str] = []
    try:
        report = run_sweep(
            sweep,
            tmp_path / "hang.zarr",
            scheduler=local_cluster.scheduler_address,
            task_timeout=3.0,
            log=lines.append,
        )
    finally:
        if psutil.pid_exists(pid) and psutil.Process(pid).status() == psutil.STATUS_STOPPED:
            os.kill(pid, signal.SIGCONT)
    text = "\n".join(lines)
    assert report.missing == 0 and report.failed == 0 and report.computed == 24, text
    assert int(open_dataset(tmp_path / "hang.zarr")["done"].sum()) == 24
    restarts = [line for line in lines if "restarting that worker" in line]
    assert restarts and all(worker in line for line in restarts), text
    assert "past its timeout of 3 s" in restarts[0]
    # The restart is said once, as a restart, not also as a lost worker (worker_losses.py).
    assert report.workers_lost == 0 and "lost while running" not in text, text
    late = [line for line in lines if line.startswith("progress:") and " late: " in line]
    assert late and worker in late[0], text
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_task_timeout_must_be_positive_seconds(value, tmp_path, capsys):
    code = main(["run", "demo", "--task-timeout", value, "--store", str(tmp_path / "s.zarr")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--task-timeout" in err[0], err


class _Scheduler:
    """What the watchdog reads of a client: the tasks each worker is processing."""

    def __init__(self) -> None:
        self.tasks: dict[str, list[str]] = {}
        self.restarted: list[str] = []

    def processing(self) -> dict[str, list[str]]:
        return self.tasks

    def restart_workers(self, workers, **_) -> None:
        self.restarted.extend(workers)


def test_a_first_task_may_compile_for_minutes_a_later_one_may_not():
    # Before (issue 43 item 10): on a loaded machine a worker compiling its kernels past
    # 120 s was restarted, and compiled again.
    from ldpsim.pipeline.compute.watchdog import FIRST_TASK_MIN, Watchdog

    scheduler = _Scheduler()
    watchdog = Watchdog(scheduler, {"a": 0.01, "b": 0.01}, None, log=lambda line: None)
    scheduler.tasks = {"w": ["a"]}
    watchdog.check(0.0)
    watchdog.check(130.0)  # compiling, past the 120 s of a warm worker
    assert scheduler.restarted == []
    watchdog.check(FIRST_TASK_MIN + 1.0)
    assert scheduler.restarted == ["w"]
    scheduler.restarted.clear()
    watchdog.check(FIRST_TASK_MIN + 2.0)  # its task was given again
    scheduler.tasks = {"w": ["b"]}  # it moved on: warm
    watchdog.check(FIRST_TASK_MIN + 3.0)
    watchdog.check(FIRST_TASK_MIN + 125.0)
    assert scheduler.restarted == ["w"]


def test_a_worker_that_moves_from_task_to_task_is_never_restarted():
    # A mutation hunt (h13d): the timeout counted from the worker's first task, not from
    # its current one, and no test noticed; a busy worker was restarted every 120 s.
    from ldpsim.pipeline.compute.watchdog import Watchdog

    scheduler = _Scheduler()
    keys = [f"t{i}" for i in range(4)]
    watchdog = Watchdog(scheduler, dict.fromkeys(keys, 0.01), 100.0, log=lambda line: None)
    for i, key in enumerate(keys):  # a new task every 90 s, each under the 100 s timeout
        scheduler.tasks = {"w": [key]}
        watchdog.check(90.0 * i)
        watchdog.check(90.0 * i + 89.0)
    assert scheduler.restarted == []


def test_the_tasks_of_another_client_on_a_worker_are_not_watched():
    # Another client's task on a shared scheduler: neither timed nor a KeyError.
    from ldpsim.pipeline.compute.watchdog import Watchdog

    scheduler = _Scheduler()
    watchdog = Watchdog(scheduler, {"ours": 0.01}, 100.0, log=lambda line: None)
    scheduler.tasks = {"w": ["ours", "theirs"], "v": ["theirs-too"]}
    watchdog.check(0.0)
    scheduler.tasks = {"w": ["theirs"], "v": ["theirs-too"]}
    watchdog.check(50.0)
    watchdog.check(500.0)
    assert scheduler.restarted == [] and watchdog.late == ""


class _Counting(_Scheduler):
    """A scheduler that counts the watchdog's looks."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def processing(self) -> dict[str, list[str]]:
        self.looks += 1
        return self.tasks


def test_the_scheduler_is_asked_at_most_every_check_every_seconds():
    # The run calls check() at every turn of its wait; each look is a scheduler round
    # trip. Not throttled, or throttled past CHECK_EVERY (``<=``), passed every test
    # (a mutation hunt, h19a).
    from ldpsim.pipeline.compute.watchdog import CHECK_EVERY, Watchdog

    assert CHECK_EVERY == 1.0
    scheduler = _Counting()
    watchdog = Watchdog(scheduler, {"a": 0.01}, None, log=lambda line: None)
    scheduler.tasks = {"w": ["a"]}
    for now in (0.0, 0.5, 0.999):
        watchdog.check(now)
    assert scheduler.looks == 1
    watchdog.check(1.0)  # CHECK_EVERY after the last look: looks again
    assert scheduler.looks == 2


def test_late_tasks_are_noted_past_five_times_their_estimate_and_30_s():
    # The progress line's note: a worker's costliest task counts (its estimate and
    # LATE_FACTOR x it), and LATE_MIN at least; an infinite timeout only reports. Each
    # part of the rule, and the plural, passed every test (a mutation hunt, h19a).
    from ldpsim.pipeline.compute.watchdog import LATE_FACTOR, LATE_MIN, Watchdog

    assert (LATE_FACTOR, LATE_MIN) == (5.0, 30.0)
    scheduler = _Scheduler()
    estimates = {"cheap": 0.01, "dear": 10.0, "other": 0.01}
    watchdog = Watchdog(scheduler, estimates, float("inf"), log=lambda line: None)
    scheduler.tasks = {"w": ["cheap", "dear"], "v": ["other"]}
    assert watchdog.check(0.0) == ""
    assert watchdog.check(29.0) == ""  # under LATE_MIN: neither
    assert watchdog.check(31.0) == "1 task late: 31 s on v (estimate 0.01 s)"
    assert watchdog.check(49.0) == "1 task late: 49 s on v (estimate 0.01 s)"
    assert watchdog.check(51.0) == (
        "2 tasks late: 51 s on w (estimate 10 s); 51 s on v (estimate 0.01 s)"
    )
    assert watchdog.check(1e6).startswith("2 tasks late: ") and scheduler.restarted == []


def test_a_restarted_worker_s_task_is_not_also_noted_late():
    # Its restart is logged on a line of its own; the note shows the tasks still waited on.
    from ldpsim.pipeline.compute.watchdog import Watchdog

    scheduler = _Scheduler()
    lines: list[str] = []
    watchdog = Watchdog(scheduler, {"a": 0.01}, 100.0, log=lines.append)
    scheduler.tasks = {"w": ["a"]}
    watchdog.check(0.0)
    assert watchdog.check(101.0) == "" and scheduler.restarted == ["w"]
    assert len(lines) == 1 and "past its timeout of 100 s" in lines[0]


class _NoNannies(_Scheduler):
    """Workers started without a nanny: ``restart_workers`` refuses them."""

    def __init__(self) -> None:
        super().__init__()
        self.retired: list[tuple[list[str], bool]] = []

    def restart_workers(self, workers, **_) -> None:
        raise ValueError("no nanny")

    def retire_workers(self, workers, close_workers=False) -> None:
        self.retired.append((list(workers), close_workers))


def test_a_hung_worker_without_a_nanny_is_retired():
    # `dask worker --no-nanny`: it cannot be restarted; retired and closed, its task goes
    # to another worker (dropping the retirement passed every test: a mutation hunt, h19a).
    from ldpsim.pipeline.compute.watchdog import Watchdog

    scheduler = _NoNannies()
    watchdog = Watchdog(scheduler, {"a": 0.01}, 100.0, log=lambda line: None)
    scheduler.tasks = {"w": ["a"]}
    watchdog.check(0.0)
    watchdog.check(100.0)  # at its timeout, not past it
    assert scheduler.retired == []
    watchdog.check(101.0)
    assert scheduler.retired == [(["w"], True)]


def test_the_default_timeout_is_that_of_the_worker_s_costliest_task():
    # A worker holding a task of 60 s and one of 0.01 s: 20 x 60 = 1200 s, not the
    # cheap task's 600 s (the first-task floor); the restart line says which. The
    # cheapest task's, and the line naming the run's timeout (None here), passed every
    # test (a mutation hunt, h19a).
    from ldpsim.pipeline.compute.watchdog import Watchdog

    scheduler = _Scheduler()
    lines: list[str] = []
    watchdog = Watchdog(scheduler, {"cheap": 0.01, "dear": 60.0}, None, log=lines.append)
    scheduler.tasks = {"w": ["cheap", "dear"]}
    watchdog.check(0.0)
    watchdog.check(1199.0)
    assert scheduler.restarted == []
    watchdog.check(1201.0)
    assert scheduler.restarted == ["w"]
    assert lines == [
        "A task has run 1201 s on worker w, past its timeout of 1200 s (estimate 60 s; "
        "--task-timeout): restarting that worker (retiring it if it has no nanny); its task "
        "runs again."
    ]


def test_a_late_task_on_a_worker_dask_paused_says_why():
    # A memory limit just too small (300 MB, 2026-12-04): the demo's last task waited on
    # a worker Dask had paused at 80% of its limit, and the progress line said only
    # "1 task late". A worker paused while it held a task: the note names the pause.
    import math
    import time

    import dask
    from distributed import Event, LocalCluster
    from distributed.core import Status

    from ldpsim.pipeline.compute.watchdog import Watchdog

    def wait_for(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def pause(dask_worker) -> None:
        dask_worker.status = Status.paused

    options = {"n_workers": 1, "threads_per_worker": 1, "processes": False}
    # No dashboard, and the scheduler's health page on a free port (not 8787).
    quiet = {"dashboard_address": "127.0.0.1:0", "scheduler_kwargs": {"dashboard": False}}
    # The worker's own memory monitor resumes a paused worker below 80% of its limit
    # (within 0.1 s: the test failed with a second's wait): it pauses none here.
    with (
        dask.config.set({"distributed.worker.memory.pause": False}),
        LocalCluster(**options, **quiet, memory_limit="2GB") as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        release = Event(client=client)
        future = client.submit(release.wait, key="ours")
        (worker,) = client.scheduler_info()["workers"]
        dog = Watchdog(client, {"ours": 0.01}, math.inf, log=lambda line: None)
        wait_for(lambda: "ours" in map(str, client.processing().get(worker, ())))
        dog.check(0.0)
        running = dog.check(100.0)
        assert running == f"1 task late: 100 s on {worker} (estimate 0.01 s)"
        client.run(pause)
        wait_for(lambda: client.scheduler_info()["workers"][worker]["status"] == "paused")
        note = dog.check(101.0)  # within PAUSED_EVERY of the last look: not yet asked
        assert note == running.replace("100 s", "101 s")
        note = dog.check(111.0)
        assert note.startswith(f"1 task late: 111 s on {worker} (estimate 0.01 s; worker ")
        assert "; worker paused at " in note and " MB of its 2000 MB limit); " in note
        assert note.endswith(
            "); a paused worker starts no task until its memory falls: "
            "give workers more memory (memory_limit, or a job's memory)"
        )
        release.set()
        future.result(timeout=30)
