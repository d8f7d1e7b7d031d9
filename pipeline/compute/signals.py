"""SIGINT and SIGTERM stop a command the same way: one exception, raised in the main thread."""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

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
        #: For a run that added methods to a store's finished replicates: those whose
        #: added methods it computed and wrote (their replicates were kept as they were).
        self.methods_kept: int | None = None
        #: The interrupted run's :class:`ldpsim.pipeline.compute.runner.RunReport`.
        self.report: Any = None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal, what a shell reports for a program stopped by it (130, 143)."""
        return 128 + self.signum


class _State:
    """What the handler has seen, and where it may raise."""

    def __init__(self) -> None:
        self.pending: int | None = None  # the first signal that came
        self.depth = 0  # nesting of interruptible(): a wait where raising is safe
        self.stopping = False  # the run is winding down: signals are ignored


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state.stopping:
        return  # the run is writing its results and releasing its lock: let it finish
    if _state.pending is None:
        _state.pending = signum
    if _state.depth and not _in_finalizer(frame):
        raise Interrupted(_state.pending)


def _in_finalizer(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a garbage-collector callback or a ``__del__``.

    Python ignores (prints and drops) an exception raised there: distributed's
    GCDiagnosis, a gc callback of the driver's scheduler, printed "Exception ignored
    in ... _gc_callback" and a traceback. The signal stays pending for :func:`check`.
    """
    codes = set()
    for callback in gc.callbacks:
        code = getattr(getattr(callback, "__func__", callback), "__code__", None)
        if code is not None:
            codes.add(code)
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def handle_signals(signums: tuple[int, ...] = SIGNALS) -> Iterator[None]:
    """Inside, SIGINT and SIGTERM (or those of ``signums``) stop the command with
    :class:`Interrupted`.

    The handler notes the signal, and the next :func:`check` raises it (a run checks
    at least every second while it waits for results); inside :func:`interruptible`
    (the store's creation, which cleans up after any exception) it raises at once. An
    exception raised at any moment lands anywhere: in a module being imported (which
    then stays half-initialized), in a garbage-collector callback (which swallows it),
    in a Dask cluster half started; each printed tracebacks or went unnoticed. Once the command
    winds down (:func:`stopping`), later signals are ignored, so that a second Ctrl-C
    or a batch system's repeated SIGTERM cannot cut the clean-up short. Outside the
    main thread (where Python cannot set handlers) this does nothing, and so does a
    block inside another (``ldpsim run`` calls :func:`ldpsim.pipeline.api.run_report`,
    which handles SIGINT for a notebook's or a script's runs: its state is the outer's).
    """
    if threading.current_thread() is not threading.main_thread() or any(
        signal.getsignal(signum) is _handler for signum in signums
    ):
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in signums}
    _state.__init__()
    for signum in signums:
        signal.signal(signum, _handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state.__init__()


def check() -> None:
    """Raise :class:`Interrupted` if SIGINT or SIGTERM came (a point where stopping is safe)."""
    if _state.pending is not None and not _state.stopping:
        raise Interrupted(_state.pending)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A block that cleans up after any exception, in which a signal raises at once."""
    check()
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1


def stopping() -> None:
    """The command is winding down: ignore SIGINT and SIGTERM until it ends."""
    _state.stopping = True


def worker_ignores_sigint() -> None:
    """Ignore SIGINT in this process (a worker of a local cluster; see :mod:`.worker_setup`).

    Ctrl-C in a terminal reaches every process of the group, the local cluster's
    workers too, each of which printed a KeyboardInterrupt traceback. The driver stops
    them itself (its nannies close them) once it has written the finished results.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
