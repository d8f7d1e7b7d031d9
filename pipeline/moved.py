"""Names whose module moved (the layers became folders, ldpsim 0.3): the old path keeps
them importable for one release, each first use with a DeprecationWarning
(docs/changelog.md)."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any


def moved_names(old: str, new: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old`` that finds a name in the module ``new``.

    Parameters
    ----------
    old : str
        The module or package the name used to be in, e.g. ``"ldpsim.pipeline.reading"``.
        Where ``old`` is now a package, its dunder names and its submodules not yet
        imported are left to the import system.
    new : str
        The module the names are in now, e.g. ``"ldpsim.pipeline.store.reading"``.

    Returns
    -------
    callable
        ``__getattr__(name)``: the value of ``new.name``, with a DeprecationWarning naming
        both paths; AttributeError for a name ``new`` does not have.
    """
    package = importlib.util.find_spec(old).submodule_search_locations is not None

    def __getattr__(name: str) -> Any:
        if package and (
            name.startswith("__") or importlib.util.find_spec(f"{old}.{name}") is not None
        ):
            raise AttributeError(name)  # a submodule not imported yet: the import system's
        try:
            value = getattr(importlib.import_module(new), name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
        where = f"{old}.{name}" if package else old
        warnings.warn(
            f"{where} moved to {new}{'.' + name if package else ''}; the old path works in "
            "ldpsim 0.3 only.",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__
