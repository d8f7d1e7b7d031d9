"""Compiled kernels on disk, keyed by everything their machine code depends on.

numba caches a compiled function next to its source file, and it checks only that
file: when a function the cached one calls changes (a model's callback, an intrinsic
of :mod:`ldpsim.tasks.streams.rng`), numba runs the stale machine code. And it cannot cache a
function created at run time, like a loop with one model's callbacks compiled in.

:func:`compile_template` therefore writes each such function into a module file of its
own, generated from a template module whose ``# <bindings>`` block it fills in, and
compiles it with numba's ``cache=True``. The file is named by a hash of

- the generated source itself (the template and the bindings);
- the source file of every module whose compiled functions the code reaches, found by
  walking the globals and closures of the template's function and of every bound
  callback, transitively (numba dispatchers, intrinsics and plain functions alike),
  and the value of every global constant they read (numba freezes those into the
  machine code; the ziggurat tables of :mod:`ldpsim.tasks.streams.ziggurat` are such
  constants, read from a data file);
- the versions of Python, numba, llvmlite and numpy (their code, and that of the
  standard library, is not walked), the host CPU and the numba settings that change
  the generated code (the GPU kernel binds numba-cuda's version and settings as
  constants of its own, :mod:`ldpsim.tasks.gpu.kernel`).

Any change to any of these gives a new file name, so numba never finds an old entry for
changed code: a new module is generated and compiled once, and later processes load its
machine code instead of compiling it (about 0.2 s instead of 2 to 10 s, most of it
numba's own set-up). Files of superseded code stay behind; the folder can be deleted at any
time.

Writes are atomic (a temporary file renamed into place; numba writes its own index and
data files the same way), so processes that compile the same entry at once all
succeed. :func:`ldpsim.tasks.compile_lock.compile_signature` also makes them take
turns: a cluster's workers that start on the same new kernel together compile it once,
the others waiting for its machine code instead of compiling it again beside it (the CPU
kernels; a node's GPU workers, one per GPU, each compile a new GPU kernel). The
folder (:func:`ldpsim.tasks.compile_lock.cache_folder`) and the locks live in
:mod:`ldpsim.tasks.compile_lock`, which the package's own compiled functions use too.

Where the folder cannot be written, or a callback cannot be imported by name from
another process (defined inside a function or in ``__main__``), the same source is
compiled in memory, as every process did before this cache existed.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import importlib
import importlib.util
import json
import linecache
import logging
import os
import sys
import sysconfig
import threading
import types
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding
import numba
import numpy as np
from numba.core import config as numba_config

from ldpsim.tasks.compile_lock import cache_folder
from ldpsim.tasks.compiled import NUMBA_CODEGEN_SETTINGS, settings_of, warn_in_memory

#: The subfolder of the cache folder that holds the generated kernel modules.
KERNEL_SUBFOLDER = "kernels"
#: Version of the generated modules' format; part of every key.
GENERATED_FORMAT = 1
#: The lines that delimit a template's block of placeholder bindings.
BINDINGS_BEGIN = "# <bindings>"
BINDINGS_END = "# </bindings>"
#: The name a template's function reads to decide whether numba caches it on disk.
CACHE_FLAG = "cache_to_disk"
#: Packages identified by their version instead of by walking their code.
VERSIONED_PACKAGES = frozenset({"numba", "llvmlite", "numpy"})

_log = logging.getLogger(__name__)
_import_lock = threading.Lock()
_warned_templates: set[str] = set()


#: Each template's source as this process first read it (:func:`pin_template`).
_template_sources: dict[str, str] = {}


def pin_template(template: types.ModuleType) -> str:
    """The source text of a template module, read once per process and kept.

    The module that binds a template (``sgd.py``, ``users.py``) pins it when it is
    imported, so that a worker compiles the template it started with, consistent with
    the bindings it imported then, even if the file is edited while it runs (an
    editable install during a long sweep). :func:`compile_template` warns once when the
    file on disk no longer matches.

    Parameters
    ----------
    template : module
        A template module (see :func:`compile_template`).

    Returns
    -------
    str
        Its source as first read.
    """
    name = template.__name__
    if name not in _template_sources:
        _template_sources[name] = Path(template.__file__).read_text(encoding="utf-8")
    return _template_sources[name]


def compile_template(
    template: types.ModuleType, function: str, bindings: Mapping[str, object]
) -> Any:
    """The numba dispatcher of ``template.function`` with the placeholders bound.

    Parameters
    ----------
    template : module
        A module whose source has one block of placeholder assignments between the
        lines :data:`BINDINGS_BEGIN` and :data:`BINDINGS_END`, among them
        ``cache_to_disk = False``, and whose ``function`` is decorated with
        ``njit(..., cache=cache_to_disk)`` (or numba-cuda's ``cuda.jit``: the GPU
        kernel, :mod:`ldpsim.tasks.gpu.kernel_loop`). Its own ``function`` is never
        compiled.
    function : str
        Name of the compiled function in ``template``.
    bindings : mapping of str to object
        Values for the other placeholders: Python ints, floats or bools, or compiled
        numba functions (dispatchers) that the function calls.

    Returns
    -------
    numba dispatcher
        Compiled on first call, or loaded from the disk cache of an earlier process.

    Notes
    -----
    The source is the same whether the function is cached on disk or compiled in
    memory, so both give the same machine code; see the module docstring for the
    key and the fallback.
    """
    text = pin_template(template)
    if Path(template.__file__).read_text(encoding="utf-8") != text:
        _warn_edited(template)
    callables = {name: value for name, value in bindings.items() if not _is_constant(value)}
    references = {name: _import_reference(value) for name, value in callables.items()}
    fingerprint = code_fingerprint([getattr(template, function), *callables.values()])
    if fingerprint is not None and None not in references.values():
        block = _binding_lines(bindings, references, cache_to_disk=True)
        source = _fill_bindings(template.__name__, text, block)
        key = _hash_json([GENERATED_FORMAT, source, fingerprint, environment_fingerprint()])
        name = f"{Path(template.__file__).stem}_{key[:32]}"
        where = "the cache folder"
        try:
            folder = cache_folder() / KERNEL_SUBFOLDER  # OSError: no home folder to hold it
            where = str(folder)
            with _import_lock:  # a thread must not see another's half-run module
                module = _import_generated(folder, name, source)
            return getattr(module, function)
        except (OSError, ImportError, RuntimeError) as exc:
            # OSError: the folder cannot be written; RuntimeError: numba found no
            # writable place for its cache files ("no locator available").
            warn_in_memory("compiled kernels", where, f"{type(exc).__name__}: {exc}")
    else:
        _log.debug("%s: a callback cannot be cached on disk; compiling in memory", function)
    block = _binding_lines(bindings, {}, cache_to_disk=False)
    return getattr(
        _exec_in_memory(_fill_bindings(template.__name__, text, block), callables), function
    )


def code_fingerprint(roots: Iterable[object]) -> dict[str, object] | None:
    """What the compiled code of ``roots`` depends on, as a JSON-able record.

    Walks every compiled function reachable from ``roots`` (numba dispatchers through
    ``py_func``, intrinsics and other wrappers through ``__wrapped__``) by the global
    names and closure cells of its code, code nested in it included.

    Returns
    -------
    dict or None
        ``modules``: a SHA-256 of the source file of each module reached (by module
        name); ``constants``: a hash of every global constant read, by module and name;
        ``code``: a hash of each reached function's code as this process loaded it
        (:func:`_code_digest`).
        None if reachable code has no source file to hash (it cannot be cached).
    """
    walker = _DependencyWalker()
    for root in roots:
        walker.visit(root)
    if walker.unhashable:
        _log.debug("no source file for %s", sorted(walker.unhashable))
        return None
    return {
        "modules": dict(sorted(walker.modules.items())),
        "constants": sorted(walker.constants),
        "code": dict(sorted(walker.codes.items())),
    }


def environment_fingerprint() -> dict[str, object]:
    """Interpreter, library versions, host CPU and numba code-generation settings."""
    try:
        features = llvmlite.binding.get_host_cpu_features().flatten()
    except RuntimeError:  # LLVM cannot tell on this host; numba then uses none either
        features = ""
    return {
        "python": sys.version,
        "implementation": sys.implementation.cache_tag,
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "numpy": np.__version__,
        "triple": llvmlite.binding.get_process_triple(),
        "cpu": llvmlite.binding.get_host_cpu_name(),
        "cpu_features": features,
        "numba_settings": settings_of(numba_config, NUMBA_CODEGEN_SETTINGS),
    }


def import_by_name(module: str, qualname: str) -> object:
    """The object ``qualname`` (dotted for class attributes) of the module ``module``."""
    value: object = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


class _DependencyWalker:
    """Collects the modules and constants reachable from compiled functions."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.constants: set[tuple[str, str, str]] = set()
        self.codes: dict[str, str] = {}
        self.unhashable: set[str] = set()
        self._seen: set[int] = set()
        self._attributes_read: set[tuple[str, str]] = set()
        self._keep: list[object] = []  # keeps visited objects alive, so ids stay unique

    def visit(self, obj: object) -> None:
        if id(obj) in self._seen:
            return
        self._seen.add(id(obj))
        self._keep.append(obj)
        py_func = getattr(obj, "py_func", None)  # a numba dispatcher
        if isinstance(py_func, types.FunctionType):
            self.visit(py_func)
            self._add_options(py_func, getattr(obj, "targetoptions", None))
        elif isinstance(obj, types.FunctionType):
            self._visit_function(obj)
        elif isinstance(getattr(obj, "__wrapped__", None), types.FunctionType):
            self.visit(obj.__wrapped__)  # a numba intrinsic (functools.update_wrapper)
        elif isinstance(obj, types.ModuleType):
            self._add_module(obj.__name__)
        elif isinstance(obj, type):
            self._add_module(obj.__module__)
            self._add_class_constants(obj)
        elif isinstance(obj, tuple | list):
            for item in obj:
                self.visit(item)
        else:  # an instance: its class's module holds its code
            self._add_module(type(obj).__module__)

    def _visit_function(self, func: types.FunctionType) -> None:
        module = func.__module__ or ""
        if _is_versioned(module):
            return
        if module not in self.modules and not self._add_source(
            module or func.__qualname__, func.__code__.co_filename
        ):
            return
        # The code as loaded, beside its file's hash: a process that imported a module
        # before its file was edited compiles the old code, under a key no fresh process
        # (which loads the new code) computes.
        self.codes[f"{module}:{func.__qualname__}"] = _code_digest(func.__code__)
        names = _global_names(func.__code__)
        for name in sorted(names):
            if name not in func.__globals__:
                continue  # a builtin, or the name of an attribute
            value = func.__globals__[name]
            if isinstance(value, types.ModuleType) and not _is_versioned(value.__name__):
                self._visit_module_attributes(value, names)
            else:
                self._visit_value(module, name, value)
        for index, cell in enumerate(func.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            self._visit_value(module, f"{func.__qualname__}:cell{index}", contents)
        for index, default in enumerate(func.__defaults__ or ()):
            self._visit_value(module, f"{func.__qualname__}:default{index}", default)

    def _visit_module_attributes(self, module: types.ModuleType, names: set[str]) -> None:
        """A module read by a function, and those of its attributes that the function's
        code names (``module.attribute``, and ``module.submodule.attribute`` on)."""
        self._add_module(module.__name__)
        for attribute in sorted(names & set(dir(module))):
            if (module.__name__, attribute) in self._attributes_read:
                continue  # each attribute once: other functions may read others
            self._attributes_read.add((module.__name__, attribute))
            value = getattr(module, attribute)
            if isinstance(value, types.ModuleType) and not _is_versioned(value.__name__):
                self._visit_module_attributes(value, names)
            else:
                self._visit_value(module.__name__, attribute, value)

    def _visit_value(self, module: str, name: str, value: object) -> None:
        if _is_constant(value):
            self.constants.add((module, name, _hash_constant(value)))
            return
        identity = _versioned_identity(value)
        if identity is not None:  # numpy's, numba's or Python's own: named, not walked
            self.constants.add((module, name, _hash_json(["versioned", identity])))
        elif isinstance(value, tuple | list):  # its numbers keyed by place, its code walked
            for index, item in enumerate(value):
                self._visit_value(module, f"{name}[{index}]", item)
            return
        self.visit(value)

    def _add_options(self, func: types.FunctionType, options: object) -> None:
        """A dispatcher's compile options (``fastmath``, ``error_model``, ...): the same
        code compiles to other machine code under others."""
        if isinstance(options, Mapping):
            text = _hash_json({str(k): _option_text(v) for k, v in options.items()})
            self.constants.add((func.__module__ or "", f"{func.__qualname__}:options", text))

    def _add_class_constants(self, cls: type) -> None:
        """The constant attributes of a class the code reads (an enumeration's members,
        a class's numbers), as this process loaded them: an edit of its module after the
        import changes the file's hash but not what this process compiles."""
        if _is_versioned(cls.__module__):
            return
        for name, value in sorted(vars(cls).items()):
            if isinstance(value, enum.Enum):
                value = value.value
            if not name.startswith("__") and _is_constant(value):
                self.constants.add(
                    (cls.__module__, f"{cls.__qualname__}.{name}", _hash_constant(value))
                )

    def _add_module(self, name: str) -> None:
        if _is_versioned(name) or name in self.modules:
            return
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path is None:  # built in (math, sys): covered by the Python version
            return
        self._add_source(name, path)

    def _add_source(self, name: str, path: str) -> bool:
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            self.unhashable.add(name)
            return False
        self.modules[name] = digest
        return True


def _is_versioned(module: str) -> bool:
    """Whether ``module`` is identified by a version, not by its code: numpy, numba,
    llvmlite, or the standard library (a module of the user's that takes a standard
    library name, a ``statistics.py`` first on the path, is the user's)."""
    top = module.partition(".")[0]
    if top in VERSIONED_PACKAGES:
        return True
    if top not in sys.stdlib_module_names:
        return False
    path = getattr(sys.modules.get(top), "__file__", None)
    return path is None or _in_standard_library(path)


def _in_standard_library(path: str) -> bool:
    return Path(path).resolve().is_relative_to(_standard_library())


@functools.cache
def _standard_library() -> Path:
    return Path(sysconfig.get_paths()["stdlib"]).resolve()


def _versioned_identity(value: object) -> str | None:
    """Where a function, class, ufunc or dtype of numpy, numba, llvmlite or the standard
    library lives (``"numpy.tanh"``): a key names such a value, whose code the versions
    cover, so that a global bound to another one (chosen by a setting) is another key.
    None for anything else."""
    if isinstance(value, np.ufunc):
        return f"numpy.ufunc.{value.__name__}"
    if isinstance(value, np.dtype):
        return f"numpy.dtype.{value.descr!r}"
    function = getattr(value, "py_func", value)
    owner = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if isinstance(owner, str) and isinstance(name, str) and _is_versioned(owner):
        return f"{owner}.{name}"
    return None


def _is_constant(value: object) -> bool:
    if isinstance(value, tuple):
        return all(_is_constant(item) for item in value)
    return (
        value is None
        or isinstance(value, bool | int | float | complex | str | bytes)
        or (isinstance(value, np.ndarray | np.generic))
    )


def _option_text(value: object) -> object:
    """A compile option as the same text in every process: a set sorted, a function (an
    ``inline`` cost model) by its name, not by its address."""
    if isinstance(value, set | frozenset):
        return sorted(map(repr, value))
    if callable(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    return repr(value)


def _hash_constant(value: object) -> str:
    if isinstance(value, tuple):
        return _hash_json(["tuple", [_hash_constant(item) for item in value]])
    if isinstance(value, np.ndarray):
        data = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return _hash_json(["ndarray", repr(value.dtype.descr), list(value.shape), data])
    return _hash_json([type(value).__qualname__, repr(value)])


def _code_digest(code: types.CodeType) -> str:
    """SHA-256 of a code object's bytecode, names and constants, nested code included.

    Stable across processes for the same source and Python (unlike ``marshal``, whose
    output depends on reference counts); frozenset constants are sorted, since their
    order follows the per-process string hash.
    """
    parts: list[bytes] = []

    def add(item: object) -> None:
        if isinstance(item, types.CodeType):
            parts.extend([item.co_code, repr((item.co_names, item.co_varnames)).encode()])
            for const in item.co_consts:
                add(const)
        elif isinstance(item, frozenset):
            parts.append(repr(sorted(map(repr, item))).encode())
        else:
            parts.append(repr(item).encode())

    add(code)
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _global_names(constant)
    return names


def _import_reference(value: object) -> tuple[str, str] | None:
    """(module, qualname) by which another process imports ``value``, or None."""
    function = getattr(value, "py_func", value)
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<locals>" in qualname:
        return None
    try:
        found = import_by_name(module, qualname)
    except (ImportError, AttributeError):
        return None
    return (module, qualname) if found is value else None


def _binding_lines(
    bindings: Mapping[str, object],
    references: Mapping[str, tuple[str, str] | None],
    *,
    cache_to_disk: bool,
) -> list[str]:
    lines = []
    for name, value in bindings.items():
        if _is_constant(value):
            lines.append(f"{name} = {value!r}")
        elif name in references:
            module, qualname = references[name]
            lines.append(f"{name} = import_by_name({module!r}, {qualname!r})")
        else:
            lines.append(f"# {name}: bound in memory by ldpsim.tasks.kernel.cache")
    if references:
        lines.insert(0, "from ldpsim.tasks.kernel.cache import import_by_name")
    lines.append(f"{CACHE_FLAG} = {cache_to_disk!r}")
    return lines


def _fill_bindings(template: str, text: str, block: list[str]) -> str:
    lines = text.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith(BINDINGS_BEGIN))
    end = lines.index(BINDINGS_END, begin)
    header = [
        f"# Generated by ldpsim.tasks.kernel.cache from {template}; do not edit. The file",
        "# name is a hash of everything the compiled code depends on.",
    ]
    return "\n".join([*header, *lines[: begin + 1], *block, *lines[end:]]) + "\n"


def _import_generated(folder: Path, name: str, source: str) -> types.ModuleType:
    """Write ``source`` to ``folder/name.py`` unless it is there already; import it."""
    if name in sys.modules:
        return sys.modules[name]
    path = folder / f"{name}.py"
    try:
        present = path.read_text(encoding="utf-8") == source
    except (OSError, UnicodeDecodeError):
        present = False
    if not present:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{name}.{uuid.uuid4().hex[:16]}.tmp"
        try:
            temporary.write_text(source, encoding="utf-8")
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _exec_in_memory(source: str, namespace: dict[str, object]) -> types.ModuleType:
    """Run ``source`` as a module that exists only in memory (numba caches nothing)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    filename = f"<ldpsim kernel {digest}>"
    # numba and tracebacks read the source of a function from linecache.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(f"_ldpsim_in_memory_{digest}")
    module.__dict__.update(namespace)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _warn_edited(template: types.ModuleType) -> None:
    if template.__name__ in _warned_templates:
        return
    _warned_templates.add(template.__name__)
    _log.warning(
        "%s changed on disk after this process imported it; it compiles the version it "
        "imported, consistent with the rest of its code. Restart to run the new code.",
        template.__file__,
    )


def _hash_json(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
