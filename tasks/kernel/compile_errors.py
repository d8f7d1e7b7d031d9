"""A kernel that does not compile: one line naming the callback, its file and line."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from pathlib import Path

from ldpsim.tasks.compile_lock import cache_folder

# numba's messages begin with the pipeline step that failed, then the reason.
_HEADER = re.compile(r"^Failed in \w+ mode pipeline \(step: [^)]*\)$")


class KernelCompileError(TypeError):
    """A model's or mechanism's callback does not compile into the LDP-SGD kernel.

    The message is one line: the callback, where numba stopped (file and line) and
    numba's reason, shortened. numba's whole message is kept in ``detail``.

    Attributes
    ----------
    role : str or None
        The callback that failed ("sample_gradient", "privatize" or "project"), None when
        the error lies in neither callback's file (e.g. a callback returns no state).
    filename : str or None
        The file where numba stopped; None when numba names none.
    line : int or None
        The line there.
    reason : str
        numba's reason, one line.
    detail : str
        numba's whole message.
    """

    def __init__(
        self,
        message: str,
        *,
        role: str | None,
        filename: str | None,
        line: int | None,
        reason: str,
        detail: str,
    ) -> None:
        super().__init__(message)
        self.role = role
        self.filename = filename
        self.line = line
        self.reason = reason
        self.detail = detail

    def __reduce__(self):  # picklable, so that a Dask worker can send it back
        fields = {
            "role": self.role,
            "filename": self.filename,
            "line": self.line,
            "reason": self.reason,
            "detail": self.detail,
        }
        return _rebuild, (str(self), fields)


def _rebuild(message: str, fields: dict) -> KernelCompileError:
    return KernelCompileError(message, **fields)


def short_reason(text: str) -> str:
    """numba's reason in one line: its first lines after the pipeline header, joined."""
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line and not _HEADER.match(line)]
    if not lines:
        return "numba gave no reason"
    reason = lines[0].rstrip(":")
    if len(lines) > 1 and lines[1].startswith(">>>"):  # the signature that has no match
        reason = f"{reason}: {lines[1][3:].strip()}"
    return reason


def source_location(function: object) -> tuple[str | None, int | None]:
    """The file and ``def`` line of a numba dispatcher's (or a function's) Python code."""
    function = getattr(function, "py_func", function)
    code = getattr(function, "__code__", None)
    if code is None:
        return None, None
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return code.co_filename, code.co_firstlineno
    for offset, text in enumerate(lines):  # past the decorators
        if text.lstrip().startswith("def "):
            return code.co_filename, first + offset
    return code.co_filename, first


def _package_folder(filename: str) -> Path:
    """The folder of the top-level package holding ``filename`` (a module: its folder)."""
    folder = Path(filename).resolve().parent
    while (folder / "__init__.py").exists() and (folder.parent / "__init__.py").exists():
        folder = folder.parent
    return folder


def blame(filename: str | None, callbacks: Mapping[str, object]) -> str | None:
    """Which of ``callbacks`` (role -> dispatcher) the file ``filename`` belongs to.

    The callback whose own file it is, else the one from the same package; None when
    none matches or two do.
    """
    if filename is None:
        return None
    path = Path(filename).resolve()
    files = {role: source_location(cb)[0] for role, cb in callbacks.items()}
    same = [role for role, f in files.items() if f is not None and Path(f).resolve() == path]
    if len(same) == 1:
        return same[0]
    if same:
        return None
    near = [
        role
        for role, f in files.items()
        if f is not None and path.is_relative_to(_package_folder(f))
    ]
    return near[0] if len(near) == 1 else None


#: numba's "During: typing of ... at FILE (LINE)" lines of a compile error.
TYPING_AT = re.compile(r"^During: typing of .* at (.+) \((\d+)\)$", re.MULTILINE)


def kernel_compile_error(
    exc: BaseException, callbacks: Mapping[str, object], d: int
) -> KernelCompileError:
    """The :class:`KernelCompileError` for numba's error ``exc`` compiling a kernel.

    Parameters
    ----------
    exc : numba.core.errors.NumbaError
        What numba raised.
    callbacks : mapping of str to dispatcher
        The kernel's callbacks by role ("sample_gradient", "privatize", "project").
    d : int
        The dimension the kernel was compiled for.
    """
    detail = str(exc)
    loc = getattr(exc, "loc", None)
    filename = getattr(loc, "filename", None)
    line = getattr(loc, "line", None)
    reason = short_reason(detail)
    if _is_ldpsim(filename):
        # numba names the outermost call (the batched kernel calling one chain's loop);
        # its "During: typing of ... at FILE (LINE)" lines, innermost first, name the
        # callback's own line.
        filename, line = next(
            (
                (found, int(number))
                for found, number in TYPING_AT.findall(detail)
                if not _is_ldpsim(found)
            ),
            (filename, line),
        )
    role = None if _is_ldpsim(filename) else blame(filename, callbacks)
    if _is_ldpsim(filename):
        # numba stopped in ldpsim's own code, the kernel or tasks.rng (e.g. a callback
        # returns no state): point at the callback's definition when only one callback
        # is not ldpsim's own.
        foreign = [r for r, cb in callbacks.items() if not _is_ldpsim(source_location(cb)[0])]
        if len(foreign) == 1:
            role = foreign[0]
            filename, line = source_location(callbacks[role])
            reason = (
                f"{reason} (in ldpsim's code that calls it: does it return the random "
                f"state its last draw returned?)"
            )
    who = "a callback" if role is None else role
    if role is not None:
        function = getattr(callbacks[role], "py_func", callbacks[role])
        who = f"{role} ({function.__module__}.{function.__qualname__})"
    where = "" if filename is None else f" at {filename}, line {line}"
    message = f"{who} does not compile into the LDP-SGD kernel (d = {d}){where}: {reason}"
    return KernelCompileError(
        message, role=role, filename=filename, line=line, reason=reason, detail=detail
    )


def _is_ldpsim(filename: str | None) -> bool:
    """Whether ``filename`` is ldpsim.tasks' own code or a kernel generated from it."""
    if filename is None:
        return False
    path = Path(filename)
    if not path.is_absolute():  # a kernel compiled in memory ("<ldpsim kernel ...>")
        return True
    path = path.resolve()
    tasks = Path(__file__).resolve().parents[1]  # ldpsim.tasks, this module in its kernel/
    if path.is_relative_to(tasks):
        return True
    try:
        return path.is_relative_to(cache_folder().resolve())
    except OSError:  # no cache folder (no home folder): no kernel generated there
        return False
