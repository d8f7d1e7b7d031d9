"""SIGINT and SIGTERM stop a command the same way: one exception, raised in the main thread."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

#: The signals :func:`handle_signals` turns into :class:`Interrupted`: Ctrl-C, and what
#: ``kill``, ``scancel`` and most batch schedulers send first.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A command stopped by SIGINT or SIGTERM.

    A KeyboardInterrupt, so that code which handles Ctrl-C handles SIGTERM alike. A run
    that stops fills in ``store`` and ``kept`` (the sweep's replicates done in the store
    once the finished results are written).

    Parameters
    ----------
    signum : int
        The signal, SIGINT or SIGTERM.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.store: Path | None = None
        self.kept: int | None = None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal, what a shell reports for a program stopped by it (130, 143)."""
        return 128 + self.signum


class _State:
    """What the handler does: raise once; hold a signal inside :func:`deferred`."""

    def __init__(self) -> None:
        self.depth = 0  # nesting of deferred()
        self.held: int | None = None  # a signal that arrived inside deferred()
        self.raised = False  # the run is stopping: later signals are ignored


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.raised:
        return  # the run is winding down (writing, releasing the lock): let it finish
    if _state.depth:
        _state.held = _state.held or signum
        return
    _state.raised = True
    raise Interrupted(signum)


@contextlib.contextmanager
def handle_signals() -> Iterator[None]:
    """Inside, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread.

    Only the first one raises; later ones are ignored while the command winds down (it
    writes the finished results and releases the store's lock), so that a second Ctrl-C
    or a batch system's repeated SIGTERM cannot cut the clean-up short. Outside the main
    thread (where Python cannot set handlers) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    _state.__init__()
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state.__init__()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a signal that arrives inside until the block ends, then raise it.

    Around a write of the store: results half written are never lost to a signal.
    Without :func:`handle_signals` (Python's own Ctrl-C handler) this changes nothing.
    """
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
    if not _state.depth and _state.held is not None and not _state.raised:
        signum, _state.held = _state.held, None
        _state.raised = True
        raise Interrupted(signum)


def worker_ignores_sigint() -> None:
    """Ignore SIGINT in this process (a worker of a local cluster; see :mod:`.worker_setup`).

    Ctrl-C in a terminal reaches every process of the group, the local cluster's
    workers too, each of which printed a KeyboardInterrupt traceback. The driver stops
    them itself (its nannies close them) once it has written the finished results.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
