"""One simulation replicate of LDP-SGD inference: models, mechanisms, kernel, intervals.

Imports only numpy, scipy and numba; the plumbing lives in ``pipeline``.
"""

from ldpsim.tasks.replicate import ReplicateResult, compute_replicate, run_replicate
from ldpsim.tasks.spec import ReplicateSpec, normalize_spec

__all__ = [
    "ReplicateResult",
    "ReplicateSpec",
    "compute_replicate",
    "normalize_spec",
    "run_replicate",
]
