"""Which code computed a store's replicates: the origin and source hash of every unit.

A store's ``units`` root attribute (JSON) is a list of *generations*: each maps every
unit the store uses (``"method:bb"``, ``"model:quantile"``, ...) to its origin, built-in
(``{"origin": "ldpsim", "version": ..., "source_sha256": ...}``), plugin
(``{"origin": "plugin", "distribution": ..., "version": ..., "source_sha256": ...,
"package_sha256": ...}``) or registered at run time (``{"origin": "registered", "class":
..., "version": None, "source_sha256": ...}``). The per-replicate variable
``code_version`` holds the index of the generation whose code computed the replicate (-1:
computed before ldpsim recorded it). A run whose units' code differs from the latest
generation (:func:`code_differs`) is refused, unless it accepts the change, which adds a
generation (:func:`plan_units`).

A plugin's ``package_sha256`` (the Python files of its package, :func:`package_sha256`)
came after ``source_sha256`` (its module's file): a store written before it has none,
and is compared by ``source_sha256`` alone until a run records it.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import inspect
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsim.pipeline.errors import InputError
from ldpsim.pipeline.sweep import Sweep

if TYPE_CHECKING:  # a run needs no xarray here
    import xarray as xr

    from ldpsim.tasks.spec import ReplicateSpec

#: Root attribute: the generations of unit origins (a JSON list).
UNITS_ATTR = "units"
#: Per-replicate variable: the index into :data:`UNITS_ATTR` of the code that computed it.
CODE_VERSION = "code_version"
#: ``code_version`` of a replicate computed before the store recorded its units.
UNRECORDED = -1
#: How a message names each kind of unit.
KIND_WORDS = {"model": "model", "mechanism": "mechanism", "method": "interval method"}
#: The keys of a unit's origin that identify its code, and how a message names each.
CODE_KEYS = {"source_sha256": "source", "package_sha256": "package"}


def _source_sha256(cls: type) -> str | None:
    """SHA-256 (hex) of the file holding ``cls``'s module, followed by the files of the
    modules its ``source_modules`` names (a built-in unit's compiled helpers: each
    name, then the file, in that order); None where there is none. A class without
    ``source_modules`` hashes its module's file alone, as ldpsim always has."""
    try:
        file = inspect.getsourcefile(cls)
        if not file:
            return None
        digest = hashlib.sha256(Path(file).read_bytes())
        for name in getattr(cls, "source_modules", ()):
            helper = inspect.getsourcefile(importlib.import_module(name))
            digest.update(b"\0" + name.encode() + b"\0" + Path(str(helper)).read_bytes())
        return digest.hexdigest()
    except (TypeError, OSError, ImportError):  # made in an interpreter, a file gone
        return None


def _package_root(module: str) -> Path | None:
    """The folder of the package that holds ``module`` (its first ancestor with a file:
    a namespace package has none), or the module's own file where it has no package."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        file = getattr(sys.modules.get(".".join(parts[:end])), "__file__", None)
        if file:
            path = Path(file)
            return path.parent if path.name == "__init__.py" else path
    return None


#: How the modules that an editable install adds start (setuptools', and the editables
#: package's of hatchling): they name the checkout's folder, not the plugin's code.
EDITABLE_FINDERS = ("__editable__", "_editable_impl_")


def package_files(cls: type, distribution_name: str | None) -> dict[str, str]:
    """The Python files of the package of the plugin class ``cls``: their paths, by
    their names in it.

    Every ``.py`` file under the folder of ``cls``'s top-level package (the module's
    own file where it is a top-level module): what an editable install runs from. And
    every ``.py`` file that the installed distribution ``distribution_name`` lists in
    its ``RECORD`` (its other top-level modules and packages, as pip installed them),
    but the finders of an editable install (:data:`EDITABLE_FINDERS`).
    The names are relative to the folder that holds the package, as the distribution
    lists them, so that two installations of the same files name them alike.
    """
    found: dict[str, str] = {}  # path -> name; a file of both the folder and the list once
    root = _package_root(cls.__module__)
    if root is not None:
        real = os.path.realpath(root)
        start = len(os.path.join(os.path.dirname(real), ""))  # names start in the parent
        if os.path.isdir(real):
            for folder, subfolders, names in os.walk(real):
                subfolders[:] = [d for d in subfolders if d != "__pycache__"]
                for name in names:
                    if name.endswith(".py"):
                        path = os.path.join(folder, name)
                        found[path] = path[start:].replace(os.sep, "/")
        else:
            found[real] = os.path.basename(real)
    record = None
    if distribution_name:
        try:
            dist = distribution(distribution_name)
            record = dist.read_text("RECORD")
        except PackageNotFoundError:  # declared by a package no longer installed
            pass
    if record:
        # Read as text: importlib's own list of the files costs tens of milliseconds for a
        # large distribution, this a few.
        base = os.path.realpath(dist.locate_file(""))
        for row in csv.reader(record.splitlines()):
            if row and row[0].endswith(".py") and not row[0].startswith(EDITABLE_FINDERS):
                path = os.path.normpath(os.path.join(base, row[0]))
                found.setdefault(path, row[0])
    return {name: path for path, name in found.items()}


def package_sha256(cls: type, distribution_name: str | None) -> str | None:
    """SHA-256 (hex) of the Python files of the plugin class ``cls``'s package
    (:func:`package_files`, each by its name and content); None where there are none.

    A plugin's own module is in its ``source_sha256``; this hash covers the modules it
    imports from its own package and distribution too (a helper module edited), not
    those of other distributions.
    """
    digest = hashlib.sha256()
    files = package_files(cls, distribution_name)
    for name in sorted(files):
        try:
            with open(files[name], "rb") as file:
                data = file.read()
        except OSError:  # listed, but not there (a file removed by hand): none
            continue
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest() if files else None


def unit_origin(cls: type, package_hashes: dict[Any, str | None] | None = None) -> dict[str, Any]:
    """Where the unit class ``cls`` comes from, and the hashes of its code.

    Parameters
    ----------
    cls : type
        A model, mechanism or interval method class (a registry's value).
    package_hashes : dict, optional
        The package hashes read so far, by package and distribution, kept and used
        here: the units of one package hash its files once (:func:`sweep_units`).

    Returns
    -------
    dict
        ``{"origin": "ldpsim", "version": ..., "source_sha256": ...}`` for a built-in
        unit; ``{"origin": "plugin", "distribution": ..., "version": ...,
        "source_sha256": ..., "package_sha256": ...}`` for a plugin (distribution and
        version None where no installed package declares it; :func:`package_sha256`);
        ``{"origin": "registered", "class": ..., "version": None, "source_sha256":
        ...}`` for a unit registered at run time.
    """
    from ldpsim.tasks.plugins import REGISTERED_ORIGIN, plugins

    record = next((p for p in plugins() if p.unit is cls), None)
    if record is not None and record.distribution == REGISTERED_ORIGIN:
        return {
            "origin": "registered",
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "version": None,
            "source_sha256": record.source_sha256,
        }
    sha = _source_sha256(cls)
    if cls.__module__ == "ldpsim" or cls.__module__.startswith("ldpsim."):
        try:
            ours = version("ldpsim")
        except PackageNotFoundError:
            ours = None
        return {"origin": "ldpsim", "version": ours, "source_sha256": sha}
    declared = record.distribution if record is not None else None
    name, _, release = (declared or "").rpartition(" ")
    package = (_package_root(cls.__module__), name)
    hashes = {} if package_hashes is None else package_hashes
    if package not in hashes:
        hashes[package] = package_sha256(cls, name or None)
    return {
        "origin": "plugin",
        "distribution": name or None,
        "version": release or None,
        "source_sha256": sha,
        "package_sha256": hashes[package],
    }


def spec_units(spec: ReplicateSpec) -> dict[str, type]:
    """The unit classes of one normalized grid point, keyed ``"kind:name"``."""
    classes = {
        f"model:{spec.model.name}": type(spec.model),
        f"mechanism:{spec.mechanism.name}": type(spec.mechanism),
    }
    classes.update({f"method:{method.name}": type(method) for method in spec.methods.values()})
    return classes


def sweep_units(sweep: Sweep) -> dict[str, dict[str, Any]]:
    """The origin of every unit ``sweep`` uses, keyed ``"kind:name"`` (sorted)."""
    classes: dict[str, type] = {}
    for point in sweep.points():
        classes.update(spec_units(point.normalized))
    package_hashes: dict[Any, str | None] = {}  # the units of one package: read once
    return {key: unit_origin(classes[key], package_hashes) for key in sorted(classes)}


def code_of(origin: dict[str, Any]) -> dict[str, str]:
    """The hashes of a unit's origin that identify its code (:data:`CODE_KEYS`), those
    it has."""
    return {key: origin[key] for key in CODE_KEYS if origin.get(key)}


def code_differs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two origins of a unit (or their :func:`code_of`) name other code: a hash
    of :data:`CODE_KEYS` that both know differs (one that only one knows is not compared:
    a store written before ldpsim recorded a plugin's package hash)."""
    return any(old.get(key) and new.get(key) and old[key] != new[key] for key in CODE_KEYS)


def task_hashes(units: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """What a task carries of the units' code as the run read it (:func:`sweep_units`),
    which its worker checks (:func:`check_running_units`)."""
    return {key: code_of(origin) for key, origin in units.items()}


#: The code hashes of each unit class as this process first read them. A worker runs
#: the code it imported: a file that changed since is not what it computes with.
_FIRST_READ: dict[type, dict[str, str]] = {}


def running_code(cls: type) -> dict[str, str]:
    """The hashes of ``cls``'s code (:func:`code_of` of its :func:`unit_origin`) as
    this process first read them (then kept); for a unit registered at run time, the
    hash its registration carries."""
    from ldpsim.tasks.plugins import REGISTERED_ORIGIN, registered

    for record in registered():
        if record.unit is cls and record.distribution == REGISTERED_ORIGIN:
            return code_of({"source_sha256": record.source_sha256})
    if cls not in _FIRST_READ:
        _FIRST_READ[cls] = code_of(unit_origin(cls))
    return _FIRST_READ[cls]


def _hashes_text(code: dict[str, Any]) -> str:
    """``source 1a2b3c4d, package 5e6f7a8b``: the hashes of :data:`CODE_KEYS` it has."""
    shown = [f"{word} {code[key][:8]}" for key, word in CODE_KEYS.items() if code.get(key)]
    return ", ".join(shown) or "source unknown"


def check_running_units(
    spec: ReplicateSpec, expected: dict[str, dict[str, str] | str | None]
) -> None:
    """Refuse to compute with a unit whose code in this process is not the store's.

    Called by a worker for each grid point of a task. ``expected`` holds the code
    hashes of every unit as the client read them (:func:`task_hashes`; a bare source
    hash is read as ``{"source_sha256": ...}``), which the store records; a worker
    that imported a unit before its files changed (a cluster kept up across an edit)
    would compute with the old code under the new code's version.

    Raises
    ------
    RuntimeError
        Naming the unit and both hashes, and the remedy (restart the workers); the
        task's replicates are then recorded as failed, and none is stored as done.
    """
    for key, cls in spec_units(spec).items():
        want = expected.get(key) or {}
        want = {"source_sha256": want} if isinstance(want, str) else want
        have = running_code(cls)
        if code_differs(want, have):
            kind, _, name = key.partition(":")
            raise RuntimeError(
                f"This worker runs another copy of the {KIND_WORDS.get(kind, kind)} "
                f"{name!r} ({_hashes_text(have)}) than the client read "
                f"({_hashes_text(want)}): "
                "it imported the unit before its files changed, or it has another "
                "installation of it. Restart the workers (client.restart(), or a new "
                "cluster), or install the same code on them, and run again."
            )


def _is_generation(generation: object) -> bool:
    """Whether ``generation`` maps units to origins (objects) whose code hashes
    (:data:`CODE_KEYS`) are text or null: what every reader of the origins reads."""
    return isinstance(generation, dict) and all(
        isinstance(origin, dict)
        and all(isinstance(origin.get(key), (str, type(None))) for key in CODE_KEYS)
        for origin in generation.values()
    )


def read_generations(attrs: dict[str, Any]) -> list[dict[str, dict[str, Any]]] | None:
    """The generations recorded in a store's root ``attrs``; None for a store without."""
    raw = attrs.get(UNITS_ATTR)
    if raw is None:
        return None
    try:
        out = json.loads(raw)
        if not isinstance(out, list) or not all(_is_generation(g) for g in out) or not out:
            raise ValueError
    except (TypeError, ValueError, RecursionError):
        raise InputError(
            f"The store's {UNITS_ATTR!r} attribute {raw!r} is not a JSON list of unit "
            "origins; refusing to change it."
        ) from None
    return out


def registered_units(attrs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The units a store's replicates were computed with that were registered at run
    time (:func:`ldpsim.pipeline.api.register`), ``"kind:name"`` -> origin, as the
    store's latest record of each says ({} for a store without such units, or without
    a readable record of its units)."""
    try:
        generations = read_generations(dict(attrs)) or []
    except InputError:  # the checks of a run say so; nothing to say here
        return {}
    out: dict[str, dict[str, Any]] = {}
    for generation in generations:
        for key, origin in generation.items():
            if isinstance(origin, dict) and origin.get("origin") == "registered":
                out[key] = origin
            else:
                out.pop(key, None)
    return out


def unregistered_units(attrs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Those of :func:`registered_units` that this process has not registered (a new
    ``ldpsim`` process has none): only the user's code defines them."""
    from ldpsim.tasks import plugins

    return {
        key: origin
        for key, origin in registered_units(attrs).items()
        if key.partition(":")[2] not in plugins.registry(key.partition(":")[0])
    }


def register_calls(units: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """(the units in words, the calls that register them again)."""
    words, calls = [], []
    for key, origin in units.items():
        kind, _, name = key.partition(":")
        cls = str(origin.get("class") or name)
        words.append(f"the {KIND_WORDS.get(kind, kind)} {name!r} (class {cls})")
        calls.append(f"ldpsim.pipeline.api.register({cls.rpartition('.')[2]})")
    return " and ".join(words), "; ".join(calls)


def describe(origin: dict[str, Any]) -> str:
    """``plugin mypkg 0.1, source 1a2b3c4d, package 5e6f7a8b`` (the package hash where
    the origin has it) or ``ldpsim 0.2, source 9f8e7d6c``."""
    hashes = _hashes_text(origin)
    if origin.get("origin") == "registered":
        return f"registered at run time ({origin.get('class')}), {hashes}"
    if origin.get("origin") == "plugin":
        where = f"plugin {origin.get('distribution') or '(no package)'} {origin.get('version')}"
    else:
        where = f"ldpsim {origin.get('version')}"
    return f"{where}, {hashes}"


@dataclass(frozen=True)
class UnitsPlan:
    """What a run writes about its units: the attribute, its code version, the changes."""

    #: The new ``units`` attribute (JSON).
    attr: str
    #: Whether it differs from the store's (a commit is needed).
    write: bool
    #: The generation index of the replicates this run computes.
    code_version: int
    #: ``{"unit": key, "old": origin, "new": origin, "code_version": index}`` per
    #: accepted change.
    changes: list[dict[str, Any]] = field(default_factory=list)


def changed_units(
    old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The units of both ``old`` and ``new`` whose known code hashes differ
    (:func:`code_differs`)."""
    return [
        {"unit": key, "old": old[key], "new": new[key]}
        for key in sorted(set(old) & set(new))
        if code_differs(old[key], new[key])
    ]


def plan_units(
    path: str | Path,
    attrs: dict[str, Any] | None,
    sweep: Sweep,
    accept_code_change: bool,
    current: dict[str, dict[str, Any]] | None = None,
) -> UnitsPlan:
    """Check the units of ``sweep`` against the store's, and plan its ``units`` attribute.

    Units new to the store join its latest generation; a store without the attribute
    (an older ldpsim) gets its first generation, unrefused.

    Parameters
    ----------
    path : str or pathlib.Path
        The store (for the message).
    attrs : dict or None
        The store's root attributes; None for a new store.
    sweep : Sweep
        The sweep the run computes.
    accept_code_change : bool
        Record a changed unit as a new generation instead of refusing the run.
    current : dict, optional
        :func:`sweep_units` of ``sweep`` as the run read it once (read here if None):
        the refusal, the store's record and the workers' check then agree.

    Raises
    ------
    InputError
        A unit's source changed and ``accept_code_change`` is false: one line naming
        each such unit with both origins.
    """
    current = sweep_units(sweep) if current is None else current
    generations = None if attrs is None else read_generations(attrs)
    if generations is None:
        attr = json.dumps([current], sort_keys=True)
        return UnitsPlan(attr=attr, write=True, code_version=0)
    latest = generations[-1]
    changes = changed_units(latest, current)
    if changes and not accept_code_change:
        parts = [
            f"the {KIND_WORDS.get(c['unit'].partition(':')[0], 'unit')} "
            f"{c['unit'].partition(':')[2]!r} changed since the store {str(path)!r} was "
            f"written ({describe(c['old'])} -> {describe(c['new'])})"
            for c in changes
        ]
        text = "; ".join(parts)
        raise InputError(
            f"{text[0].upper()}{text[1:]}; its new replicates would not be comparable. Use "
            "another --store path, or run with --accept-code-change to record the change."
        )
    merged = {**latest, **current}
    if changes:
        generations = [*generations, merged]
    else:
        generations = [*generations[:-1], merged]
    attr, index = json.dumps(generations, sort_keys=True), len(generations) - 1
    return UnitsPlan(
        attr=attr,
        write=attr != attrs.get(UNITS_ATTR),
        code_version=index,
        changes=[{**change, "code_version": index} for change in changes],
    )


def _cell_units(
    sweep: dict[str, Any], values: dict[str, Any], label: str, known: set[str]
) -> list[str]:
    """The units (``"kind:name"``) a summary cell uses: its grid point's model and
    mechanism (from the sweep's spec, case and grid values; every mechanism of the store
    where the spec leaves it to the model's default) and its method's kind."""
    spec = dict(sweep.get("spec", {}))
    if "case" in values:
        spec.update(sweep.get("cases", {}).get(str(values["case"]), {}))
    spec.update({axis: value for axis, value in values.items() if axis != "case"})
    params = sweep.get("methods", {}).get(label) or {}
    units = [f"model:{spec.get('model')}", f"method:{params.get('method', label)}"]
    if spec.get("mechanism") is not None:
        units.append(f"mechanism:{spec['mechanism']}")
    else:
        units += sorted(key for key in known if key.startswith("mechanism:"))
    return units


def code_versions(ds: xr.Dataset) -> xr.DataArray | None:
    """Per grid point and method, how many versions of its own code computed its done
    replicates.

    A replicate's ``code_version`` is the store's generation when it was computed; two
    generations count as one version for a cell whose units (its model, mechanism and
    method, :func:`_cell_units`) have the same code hashes in both (:data:`CODE_KEYS`;
    a unit's package hash only where every generation of the cell records it): a
    change of another unit does not make the cell mixed. A replicate computed before
    the store recorded its units counts for none; None for a store without the variable.
    """
    import xarray as xr

    if CODE_VERSION not in ds:
        return None
    try:
        generations = read_generations(ds.attrs) or []
    except InputError:  # the checks of a run say so; a reader counts what it can
        generations = []
    sweep = json.loads(ds.attrs.get("sweep") or "{}")
    known = {key for generation in generations for key in generation}
    done_array = ds["done"].transpose(..., "rep")  # 'rep' last, however the caller holds it
    grid = [str(dim) for dim in done_array.dims if dim != "rep"]
    methods = [str(label) for label in ds["method"].values]
    done = np.asarray(done_array.values, dtype=bool)
    version = np.asarray(ds[CODE_VERSION].transpose(*done_array.dims).values)
    labels = {dim: ds[dim].values.tolist() for dim in grid}
    out = np.zeros((*done.shape[:-1], len(methods)), dtype=np.int64)
    for index in np.ndindex(*done.shape[:-1]):
        present = sorted(
            v for v in set(version[index][done[index]].tolist()) if 0 <= v < len(generations)
        )
        if len(present) < 2:
            out[index] = len(present)
            continue
        # tolist(): Python values of any axis (a string axis holds str, without .item()).
        values = {dim: labels[dim][i] for dim, i in zip(grid, index, strict=True)}
        for m, label in enumerate(methods):
            units = _cell_units(sweep, values, label, known)
            origins = [[generations[v].get(unit, {}) for unit in units] for v in present]
            # A package hash counts where every generation of the cell records it: one
            # recorded from some run on (a store older than it) is no change of the code.
            packaged = [
                all(row[u].get("package_sha256") for row in origins) for u in range(len(units))
            ]
            codes = {
                tuple(
                    (origin.get("source_sha256"), packaged[u] and origin["package_sha256"])
                    for u, origin in enumerate(row)
                )
                for row in origins
            }
            out[(*index, m)] = len(codes)
    coords = {dim: ds[dim] for dim in grid}
    return xr.DataArray(out, dims=(*grid, "method"), coords={**coords, "method": ds["method"]})
