"""The streams fingerprint of this installation, computed once and kept beside the kernels.

A store records :func:`ldpsim.tasks.streams.seeding.streams_fingerprint` when it is
created, and a run compares it before adding replicates. Computing it loads the
compiled samplers of :mod:`ldpsim.tasks.streams.rng`, which sets up numba's compiler in
the driver: about a second of a run's start on a 2-core machine, for a value that only
changes with the code and the libraries behind it.

:func:`running_fingerprint` therefore keeps it in a file of the kernel cache folder
(:func:`ldpsim.tasks.compile_lock.cache_folder`, subfolder ``streams``), named by a hash
of everything the value is a function of: the source of every module the fingerprint's
code reaches and every constant it reads
(:func:`ldpsim.tasks.kernel.cache.code_fingerprint`: the samplers, the seeding, the
multipliers), the versions of Python, numpy, numba and llvmlite and the host CPU
(:func:`ldpsim.tasks.kernel.cache.environment_fingerprint`), and
:data:`ldpsim.tasks.streams.seeding.FINGERPRINT_PARTS`. A change to any of them names
another file, which is computed once. A file that cannot be read or does not hold the
parts is computed again; where the folder cannot be written, every call computes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid

from ldpsim.tasks.compile_lock import cache_folder
from ldpsim.tasks.kernel.cache import code_fingerprint, environment_fingerprint
from ldpsim.tasks.streams.seeding import FINGERPRINT_PARTS, streams_fingerprint

#: The subfolder of the kernel cache folder that holds the fingerprints.
SUBFOLDER = "streams"


def fingerprint_key() -> str | None:
    """SHA-256 of what :func:`streams_fingerprint` depends on; None where its code has no
    source file to hash (it is then never kept)."""
    code = code_fingerprint([streams_fingerprint])
    if code is None:
        return None
    record = {"code": code, "environment": environment_fingerprint(), "parts": FINGERPRINT_PARTS}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def running_fingerprint() -> dict[str, str]:
    """:func:`ldpsim.tasks.streams.seeding.streams_fingerprint` of this installation:
    read from the cache folder where it was computed before with the same code and
    libraries, else computed and kept there (atomically: a temporary file renamed)."""
    key = fingerprint_key()
    if key is None:
        return streams_fingerprint()
    try:
        path = cache_folder() / SUBFOLDER / f"{key[:32]}.json"
    except OSError:  # no cache folder (no home folder): computed each time
        return streams_fingerprint()
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(path.read_text())
        if (
            isinstance(kept, dict)
            and set(kept) == set(FINGERPRINT_PARTS)
            and all(isinstance(value, str) for value in kept.values())
        ):
            return kept
    value = streams_fingerprint()
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(value, sort_keys=True))
        os.replace(temporary, path)
    except OSError:  # a read-only or full cache folder: the value is still right
        with contextlib.suppress(OSError):
            temporary.unlink()
    return value
