"""Models, mechanisms and interval methods from other packages, found by entry points.

A package makes a unit available to every sweep by declaring it in its
``pyproject.toml``::

    [project.entry-points."ldpsim.methods"]
    bm_t = "my_package.methods:BatchMeansT"

The groups are ``ldpsim.models``, ``ldpsim.mechanisms`` and ``ldpsim.methods``; the
entry point's name is the unit's ``name``. A unit is a class like the built-in ones
(see ``docs/extending.md``): a frozen, keyword-only dataclass deriving from
:class:`~ldpsim.tasks.models.base.Model`, :class:`~ldpsim.tasks.mechanisms.base.Mechanism`
or :class:`~ldpsim.tasks.intervals.base.IntervalMethod`. Plugins are loaded and checked
once per process. A plugin that cannot be imported or breaks a rule is left out, with
one line saying why (:func:`plugin_problems`); the built-in units and the other plugins
keep working, and a sweep that names it is refused with that line.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib.metadata import entry_points

from ldpsim.tasks import intervals, mechanisms, models

#: Entry-point group of each kind of unit.
GROUPS = {"model": "ldpsim.models", "mechanism": "ldpsim.mechanisms", "method": "ldpsim.methods"}
#: The built-in units of each kind, which a plugin may not replace.
BUILTINS: dict[str, dict[str, type]] = {
    "model": dict(models.REGISTRY),
    "mechanism": dict(mechanisms.REGISTRY),
    "method": dict(intervals.REGISTRY),
}
#: The class every unit of a kind derives from.
BASES: dict[str, type] = {
    "model": models.Model,
    "mechanism": mechanisms.Mechanism,
    "method": intervals.IntervalMethod,
}
#: The compiled callback a model or mechanism class must set (njit functions).
CALLBACKS = {"model": "sample_gradient", "mechanism": "privatize"}


@dataclass(frozen=True)
class Plugin:
    """One entry point of an ldpsim group, loaded and checked.

    Attributes
    ----------
    kind : {"model", "mechanism", "method"}
    name : str
        The entry point's name, which the unit is known by in a sweep.
    target : str
        What the entry point names, ``module:attribute``.
    distribution : str
        The installed package that declares it (e.g. ``ldpsim-example-plugin 0.1.0``).
    unit : type or None
        The class, when it loaded and passed the checks.
    problem : str or None
        Why it was left out, one line; None when it is usable.
    """

    kind: str
    name: str
    target: str
    distribution: str
    unit: type | None
    problem: str | None


def _distribution(entry_point) -> str:
    dist = entry_point.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown package"


def _check(kind: str, name: str, unit: object, reserved: dict[str, set[str]]) -> str | None:
    """Why ``unit`` cannot be the ``kind`` called ``name``; None if it can."""
    base = BASES[kind]
    if not isinstance(unit, type) or not issubclass(unit, base):
        return f"is {unit!r}, not a subclass of {base.__module__}.{base.__qualname__}"
    if name in BUILTINS[kind]:
        return f"has the name of the built-in {kind} {name!r}, which a plugin cannot replace"
    own_name = getattr(unit, "name", None)
    if own_name != name:
        return f"sets name = {own_name!r}; it must equal the entry point's name {name!r}"
    if not dataclasses.is_dataclass(unit):
        return "is not a dataclass (@dataclass(frozen=True, kw_only=True))"
    callback = CALLBACKS.get(kind)
    if callback is not None and not hasattr(getattr(unit, callback, None), "py_func"):
        return f"sets no numba-compiled {callback} (a function decorated with numba.njit)"
    if kind == "mechanism":
        fields = {f.name for f in dataclasses.fields(unit)}
        if unit.budget_param not in fields:
            return (
                f"has no field {unit.budget_param!r}, the privacy parameter it names in "
                f"budget_param (e.g. `{unit.budget_param}: float | None = None`)"
            )
    if kind == "method" and unit.interval is intervals.IntervalMethod.interval:
        return "does not implement interval(stats, level, rng)"
    if kind in ("model", "mechanism"):  # their parameters are keys of a replicate spec
        clash = sorted({f.name for f in dataclasses.fields(unit)} & reserved[kind])
        if clash:
            return f"has parameters named like other keys of a spec ({', '.join(clash)})"
    return None


@functools.cache
def plugins() -> tuple[Plugin, ...]:
    """Every installed ldpsim plugin, loaded and checked once per process."""
    from ldpsim.tasks.spec import SPEC_KEYS, unit_params  # spec looks units up here

    def parameters(kind: str) -> set[str]:
        return {p for cls in BUILTINS[kind].values() for p in unit_params(cls)}

    # A model's parameters may not shadow a mechanism's, nor the other way round (a
    # mechanism plugin may take eps, like the built-in ones).
    reserved = {
        "model": set(SPEC_KEYS) | parameters("mechanism"),
        "mechanism": (set(SPEC_KEYS) | parameters("model")) - parameters("mechanism"),
    }
    found = []
    for kind, group in GROUPS.items():
        for entry_point in sorted(entry_points(group=group), key=lambda e: e.name):
            unit: type | None = None
            try:
                loaded = entry_point.load()
            except Exception as exc:  # a plugin's own error must not stop ldpsim
                problem = f"cannot be imported ({type(exc).__name__}: {exc})"
            else:
                problem = _check(kind, entry_point.name, loaded, reserved)
                unit = loaded if problem is None else None
            found.append(
                Plugin(
                    kind=kind,
                    name=entry_point.name,
                    target=entry_point.value,
                    distribution=_distribution(entry_point),
                    unit=unit,
                    problem=problem,
                )
            )
    return tuple(found)


def registry(kind: str) -> dict[str, type]:
    """The usable units of ``kind`` ("model", "mechanism" or "method"): built-in, then plugins."""
    usable = {p.name: p.unit for p in plugins() if p.kind == kind and p.unit is not None}
    return {**BUILTINS[kind], **usable}


def _left_out(plugin: Plugin) -> str:
    return (
        f"The {plugin.kind} plugin {plugin.name!r} ({plugin.target}, from "
        f"{plugin.distribution}) {plugin.problem}; it is left out."
    )


def plugin_problems(kind: str | None = None) -> list[str]:
    """One line per plugin left out (of ``kind``, or of every kind), saying why."""
    return [_left_out(p) for p in plugins() if p.problem is not None and kind in (None, p.kind)]


def problem_of(kind: str, name: object) -> str | None:
    """The line explaining why the plugin ``name`` of ``kind`` is left out, if it is."""
    for p in plugins():
        if p.kind == kind and p.name == name and p.problem is not None:
            return _left_out(p)
    return None
