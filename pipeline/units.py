"""The models, mechanisms and interval methods a sweep can name, one line each."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ldpsim.pipeline.formatting import summary_line
from ldpsim.tasks.plugins import BUILTINS, GROUPS, plugins

#: Kinds of unit in the order ``ldpsim list`` shows them, with their heading.
KIND_HEADINGS = {"model": "Models", "mechanism": "Mechanisms", "method": "Interval methods"}


@dataclass(frozen=True)
class UnitLine:
    """One unit a sweep can name.

    Attributes
    ----------
    kind : {"model", "mechanism", "method"}
    name : str
        The name a sweep uses.
    summary : str
        One line: the unit's ``description`` attribute if it sets one (as xarray's
        backends do), else its class docstring's summary (:func:`one_line`).
    package : str or None
        The installed package of a plugin (``name version``); None for a built-in.
    """

    kind: str
    name: str
    summary: str
    package: str | None


def one_line(unit: type) -> str:
    """The one-line description of a unit class ('' when it has none): its
    ``description``, else its docstring's summary, each up to the first blank line and
    joined into one line (a summary wrapped over two lines is not cut mid-sentence)."""
    description = getattr(unit, "description", None)
    if not (isinstance(description, str) and description.strip()):
        description = inspect.getdoc(unit) or ""
    return summary_line(description)


def unit_lines() -> list[UnitLine]:
    """Every usable unit: per kind the built-ins, then the plugins that loaded.

    A plugin that failed to load is left out (``ldpsim list`` reports it on stderr,
    :func:`ldpsim.tasks.plugins.plugin_problems`).
    """
    out = []
    for kind in GROUPS:
        for name, unit in BUILTINS[kind].items():
            out.append(UnitLine(kind, name, one_line(unit), None))
        for plugin in plugins():
            if plugin.kind == kind and plugin.unit is not None:
                out.append(UnitLine(kind, plugin.name, one_line(plugin.unit), plugin.distribution))
    return out
