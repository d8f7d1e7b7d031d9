"""The package's compiled functions, cached on disk under a key of the package's code.

numba's disk cache (``cache=True``) keeps a function's machine code beside its module and
checks only that module's file. A compiled function that calls a compiled function of
another module (bb's intervals call the quantiles and the multipliers' laws; the
statistics call the pairwise sums) has the callee's machine code inside its own, and
keeps running it after only the callee's module changed: in a checkout that an edit or
a ``git pull`` changes (``make run`` installs ldpsim editable), old code under the new
code's name, without a word. On numba 0.68: a cached ``f`` calling ``g`` of another
module returned ``g``'s old result after ``g``'s file changed.

:func:`cached_njit` therefore keeps the package's machine code in a folder of ldpsim's
cache folder (:func:`ldpsim.tasks.compile_lock.cache_folder`) named by a hash of every
source and data file of :mod:`ldpsim.tasks` (:func:`source_key`): changed code finds a
folder of its own and compiles once. Where that folder cannot be made or written, or the
package's files cannot all be read, the functions compile in memory, once per process,
with one warning; so does a module whose file changed after the process made its key
(an edit during a long sweep), as the SGD kernels' templates do. Folders of superseded
code stay behind; the cache folder can be deleted at any time. numba's own subfolder
names the module's folder, so each installation and each CPU model compiles once. (The
SGD kernels have a cache of their own, keyed the same way module by module:
:mod:`ldpsim.tasks.kernel.cache`.)
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numba
import numba.core.config

from ldpsim.tasks.compile_lock import CACHE_DIR_VARIABLE, cache_folder

#: The folder whose files key the package's machine code: ldpsim's tasks, where every
#: compiled function of the package lives.
PACKAGE_FOLDER = Path(__file__).resolve().parent
#: The files of a folder that make its key: sources and the data files that compiled
#: code reads as constants (the ziggurat's tables, sn's critical values).
KEYED_SUFFIXES = (".py", ".npz")
#: The subfolder of the cache folder that holds the package's machine code, one folder
#: per :func:`source_key`.
PACKAGE_SUBFOLDER = "package"


#: numba's ``config.CACHE_DIR`` is the process's: one dispatcher is made under it at a
#: time (a GPU worker's threads may import modules side by side).
_CACHE_DIR_LOCK = threading.Lock()
_log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()
#: What :func:`cached_njit`'s warnings name.
WHAT = "the package's compiled functions"
#: The folders in which this process found a changed file (:func:`package_changed`).
_changed_folders: set[Path] = set()
#: numba's settings that change the machine code it generates, as its compiler reads
#: them (``numba.core.config``): from the ``NUMBA_*`` environment variables, or from a
#: ``.numba_config.yaml`` in the working folder (``boundscheck: 1`` there is
#: ``NUMBA_BOUNDSCHECK=1``). Part of every key of compiled code (:func:`source_key`,
#: and the kernels' :mod:`ldpsim.tasks.kernel.cache`).
NUMBA_CODEGEN_SETTINGS = (
    "OPT",
    "LOOP_VECTORIZE",
    "SLP_VECTORIZE",
    "ENABLE_AVX",
    "CPU_NAME",
    "CPU_FEATURES",
    "BOUNDSCHECK",
    "DEBUGINFO_DEFAULT",
    "FULL_TRACEBACKS",
)


@functools.cache
def source_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every regular file of ``folder`` (recursively, caches left out) whose
    suffix is one of :data:`KEYED_SUFFIXES`, by path relative to ``folder``. Read once
    per process and folder (about 0.7 MB for the package). Raises OSError where a file
    cannot be read."""
    digests = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix in KEYED_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
            digests[path.relative_to(folder).as_posix()] = hashlib.sha256(
                path.read_bytes()
            ).hexdigest()
    return digests


@functools.cache
def source_key(folder: Path) -> str:
    """16 hex digits of a SHA-256 of :func:`source_digests` (paths and contents) and of
    numba's code-generation settings (:data:`NUMBA_CODEGEN_SETTINGS`, which numba's own
    index leaves out), once per process and folder."""
    digest = hashlib.sha256()
    for name, file_digest in source_digests(folder).items():
        digest.update(f"{name}\0{file_digest}\n".encode())
    settings = settings_of(numba.core.config, NUMBA_CODEGEN_SETTINGS)
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def settings_of(config: Any, names: Iterable[str]) -> dict[str, str]:
    """The values of the settings ``names`` of a numba ``config`` module (numba's, or
    numba-cuda's), as text (None for a setting this version lacks), read again first as
    numba's compiler does (a ``NUMBA_*`` variable set since the import counts)."""
    config.reload_config()
    return {name: repr(getattr(config, name, None)) for name in names}


def machine_code_folder(folder: Path) -> str | None:
    """The folder of the machine code of ``folder``'s compiled functions, made where
    missing: ``<cache folder>/package/<source_key>``; None (with a warning, once) where
    it cannot be made or written or the files cannot be read."""
    try:
        base = cache_folder()
    except OSError as exc:  # no home folder to hold it
        warn_in_memory(WHAT, "the cache folder", str(exc))
        return None
    try:
        path = base / PACKAGE_SUBFOLDER / source_key(folder)
    except OSError as exc:
        warn_in_memory(WHAT, str(folder), f"cannot read its files: {exc}")
        return None
    made = made_folder(path)
    if made is None:
        warn_in_memory(WHAT, str(path), "cannot write the folder")
    return made


@functools.cache
def made_folder(path: Path) -> str | None:
    """``path`` as a string once it exists as a writable folder (made where missing),
    else None. Asked once per process and path."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path) if os.access(path, os.W_OK | os.X_OK) else None


def package_changed(function: Any, folder: Path) -> bool:
    """Whether ``function``'s file, or the file of a function decorated before it in
    this process, changed since :func:`source_digests` read ``folder``: a function
    decorated after such a change may call the changed code (its module imported
    the changed one), which its own file does not show, so it is not cached either."""
    if folder in _changed_folders:
        return True
    if unchanged_since_keyed(function, folder):
        return False
    _changed_folders.add(folder)
    return True


def unchanged_since_keyed(function: Any, folder: Path) -> bool:
    """Whether ``function``'s file is as :func:`source_digests` read it (a module edited
    after the key was made would otherwise put new machine code under the old key)."""
    path = Path(function.__code__.co_filename).resolve()
    try:
        name = path.relative_to(folder.resolve()).as_posix()
        return source_digests(folder).get(name) == file_digest(path)
    except (OSError, ValueError):
        return False


@functools.cache
def file_digest(path: Path) -> str:
    """SHA-256 of a module's file as the process decorates its functions (once a file)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_njit(folder: Path = PACKAGE_FOLDER, **options: Any) -> Callable[[Any], Any]:
    """``numba.njit(cache=True, **options)``, its machine code kept under the key of
    ``folder``'s code (:func:`machine_code_folder`); compiled in memory where that folder
    cannot be used, where the function's module changed since the key was made, or where
    numba would not keep the cache in that folder.

    Parameters
    ----------
    folder : Path
        The folder whose files key the cache, holding the decorated function's module:
        the package's (default) or, in a test, a folder of its own modules.
    **options
        numba's, as for ``njit`` (``nogil``, ``inline``, ``error_model``, ...).
    """

    def decorate(function: Any) -> Any:
        place = machine_code_folder(folder)
        if place is None:
            return numba.njit(**options)(function)
        if package_changed(function, folder):
            warn_in_memory(
                WHAT,
                str(folder),
                "a file changed on disk after this process read the package (first "
                f"seen at {function.__code__.co_filename})",
                "A process started after the change caches them again.",
            )
            return numba.njit(**options)(function)
        with _CACHE_DIR_LOCK:
            before = numba.config.CACHE_DIR
            numba.config.CACHE_DIR = place
            try:
                dispatcher = numba.njit(cache=True, **options)(function)
            finally:
                numba.config.CACHE_DIR = before
        # numba falls back to a folder of its own choosing where it finds the given one
        # unwritable (its own check), and a NUMBA_CACHE_LOCATOR_CLASSES setting bypasses it.
        if not str(dispatcher.stats.cache_path or "").startswith(place):
            warn_in_memory(WHAT, place, f"numba keeps it in {dispatcher.stats.cache_path}")
            return numba.njit(**options)(function)
        return dispatcher

    return decorate


def warn_in_memory(what: str, where: str, why: str, advice: str | None = None) -> None:
    """Warn, once per process, ``what`` and ``where``, that ``what`` (compiled functions, the
    kernels) compile in memory because they cannot be cached there (``why``), and what
    to do (``advice``; default: every new process repeats it, so name a writable cache
    folder)."""
    if (what, where) in _warned:
        return
    _warned.add((what, where))
    if advice is None:
        advice = f"Every new process repeats this: set {CACHE_DIR_VARIABLE} to a writable folder."
    _log.warning(
        "ldpsim cannot cache %s in %s (%s); compiling them in memory. %s",
        what,
        where,
        why,
        advice,
    )
