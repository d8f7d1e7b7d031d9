"""The store layer: a sweep's Zarr store and everything about it that no run needs to
know. Its layout (``layout``), creation, extension and writes (``store``), reading
(``reading``), the checks of its metadata and determined arrays (``integrity``), of its
data files (``damage``) and their digests (``digests``), the run lock (``lock``), the
identity of a requested sweep and of the code that computed the replicates
(``identity``, ``code_identity``), run records (``provenance``), the methods added to it
and still pending (``pending``) and the check of a --store path (``store_path``).

It may import the bottom layer of ``ldpsim.pipeline`` (``sweep``, ``cost``,
``formatting``, ``errors``) and ``ldpsim.tasks``; never the compute layer, the summaries
or the report (the import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    # ``ldpsim.pipeline.store`` was a module before its layer became a folder: its public
    # names stay importable from here for one release (docs/changelog.md).
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule not imported yet: the import system's
    module = importlib.import_module("ldpsim.pipeline.store.store")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(
        f"ldpsim.pipeline.store.{name} moved to ldpsim.pipeline.store.store.{name}; the old "
        "path works in ldpsim 0.3 only.",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
