"""Deprecated: moved to :mod:`ldpsim.pipeline.store.reading`
(the layers became folders).

Its names stay importable from here for one release (ldpsim 0.3; docs/changelog.md).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

NEW = "ldpsim.pipeline.store.reading"


def __getattr__(name: str) -> Any:
    value = getattr(importlib.import_module(NEW), name)
    warnings.warn(
        f"ldpsim.pipeline.reading moved to {NEW}; the old path works in ldpsim 0.3 only.",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
