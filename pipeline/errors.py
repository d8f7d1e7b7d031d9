"""Exceptions the CLI turns into one line on stderr (exit 2, or 4); paths and values in words."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path


class InputError(ValueError):
    """Bad user input: a sweep file, a CLI option, a cluster file or a store path."""


class InputTypeError(InputError, TypeError):
    """An argument of a wrong type: an :class:`InputError` (the command line's one line)
    that is also a TypeError, as scikit-learn's ``InvalidParameterError`` is both."""


class StoreDamage(InputError):
    """A damaged store (the CLI's exit code 4, :data:`ldpsim.pipeline.api.EXIT_DAMAGED`):
    finished replicates' data missing or not decodable, or coordinates and truths that
    differ from the sweep's, which `ldpsim run` recomputes; or damaged metadata, which
    it cannot rebuild (the message says to restore a copy)."""


class RunStopped(Exception):
    """A run stopped by its surroundings (a full disk, a lost scheduler, its lock taken
    over): one line, and the exit code of the policy (3 when nothing failed, never 0);
    the replicates written before are kept, and the next run resumes."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        #: What the run wrote (its RunReport) and how it ended ("stopped (...)"), for its
        #: record in the store; None where it wrote nothing.
        self.report: object = None
        self.ended: str | None = None


#: File types in words, for messages ("'/dev/null' is a character device").
_KINDS = (
    (stat.S_ISREG, "file"),
    (stat.S_ISDIR, "folder"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISFIFO, "named pipe"),
    (stat.S_ISSOCK, "socket"),
)


def path_kind(path: str | Path) -> str | None:
    """What ``path`` is, in words: 'file', 'folder', 'character device', ...; None if absent.

    Symbolic links are followed (a dangling one counts as absent).

    Raises
    ------
    OSError
        The path cannot be looked at: a name too long, no permission on a folder above it.
        :func:`os_error_text` words it.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    for test, word in _KINDS:
        if test(mode):
            return word
    return "special file"


def is_absent(path: str | Path) -> bool:
    """Whether nothing is at ``path`` (:func:`path_kind` None); False where the path
    cannot be looked at (a name too long, a folder above it that cannot be read), which
    the checks that use the path then word."""
    try:
        return path_kind(path) is None
    except OSError:
        return False


def os_error_text(exc: OSError, path: str | Path | None = None) -> str:
    """The reason of an OSError in words, with the system's limits for a name too long."""
    text = exc.strerror or str(exc)
    if exc.errno == errno.ENAMETOOLONG:
        folder = Path(path).parent if path is not None else Path(".")
        while not os.path.isdir(folder) and folder != folder.parent:
            folder = folder.parent
        try:
            name_max = os.pathconf(folder, "PC_NAME_MAX")
            path_max = os.pathconf(folder, "PC_PATH_MAX")
            text += f" (at most {name_max} bytes per name and {path_max} per path here)"
        except (OSError, ValueError):
            pass
    return text


def unwritable_reason(folder: str | Path) -> str | None:
    """Why files cannot be created in ``folder``, in words; None when they can.

    ``os.access`` reports a read-only file system even to root, who ignores modes.
    """
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        pass
    return "no write permission"


def shown_value(value: object) -> str:
    """A value as a message shows it: its repr on one line of at most 80 characters, or
    its type for a longer one.

    A numpy scalar is shown as the Python value it holds (``0.5``, not
    ``np.float64(0.5)``). Every message of ldpsim that quotes a user's value uses this.

    Examples
    --------
    >>> shown_value("tau"), shown_value([1, 2]), shown_value("x" * 100)
    ("'tau'", '[1, 2]', 'a str')
    """
    numpy = sys.modules.get("numpy")  # a numpy scalar exists only once numpy is imported
    if numpy is not None and isinstance(value, numpy.generic):
        value = value.item()
    text = repr(value)
    return text if len(text) <= 80 and "\n" not in text else f"a {type(value).__name__}"


#: Exit codes of ``ldpsim run``, ``status`` and ``errors`` for a sweep's replicates; the
#: ``exit_code`` of :func:`run`'s report (see :func:`outcome`).
EXIT_OK = 0  # every replicate done; no replicate and no interval method failed
EXIT_FAILED = 1  # some replicate or interval method failed (recorded: `ldpsim errors`)
EXIT_INCOMPLETE = 3  # replicates not computed yet, none failed (`ldpsim run` resumes)
#: Exit code of ``status`` (and ``summarize``, ``plot``, ``report``, which refuse) for a
#: store whose finished replicates' data is missing or corrupt, or whose coordinates or
#: truths differ from its sweep's: ``run`` recomputes them. Damaged metadata too, in
#: every verb, ``run`` included (it cannot rebuild them).
EXIT_DAMAGED = 4
#: The report's ``status`` for each exit code of :func:`outcome`.
STATUS = {EXIT_OK: "complete", EXIT_FAILED: "failed", EXIT_INCOMPLETE: "incomplete"}


def outcome(*, replicates_failed: int, methods_failed: int, missing: int) -> int:
    """The exit code for a store's replicates (or a sweep's share of them).

    Parameters
    ----------
    replicates_failed : int
        Replicates that raised (>= 0).
    methods_failed : int
        (Replicate, interval method) pairs whose interval could not be computed (>= 0).
    missing : int
        Replicates neither done nor failed (>= 0).

    Returns
    -------
    int
        :data:`EXIT_FAILED` if anything failed, else :data:`EXIT_INCOMPLETE` if anything is
        missing, else :data:`EXIT_OK`.

    Examples
    --------
    >>> outcome(replicates_failed=0, methods_failed=0, missing=0)
    0
    >>> outcome(replicates_failed=0, methods_failed=0, missing=12)  # resume it
    3
    >>> outcome(replicates_failed=0, methods_failed=2, missing=12)  # see `ldpsim errors`
    1
    """
    if replicates_failed or methods_failed:
        return EXIT_FAILED
    if missing:
        return EXIT_INCOMPLETE
    return EXIT_OK
