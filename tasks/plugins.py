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
import inspect
import numbers
import re
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from ldpsim.tasks import intervals, mechanisms, models
from ldpsim.tasks.spec_keys import SPEC_KEYS, unit_params

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
    source_sha256 : str or None
        A unit registered at run time (:func:`register`): the SHA-256 of its source (its
        class's and its callbacks'; their code where it has no source,
        :func:`unit_source_sha256`), as the registering process read it; None for an
        entry point (its package's files are hashed, ``ldpsim.pipeline.store.code_identity``).
    """

    kind: str
    name: str
    target: str
    distribution: str
    unit: type | None
    problem: str | None
    source_sha256: str | None = None


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
    # is_dataclass is true of any subclass of a dataclass: a class that declares fields
    # of its own without its own decorator has them as plain class attributes.
    undecorated = next(
        (
            c
            for c in unit.__mro__[: unit.__mro__.index(base)]
            if inspect.get_annotations(c) and "__dataclass_fields__" not in vars(c)
        ),
        None,
    )
    if not dataclasses.is_dataclass(unit) or undecorated is not None:
        where = "" if undecorated in (None, unit) else f" (its base {undecorated.__qualname__})"
        return (
            f"is not a dataclass{where}: declare its fields under "
            "@dataclass(frozen=True, kw_only=True)"
        )
    callback = CALLBACKS.get(kind)
    if callback is not None and not hasattr(getattr(unit, callback, None), "py_func"):
        return f"sets no numba-compiled {callback} (a function decorated with numba.njit)"
    if kind == "mechanism":
        fields = {f.name for f in dataclasses.fields(unit)}
        if not isinstance(unit.budget_param, str):
            return f"sets budget_param = {unit.budget_param!r}; it must name a field, a string"
        if unit.budget_param not in fields:
            return (
                f"has no field {unit.budget_param!r}, the privacy parameter it names in "
                f"budget_param (e.g. `{unit.budget_param}: float | None = None`)"
            )
    if kind == "method" and unit.own_estimate:  # a competitor: estimate_interval instead
        if unit.estimate_interval is intervals.IntervalMethod.estimate_interval:
            return (
                "sets own_estimate = True and does not implement "
                "estimate_interval(users, level, rng)"
            )
    elif kind == "method" and unit.interval is intervals.IntervalMethod.interval:
        return "does not implement interval(stats, level, rng)"
    if kind in ("model", "mechanism"):  # their parameters are keys of a replicate spec
        clash = sorted({f.name for f in dataclasses.fields(unit)} & reserved[kind])
        if clash:
            return f"has parameters named like other keys of a spec ({', '.join(clash)})"
    return None


def _reserved() -> dict[str, set[str]]:
    """The parameter names a model or mechanism plugin may not use (spec keys, and the
    other kind's parameters)."""

    def parameters(kind: str) -> set[str]:
        return {p for cls in BUILTINS[kind].values() for p in unit_params(cls)}

    # A model's parameters may not shadow a mechanism's, nor the other way round (a
    # mechanism plugin may take eps, like the built-in ones).
    return {
        "model": set(SPEC_KEYS) | parameters("mechanism"),
        "mechanism": (set(SPEC_KEYS) | parameters("model")) - parameters("mechanism"),
    }


#: The units registered in this process at run time (:func:`register`), by kind and name.
#: Copy on write: :func:`register` assigns a new dict, never changes one, so a thread
#: that iterates it (a Dask task looking a unit up) never sees it change meanwhile.
_REGISTERED: dict[str, dict[str, Plugin]] = {kind: {} for kind in GROUPS}
#: Serializes the writers of :data:`_REGISTERED` (a worker plugin's setup, the client).
_REGISTERING = threading.Lock()
#: Replacements of registered units so far (:func:`generation`).
_GENERATION = 0
#: How :attr:`Plugin.distribution` names a unit registered at run time.
REGISTERED_ORIGIN = "registered at run time"


def plugins() -> tuple[Plugin, ...]:
    """Every ldpsim plugin: the installed ones (entry points, loaded and checked once per
    process), then the units registered at run time (:func:`register`)."""
    registered = tuple(p for units in _REGISTERED.values() for p in units.values())
    return (*_installed(), *registered)


@functools.cache
def _installed() -> tuple[Plugin, ...]:
    """Every installed ldpsim plugin, loaded and checked once per process."""
    reserved = _reserved()
    found = []
    for kind, group in GROUPS.items():
        for entry_point in sorted(entry_points(group=group), key=lambda e: e.name):
            unit: type | None = None
            try:
                loaded = entry_point.load()
            except Exception as exc:  # a plugin's own error must not stop ldpsim
                problem = f"cannot be imported ({type(exc).__name__}: {exc})"
            else:
                try:
                    problem = _check(kind, entry_point.name, loaded, reserved)
                except Exception as exc:  # e.g. a class attribute that raises
                    problem = f"cannot be checked ({type(exc).__name__}: {exc})"
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


plugins.cache_clear = _installed.cache_clear  # type: ignore[attr-defined]  # tests reload


def unit_kind(unit: object) -> str | None:
    """The kind ("model", "mechanism", "method") whose base class ``unit`` derives from."""
    if isinstance(unit, type):
        for kind, base in BASES.items():
            if issubclass(unit, base):
                return kind
    return None


#: The methods a dataclass writes itself, from its fields (no source of their own).
_DATACLASS_MADE = frozenset(
    {"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__"}
    | {"__le__", "__gt__", "__ge__", "__getstate__", "__setstate__", "__replace__"}
)
#: Modules whose classes in a unit's bases are not the unit's own code (with ldpsim's).
_NOT_OWN = ("builtins", "abc", "typing")
#: Values of a global that the code of a function without source reads, hashed by repr.
_PLAIN = (numbers.Number, str, bytes, type(None))


def _functions_of(value: object) -> list[object]:
    """The Python functions an attribute of a class holds: a method, a static or class
    method's function, a property's accessors, a numba callback's ``py_func``."""
    value = getattr(value, "__func__", value)  # staticmethod, classmethod
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if f is not None]
    if isinstance(value, functools.cached_property):
        value = value.func
    value = getattr(value, "py_func", value)  # a numba dispatcher: its Python function
    return [value] if isinstance(value, types.FunctionType) else []


def _stable_repr(value: object) -> str:
    """``repr(value)`` without memory addresses, and a set's items sorted: both differ
    from process to process (a string's hash, hence a set's order, is salted per
    process)."""
    if isinstance(value, set | frozenset) and value:
        items = "{" + ", ".join(sorted(_stable_repr(item) for item in value)) + "}"
        return items if type(value) is set else f"{type(value).__name__}({items})"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _is_library_class(cls: type) -> bool:
    """Whether ``cls`` is ldpsim's or Python's own class (``object``, ``abc.ABC``,
    ``typing.Generic``): the class its module and qualified name designate, not a class
    of the unit's that only carries such a module's name (one made by ``exec`` in a
    fresh namespace has the module ``builtins``)."""
    module = cls.__module__
    if not (_is_ldpsim(module) or module in _NOT_OWN):
        return False
    found: object = sys.modules.get(module)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


def _const_text(value: object) -> str:
    """A code object's constant as text: a nested code object by its own
    :func:`_code_text`, a frozenset sorted (its repr's order varies between processes)."""
    if isinstance(value, types.CodeType):
        return _code_text(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_const_text(item) for item in value) + ",)"
    if isinstance(value, frozenset):
        return "frozenset({" + ", ".join(sorted(_const_text(item) for item in value)) + "})"
    return _stable_repr(value)


#: The flags of a code object that say what kind of code it is (a generator, ``*args``);
#: the higher ones are ``__future__`` imports, which ``exec`` inherits from its caller.
_KIND_FLAGS = 0xFFFF


def _code_text(code: types.CodeType) -> str:
    """What a code object computes: its bytecode, exception table, constants (nested
    code objects recursively), names, variables, argument counts and kind; not its file,
    line numbers or ``__future__`` flags, which do not change what it computes."""
    fields = (
        code.co_name,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & _KIND_FLAGS,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_code.hex(),
        code.co_exceptiontable.hex(),
    )
    consts = ", ".join(_const_text(value) for value in code.co_consts)
    return f"code{fields!r} consts ({consts})"


def _names_read(code: types.CodeType) -> set[str]:
    """The global (and attribute) names that ``code`` and its nested code objects use."""
    names = set(code.co_names)
    for value in code.co_consts:
        if isinstance(value, types.CodeType):
            names |= _names_read(value)
    return names


def _value_text(value: object, namespace: dict[str, object], seen: set[int]) -> str | None:
    """A default, closure or global value of a function of ``namespace`` as text: a
    function of the same namespace by its code (:func:`_function_code_text`), one of
    another (a library's) by its name; plain data (numbers, strings, and tuples, lists,
    sets and dicts of them) by its repr; None for anything else (a module, a class, an
    object), which is not hashed."""
    value = getattr(value, "py_func", value)  # a numba dispatcher: its Python function
    if isinstance(value, types.FunctionType):
        if value.__globals__ is namespace:
            return _function_code_text(value, seen)
        return f"function {value.__module__}.{value.__qualname__}"
    if isinstance(value, _PLAIN):
        return _stable_repr(value)
    if isinstance(value, tuple | list | frozenset | set | dict):
        items = [*value.items()] if isinstance(value, dict) else [*value]
        texts = [_value_text(item, namespace, seen) for item in items]
        if None in texts:  # data that holds an object: not hashed
            return None
        if isinstance(value, frozenset | set):
            texts.sort()  # its order differs from process to process
        return f"{type(value).__name__}({', '.join(map(str, texts))})"
    return None


def _function_code_text(function: types.FunctionType, seen: set[int]) -> str:
    """A function whose source cannot be read (made by ``exec`` of a string), by what
    it computes: its code object (:func:`_code_text`), its defaults, its closure's
    values, and the values of the globals it reads (:func:`_value_text`: the functions
    of its own namespace by the same rule, once each: ``seen``)."""
    if id(function) in seen:
        return f"<function {function.__qualname__}>"
    seen.add(id(function))
    namespace = function.__globals__
    parts = [_code_text(function.__code__)]
    for default in function.__defaults__ or ():
        parts.append(f"default {_value_text(default, namespace, seen)}")
    for name, default in sorted((function.__kwdefaults__ or {}).items()):
        parts.append(f"default {name} {_value_text(default, namespace, seen)}")
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            contents = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
        text = _value_text(contents, namespace, seen)
        parts.append(f"closure {name} {_stable_repr(contents) if text is None else text}")
    for name in sorted(_names_read(function.__code__)):
        if name in namespace:
            text = _value_text(namespace[name], namespace, seen)
            if text is not None:
                parts.append(f"global {name} = {text}")
    return "\n".join(parts)


def _function_text(function: types.FunctionType) -> str | None:
    """A function's source, where Python can read it (a file, a notebook's cell); else
    None."""
    import inspect

    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return None


def _member_sources(unit: type) -> list[str]:
    """What a class whose own source cannot be read is made of: each of its functions
    (and of its own bases') by its source, or by its code where the source cannot be
    read either (:func:`_function_code_text`), its other attributes and its dataclass
    fields by their repr."""
    parts = []
    for cls in unit.__mro__:
        if cls is object or _is_library_class(cls):
            continue  # ldpsim's bases are hashed as ldpsim's code, not as the unit's
        bases = ", ".join(f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__)
        parts.append(f"class {cls.__qualname__}({bases})")
        made = _DATACLASS_MADE if dataclasses.is_dataclass(cls) else frozenset()
        for name, value in vars(cls).items():
            functions = _functions_of(value)
            for function in functions:
                text = _function_text(function)
                if text is not None:
                    parts.append(text)
                elif name not in made:  # what a dataclass writes follows from its fields
                    parts.append(_function_code_text(function, set()))
            if not functions and (not name.startswith("__") or name == "__doc__"):
                parts.append(f"{name} = {_stable_repr(value)}")
        if dataclasses.is_dataclass(cls):
            parts.append(_stable_repr(vars(cls).get("__dataclass_params__")))
    if dataclasses.is_dataclass(unit):
        for f in dataclasses.fields(unit):
            factory = f.default_factory
            if factory is not dataclasses.MISSING and _functions_of(factory):
                text = _function_text(factory)  # type: ignore[arg-type]
                factory = _stable_repr(factory) if text is None else text
            default = _stable_repr(f.default)
            parts.append(f"field {f.name}: {f.type!r} = {default} / {_stable_repr(factory)}")
    return parts


def unit_source_sha256(unit: type) -> str:
    """SHA-256 of a unit class's source and of its compiled callbacks' sources.

    What a unit registered at run time is known by (it may have no file of its own: a
    notebook's cell, a string run by ``exec``). Its class's source, where ``inspect``
    can read it (a script, a module). Else (a class of a notebook: its module
    ``__main__`` has no file; a class made by ``type()`` or ``exec``) what the class is
    made of: each of its functions and of its own bases' (numba callbacks by their
    ``py_func``) by its source, which a notebook keeps; a function whose source cannot
    be read either (made by ``exec`` of a string) by its code object: its bytecode,
    constants, names, defaults and closure, nested functions and code objects
    recursively, and the plain values (numbers, strings) and functions of its namespace
    that it reads. The repr of the class's other attributes and of its dataclass fields'
    defaults are hashed too. An edited method, callback, default or constant then
    changes the hash, whatever the class's module.

    A hash of code objects is Python's bytecode: another Python version (3.11 to 3.12)
    gives another hash for the same text, which a store then refuses as a change of
    code; the source's hash does not change so. What the unit's functions import (a
    helper module of yours) is not hashed.
    """
    import hashlib
    import inspect

    try:
        parts = [inspect.getsource(unit)]
    except (OSError, TypeError):
        parts = _member_sources(unit)
    for attribute in ("sample_gradient", "privatize", "privatize_per_user"):
        function = getattr(getattr(unit, attribute, None), "py_func", None)
        if function is not None:
            text = _function_text(function)
            parts.append(_function_code_text(function, set()) if text is None else text)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def register(unit: type, source_sha256: str | None = None) -> Plugin:
    """Make ``unit`` available to sweeps in this process, as an installed plugin is.

    A unit defined in a notebook or script (a class like the built-in ones, see
    ``docs/extending.md``) is checked as an entry point's is; its name is its ``name``.
    Registering a unit of the same kind and name again replaces it (an edited class
    re-run in a notebook), and the grid points set up with the old one are forgotten.

    Parameters
    ----------
    unit : type
        A subclass of :class:`~ldpsim.tasks.models.base.Model`,
        :class:`~ldpsim.tasks.mechanisms.base.Mechanism` or
        :class:`~ldpsim.tasks.intervals.base.IntervalMethod`.
    source_sha256 : str, optional
        The hash of its source as the registering client read it (a Dask worker gets
        the client's and uses it as it is); computed here by default
        (:func:`unit_source_sha256`).

    Returns
    -------
    Plugin
        Its record (``distribution`` is :data:`REGISTERED_ORIGIN`).

    Raises
    ------
    TypeError
        ``unit`` is not a subclass of one of the three bases.
    ValueError
        It breaks a rule of its kind (one line saying which), or has the name of a
        built-in unit or of an installed plugin.
    """
    kind = unit_kind(unit)
    if kind is None:
        bases = ", ".join(f"{b.__module__}.{b.__qualname__}" for b in BASES.values())
        raise TypeError(f"The unit to register must be a subclass of {bases}. Got {unit!r}.")
    name = getattr(unit, "name", None)
    what = f"The {kind} {getattr(unit, '__qualname__', unit)!r}"
    if not isinstance(name, str) or not name:
        raise ValueError(f'{what} cannot be registered: it sets no name (name = "...").')
    installed = next((p for p in _installed() if p.kind == kind and p.name == name), None)
    if installed is not None:
        raise ValueError(
            f"{what} cannot be registered: {name!r} is the name of the installed {kind} "
            f"plugin from {installed.distribution}. Give it another name."
        )
    problem = _check(kind, name, unit, _reserved())
    if problem is not None:
        raise ValueError(f"{what} cannot be registered: it {problem}.")
    if source_sha256 is None:
        source_sha256 = unit_source_sha256(unit)
    plugin = Plugin(
        kind=kind,
        name=name,
        target=f"{unit.__module__}:{unit.__qualname__}",
        distribution=REGISTERED_ORIGIN,
        unit=unit,
        problem=None,
        source_sha256=source_sha256,
    )
    global _REGISTERED, _GENERATION
    with _REGISTERING:
        replaced = _REGISTERED[kind].get(name)
        _REGISTERED = {**_REGISTERED, kind: {**_REGISTERED[kind], name: plugin}}
        if replaced is not None and replaced.unit is not unit:
            _GENERATION += 1  # grid points set up with the replaced class: set up again
    return plugin


def generation() -> int:
    """How many times a unit registered at run time was replaced by another class of its
    kind and name in this process: what a grid point's set-up depends on besides its
    spec (:func:`ldpsim.tasks.grid_point.setup_of` keys its cache by it)."""
    return _GENERATION


def registered(kind: str | None = None) -> list[Plugin]:
    """The units registered at run time (of ``kind``, or of every kind)."""
    now = _REGISTERED  # one version of the registry, whatever registers meanwhile
    return [p for k, units in now.items() if kind in (None, k) for p in units.values()]


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
