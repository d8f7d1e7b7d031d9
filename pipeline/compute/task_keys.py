"""The keys that name a run's Dask tasks, kept in its failure records.

A key names the store (:func:`store_token`), the grid point's position along each axis
and the chunk: ``ldpsim-1a2b3c4d-0-2-c5``; a task of several chunks adds ``-xK``, and the
work of methods added to a finished store :data:`KEY_SUFFIX`. Failure records keep the
key (:data:`CHUNK_KEY` reads it back). Nothing here imports the units (models,
mechanisms, methods): `ldpsim status` and `errors` name grid points by these keys.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: The end of the key of a task that computes methods added to a finished store.
KEY_SUFFIX = "-methods"
#: A chunk's key: the store's token, the grid point's position along each axis, the
#: chunk, and :data:`KEY_SUFFIX` for added methods.
CHUNK_KEY = re.compile(
    rf"ldpsim-[0-9a-f]+-(?P<index>\d+(?:-\d+)*)-c(?P<chunk>\d+)(?:{re.escape(KEY_SUFFIX)})?"
)


def store_token(path: str | Path) -> str:
    """The store's part of its task keys: 8 hex digits of the SHA-256 of its absolute path,
    links followed (one link name moved to another store names that store)."""
    return hashlib.sha256(Path(path).resolve().as_posix().encode()).hexdigest()[:8]


def chunk_key(token: str, index: tuple[int, ...], chunk: int, suffix: str = "") -> str:
    """The key of chunk ``chunk`` of the grid point at ``index`` (see :data:`CHUNK_KEY`)."""
    label = "-".join(map(str, index)) or "0"
    return f"ldpsim-{token}-{label}-c{chunk}{suffix}"
