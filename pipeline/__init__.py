"""The plumbing of ldpsim: sweeps, Dask execution, the Zarr store, summaries, reports, CLI.

The API of :mod:`ldpsim.pipeline.api` is importable from here too::

    from ldpsim.pipeline import load_sweep, run, open_store, summarize, plot

Each name is imported when first used, so that ``ldpsim --help`` imports nothing more.
The layers below are folders (``store``, ``compute``, ``summary``, ``report``;
docs/layout.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ldpsim.pipeline.api import (
        compare,
        load_sweep,
        open_store,
        plot,
        register,
        replay,
        run,
        run_report,
        summarize,
    )

#: The API's functions importable from ``ldpsim.pipeline``.
__all__ = [
    "compare",
    "load_sweep",
    "open_store",
    "plot",
    "register",
    "replay",
    "run",
    "run_report",
    "summarize",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module("ldpsim.pipeline.api"), name)
        globals()[name] = value  # imported once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
