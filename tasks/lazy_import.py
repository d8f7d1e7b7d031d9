"""Modules imported when first used: scipy's submodules take a second to import."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


class LazyModule(types.ModuleType):
    """A stand-in for the module of its name, which it imports at its first attribute
    access; each attribute read is kept on the stand-in.

    The import is Python's own, whose per-module lock makes a second thread wait until
    the module is whole: a GPU worker's threads may set up their first grid points at the
    same moment. (importlib's ``LazyLoader`` does not: on Python 3.11 a thread could read
    the module while another was still executing it, and fail with an AttributeError.)
    """

    def __getattr__(self, attribute: str) -> object:
        value = getattr(importlib.import_module(self.__name__), attribute)
        setattr(self, attribute, value)  # read from here from now on
        return value


def lazy_module(name: str) -> types.ModuleType:
    """The module ``name``, imported on its first attribute access (:class:`LazyModule`).

    ldpsim's models and mechanisms call scipy (``scipy.stats``, ``integrate``,
    ``optimize``, ``special``) when a grid point is set up, not when they are imported:
    a command that only reads a store, or validates a sweep of cheap grid points,
    does not pay scipy's import. A module already imported is returned as it is.

    Parameters
    ----------
    name : str
        A module's full name, e.g. ``"scipy.stats"``.

    Raises
    ------
    ModuleNotFoundError
        No module of that name is installed (found now, not at its first use).
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return LazyModule(name)
