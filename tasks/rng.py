"""Deprecated: numpy's random streams inline moved to :mod:`ldpsim.tasks.streams.rng`.

This module re-exports it for one release (ldpsim 0.3), so that a plugin's callbacks
written with ``from ldpsim.tasks.rng import random`` keep working; import from
``ldpsim.tasks.streams.rng`` instead (docs/changelog.md).
"""

import warnings

from ldpsim.tasks.streams.rng import *  # noqa: F403 (the same functions, by name)

warnings.warn(
    "ldpsim.tasks.rng moved to ldpsim.tasks.streams.rng; the old path works in ldpsim 0.3 "
    "only. Import from ldpsim.tasks.streams.rng.",
    DeprecationWarning,
    stacklevel=2,
)
