"""One simulation replicate of LDP-SGD inference: models, mechanisms, kernel, intervals.

Imports only numpy, scipy and numba; the plumbing lives in ``pipeline``. The names below
are imported when first used (``from ldpsim.tasks import run_replicate``), so that a
module of a subpackage (``ldpsim.tasks.plugins``, ``ldpsim.tasks.streams.rng``) is
imported without the compiled kernel and every unit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ldpsim.tasks.replicate import ReplicateResult, compute_replicate, run_replicate
    from ldpsim.tasks.spec import ReplicateSpec, normalize_spec

#: Name -> the module that defines it.
_LAZY = {
    "ReplicateResult": "ldpsim.tasks.replicate",
    "compute_replicate": "ldpsim.tasks.replicate",
    "run_replicate": "ldpsim.tasks.replicate",
    "ReplicateSpec": "ldpsim.tasks.spec",
    "normalize_spec": "ldpsim.tasks.spec",
}

__all__ = [
    "ReplicateResult",
    "ReplicateSpec",
    "compute_replicate",
    "normalize_spec",
    "run_replicate",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # imported once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
