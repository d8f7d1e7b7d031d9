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
keep working, and a sweep that names it is refused with that line. A loaded plugin whose
own code raises while a grid point is set up is reported in one line too, naming the
plugin, its function, the file and the line (:func:`plugin_code_errors`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

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


def distribution_of(entry_point: EntryPoint) -> str:
    """``NAME VERSION`` of the installed package that declares ``entry_point`` (every
    plugin group's, statistics included); "an unknown package" where none does."""
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
                    distribution=distribution_of(entry_point),
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


class PluginCodeError(ValueError):
    """A plugin's own code raised while ldpsim set a grid point up; the message is one line.

    Raised by :func:`plugin_code_errors` in place of the plugin's exception (its cause):
    a ValueError, so that the sweep's checks report it like bad input, before anything
    is computed or written.
    """


def _is_ldpsim(module: str) -> bool:
    return module == "ldpsim" or module.startswith("ldpsim.")


def _defines(unit: type, code: types.CodeType) -> bool:
    """Whether ``code`` is the code of a function that ``unit`` or a base defines."""
    for cls in unit.__mro__:
        for attribute in vars(cls).values():
            for function in (attribute, getattr(attribute, "fget", None)):
                function = getattr(function, "__func__", function)  # class/static methods
                function = getattr(function, "func", function)  # functools.cached_property
                if getattr(function, "__code__", None) is code:
                    return True
    return False


def _owner(frames: list[types.FrameType]) -> Plugin | None:
    """The usable plugin whose code the ``frames`` run (outermost first).

    The unit whose instance (``self``) or class (``cls``) a frame runs on, else a unit
    that defines one of their functions, else the unit whose package holds their
    module.
    """
    usable = [p for p in plugins() if p.unit is not None]
    for frame in frames:
        bound = frame.f_locals.get("self", frame.f_locals.get("cls"))
        unit = bound if isinstance(bound, type) else type(bound)
        for plugin in usable:
            if plugin.unit is unit:
                return plugin
    for frame in frames:
        for plugin in usable:
            if _defines(plugin.unit, frame.f_code):
                return plugin
    for frame in frames:
        package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        for plugin in usable:
            if plugin.unit.__module__.partition(".")[0] == package:
                return plugin
    return None


#: The module of ldpsim's ``check_*`` helpers, whose errors are refusals wherever called.
VALIDATION_MODULE = "ldpsim.tasks.validation"


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is a unit's deliberate refusal of its parameters.

    That is a TypeError or ValueError raised by validation, judged by the frame that
    raised it (the innermost of its traceback): a unit's ``__post_init__``, a function
    or method called ``check`` or ``check_*`` (``check_model``, ``_check_scale``; not
    ``checkpoint``), or one of ldpsim's helpers in :mod:`ldpsim.tasks.validation`.
    Raised anywhere else (a plugin's ``params()`` adding ``None + 1``, numpy refusing
    a shape), it is a bug, not a refusal.
    """
    if not isinstance(exc, TypeError | ValueError):
        return False
    tb = exc.__traceback__
    if tb is None:  # never raised: nothing says where it comes from
        return True
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    function = frame.f_code.co_name.lstrip("_")
    return (
        frame.f_globals.get("__name__") == VALIDATION_MODULE
        or function == "post_init__"
        or function == "check"
        or function.startswith("check_")
    )


def plugin_code_error(exc: BaseException) -> PluginCodeError | None:
    """The one-line error for ``exc`` if a plugin's own code raised it, else None.

    A plugin's frames are those of a usable plugin's modules (:func:`plugins`); ldpsim's
    own modules, numpy's and the other libraries' are not. A TypeError or ValueError
    that a unit's validation raised is left alone (None): it is how a unit refuses its
    parameters, and its message is already meant for the user (:func:`is_refusal`).
    Any other TypeError or ValueError of a plugin's code (``None + 1``, a numpy shape
    mismatch) is a bug like any other exception.

    Returns
    -------
    PluginCodeError or None
        "The model plugin 'x' (package.module:Class, from package 1.0): Class.params
        raised AttributeError at /path/module.py, line 12: ..."; the function named is
        the first of the plugin's that ldpsim called, the file and line the last of the
        plugin's frames (the one that raised, or called the library that did).
    """
    if not isinstance(exc, Exception) or isinstance(exc, PluginCodeError) or is_refusal(exc):
        return None
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        module = str(frame.f_globals.get("__name__", ""))
        # Code made by exec (a dataclass's __init__) has no file to point at.
        if not _is_ldpsim(module) and not frame.f_code.co_filename.startswith("<"):
            frames.append((frame, tb.tb_lineno))
        tb = tb.tb_next
    plugin = _owner([frame for frame, _ in frames]) if frames else None
    if plugin is None:
        return None
    package = plugin.unit.__module__.partition(".")[0]
    own = [
        (frame, line)
        for frame, line in frames
        if str(frame.f_globals.get("__name__", "")).partition(".")[0] == package
        or _defines(plugin.unit, frame.f_code)
    ] or frames
    entry, (last, line) = own[0][0].f_code.co_qualname, own[-1]
    inner = last.f_code.co_qualname
    where = f"{entry}" if inner == entry else f"{entry} (in {inner})"
    text = str(exc).strip().splitlines()
    reason = f": {text[0].rstrip('.')}" if text else ""
    return PluginCodeError(
        f"The {plugin.kind} plugin {plugin.name!r} ({plugin.target}, from "
        f"{plugin.distribution}): {where} raised {type(exc).__name__} at "
        f"{last.f_code.co_filename}, line {line}{reason}."
    )


@contextlib.contextmanager
def plugin_code_errors() -> Iterator[None]:
    """Report an exception of a plugin's own code as one line (:class:`PluginCodeError`).

    Wraps the calls that set a grid point up on the client (constructors, ``params``,
    the sensitivities), before anything is submitted. An exception that no plugin's
    code raised, and a unit's deliberate refusal (a TypeError or ValueError of its
    validation, :func:`is_refusal`), passes unchanged: the built-in units keep their
    behaviour, and a plugin's refusal its own message (:func:`plugin_code_error`).

    Raises
    ------
    PluginCodeError
        A plugin's code raised; the original exception is its ``__cause__``.
    """
    try:
        yield
    except Exception as exc:
        error = plugin_code_error(exc)
        if error is None:
            raise
        raise error from exc
