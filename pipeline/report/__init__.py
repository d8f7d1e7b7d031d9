"""The report layer: figures (``plots``, ``zip_plot``, ``narrow_layout`` for a phone) and
the one-page HTML report (``report``, its template in ``templates/``).

It may import every layer below it (summaries, compute, store, the bottom layer) and
``ldpsim.tasks``; only the API and the command line import it.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    # ``ldpsim.pipeline.report`` was a module before its layer became a folder: its public
    # names stay importable from here for one release (docs/changelog.md).
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule not imported yet: the import system's
    module = importlib.import_module("ldpsim.pipeline.report.report")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(
        f"ldpsim.pipeline.report.{name} moved to ldpsim.pipeline.report.report.{name}; the old "
        "path works in ldpsim 0.3 only.",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
