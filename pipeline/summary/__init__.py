"""The summary layer: a store's replicates as statistics. Coverage, length, their Monte-Carlo
errors and the diagnostics (``summary``, ``diagnostics``, the variables in
``variables``), your own statistics (``cell_statistics``), partial cells, the flags
against each method's nominal claim (``nominal_claims``), tables and records (``tables``,
``table_layouts``, ``records``), paired comparisons (``compare``), cases by their
parameters (``case_parameters``) and compute times (``timings``).

It may import the compute and store layers, the bottom layer and ``ldpsim.tasks``; never the
report.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    # ``ldpsim.pipeline.summary`` was a module before its layer became a folder: its public
    # names stay importable from here for one release (docs/changelog.md).
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule not imported yet: the import system's
    module = importlib.import_module("ldpsim.pipeline.summary.summary")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(
        f"ldpsim.pipeline.summary.{name} moved to ldpsim.pipeline.summary.summary.{name}; the old "
        "path works in ldpsim 0.3 only.",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
