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
folder of its own and compiles once, and no process loads machine code of other code.
Where that folder cannot be made or written, the functions compile in memory, once per
process. Folders of superseded code stay behind; the cache folder can be deleted at any
time. (The SGD kernels have a cache of their own, keyed the same way module by module:
:mod:`ldpsim.tasks.kernel.cache`.)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numba

from ldpsim.tasks.compile_lock import cache_folder

#: The folder whose files key the package's machine code: ldpsim's tasks, where every
#: compiled function of the package lives.
PACKAGE_FOLDER = Path(__file__).resolve().parent
#: The files of a folder that make its key: sources and the data files that compiled
#: code reads as constants (the ziggurat's tables, sn's critical values).
KEYED_SUFFIXES = (".py", ".npz")
#: The subfolder of the cache folder that holds the package's machine code, one folder
#: per :func:`source_key`.
PACKAGE_SUBFOLDER = "package"


@functools.cache
def source_key(folder: Path) -> str:
    """16 hex digits of a SHA-256 of every file of ``folder`` (recursively, caches left
    out) whose suffix is one of :data:`KEYED_SUFFIXES`: its path and its bytes.
    Computed once per process and folder (about 0.7 MB for the package)."""
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in folder.rglob("*")
        if path.suffix in KEYED_SUFFIXES and "__pycache__" not in path.parts
    )
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def machine_code_folder(folder: Path) -> str | None:
    """The folder of the machine code of ``folder``'s compiled functions, made where
    missing: ``<cache folder>/package/<source_key>``; None where it cannot be made or
    written."""
    return made_folder(cache_folder() / PACKAGE_SUBFOLDER / source_key(folder))


@functools.cache
def made_folder(path: Path) -> str | None:
    """``path`` as a string once it exists as a writable folder (made where missing),
    else None. Asked once per process and path."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path) if os.access(path, os.W_OK | os.X_OK) else None


@contextlib.contextmanager
def numba_cache_dir(path: str) -> Iterator[None]:
    """numba's ``config.CACHE_DIR`` set to ``path`` for the block: a dispatcher made with
    ``cache=True`` inside it keeps its cache there (numba fixes the place when it makes
    the dispatcher)."""
    before = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = path
    try:
        yield
    finally:
        numba.config.CACHE_DIR = before


def cached_njit(folder: Path = PACKAGE_FOLDER, **options: Any) -> Callable[[Any], Any]:
    """``numba.njit(cache=True, **options)``, its machine code kept under the key of
    ``folder``'s code (:func:`machine_code_folder`), or compiled in memory where that
    folder cannot be written.

    Parameters
    ----------
    folder : Path
        The folder whose files key the cache: the package's (default) or, in a test, a
        folder of its own modules.
    **options
        numba's, as for ``njit`` (``nogil``, ``inline``, ``error_model``, ...).
    """

    def decorate(function: Any) -> Any:
        place = machine_code_folder(folder)
        if place is None:
            return numba.njit(**options)(function)
        with numba_cache_dir(place):
            return numba.njit(cache=True, **options)(function)

    return decorate
