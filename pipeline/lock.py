"""A run lock inside a store: one `ldpsim run` writes a store at a time."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from ldpsim.pipeline.errors import InputError

#: The lock file, inside the store's ``ldpsim`` sub-group.
LOCK_NAME = "lock.json"


def _pid_alive(pid: int, started: float) -> bool:
    """Whether ``pid`` runs on this host and is not a newer process that reused the pid."""
    try:
        proc = psutil.Process(pid)
        # A process created after the lock was written is not the one that wrote it.
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= started + 1.0
    except psutil.Error:  # NoSuchProcess, AccessDenied on a dead pid, ...
        return False


class RunLock:
    """The lock file ``<store>/ldpsim/lock.json`` holding pid, host, start time, command.

    Taken atomically (the record is written to a private file, then hard-linked to the
    lock name, which fails if the lock exists), so a reader never sees a half-written
    lock. A lock whose process is gone (same host, pid not alive) is stale and taken
    over; a live one, or one from another host, makes :meth:`acquire` raise.
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.held = False

    def read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}

    def acquire(self, log=print) -> None:
        """Take the lock or raise InputError naming the process that holds it."""
        record = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "started": time.time(),
            "started_iso": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private = self.path.with_name(f".lock-{os.getpid()}-{time.monotonic_ns()}.new")
        try:
            # Inside the try: a full disk fails this write and must not leave the file.
            private.write_text(json.dumps(record))
            for _ in range(3):
                try:
                    os.link(private, self.path)
                except FileExistsError:
                    other = self.read()
                    if other is None:
                        continue  # released meanwhile: try again
                    if not self._stale(other):
                        raise InputError(
                            f"The store {str(self.path.parent.parent)!r} is being written by "
                            f"another ldpsim run (pid {other.get('pid')} on host "
                            f"{other.get('hostname')!r}, started {other.get('started_iso')}, "
                            f"command {other.get('command')!r}); wait for it to finish, or "
                            f"delete {str(self.path)!r} if that process is gone."
                        ) from None
                    log(
                        f"Note: taking over a stale lock of pid {other.get('pid')} on host "
                        f"{other.get('hostname')!r} (that process is gone)."
                    )
                    self.path.unlink(missing_ok=True)
                    continue
                self.held = True
                return
            raise InputError(f"Could not take the lock {str(self.path)!r}; try again.")
        finally:
            private.unlink(missing_ok=True)

    def _stale(self, other: dict[str, Any]) -> bool:
        if not other:  # unreadable: cannot happen with the link protocol but for a crash
            return True
        if other.get("hostname") != socket.gethostname():
            return False  # cannot tell whether a process on another host is alive
        try:
            pid, started = int(other["pid"]), float(other["started"])
        except (KeyError, TypeError, ValueError):
            return True
        return not _pid_alive(pid, started)

    def release(self) -> None:
        """Remove the lock if this process holds it."""
        if self.held:
            other = self.read()
            if other is not None and other.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
