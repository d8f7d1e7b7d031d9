"""Whether a path can hold a run's store, checked before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ldpsim.pipeline.errors import InputError, os_error_text, path_kind, unwritable_reason
from ldpsim.pipeline.store.reading import check_store


def check_store_path(path: Path) -> None:
    """Refuse a path that cannot hold this run's store, before anything is written.

    Allowed: a new path below a writable folder, an empty folder (replaced by the
    store), or a writable ldpsim store whose metadata are undamaged (see
    :func:`check_store`).

    Raises
    ------
    InputError
        The path is not a folder, a symbolic link to nothing, a non-empty folder that
        is not a store, the current folder or one above it, on a read-only file system
        or otherwise not writable, unreadable (e.g. a name longer than the file system
        allows), or a damaged store.
    """
    try:
        kind = path_kind(path)
        if kind is None:
            parent = _existing_parent(path)
            parent_kind = path_kind(parent)
        elif kind == "folder" and not (path / "zarr.json").exists():
            empty = not any(path.iterdir())
    except OSError as exc:
        raise InputError(
            f"The store path {str(path)!r} cannot be used: {os_error_text(exc, path)}."
        ) from None
    if kind is None:
        if path.is_symlink():  # a store is made aside and renamed: never through a link
            raise InputError(
                f"The store path {str(path)!r} is a symbolic link to "
                f"{os.readlink(path)!r}, which does not exist; give the path of a new "
                "store itself (or make the link's target an existing store)."
            )
        if parent_kind != "folder":
            raise InputError(
                f"The store path {str(path)!r} lies below {str(parent)!r}, which is a "
                f"{parent_kind}, not a folder; choose a path inside a folder."
            )
        check_outside_stores(path, f"The store path {str(path)!r}", "a new store")
        _check_writable(path, parent)
        return
    if kind != "folder":
        raise InputError(
            f"The store path {str(path)!r} is a {kind}; a store is a folder (a new path "
            "such as outputs/NAME.zarr, or an existing ldpsim store)."
        )
    if (path / "zarr.json").exists():
        # Chunks are decoded by the run (ldpsim.pipeline.store.damage), which recomputes the
        # replicates of those that are damaged.
        check_store(path, read_chunks=False)
        _check_writable(path, path)
        return
    if not empty:
        raise InputError(
            f"The store path {str(path)!r} is a non-empty folder that is not a Zarr store; "
            "choose a new path."
        )
    here = Path.cwd().resolve()
    if path.resolve() in (here, *here.parents):
        # The store replaces an empty folder by a rename, which cannot be done to the
        # folder a process works in.
        raise InputError(
            f"The store path {str(path)!r} is the current folder or one above it; a store "
            "is a folder of its own: give a new path such as ./NAME.zarr."
        )
    check_outside_stores(path, f"The store path {str(path)!r}", "a new store")
    _check_writable(path, path.parent)
    try:
        path.rmdir()  # creation renames the finished store into place
    except OSError as exc:
        raise InputError(
            f"The store path {str(path)!r} cannot be used: {os_error_text(exc, path)}."
        ) from None


#: The files that make a folder a Zarr store, group or array (version 3; version 2).
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


def enclosing_store(path: str | Path) -> Path | None:
    """The Zarr store that ``path`` is or lies in: the outermost of ``path`` (where it is
    a folder) and the folders above it that holds Zarr metadata (a file of
    :data:`ZARR_MARKERS` that is a JSON object with ``zarr_format``); None if none.

    A path that cannot be resolved (a symbolic link loop) is taken as written, made
    absolute.
    """
    resolved = _resolved(path)
    found = None
    for folder in (resolved, *resolved.parents):
        if any(_is_zarr_metadata(folder / marker) for marker in ZARR_MARKERS):
            found = folder
    return found


def _resolved(path: str | Path) -> Path:
    """``path`` absolute, its links resolved where they can be (not in a loop)."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        return Path(os.path.abspath(path))


def _is_zarr_metadata(file: Path) -> bool:
    """Whether ``file`` is Zarr metadata (a page named zarr.json is not)."""
    try:
        if not file.is_file() or file.stat().st_size > MAX_METADATA_BYTES:
            return False
        data = json.loads(file.read_bytes())
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON
        return False
    return isinstance(data, dict) and "zarr_format" in data


#: Larger than any Zarr metadata file ldpsim writes (the root's, with the sweep and the
#: units, is tens of kB): a larger file of a marker's name is not read.
MAX_METADATA_BYTES = 16 * 2**20


def beside_store(store: str | Path, suffix: str) -> Path:
    """``<store>SUFFIX`` next to the store at ``store``, its ``.zarr`` left out:
    ``outputs/demo-report.html`` for ``outputs/demo.zarr``. A store named as ``.`` or
    ``..`` (from inside it) is named by its absolute path."""
    path = Path(store)
    if path.name in ("", ".."):  # Path(".").name is ""
        path = path.resolve()
    if not path.name:  # the root, which holds no store (refused as such before a write)
        return path / suffix.lstrip("-")
    return path.with_name(path.name.removesuffix(".zarr") + suffix)


def check_outside_stores(path: str | Path, what: str, writes: str) -> None:
    """Refuse to write ``path`` (a file or a folder) inside a Zarr store: its files would
    become the store's (a page written over its ``zarr.json`` wrecks it).

    ``what`` names the path in the message ("--out 'x'"), ``writes`` what would be
    written ("the report").

    Raises
    ------
    InputError
        ``path`` is a Zarr store or lies inside one (nothing is written).
    """
    store = enclosing_store(path)
    if store is not None:
        where = "is" if store == _resolved(path) else "lies inside"
        raise InputError(
            f"{what} {where} the Zarr store {str(store)!r}, where {writes} would change "
            "the store; choose a path outside it."
        )


def _check_writable(path: Path, folder: Path) -> None:
    """Refuse ``path`` when ``folder`` (where its files are written) is not writable."""
    why = unwritable_reason(folder)
    if why is None:
        return
    raise InputError(
        f"The store path {str(path)!r} is not writable ({why}: {str(folder)!r}); choose "
        "a --store path in a writable folder."
    )


def _existing_parent(path: Path) -> Path:
    for parent in [path.parent, *path.parent.parents]:
        if path_kind(parent) is not None:
            return parent
    return Path("/")
