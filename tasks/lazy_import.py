"""Modules imported when first used: scipy's submodules take a second to import."""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

_LOCK = threading.Lock()


def lazy_module(name: str) -> types.ModuleType:
    """The module ``name``, loaded on its first attribute access (importlib's LazyLoader).

    ldpsim's models and mechanisms call scipy (``scipy.stats``, ``integrate``,
    ``optimize``, ``special``) when a grid point is set up, not when they are imported:
    a command that only reads a store, or validates a sweep of cheap grid points,
    does not pay scipy's import. A module already imported is returned as it is.

    Parameters
    ----------
    name : str
        A module's full name, e.g. ``"scipy.stats"``.
    """
    with _LOCK:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        loader = importlib.util.LazyLoader(spec.loader)
        spec.loader = loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loader.exec_module(module)
        return module
