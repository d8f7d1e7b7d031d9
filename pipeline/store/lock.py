"""A run lock inside a store: one `ldpsim run` writes a store at a time, from any host."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ldpsim.pipeline.errors import InputError

#: The lock file, inside the store's ``ldpsim`` sub-group.
LOCK_NAME = "lock.json"
#: Environment variable: seconds without a heartbeat after which a lock is stale.
STALE_AFTER_ENV = "LDPSIM_LOCK_TIMEOUT"
#: Default of :data:`STALE_AFTER_ENV`: six missed heartbeats, so that a busy shared file
#: system or a driver paused for a few seconds never loses its lock.
STALE_AFTER = 60.0
#: Heartbeats per timeout: the holder refreshes the lock every ``stale_after / 6`` s.
HEARTBEATS_PER_TIMEOUT = 6
#: Seconds :meth:`RunLock.acquire` keeps trying while other runs release the lock or
#: take it over (each of which takes milliseconds); then it gives up.
ACQUIRE_PATIENCE = 10.0
#: Rounds of takeover markers of one lock generation (a round per run that died while
#: taking the lock over; more than a few means something else is wrong).
MARKER_ROUNDS = 5
#: Seconds by which two readings of one process's start time may differ. Linux counts
#: a start in clock ticks since boot (1/100 s) and psutil adds the boot time, which
#: ``/proc/stat`` gives in whole seconds and which may move by one after a suspend or a
#: setting of the clock; other systems store the start itself (microseconds). Another
#: process would have to get the holder's pid within this second of the holder's start.
START_TIME_TOLERANCE = 1.0
#: This boot of this host's kernel (Linux): a pid names a process of one boot only.
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


def stale_after_from_env() -> float:
    """The lock timeout in seconds: ``$LDPSIM_LOCK_TIMEOUT`` or :data:`STALE_AFTER`.

    Raises
    ------
    InputError
        The variable is set but is not a number of seconds in [1, 86400].
    """
    text = os.environ.get(STALE_AFTER_ENV, "").strip()
    if not text:
        return STALE_AFTER
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 1.0 <= seconds <= 86400.0:  # also refuses nan
        raise InputError(
            f"The {STALE_AFTER_ENV} environment variable must be a number of seconds in "
            f"[1, 86400]. Got {text!r}."
        )
    return seconds


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name the same folder (a bind mount, another spelling); False
    when either is gone (the original of a copy may have been deleted)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _boot_id() -> str | None:
    """The id of this boot of the kernel (Linux), None where there is none."""
    try:
        return BOOT_ID_FILE.read_text().strip() or None
    except OSError:
        return None


def _process_start(pid: int) -> dict[str, Any] | None:
    """When the process ``pid`` of this host started: the fields a lock record keeps.

    Parameters
    ----------
    pid : int
        A process id of this host.

    Returns
    -------
    dict or None
        ``pid_started`` (seconds since the epoch, as psutil gives it) and, on Linux,
        ``boot_id`` with ``pid_started_since_boot``: seconds from boot, which a setting
        of the clock does not move (psutil adds the current boot time to a count of
        clock ticks since boot, so its ``pid_started`` moves with the clock). None if
        there is no such process, or a zombie.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        boot = psutil.boot_time()  # first: psutil < 6 adds the boot time it read last
        started = proc.create_time()
    except psutil.Error:  # NoSuchProcess, AccessDenied on a dead pid, ...
        return None
    fields: dict[str, Any] = {"pid_started": started}
    boot_id = _boot_id()
    if boot_id is not None:
        fields |= {"boot_id": boot_id, "pid_started_since_boot": started - boot}
    return fields


def _number(value: Any) -> float | None:
    """A number read from another run's record, None if missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _on_this_host(record: dict[str, Any]) -> bool:
    """Whether a lock was written on this host in this boot, so its pid means a process
    here. A lock of another boot (a restart, or another machine of the same name) is
    judged by its heartbeat, like one of another host."""
    if record.get("hostname") != socket.gethostname():
        return False
    written_in, running_in = record.get("boot_id"), _boot_id()
    return not isinstance(written_in, str) or running_in is None or written_in == running_in


def _holder_gone(pid: int, record: dict[str, Any]) -> str | None:
    """Why the process that wrote the lock ``record`` on this host no longer runs, or
    None if it does: the pid must be alive and started when the record says."""
    now = _process_start(pid)
    if now is None:
        return "that process is gone"
    since_boot = _number(record.get("pid_started_since_boot"))
    if since_boot is not None and "pid_started_since_boot" in now:
        same = abs(now["pid_started_since_boot"] - since_boot) <= START_TIME_TOLERANCE
    elif (started := _number(record.get("pid_started"))) is not None:
        same = abs(now["pid_started"] - started) <= START_TIME_TOLERANCE
    else:
        # A lock of an older ldpsim keeps only when it was written: a process created
        # after that is not the one that wrote it (an older one that got the pid is
        # not told apart, as before).
        written = _number(record.get("started"))
        if written is None:
            return "its record names no process"
        same = now["pid_started"] <= written + START_TIME_TOLERANCE
    if same:
        return None
    started_iso = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now["pid_started"]))
    return f"that process is gone: pid {pid} is now a process started {started_iso}"


def _seconds_text(seconds: float) -> str:
    """``3600`` or ``0.25``: whole seconds from 10 s on, two digits below."""
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.2g}"


@dataclass
class _HeartbeatWatch:
    """A lock whose heartbeat is dated in the future, watched on this host's clock."""

    generation: str
    heartbeat: float  # the heartbeat first seen, on the file system's clock
    since: float  # when first seen, on this host's monotonic clock


@dataclass(frozen=True)
class LockFile:
    """One generation of the lock file as read: its record and its last heartbeat."""

    record: dict[str, Any]  # {} when unreadable (a crash while the file was written)
    generation: str  # digest of the bytes: the record is never rewritten, only touched
    heartbeat: float  # modification time, on the file system's clock


class RunLock:
    """The lock file ``<store>/ldpsim/lock.json``: pid, host, start, command, token.

    Taken atomically: the record is written to a private file, then hard-linked to the
    lock name, which fails if the lock exists, so a reader never sees a half-written
    lock. While held, a daemon thread touches the file every ``stale_after / 6`` seconds
    (the heartbeat). A lock written on this host (in this boot) is stale, and taken
    over, when its process is gone: its pid is not alive, or is a process whose start
    time differs from the one recorded (by more than :data:`START_TIME_TOLERANCE`);
    a lock of an older ldpsim, without a start time, is stale when its pid is not alive
    or started after the lock was written. A lock of another host is stale when its
    heartbeat is older than ``stale_after`` seconds: a driver killed in a batch job on
    another node blocks the store for at most that long. Ages compare two modification
    times on the store's file system (the lock's and a file just written), so the
    hosts' clocks need not agree. A heartbeat dated in the future (a file system that
    takes times from its clients, and a host whose clock is ahead) has no age: the
    waiter watches it, and the lock is stale once its heartbeat has not changed for
    ``stale_after`` seconds of the waiter's own clock; one that changes is refused.
    The record names the store's absolute, resolved path: on the same host a lock
    taken for another path (the store was copied while its run was alive) is stale.

    A takeover is atomic: only the run that creates the marker file
    ``.lock.json.takeover-<generation>-<round>`` (exclusive create) may remove that
    generation of the lock, and it checks that the lock still is that generation first;
    the new lock is then linked as usual, so of several runs racing for one stale lock
    exactly one ends up holding it. A marker left by a run that died while taking over
    is itself stale after ``stale_after`` seconds (the next run claims the next round).

    Parameters
    ----------
    folder : path
        Folder of the lock file (the store's ``ldpsim`` sub-group); created if missing.
    stale_after : float or None
        Seconds without a heartbeat after which this run's lock may be taken over by
        others, in [0.1, 86400]; None reads ``$LDPSIM_LOCK_TIMEOUT`` (default 60 s).
        Another run's lock is judged by the timeout written in its record.
    token : str or None
        The token its record carries while held (:func:`holder_token`): one the run chose
        before it took the lock, so that its workers can tell that it holds the store
        (:mod:`ldpsim.pipeline.store.handoff`); None: a new random one each time it is
        taken.
    """

    def __init__(
        self, folder: str | Path, stale_after: float | None = None, token: str | None = None
    ) -> None:
        self.path = Path(folder) / LOCK_NAME
        #: The store the lock belongs to, absolute and resolved: a copy of the store
        #: (``cp -a``) carries the lock file but is not locked by it.
        self.store = str(Path(folder).resolve().parent)
        self.stale_after = stale_after_from_env() if stale_after is None else stale_after
        if not 0.1 <= self.stale_after <= 86400.0:
            raise ValueError(
                "The 'stale_after' parameter of RunLock must be a float in [0.1, 86400]. "
                f"Got {self.stale_after!r}."
            )
        self.heartbeat_every = self.stale_after / HEARTBEATS_PER_TIMEOUT
        self.held = False
        #: True once the heartbeat finds that another run has taken the lock over.
        self.lost = False
        self._token = ""
        self._chosen_token = token
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._log: Callable[[str], Any] = print

    # -- reading ---------------------------------------------------------------------
    def inspect(self) -> LockFile | None:
        """The lock file now, or None if there is none."""
        try:
            # open + fstat, not stat: opening revalidates cached attributes on NFS
            # (close-to-open consistency), and bytes and time come from one inode.
            with open(self.path, "rb") as f:
                raw = f.read()
                heartbeat = os.fstat(f.fileno()).st_mtime
        except FileNotFoundError:
            return None
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            record = {}
        if not isinstance(record, dict):
            record = {}
        generation = hashlib.sha256(raw).hexdigest()[:16]
        return LockFile(record, generation, heartbeat)

    def read(self) -> dict[str, Any] | None:
        """The holder's record, ``{}`` if unreadable, None if there is no lock."""
        current = self.inspect()
        return None if current is None else current.record

    # -- taking and giving back ------------------------------------------------------
    def acquire(self, log: Callable[[str], Any] = print) -> None:
        """Take the lock (taking over a stale one) and start the heartbeat.

        A lock of another host whose heartbeat is dated in the future is watched for
        up to its timeout (a note says so): its heartbeat advances if it is held.

        Raises
        ------
        InputError
            Another run holds the lock: one line naming its host, pid, start, last
            heartbeat and command.
        """
        self._log = log
        self._token = self._chosen_token or uuid.uuid4().hex
        record = {
            "pid": os.getpid(),
            **(_process_start(os.getpid()) or {}),  # tells this process from a reuse
            "hostname": socket.gethostname(),
            "started": time.time(),
            "started_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv),
            "token": self._token,
            "store": self.store,
            "heartbeat_every": self.heartbeat_every,
            "stale_after": self.stale_after,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private = self.path.with_name(f".lock-{self._token}.new")
        deadline = time.monotonic() + ACQUIRE_PATIENCE
        watch: _HeartbeatWatch | None = None
        try:
            private.write_text(json.dumps(record))  # inside: a full disk leaves no file
            while time.monotonic() < deadline:
                try:
                    os.link(private, self.path)
                except FileExistsError:
                    pass
                else:
                    self._start_heartbeat()
                    return
                other = self.inspect()
                if other is None:
                    continue  # released meanwhile: try again
                os.utime(private)  # "now" on the file system's clock
                age = private.stat().st_mtime - other.heartbeat
                why = self._stale_reason(other.record, age)
                if why is None and age < 0 and not _on_this_host(other.record):
                    # A heartbeat in the future: judged by whether it still changes.
                    limit = _seconds(other.record.get("stale_after"), self.stale_after)
                    if watch is None or watch.generation != other.generation:
                        watch = _HeartbeatWatch(
                            other.generation, other.heartbeat, time.monotonic()
                        )
                        log(
                            f"Note: the lock of pid {other.record.get('pid')} on host "
                            f"{other.record.get('hostname')!r} has a heartbeat dated "
                            f"{_seconds_text(-age)} s in the future (that host's clock is "
                            f"ahead?); watching for up to {limit:g} s whether it advances."
                        )
                    elif other.heartbeat != watch.heartbeat:
                        raise InputError(self._held_message(other.record, age))
                    still_for = time.monotonic() - watch.since
                    if still_for < limit:
                        deadline = max(deadline, watch.since + limit + ACQUIRE_PATIENCE)
                        time.sleep(min(1.0, max(0.01, limit / (4 * HEARTBEATS_PER_TIMEOUT))))
                        continue
                    why = (
                        f"its heartbeat, dated {_seconds_text(-age)} s in the future, "
                        f"did not advance for {still_for:.3g} s, more than its timeout "
                        f"of {limit:g} s"
                    )
                if why is None:
                    raise InputError(self._held_message(other.record, age))
                if self._take_over(other.generation, private):
                    log(
                        f"Note: taking over a stale lock of pid {other.record.get('pid')} on "
                        f"host {other.record.get('hostname')!r} ({why})."
                    )
                else:  # another run is taking it over: the next round sees the outcome
                    time.sleep(0.01)
            raise InputError(f"Could not take the lock {str(self.path)!r}; try again.")
        finally:
            private.unlink(missing_ok=True)

    def _stale_reason(self, other: dict[str, Any], age: float) -> str | None:
        """Why the lock ``other``, last touched ``age`` s ago, is stale; None if held."""
        if not other:  # unreadable: cannot happen with the link protocol but for a crash
            return "its record is unreadable"
        if _on_this_host(other):
            # A copy of a store (``cp -a``) carries the lock of the original's live run.
            # Paths are compared on the same host only: another host may mount the same
            # store elsewhere, and there the heartbeat decides.
            store = other.get("store")  # none in a lock of an older ldpsim
            if (
                isinstance(store, str)
                and store != self.store
                and not _same_file(store, self.store)
            ):
                return f"it was taken for the store {store!r}, of which this is a copy"
            try:
                pid = int(other["pid"])
            except (KeyError, TypeError, ValueError):
                return "its record names no process"
            # The fast path: a live process is asked directly, whatever its heartbeat
            # (a driver paused with Ctrl-Z keeps its store); a dead one is gone now.
            return _holder_gone(pid, other)
        limit = _seconds(other.get("stale_after"), default=self.stale_after)
        if age > limit:
            return f"no heartbeat for {age:.3g} s, more than its timeout of {limit:g} s"
        return None

    def _held_message(self, other: dict[str, Any], age: float) -> str:
        who = (
            f"pid {other.get('pid')} on host {other.get('hostname')!r}, started "
            f"{other.get('started_iso')}"
        )
        limit = _seconds(other.get("stale_after"), default=self.stale_after)
        if _on_this_host(other):
            # Judged by its process, not its heartbeat (see _stale_reason).
            when = "its lock is released when that process ends"
        elif age < 0:  # refused because its heartbeat advanced while watched
            who += (
                f", last heartbeat dated {_seconds_text(-age)} s in the future (that host's "
                "clock is ahead) and advancing"
            )
            when = (
                "if it was killed, its lock is taken over once its heartbeat has not "
                f"advanced for {limit:g} s"
            )
        else:
            who += f", last heartbeat {age:.0f} s ago"
            when = (
                "if it was killed, its lock is taken over once it has had no heartbeat "
                f"for {limit:g} s"
            )
        return (
            f"The store {str(self.path.parent.parent)!r} is being written by another ldpsim "
            f"run ({who}, command {other.get('command')!r}); wait for it to finish ({when})."
        )

    def _take_over(self, generation: str, private: Path) -> bool:
        """Remove the lock generation ``generation`` if this run wins the right to."""
        markers = []
        for round_ in range(MARKER_ROUNDS):
            marker = self.path.with_name(f".{LOCK_NAME}.takeover-{generation}-{round_}")
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                markers.append(marker)
                try:
                    age = private.stat().st_mtime - marker.stat().st_mtime
                except FileNotFoundError:
                    return False  # that takeover just finished
                if age <= self.stale_after:
                    return False  # another run is taking this lock over right now
                continue  # the run taking over died: claim the next round
            markers.append(marker)
            break
        else:
            return False
        try:
            current = self.inspect()
            if current is None or current.generation != generation:
                return False  # taken over (or released) meanwhile: not ours to remove
            # Only the holder of a marker of this generation removes it, so nothing
            # else has replaced the file between the check above and this unlink.
            self.path.unlink(missing_ok=True)
            return True
        finally:
            for marker in markers:
                marker.unlink(missing_ok=True)

    def release(self) -> None:
        """Stop the heartbeat and remove the lock if this run still holds it."""
        if not self.held:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.heartbeat_every + 1.0)
            self._thread = None
        current = self.inspect()
        if current is not None and current.record.get("token") == self._token:
            self.path.unlink(missing_ok=True)
        self.held = False

    def still_held(self) -> bool:
        """Whether this run still holds the lock, read from its file now.

        The heartbeat looks every ``heartbeat_every`` seconds; a run asks this before
        each write, so that one whose lock another run took over (its heartbeat stalled
        for longer than its timeout: a suspended process, a file system that stopped
        answering) writes nothing more. A read that fails for another reason than a
        missing file counts as held: the heartbeat judges it again.
        """
        if not self.held or self.lost:
            return False
        try:
            record = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            record = None
        except (OSError, ValueError, RecursionError):
            return True  # a transient file-system error, or a record half seen
        if not isinstance(record, dict) or record.get("token") != self._token:
            self.lost = True
            return False
        return True

    # -- heartbeat -------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        self.held, self.lost = True, False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"ldpsim-lock-heartbeat {self.path}", daemon=True
        )
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_every):
            try:
                with open(self.path, "rb") as f:
                    record = json.loads(f.read())
                    ours = isinstance(record, dict) and record.get("token") == self._token
                    if ours:
                        os.utime(f.fileno())  # touch the very file just checked
            except FileNotFoundError:
                ours = False
            except (OSError, ValueError, RecursionError):
                continue  # a transient file-system error: the next beat tries again
            if not ours:
                self.lost = True
                self._log(
                    f"Warning: another run removed or took over the lock {str(self.path)!r} "
                    f"(did this run's heartbeat stall for more than {self.stale_after:g} s?); "
                    "this run writes nothing more and stops before its next write."
                )
                return

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder_token(folder: str | Path) -> str | None:
    """The token of the run holding the lock in ``folder`` (the store's ``ldpsim``
    sub-group) now; None when there is no lock or it cannot be read."""
    try:
        record = json.loads((Path(folder) / LOCK_NAME).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    token = record.get("token") if isinstance(record, dict) else None
    return token if isinstance(token, str) else None


def _seconds(value: Any, default: float) -> float:
    """A timeout read from another run's record, ``default`` if missing or invalid."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return default
    return seconds if 0.1 <= seconds <= 86400.0 else default
