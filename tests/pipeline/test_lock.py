"""The run lock across hosts: heartbeats, stale locks from other hosts, atomic takeover."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import done_count, write_sweep

from ldpsim.pipeline.compute.runner import run_sweep
from ldpsim.pipeline.errors import InputError, RunStopped
from ldpsim.pipeline.store import lock as lock_module
from ldpsim.pipeline.store.lock import (
    LOCK_NAME,
    STALE_AFTER,
    STALE_AFTER_ENV,
    START_TIME_TOLERANCE,
    LockFile,
    RunLock,
    _process_start,
    holder_token,
)
from ldpsim.pipeline.sweep import load_sweep

OTHER_HOST = "node-elsewhere-7"


def write_record(folder: Path, *, hostname: str, pid: int, age: float, **extra) -> Path:
    """A lock file as another run would leave it, last touched ``age`` seconds ago."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": pid,
        "hostname": hostname,
        "started": time.time() - age - 5,
        "started_iso": "2026-01-01T00:00:00+0000",
        "command": "ldpsim run paper-table1 --cluster slurm",
        "token": f"foreign-{pid}-{time.monotonic_ns()}",
        **extra,
    }
    path = folder / LOCK_NAME
    path.write_text(json.dumps(record))
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def taken_over_note(folder: Path) -> str:
    """Take the lock in ``folder`` (over another run's) and give it back: the one note
    the taking printed."""
    notes: list[str] = []
    lock = RunLock(folder)
    lock.acquire(log=notes.append)
    lock.release()
    assert len(notes) == 1, notes
    return notes[0]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_fresh_lock_from_another_host_is_refused(tmp_path):
    path = write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=2.0)
    before = (path.read_bytes(), path.stat().st_mtime)
    with pytest.raises(InputError) as info:
        RunLock(tmp_path).acquire(log=pytest.fail)
    message = str(info.value)
    assert "\n" not in message
    assert f"pid 4242 on host {OTHER_HOST!r}" in message
    assert "last heartbeat 2 s ago" in message
    assert f"no heartbeat for {STALE_AFTER:g} s" in message  # what the user may expect
    assert (path.read_bytes(), path.stat().st_mtime) == before  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]


def test_old_heartbeat_from_another_host_is_taken_over(tmp_path):
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=STALE_AFTER + 5)
    notes = []
    lock = RunLock(tmp_path)
    lock.acquire(log=notes.append)
    try:
        assert lock.read()["token"] and lock.read()["pid"] == os.getpid()
        assert len(notes) == 1
        assert f"pid 4242 on host {OTHER_HOST!r}" in notes[0]
        assert f"no heartbeat for {STALE_AFTER + 5:.3g} s" in notes[0]
    finally:
        lock.release()
    assert list(tmp_path.iterdir()) == []


def test_the_holders_own_timeout_decides(tmp_path):
    # A holder that promised a 600 s timeout is not stale after 100 s, whatever the
    # reader's own timeout; one that promised 30 s is stale after 40 s.
    write_record(tmp_path, hostname=OTHER_HOST, pid=1, age=100, stale_after=600)
    with pytest.raises(InputError, match="no heartbeat for 600 s"):
        RunLock(tmp_path, stale_after=10).acquire(log=pytest.fail)
    write_record(tmp_path, hostname=OTHER_HOST, pid=1, age=40, stale_after=30)
    lock = RunLock(tmp_path)
    lock.acquire(log=lambda note: None)
    lock.release()


HOLDER = """
import socket, sys, time
socket.gethostname = lambda: {host!r}  # this process plays a driver on another node
from ldpsim.pipeline.store.lock import RunLock
lock = RunLock({folder!r}, stale_after={stale_after})
lock.acquire(log=print)
print("held", flush=True)
time.sleep(600)
"""


def test_heartbeat_holds_then_a_killed_holder_is_taken_over(tmp_path):
    """A driver "on another host" keeps its lock by heartbeats; killed, it is taken over."""
    stale_after = 2.0  # heartbeat every 1/3 s
    script = HOLDER.format(host=OTHER_HOST, folder=str(tmp_path), stale_after=stale_after)
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        held_since = time.monotonic()
        time.sleep(2 * stale_after)  # without heartbeats the lock would be stale now
        with pytest.raises(InputError, match=f"pid {holder.pid} on host {OTHER_HOST!r}"):
            RunLock(tmp_path).acquire(log=pytest.fail)
        record = RunLock(tmp_path).inspect()
        age = time.time() - record.heartbeat
        print(f"\nheld {time.monotonic() - held_since:.1f} s; last heartbeat {age:.2f} s ago")
        assert age < stale_after
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    killed = time.monotonic()
    notes: list[str] = []
    lock = RunLock(tmp_path)
    while True:
        try:
            lock.acquire(log=notes.append)
            break
        except InputError:
            assert time.monotonic() - killed < stale_after + 10, "never taken over"
            time.sleep(0.05)
    waited = time.monotonic() - killed
    lock.release()
    print(f"taken over {waited:.2f} s after SIGKILL (timeout {stale_after} s): {notes[0]}")
    # the last heartbeat came at most one period before the kill, so the takeover waits
    # at least stale_after minus one period (minus slack for a late last beat)
    assert waited >= stale_after * (1 - 1 / 6) - 0.25
    assert "no heartbeat" in notes[0] and str(holder.pid) in notes[0]


@pytest.mark.parametrize("holder", ["another host, old heartbeat", "this host, dead pid"])
def test_concurrent_takeovers_exactly_one_wins(tmp_path, holder):
    """Threads racing to take over one stale lock, 200 times: one winner every time."""
    rounds, racers = 200, 3
    pid = dead_pid()
    folder = tmp_path / "meta"
    winners_per_round = []
    for _ in range(rounds):
        if holder == "this host, dead pid":
            write_record(folder, hostname=socket.gethostname(), pid=pid, age=1.0)
        else:
            write_record(folder, hostname=OTHER_HOST, pid=pid, age=STALE_AFTER + 1)
        start = threading.Barrier(racers)
        outcome: dict[int, object] = {}

        def race(i: int, start=start, outcome=outcome) -> None:
            lock = RunLock(folder)
            start.wait()
            try:
                lock.acquire(log=lambda note: None)
                outcome[i] = lock
            except InputError as exc:
                outcome[i] = exc

        threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [lock for lock in outcome.values() if isinstance(lock, RunLock)]
        winners_per_round.append(len(winners))
        for loser in (e for e in outcome.values() if isinstance(e, InputError)):
            assert f"pid {os.getpid()} on host" in str(loser)  # refused by the winner
        if len(winners) == 1:
            assert winners[0].read()["token"] == winners[0]._token
        for lock in winners:
            lock.release()
        assert list(folder.iterdir()) == [], "a marker or private file was left behind"
    counts = {k: winners_per_round.count(k) for k in sorted(set(winners_per_round))}
    print(f"\n{holder}: winners per round -> number of rounds: {counts}")
    assert counts == {1: rounds}


def test_a_lost_lock_is_reported_and_not_removed(tmp_path):
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.6)
    lock.acquire(log=notes.append)
    # another run took it over (as if this one had stalled for longer than its timeout)
    (tmp_path / LOCK_NAME).unlink()
    foreign = write_record(tmp_path, hostname=OTHER_HOST, pid=99, age=0)
    deadline = time.monotonic() + 10
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.lost and len(notes) == 1 and "stops before its next write" in notes[0]
    assert not lock.still_held()
    lock.release()
    assert json.loads(foreign.read_text())["pid"] == 99  # the other run's lock stays


def test_still_held_reads_the_lock_file_before_the_heartbeat_does(tmp_path, monkeypatch):
    # The heartbeat looks every 10 s here: each answer comes from the file itself.
    lock = RunLock(tmp_path, stale_after=60.0)
    lock.acquire(log=pytest.fail)
    assert lock.still_held()
    real_read = Path.read_bytes

    def unreadable(self):
        raise OSError(5, "Input/output error")  # a file system that stalls: held

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    assert lock.still_held() and not lock.lost
    monkeypatch.setattr(Path, "read_bytes", real_read)
    (tmp_path / LOCK_NAME).unlink()  # removed (a run taking it over, or by hand): lost
    assert not lock.still_held() and lock.lost
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()
    lock = RunLock(tmp_path, stale_after=60.0)
    lock.acquire(log=pytest.fail)
    (tmp_path / LOCK_NAME).unlink()
    foreign = write_record(tmp_path, hostname=OTHER_HOST, pid=99, age=0)
    assert not lock.still_held() and lock.lost
    lock.release()
    assert json.loads(foreign.read_text())["pid"] == 99


def test_timeout_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(STALE_AFTER_ENV, "90")
    lock = RunLock(tmp_path)
    assert (lock.stale_after, lock.heartbeat_every) == (90.0, 15.0)
    lock.acquire(log=pytest.fail)
    assert lock.read()["stale_after"] == 90.0
    lock.release()
    for bad in ("soon", "0", "nan", "-5"):
        monkeypatch.setenv(STALE_AFTER_ENV, bad)
        with pytest.raises(InputError) as info:
            RunLock(tmp_path)
        assert str(info.value) == (
            f"The {STALE_AFTER_ENV} environment variable must be a number of seconds in "
            f"[1, 86400]. Got {bad!r}."
        )


def test_a_bad_timeout_refuses_a_run_before_its_store_is_made(tmp_path, monkeypatch, capsys):
    from conftest import one_error_line

    from ldpsim.pipeline.cli import main

    monkeypatch.setenv(STALE_AFTER_ENV, "abc")
    store = tmp_path / "new.zarr"
    code = main(["run", "demo", "--replicates", "2", "--store", str(store), "--workers", "1"])
    one_error_line(capsys.readouterr(), code, (f"The {STALE_AFTER_ENV} environment variable",))
    assert not store.exists()  # the lock's timeout was read only after creating the store


def test_a_copy_of_a_store_is_not_locked_by_the_original_run(tmp_path):
    """`cp -a` of a store whose run lives copies its lock; the copy is free, the original not."""
    original, copy = tmp_path / "a.zarr", tmp_path / "b.zarr"
    script = HOLDER.format(
        host=socket.gethostname(), folder=str(original / "ldpsim"), stale_after=2.0
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
        assert (copy / "ldpsim" / LOCK_NAME).read_bytes() == (
            original / "ldpsim" / LOCK_NAME
        ).read_bytes()
        time.sleep(2.5)  # the copy's lock has had no heartbeat for longer than its timeout
        note = taken_over_note(copy / "ldpsim")
        assert f"{str(original.resolve())!r}" in note and "copy" in note
        with pytest.raises(InputError) as info:
            RunLock(original / "ldpsim").acquire(log=pytest.fail)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    message = str(info.value)
    # On its own host a run is judged by its process, not by its heartbeat: the message
    # says so, and names no heartbeat timeout that would not apply.
    assert f"pid {holder.pid}" in message and "\n" not in message
    assert "heartbeat" not in message
    assert "released when that process ends" in message


# -- issue 31: a pid that now names another process; a heartbeat dated in the future ----


def test_a_lock_naming_pid_1_started_at_another_time_is_taken_over(tmp_path):
    """A lock of a run that was pid 1 (a container's entry point) is not held by the pid 1
    that runs now: its recorded start time is not the current pid 1's."""
    assert _process_start(1) is not None  # pid 1 lives and psutil may ask it
    not_pid_1s = _process_start(os.getpid())
    write_record(tmp_path, hostname=socket.gethostname(), pid=1, age=0, **not_pid_1s)
    notes: list[str] = []
    lock = RunLock(tmp_path)
    lock.acquire(log=notes.append)
    try:
        assert lock.read()["token"] == lock._token
    finally:
        lock.release()
    assert len(notes) == 1 and "stale lock of pid 1 on host" in notes[0]
    assert "pid 1 is now a process started" in notes[0]


@pytest.fixture
def sleeper():
    """A live process of this host, as a lock holder that is busy elsewhere."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_process_started_when_recorded_keeps_its_lock(tmp_path, sleeper):
    start = _process_start(sleeper.pid)
    path = write_record(
        tmp_path,
        hostname=socket.gethostname(),
        pid=sleeper.pid,
        age=0,
        **start,
        started=time.time(),  # written after the process started, as a holder does
    )
    before = path.read_bytes()
    with pytest.raises(InputError) as info:
        RunLock(tmp_path).acquire(log=pytest.fail)
    assert f"pid {sleeper.pid} on host" in str(info.value)
    assert "released when that process ends" in str(info.value)
    assert path.read_bytes() == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start since boot: Linux")
def test_a_live_process_keeps_its_lock_after_the_clock_is_set_forward(tmp_path, sleeper):
    """psutil's start time moves with the wall clock on Linux, the start since boot not."""
    start = _process_start(sleeper.pid)
    assert {"boot_id", "pid_started_since_boot"} <= start.keys()
    # The lock as written an hour before the wall clock was set an hour forward.
    start["pid_started"] -= 3600
    write_record(
        tmp_path,
        hostname=socket.gethostname(),
        pid=sleeper.pid,
        age=0,
        **start,
        started=time.time() - 3600,
    )
    with pytest.raises(InputError, match=f"pid {sleeper.pid} on host"):
        RunLock(tmp_path).acquire(log=pytest.fail)


def future_by(message: str) -> int:
    """The seconds by which a message says that a heartbeat is dated in the future."""
    found = re.search(r"heartbeat dated (\d+) s in the future", message)
    assert found, message
    return int(found[1])


def test_a_future_heartbeat_is_stale_once_it_stops_advancing(tmp_path, monkeypatch):
    """Another host's clock an hour ahead: its lock is judged by whether it advances."""
    monkeypatch.setenv(STALE_AFTER_ENV, "1")
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=-3600)
    notes: list[str] = []
    lock = RunLock(tmp_path)
    began = time.monotonic()
    lock.acquire(log=notes.append)
    waited = time.monotonic() - began
    try:
        assert lock.read()["token"] == lock._token
    finally:
        lock.release()
    print(f"\ntaken over after watching it for {waited:.2f} s: {notes}")
    assert 1.0 <= waited < 5.0
    assert len(notes) == 2
    assert 3590 <= future_by(notes[0]) <= 3600
    assert "watching for up to 1 s" in notes[0]
    assert "stale lock of pid 4242" in notes[1] and "did not advance" in notes[1]
    assert list(tmp_path.iterdir()) == []


def test_a_future_heartbeat_that_advances_keeps_its_lock(tmp_path):
    """A live holder on a host whose clock is an hour ahead keeps its lock; killed, not."""
    stale_after = 1.0
    path = write_record(
        tmp_path, hostname=OTHER_HOST, pid=4242, age=-3600, stale_after=stale_after
    )
    stop = threading.Event()

    def beat() -> None:  # the holder's heartbeat, every stale_after / 6 s, an hour ahead
        while not stop.wait(stale_after / 6):
            ahead = time.time() + 3600
            os.utime(path, (ahead, ahead))

    holder = threading.Thread(target=beat)
    holder.start()
    refusals = 0
    try:
        began = time.monotonic()
        while time.monotonic() - began < 2 * stale_after:
            with pytest.raises(InputError) as info:
                RunLock(tmp_path).acquire(log=lambda note: None)
            refusals += 1
    finally:
        stop.set()
        holder.join()
    message = str(info.value)
    print(f"\n{refusals} refusals in {2 * stale_after:g} s: {message}")
    assert "0 s ago" not in message
    assert 3590 <= future_by(message) <= 3600 and "in the future (that host's" in message
    assert "clock is ahead) and advancing" in message
    assert f"once its heartbeat has not advanced for {stale_after:g} s" in message
    # The holder is gone: its heartbeat stays put, and the lock is taken over.
    notes: list[str] = []
    lock = RunLock(tmp_path)
    began = time.monotonic()
    lock.acquire(log=notes.append)
    waited = time.monotonic() - began
    lock.release()
    assert waited >= stale_after and "did not advance" in notes[-1]


def test_a_lock_of_another_boot_is_judged_by_its_heartbeat(tmp_path):
    """Its pid means nothing in this boot: this host restarted, or another machine has
    its name (a container rescheduled elsewhere), where the holder may still live."""
    other_boot = {"boot_id": "another-boot", "pid_started_since_boot": 12.5}
    here = socket.gethostname()
    write_record(tmp_path, hostname=here, pid=dead_pid(), age=2.0, **other_boot)
    with pytest.raises(InputError, match="last heartbeat 2 s ago"):
        RunLock(tmp_path).acquire(log=pytest.fail)
    write_record(tmp_path, hostname=here, pid=1, age=STALE_AFTER + 5, **other_boot)
    assert f"no heartbeat for {STALE_AFTER + 5:.3g} s" in taken_over_note(tmp_path)


def test_a_run_whose_lock_was_taken_over_writes_nothing_more(tmp_path, local_cluster):
    # A run suspended past its lock's timeout (kill -STOP, a hung file system) and taken
    # over by another run kept writing the store beside it once it went on (h13c's
    # hunt, 2026-12-02). Here the takeover comes as the run starts its first write.
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", replicates=4, rep_chunk=2))
    store = tmp_path / "S.zarr"
    folder = store / "ldpsim"
    foreign: list[Path] = []

    def log(line: str) -> None:
        if "replicates to compute" in line:  # the store exists and is locked by the run
            (folder / LOCK_NAME).unlink()
            foreign.append(write_record(folder, hostname=OTHER_HOST, pid=99, age=0))

    with pytest.raises(RunStopped) as stopped:
        run_sweep(sweep, store, scheduler=local_cluster.scheduler_address, log=log)
    message = str(stopped.value)
    assert "Another run took over the lock" in message and "keeps 0 of" in message, message
    # The other run named where it is: `ldpsim status`, named before, shows no lock.
    assert f"the lock file {str(folder / LOCK_NAME)!r} names" in message, message
    assert stopped.value.exit_code == 3 and stopped.value.ended == "stopped (lock lost)"
    assert done_count(store) == 0  # nothing written after the takeover
    assert json.loads(foreign[0].read_text())["pid"] == 99  # the other run's lock stays


def test_a_run_whose_lock_was_taken_over_never_exits_0(tmp_path, local_cluster):
    # The other run took the lock over, computed the rest and finished before this run
    # went on: the store was complete, and the stopped run printed "ldpsim: error:
    # Another run took over the lock ..." and exited 0 (h13e's hunt: lost.sh, rcA=0).
    sweep = load_sweep(write_sweep(tmp_path / "s.toml", replicates=4, rep_chunk=2))
    store = tmp_path / "S.zarr"
    address = local_cluster.scheduler_address
    other: list[object] = []

    def log(line: str) -> None:
        if "replicates to compute" in line and not other:  # this run holds the store
            (store / "ldpsim" / LOCK_NAME).unlink()  # taken over, as from another host
            other.append(run_sweep(sweep, store, scheduler=address, log=lambda _: None))

    with pytest.raises(RunStopped) as stopped:
        run_sweep(sweep, store, scheduler=address, log=log)
    assert done_count(store) == 16  # the other run completed the store
    assert "keeps 16 of the sweep's 16 replicates" in str(stopped.value)
    assert stopped.value.exit_code == 3 and stopped.value.ended == "stopped (lock lost)"


def test_a_lock_of_an_older_ldpsim_is_held_by_a_process_started_before_it(tmp_path):
    # A record without the process's start time (an older ldpsim) is judged by when it
    # was written: a live pid started before that is its writer. A mutation hunt (h13d)
    # found no test of this fallback.
    here = socket.gethostname()
    write_record(tmp_path, hostname=here, pid=os.getpid(), age=0, started=time.time())
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(tmp_path).acquire(log=pytest.fail)


def test_a_live_pid_started_seconds_from_its_record_is_another_process(tmp_path, sleeper):
    # The pid's start must match the record's to within START_TIME_TOLERANCE (1 s):
    # 5 s apart, it is another process that got the pid, and the lock is taken over.
    start = _process_start(sleeper.pid)
    start = {**start, "pid_started": start["pid_started"] - 5.0}
    if "pid_started_since_boot" in start:
        start["pid_started_since_boot"] -= 5.0
    write_record(tmp_path, hostname=socket.gethostname(), pid=sleeper.pid, age=0, **start)
    assert f"pid {sleeper.pid} is now a process started" in taken_over_note(tmp_path)


def test_a_lost_lock_stays_lost_through_a_read_error(tmp_path, monkeypatch):
    # Once the heartbeat saw the lock taken over, a file system that fails a read
    # does not make still_held() say "held" again (the run would write beside the other).
    lock = RunLock(tmp_path, stale_after=60.0)
    lock.acquire(log=pytest.fail)
    lock.lost = True  # as the heartbeat leaves it

    def unreadable(self):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    assert not lock.still_held()
    monkeypatch.undo()
    lock.release()


def test_the_heartbeat_never_touches_another_runs_lock(tmp_path):
    # The heartbeat that finds another run's record stops without touching it: that
    # lock's heartbeat is its holder's alone (a touch would keep a dead holder's lock).
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.6)  # a heartbeat every 0.1 s
    lock.acquire(log=notes.append)
    other = tmp_path / "other"
    foreign = write_record(other, hostname=OTHER_HOST, pid=99, age=30.0)
    stamp = foreign.stat().st_mtime
    os.replace(foreign, tmp_path / LOCK_NAME)  # taken over at once, never missing
    deadline = time.monotonic() + 10
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.lost
    lock.release()
    assert (tmp_path / LOCK_NAME).stat().st_mtime == stamp


def test_the_heartbeat_reports_a_lock_file_removed(tmp_path):
    # Removed (by hand, or by a run taking it over that has not written its own yet):
    # lost, and said once, not taken for a passing read error.
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.6)
    lock.acquire(log=notes.append)
    (tmp_path / LOCK_NAME).unlink()
    deadline = time.monotonic() + 10
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.02)
    lock.release()
    assert lock.lost and len(notes) == 1 and "removed or took over the lock" in notes[0]


# -- h16a's mutation hunt: cases no test above held ------------------------------------


def test_a_copy_whose_original_store_is_gone_is_not_locked_by_its_run(tmp_path, sleeper):
    # The copy's lock names a store that no longer exists (deleted or moved after the
    # copy): it is not this store, even though the process that wrote it still runs.
    start = _process_start(sleeper.pid)
    gone = tmp_path / "gone.zarr"
    folder = tmp_path / "copy.zarr" / "ldpsim"
    write_record(
        folder, hostname=socket.gethostname(), pid=sleeper.pid, age=0, store=str(gone), **start
    )
    note = taken_over_note(folder)
    assert f"taken for the store {str(gone)!r}, of which this is a copy" in note


def test_a_zombie_holder_is_gone(tmp_path):
    # A driver that exited and whose parent has not reaped it yet holds nothing.
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        start = _process_start(child.pid)
        child.stdin.close()  # the child exits; not waited for, it stays a zombie
        deadline = time.monotonic() + 10
        while _process_start(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        write_record(tmp_path, hostname=socket.gethostname(), pid=child.pid, age=0, **start)
        assert "that process is gone" in taken_over_note(tmp_path)
    finally:
        child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start since boot: Linux")
def test_a_process_start_since_boot_is_counted_from_boot():
    # The field that a setting of the clock does not move: seconds from this boot.
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    since_boot = _process_start(os.getpid())["pid_started_since_boot"]
    assert 0 <= since_boot <= uptime + START_TIME_TOLERANCE


@pytest.mark.parametrize("shift", [-5.0, 5.0])
def test_a_record_without_a_boot_id_is_judged_by_its_process_start(tmp_path, sleeper, shift):
    # A lock written where there is no boot id (not Linux) keeps the start alone: the
    # live pid is the holder when its start matches, another process when 5 s apart
    # either way.
    started = _process_start(sleeper.pid)["pid_started"]
    here = socket.gethostname()
    write_record(tmp_path, hostname=here, pid=sleeper.pid, age=0, pid_started=started)
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(tmp_path).acquire(log=pytest.fail)
    write_record(tmp_path, hostname=here, pid=sleeper.pid, age=0, pid_started=started + shift)
    assert f"pid {sleeper.pid} is now a process started" in taken_over_note(tmp_path)


def test_a_start_that_is_not_a_number_is_not_read_as_one(tmp_path, sleeper):
    # A record's start since boot of true (a damaged or hand-written record) is no
    # number, not 1 s: the live holder is judged by its start time.
    start = _process_start(sleeper.pid)
    write_record(
        tmp_path,
        hostname=socket.gethostname(),
        pid=sleeper.pid,
        age=0,
        **{**start, "pid_started_since_boot": True},
    )
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(tmp_path).acquire(log=pytest.fail)


def test_a_host_without_a_boot_id_judges_its_own_locks_by_their_process(tmp_path, monkeypatch):
    # Where this host gives no boot id, a lock written here with one (the same host
    # before /proc was hidden, a container) is still this host's: its dead pid is gone.
    monkeypatch.setattr(lock_module, "BOOT_ID_FILE", tmp_path / "no-boot-id")
    folder = tmp_path / "meta"
    write_record(folder, hostname=socket.gethostname(), pid=dead_pid(), age=2.0, boot_id="b1")
    assert "that process is gone" in taken_over_note(folder)


def test_a_host_without_a_boot_id_judges_a_live_holder_by_its_start(
    tmp_path, monkeypatch, sleeper
):
    # The record has a start since boot (written while the boot id was readable), this
    # host no longer gives one: the start time decides, and the live holder keeps it.
    start = _process_start(sleeper.pid)
    monkeypatch.setattr(lock_module, "BOOT_ID_FILE", tmp_path / "no-boot-id")
    write_record(tmp_path, hostname=socket.gethostname(), pid=sleeper.pid, age=0, **start)
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(tmp_path).acquire(log=pytest.fail)


def test_an_unreadable_lock_is_taken_over(tmp_path):
    # A crash while a lock file was written by hand or by a broken copy: no record.
    (tmp_path / LOCK_NAME).write_bytes(b'{"pid": 12')
    assert "its record is unreadable" in taken_over_note(tmp_path)


def test_a_lock_of_an_older_ldpsim_is_not_held_by_a_process_started_after_it(tmp_path, sleeper):
    # The pid now names a process started after the lock was written: not its writer.
    here = socket.gethostname()
    written = _process_start(sleeper.pid)["pid_started"] - 100
    write_record(tmp_path, hostname=here, pid=sleeper.pid, age=0, started=written)
    assert f"pid {sleeper.pid} is now a process started" in taken_over_note(tmp_path)


def test_a_record_of_this_host_that_names_no_start_holds_nothing(tmp_path):
    # Neither the process's start nor the lock's: the live pid cannot be told its writer.
    tmp_path.joinpath(LOCK_NAME).write_text(
        json.dumps({"pid": os.getpid(), "hostname": socket.gethostname(), "token": "t"})
    )
    assert "its record names no process" in taken_over_note(tmp_path)


def test_a_record_of_this_host_without_a_pid_holds_nothing(tmp_path):
    tmp_path.joinpath(LOCK_NAME).write_text(
        json.dumps({"hostname": socket.gethostname(), "started": time.time(), "token": "t"})
    )
    assert "its record names no process" in taken_over_note(tmp_path)


def test_a_store_named_another_way_is_the_same_store(tmp_path, sleeper):
    # The record names this store by another spelling (a bind mount, a path with '..'):
    # not a copy, so its live holder keeps it.
    start = _process_start(sleeper.pid)
    folder = tmp_path / "a.zarr" / "ldpsim"
    spelled = str(tmp_path / "a.zarr" / "ldpsim" / ".." / ".." / "a.zarr")
    here = socket.gethostname()
    write_record(folder, hostname=here, pid=sleeper.pid, age=0, store=spelled, **start)
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(folder).acquire(log=pytest.fail)


def test_a_future_heartbeat_of_this_host_is_judged_by_its_process(tmp_path, monkeypatch, sleeper):
    # This host's own lock with a heartbeat in the future (its clock set back since):
    # a live holder keeps it, however long its heartbeat seems not to advance.
    monkeypatch.setenv(STALE_AFTER_ENV, "1")
    start = _process_start(sleeper.pid)
    here = socket.gethostname()
    write_record(tmp_path, hostname=here, pid=sleeper.pid, age=-3600, stale_after=1, **start)
    with pytest.raises(InputError, match="its lock is released when that process ends"):
        RunLock(tmp_path).acquire(log=pytest.fail)


def test_a_future_heartbeat_is_watched_for_its_holders_timeout(tmp_path, monkeypatch):
    # Watched for the holder's own timeout (1.5 s), not the reader's (0.5 s), and for
    # longer than the patience for a busy lock.
    monkeypatch.setattr(lock_module, "ACQUIRE_PATIENCE", 0.2)
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=-3600, stale_after=1.5)
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.5)
    lock.acquire(log=notes.append)
    lock.release()
    assert len(notes) == 2 and "watching for up to 1.5 s" in notes[0]
    assert "did not advance" in notes[1] and "more than its timeout of 1.5 s" in notes[1]


def test_a_future_heartbeat_replaced_while_watched_is_watched_anew(tmp_path, monkeypatch):
    # Another run (its clock ahead too) took the lock over while this one watched it:
    # the new lock is watched from its start, not taken for an advancing heartbeat.
    monkeypatch.setenv(STALE_AFTER_ENV, "1")
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=-3600)
    notes: list[str] = []

    def log(note: str) -> None:
        notes.append(note)
        if len(notes) == 1:  # watching the first lock: replaced, dated elsewhere
            write_record(tmp_path, hostname=OTHER_HOST, pid=4343, age=-7200)

    lock = RunLock(tmp_path)
    lock.acquire(log=log)
    lock.release()
    assert len(notes) == 3, notes
    assert "lock of pid 4242" in notes[0] and "lock of pid 4343" in notes[1]
    assert "stale lock of pid 4343" in notes[2] and "did not advance" in notes[2]


def marker_of(folder: Path, round_: int) -> Path:
    """The takeover marker of the lock now in ``folder``, for round ``round_``."""
    generation = RunLock(folder).inspect().generation
    return folder / f".{LOCK_NAME}.takeover-{generation}-{round_}"


def test_a_marker_left_by_a_run_that_died_taking_over_is_stale(tmp_path):
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=STALE_AFTER + 5)
    marker = marker_of(tmp_path, 0)
    marker.touch()
    stamp = time.time() - STALE_AFTER - 5
    os.utime(marker, (stamp, stamp))
    assert "no heartbeat for" in taken_over_note(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_run_taking_a_lock_over_now_is_left_to_it(tmp_path, monkeypatch):
    # Another run holds the takeover marker of this generation (created just now): this
    # run does not remove the lock beside it, and gives up after its patience.
    monkeypatch.setattr(lock_module, "ACQUIRE_PATIENCE", 0.3)
    path = write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=STALE_AFTER + 5)
    before = path.read_bytes()
    marker_of(tmp_path, 0).touch()
    with pytest.raises(InputError, match=r"Could not take the lock .*; try again"):
        RunLock(tmp_path).acquire(log=pytest.fail)
    assert path.read_bytes() == before


def test_a_released_lock_says_nothing_more(tmp_path):
    # Release stops the heartbeat before removing the file: no warning that another
    # run removed it.
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.6)  # a heartbeat every 0.1 s
    lock.acquire(log=notes.append)
    lock.release()
    time.sleep(0.5)
    assert notes == [] and not (tmp_path / LOCK_NAME).exists()


@pytest.mark.parametrize("stale_after", [0.001, 1e9, "soon"])
def test_a_timeout_out_of_range_in_a_record_is_not_believed(tmp_path, stale_after):
    # A record's timeout outside [0.1, 86400] s: the reader's own (60 s) decides.
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=2.0, stale_after=stale_after)
    with pytest.raises(InputError, match="no heartbeat for 60 s"):
        RunLock(tmp_path).acquire(log=pytest.fail)
    write_record(
        tmp_path, hostname=OTHER_HOST, pid=4242, age=STALE_AFTER + 5, stale_after=stale_after
    )
    assert "no heartbeat for" in taken_over_note(tmp_path)


@pytest.mark.parametrize("stale_after", [0.0, 0.05, 86401.0, float("nan")])
def test_a_timeout_out_of_range_is_refused(tmp_path, stale_after):
    with pytest.raises(ValueError) as info:
        RunLock(tmp_path, stale_after=stale_after)
    assert str(info.value) == (
        "The 'stale_after' parameter of RunLock must be a float in [0.1, 86400]. "
        f"Got {stale_after!r}."
    )


def test_a_lock_taken_by_a_relative_path_holds_from_any_folder(tmp_path, monkeypatch):
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    lock = RunLock("a.zarr/ldpsim")
    lock.acquire(log=pytest.fail)
    try:
        monkeypatch.chdir(tmp_path / "here")
        with pytest.raises(InputError, match=f"pid {os.getpid()} on host"):
            RunLock(tmp_path / "a.zarr" / "ldpsim").acquire(log=pytest.fail)
    finally:
        lock.release()


def test_a_lock_names_the_start_of_its_process(tmp_path, sleeper):
    # Another live process with the holder's pid, started before the lock was taken,
    # is not its holder: the record keeps the holder's own start time.
    lock = RunLock(tmp_path)
    lock.acquire(log=pytest.fail)
    record = lock.read()
    lock.release()
    write_record(tmp_path, age=0, **{**record, "pid": sleeper.pid})
    assert f"pid {sleeper.pid} is now a process started" in taken_over_note(tmp_path)


@pytest.mark.parametrize("text", ["[1, 2]", '{"token": 7}', "{", ""])
def test_no_holder_token_in_a_record_without_one(tmp_path, text):
    (tmp_path / LOCK_NAME).write_text(text)
    assert holder_token(tmp_path) is None


def test_a_lock_taken_again_after_it_was_lost_is_held(tmp_path):
    lock = RunLock(tmp_path, stale_after=60.0)
    lock.acquire(log=pytest.fail)
    (tmp_path / LOCK_NAME).unlink()  # lost (removed by hand)
    assert not lock.still_held() and lock.lost
    lock.release()
    lock.acquire(log=pytest.fail)
    try:
        assert lock.still_held() and not lock.lost
    finally:
        lock.release()


def test_a_lock_file_read_half_written_is_not_lost(tmp_path):
    # The heartbeat that reads a record it cannot parse (an NFS client that saw the
    # file mid-update) tries again at its next beat: the lock is not given up for it.
    notes: list[str] = []
    lock = RunLock(tmp_path, stale_after=0.6)  # a heartbeat every 0.1 s
    lock.acquire(log=notes.append)
    path = tmp_path / LOCK_NAME
    record = path.read_bytes()
    path.write_bytes(record[: len(record) // 2])
    time.sleep(0.5)  # a few heartbeats read it so
    path.write_bytes(record)
    time.sleep(0.3)
    try:
        assert notes == [] and not lock.lost and lock.still_held()
    finally:
        lock.release()
    assert not path.exists()


class ReleasedWhileLooked(RunLock):
    """A run whose look at the lock comes just after its holder released it."""

    def inspect(self) -> LockFile | None:
        if not getattr(self, "looked", False):
            self.looked = True
            self.path.unlink()  # the holder releases between the link and the look
        return super().inspect()


def test_a_lock_released_while_looked_at_is_taken(tmp_path):
    write_record(tmp_path, hostname=OTHER_HOST, pid=4242, age=0)
    lock = ReleasedWhileLooked(tmp_path)
    lock.acquire(log=pytest.fail)
    try:
        assert lock.read()["token"] == lock._token
    finally:
        lock.release()


def test_a_lock_that_cannot_be_read_is_an_os_error_at_once(tmp_path):
    # Not "someone else holds it, try again" after ACQUIRE_PATIENCE: the run reports
    # the file system's error (runner: "Cannot write the run lock ...", exit 2).
    (tmp_path / LOCK_NAME).mkdir()
    with pytest.raises(IsADirectoryError):
        RunLock(tmp_path).acquire(log=pytest.fail)
    assert [p.name for p in tmp_path.iterdir()] == [LOCK_NAME]
