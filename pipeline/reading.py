"""Deprecated: moved to :mod:`ldpsim.pipeline.store.reading`
(the layers became folders).

Its names stay importable from here for one release (ldpsim 0.3; docs/changelog.md).
"""

from ldpsim.pipeline.moved import moved_names

__getattr__ = moved_names("ldpsim.pipeline.reading", "ldpsim.pipeline.store.reading")
