"""Sweep specifications (TOML): loading, validation and expansion into grid points."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import json
import math
import numbers
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from ldpsim.pipeline.errors import InputError, os_error_text, path_kind

# ldpsim.tasks (models, mechanisms, numba, scipy) is imported by the functions that
# validate or expand a sweep: a command that only reads a store does neither.
if TYPE_CHECKING:
    from ldpsim.tasks.spec import ReplicateSpec

#: Top-level keys of a sweep file.
SWEEP_KEYS = (
    "description",
    "replicates",
    "seed",
    "spec",
    "grid",
    "cases",
    "methods",
    "rep_chunk",
    "backend",
)
#: The grid axis whose values are the labels of the sweep's [cases.LABEL] tables.
CASE_AXIS = "case"
BUILTIN_DIR = "sweeps"
#: The interval methods of a sweep without a [methods] table, each with its defaults.
DEFAULT_METHODS = ("bb", "bm", "sn", "oracle")


def default_methods() -> dict[str, dict[str, Any]]:
    """The [methods] table of a sweep that has none: :data:`DEFAULT_METHODS`, empty tables."""
    return {label: {} for label in DEFAULT_METHODS}


def builtin_sweep_names() -> list[str]:
    """Names of the sweeps shipped with ldpsim, sorted (their files are not read)."""
    folder = resources.files("ldpsim.pipeline").joinpath(BUILTIN_DIR)
    return sorted(e.name[: -len(".toml")] for e in folder.iterdir() if e.name.endswith(".toml"))


def builtin_sweep_text(name: str) -> str:
    """The TOML text of the built-in sweep ``name`` (one of :func:`builtin_sweep_names`)."""
    return resources.files("ldpsim.pipeline").joinpath(BUILTIN_DIR, f"{name}.toml").read_text()


def builtin_sweeps() -> dict[str, str]:
    """Name -> description of the sweeps shipped with ldpsim."""
    return {
        name: tomllib.loads(builtin_sweep_text(name)).get("description", "")
        for name in builtin_sweep_names()
    }


@dataclass(frozen=True)
class GridPoint:
    """One configuration of a sweep: its grid index, axis values and replicate spec."""

    index: tuple[int, ...]
    values: dict[str, Any]
    spec: dict[str, Any]
    normalized: ReplicateSpec = field(repr=False, compare=False)


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: fixed spec values, grid axes, methods, replicates, seed."""

    name: str
    description: str
    replicates: int
    seed: int
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    methods: dict[str, dict[str, Any]]
    rep_chunk: int | None = None
    #: label -> spec values that vary together; the ``case`` grid axis lists the labels.
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: label -> the parameters that :func:`recommended_choices` filled in because the
    #: sweep file left them out (a sweep read back from a store has none: its methods
    #: are as recorded). Not part of the store; see :func:`adopt_recorded_choices`.
    defaulted: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    #: Warnings of overrides that reach no grid point (:func:`_unused_overrides`), said
    #: by a run. Not part of the store.
    unused: tuple[str, ...] = field(default=(), compare=False)

    @property
    def backend(self) -> str:
        """Where the chains run: 'cpu' or 'gpu' (the spec's ``backend``, one per store)."""
        return self.base.get("backend", "cpu")

    def identity(self) -> dict[str, Any]:
        """What must match for a store to be extended by this sweep (all but the sizes).

        A case's definition is part of it (a label must keep its meaning); adding cases
        extends the ``case`` axis like any other grid axis.
        """
        return {
            "seed": self.seed,
            "base": self.base,
            "axes": list(self.grid),
            "methods": self.methods,
            "cases": self.cases,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "replicates": self.replicates,
            "seed": self.seed,
            "spec": self.base,
            "grid": self.grid,
            "methods": self.methods,
            "rep_chunk": self.rep_chunk,
            **({"cases": self.cases} if self.cases else {}),
        }

    def to_json(self) -> str:
        # Not sort_keys: the order of the grid axes is the order of the store's dimensions.
        return json.dumps(self.to_dict(), default=_json_default)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str | None = None) -> Sweep:
        """Validate a sweep given as the tables of a sweep file.

        Parameters
        ----------
        data : Mapping
            What :func:`tomllib.loads` gives for a sweep file (the keys of
            :data:`SWEEP_KEYS`, with the ``spec``, ``grid``, ``cases`` and ``methods``
            tables as mappings). Tuples, numpy arrays and numpy scalars are taken as the
            TOML lists and numbers they hold. :meth:`to_dict`'s output is taken too:
            its ``name`` is the default of ``name``, and a ``rep_chunk`` of None means
            none given.
        name : str, optional
            The sweep's name, a file name (:func:`check_sweep_name`): it names the
            default store ``outputs/<name>.zarr``. Required unless ``data`` has one.

        Returns
        -------
        Sweep
            The sweep that a file ``<name>.toml`` of these tables loads to.

        Raises
        ------
        InputError
            A bad name, or the error, with the same message, that the same tables in
            the file ``<name>.toml`` raise.
        """
        tables = dict(data)
        recorded = tables.pop("name", None)
        if tables.get("rep_chunk", 0) is None:  # to_dict's "none given"
            del tables["rep_chunk"]
        if name is None and recorded is None:
            raise InputError(
                "Sweep.from_dict needs the sweep's name: pass name='...' (it names the "
                "default store outputs/<name>.zarr), or give the tables a 'name' key."
            )
        return load_sweep(tables, name=recorded if name is None else name)

    def to_toml(self) -> str:
        """The sweep as a sweep file: TOML text that loads back to an equal Sweep.

        The name is a comment on the first line (a sweep file's name is its file name:
        load the text with ``name=`` to keep it). The bb parameters that
        :func:`recommended_choices` filled in are left out, as the sweep's file left them
        out, so the text loads to the same sweep, one that resumes a store recorded
        under other choices alike (:func:`adopt_recorded_choices`).

        Returns
        -------
        str
            The sweep file's text.

        Examples
        --------
        >>> import tomllib
        >>> from ldpsim.pipeline.api import load_sweep
        >>> sweep = load_sweep("demo", replicates=20)
        >>> text = sweep.to_toml()
        >>> print(text.splitlines()[0])
        # sweep 'demo'
        >>> tomllib.loads(text)["replicates"]
        20
        >>> load_sweep(tomllib.loads(text), name="demo") == sweep
        True
        """
        data = self.to_dict()
        data["methods"] = {
            label: {k: v for k, v in params.items() if k not in self.defaulted.get(label, ())}
            for label, params in self.methods.items()
        }
        return sweep_toml(data)

    def points(self) -> list[GridPoint]:
        """Every grid point, validated (raises InputError naming the point).

        Worked out once per Sweep (a sweep is frozen): a grid of many points is
        normalized once, however often the run asks for them; again only where a unit
        was registered since, or registered again (its points may be set up otherwise).
        """
        from ldpsim.tasks.plugins import generation, registered

        units = (generation(), len(registered()))
        cached = self.__dict__.get("_points")
        if cached is None or cached[0] != units:
            # A store's recorded sweep (store.reading) reads under the ranges of the
            # ldpsim that could have made it (tasks.validation.recorded_specs).
            from ldpsim.tasks.validation import recorded_specs

            recorded = self.__dict__.get("_recorded", False)
            with recorded_specs() if recorded else contextlib.nullcontext():
                cached = (units, self._make_points())
            object.__setattr__(self, "_points", cached)
        return list(cached[1])

    def _make_points(self) -> list[GridPoint]:
        from ldpsim.tasks import normalize_spec
        from ldpsim.tasks.plugins import plugin_code_errors

        axes = list(self.grid)
        out = []
        theory: list[str] = []  # the warnings of normalize_spec, for check_theory
        for index in itertools.product(*(range(len(self.grid[a])) for a in axes)):
            values = {a: self.grid[a][i] for a, i in zip(axes, index, strict=True)}
            axis_values = {a: v for a, v in values.items() if a != CASE_AXIS}
            case = self.cases.get(values[CASE_AXIS], {}) if CASE_AXIS in values else {}
            spec = {
                **self.base,
                **case,
                **axis_values,
                "methods": self.methods,
                "seed": self.seed,
            }
            try:
                # A plugin's own bug (constructor, sensitivity, params): one line naming
                # its function, file and line (PluginCodeError, a ValueError).
                with warnings.catch_warnings(record=True) as caught, plugin_code_errors():
                    warnings.simplefilter("always")
                    normalized = normalize_spec(spec)
                theory.extend(str(w.message) for w in caught if str(w.message) not in theory)
            except (TypeError, ValueError) as exc:
                raise InputError(f"{str(exc).rstrip('.')}{at_grid_point(values)}.") from None
            out.append(
                GridPoint(index=tuple(index), values=values, spec=spec, normalized=normalized)
            )
        object.__setattr__(self, "_theory", theory)
        return out

    def check_theory(self) -> list[str]:
        """Messages of the OutsideTheoryWarnings that any grid point raises (recorded when
        the points were normalized, once)."""
        self.points()
        return list(self.__dict__["_theory"])


#: The bb choices a new sweep gets where its file names none (issue 24): the t form for
#: marginal intervals (the paper's basic form under-covers at the paper's block counts:
#: 0.884 at m = 31 even for Gaussian blocks) and Sidak's band for a simultaneous one
#: (the sup-t band covers 0.22-0.72 jointly at d = 100-1000). See docs/methods.md,
#: "Defaults of a new sweep".
RECOMMENDED_FORM = "t"
RECOMMENDED_BAND = "sidak"


def recommended_choices(params: Mapping[str, Any], label: str) -> dict[str, Any]:
    """What a new sweep records for method ``label`` where its file names no choice.

    A ``bb`` method (by label or ``method = "bb"``) without ``form`` gets
    :data:`RECOMMENDED_FORM`, or, with ``simultaneous = true`` and without ``band``,
    :data:`RECOMMENDED_BAND`. The values are written into the sweep's methods, so the
    store records them and a resumed store keeps them whatever later defaults are;
    :class:`ldpsim.tasks.intervals.BlockBootstrap` itself keeps its historical defaults
    (basic, sup-t), so a store that recorded no choice keeps meaning those.

    Returns
    -------
    dict
        The parameters to add (empty when the file names them, or for other methods).
    """
    if params.get("method", label) != "bb":
        return {}
    if params.get("simultaneous") is True:
        return {} if "band" in params else {"band": RECOMMENDED_BAND}
    return {} if "form" in params else {"form": RECOMMENDED_FORM}


def adopt_recorded_choices(requested: Sweep, stored: Sweep) -> Sweep:
    """``requested`` with the choices it left to :func:`recommended_choices` taken as
    ``stored`` recorded them.

    A store made before a choice was recorded (or under other recommendations) keeps
    the method it was made with when the same sweep file resumes it: a filled-in
    parameter takes the stored value, or is dropped when the store recorded none (the
    method's own default then applies, as when the store was made). Parameters the
    file names itself are kept, so a real difference is still refused.
    """
    if not requested.defaulted:
        return requested
    methods = {}
    for label, params in requested.methods.items():
        filled = requested.defaulted.get(label, ())
        recorded = stored.methods.get(label)
        if not filled or not isinstance(recorded, Mapping):
            methods[label] = params
            continue
        kept = {k: v for k, v in params.items() if k not in filled}
        kept.update({k: recorded[k] for k in filled if k in recorded})
        methods[label] = kept
    return dataclasses.replace(requested, methods=methods, defaulted={})


def _check_cases(raw: object, grid: Mapping[str, Any], allowed: set[str]) -> dict[str, dict]:
    """The ``[cases.LABEL]`` tables: spec values that vary together, by label.

    A case may set any spec key but ``methods``, ``seed``, ``checkpoints`` and
    ``backend`` (every grid point shares those), ``level`` (the summaries find a grid
    point's level on its axis: a grid axis ``level``) and no grid axis (it would be set
    twice); it overrides [spec].

    Raises
    ------
    InputError
        Not a table of tables, an empty case, or a key a case may not set.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(v, Mapping) for v in raw.values()):
        raise InputError(
            f"The 'cases' section must hold tables [cases.LABEL] of spec values. Got {raw!r}."
        )
    forbidden = set(NOT_AXES)
    for label, values in raw.items():
        if not values:
            raise InputError(f"The case {label!r} sets nothing; give it spec values or drop it.")
        for key in values:
            if key == "level":
                raise InputError(
                    f"The case {label!r} sets 'level', which a case may not set: coverage "
                    "is judged against each grid point's level, which the summaries read "
                    "from a grid axis. Make it one ([grid] level = [0.5, 0.999]) or set it "
                    "in [spec]."
                )
            if key not in allowed or key in forbidden:
                raise InputError(
                    f"The case {label!r} sets {key!r}, which is not a spec key a case may set; "
                    f"allowed: {', '.join(sorted(allowed - forbidden))}."
                )
            if key in grid:
                raise InputError(
                    f"The key {key!r} is both in the case {label!r} and a grid axis; keep one."
                )
    return {str(label): dict(values) for label, values in raw.items()}


def _json_default(obj: object) -> object:
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    raise TypeError(f"not JSON serializable: {obj!r}")


def sweep_toml(data: Mapping[str, Any], note: str = "") -> str:
    """A sweep's tables as a sweep file (TOML), its name as a comment on the first line.

    Parameters
    ----------
    data : Mapping
        :meth:`Sweep.to_dict`, or a store's record of it (the ``sweep`` attribute).
        None values (``rep_chunk`` when unset) are left out: TOML has no null.
    note : str, default ""
        Words for the comment after the name (``"as stored"``).

    Returns
    -------
    str
        The text, which :func:`load_sweep` reads back to the same tables.
    """

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    body = clean({k: v for k, v in data.items() if k != "name"})
    head = ""
    if "name" in data:
        head = f"# sweep {data['name']!r}{', ' + note if note else ''}\n"
    return head + tomli_w.dumps(body)


#: Characters a sweep's name may not hold: the path separators, and the ones Windows
#: refuses in a file name (a store is often copied to a laptop).
NAME_FORBIDDEN = '/\\:*?"<>|'
#: UTF-8 bytes of a sweep's name at most: ``<name>.zarr`` and ``<name>-report.html``
#: stay below the 255 bytes that file systems allow a file name.
MAX_NAME_BYTES = 200


def check_sweep_name(name: object) -> str:
    """A sweep's name, checked to be usable as a file name (``outputs/<name>.zarr``).

    Parameters
    ----------
    name : object
        A str of 1 to :data:`MAX_NAME_BYTES` UTF-8 bytes, printable, without the
        characters of :data:`NAME_FORBIDDEN` or a space at either end, not ``.`` or
        ``..``.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        Not a str.
    ValueError
        A str that is not such a name.
    """
    message = (
        "The sweep's 'name' must be a file name for its store outputs/<name>.zarr: 1 to "
        f"{MAX_NAME_BYTES} bytes of printable characters, none of {' '.join(NAME_FORBIDDEN)}, "
        f"no space at either end, not '.' or '..'. Got {name!r}."
    )
    if not isinstance(name, str):
        raise TypeError(message)
    if (
        name in ("", ".", "..")
        or not name.isprintable()
        or name != name.strip()
        or any(c in NAME_FORBIDDEN for c in name)
        or len(name.encode()) > MAX_NAME_BYTES
    ):
        raise ValueError(message)
    return name


def _toml_data(value: Any, where: str = "") -> Any:
    """A Python value as the TOML value that it stands for.

    Mappings become dicts, tuples and numpy arrays lists, numpy scalars and other
    numbers Python's int or float: a sweep given as Python values then validates, is
    stored (JSON) and is written back (TOML) as the same sweep from a file would be.
    Other values are left as they are, for the sweep's validation to judge.

    Raises
    ------
    InputError
        A mapping with a key that is not a str (TOML keys are strings).
    """
    if hasattr(value, "tolist") and hasattr(value, "ndim"):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(
                    f"The key {key!r} in {f'{where!r}' if where else 'the sweep'} is not a "
                    "string; the keys of a sweep's tables are strings, as in TOML."
                )
            out[key] = _toml_data(item, f"{where}.{key}" if where else key)
        return out
    if isinstance(value, list | tuple):
        return [_toml_data(v, where) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def note_overrides(before: Mapping[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """``after``, a sweep's tables with overrides applied, with its description noting
    what they changed from ``before``.

    The description is a sweep file's own words ("..., 500 replicates"), which the
    overrides do not rewrite; so that it does not describe a sweep that is not run, it
    gets the note ``(as run: KEY = VALUE, ...)``, one ``KEY = VALUE`` per value that
    differs from ``before`` and ``without KEY`` per value that is gone, with KEY and
    VALUE as ``--set`` takes them (``replicates = 30``, ``eps = 2.0``,
    ``grid.n = [1000, 10000]``, ``methods.bb.B = 100``). Nothing is noted when the
    overrides change nothing, when they set the description themselves, or when there
    is no description.
    """
    description = after.get("description")
    if not description or not isinstance(description, str):
        return after
    if description != before.get("description"):
        return after
    old, new = _entries(before), _entries(after)
    changes = [f"{k} = {_inline(v)}" for k, v in new.items() if k not in old or old[k] != v]
    # A label whose table gained parameters ([methods.bb] with bb.B set) is not gone.
    changes += [
        f"without {k}" for k in old if k not in new and not any(n.startswith(f"{k}.") for n in new)
    ]
    if not changes:
        return after
    return {**after, "description": f"{description} (as run: {', '.join(changes)})"}


def at_grid_point(values: Mapping[str, Any]) -> str:
    """``", at the grid point tau = 0.5, n = 1000"`` for a grid point's axis values, for
    the end of a message about it; ``""`` for a sweep without grid axes."""
    where = ", ".join(f"{axis} = {value}" for axis, value in values.items())
    return f", at the grid point {where}" if where else ""


#: The note a store's description gets when a run grows it beyond what a run of one
#: sweep made (:func:`grown_description`).
GROWN_NOTE = " (as extended: "


def grown_description(stored: Sweep, running: Sweep, grown: Sweep) -> str:
    """The description of a store grown by ``running`` from ``stored`` to ``grown``.

    A description says what a store holds: the sweep file's words and the note of what
    the overrides changed (:func:`note_overrides`). Grown by a run, the store holds more
    than either run's sweep described on its own. Where ``running`` holds all of
    ``grown`` (the same replicates, methods and grid values; a run of more replicates or
    values of the sweep it was made with), a new run of it would make the same store:
    its description. Otherwise the stored description keeps its words and notes what
    the store holds now, ``(as extended: replicates = 60, grid.tau = [0.5, 0.9, 0.7],
    methods = ["bb", "bm"])``, each size whole, in place of an earlier such note; a
    store without a description gets none.
    """
    holds_all = (
        running.replicates == grown.replicates
        and set(running.methods) == set(grown.methods)
        and running.grid.keys() == grown.grid.keys()
        and all(
            len(running.grid[axis]) == len(values)
            and all(value in running.grid[axis] for value in values)
            for axis, values in grown.grid.items()
        )
    )
    if holds_all:
        return running.description
    words = stored.description
    if GROWN_NOTE in words and words.endswith(")"):
        words = words[: words.rindex(GROWN_NOTE)]
    if not words:  # no description to correct: none noted, as by note_overrides
        return words
    sizes = [f"replicates = {grown.replicates}"]
    sizes += [f"grid.{axis} = {_inline(values)}" for axis, values in grown.grid.items()]
    sizes.append(f"methods = {_inline(list(grown.methods))}")
    return f"{words}{GROWN_NOTE}{', '.join(sizes)})"


def _entries(data: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's tables as ``--set`` KEY -> value (spec keys bare), description aside."""
    out: dict[str, Any] = {}
    if "methods" not in data:  # the methods the sweep runs (validate_sweep)
        data = {**data, "methods": default_methods()}
    for key, value in data.items():
        if key == "description":
            continue
        if key == "spec" and isinstance(value, Mapping):
            out.update({str(k): v for k, v in value.items()})
        elif key == "grid" and isinstance(value, Mapping):
            out.update({f"grid.{k}": v for k, v in value.items()})
        elif key in ("cases", "methods") and isinstance(value, Mapping):
            for label, table in value.items():
                if isinstance(table, Mapping) and table:
                    out.update({f"{key}.{label}.{k}": v for k, v in table.items()})
                else:  # a method without parameters
                    out[f"{key}.{label}"] = table or {}
        else:
            out[str(key)] = value
    return out


def _inline(value: Any) -> str:
    """A value as TOML writes it inline (as ``--set`` takes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list | tuple):
        return f"[{', '.join(map(_inline, value))}]"
    if isinstance(value, Mapping):
        return f"{{{', '.join(f'{k} = {_inline(v)}' for k, v in value.items())}}}"
    if isinstance(value, float):
        # 50000.0 (--set n=5e4) as 5e4, the way the tables write n; TOML reads it back as
        # the same float. Imported here: formatting imports this module.
        from ldpsim.pipeline.formatting import sample_size_text

        compact = sample_size_text(value)
        return compact if "e" in compact else repr(value)
    return str(value)


def _parse_value(text: str, item: str) -> Any:
    """``--set``'s VALUE as TOML, or as the bare text (a model's name); one that opens
    a list, a table or a quoted string must be valid TOML (InputError)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as exc:
        if text[:1] in ("[", "{", '"', "'"):
            raise InputError(
                f"--set {item!r}: the value {text!r} is not valid TOML ({exc}); write it "
                'as in a sweep file, e.g. grid.n=[1000, 10000] or model="quantile".'
            ) from None
        return text  # a bare word such as a model name


#: Where a dotted ``--set`` key may point: section -> number of parts after it.
OVERRIDE_DEPTH = {"spec": (1,), "grid": (1,), "cases": (2,), "methods": (1, 2)}
OVERRIDE_FORMS = "KEY, spec.KEY, grid.AXIS, cases.LABEL.KEY, methods.LABEL or methods.LABEL.PARAM"


#: One override: ``"KEY=VALUE"`` as given to ``--set`` (VALUE in TOML), or a (KEY, value)
#: pair with a Python value (:func:`ldpsim.pipeline.api.load_sweep`'s keywords).
Override = str | tuple[str, Any]


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """Apply ``--set key=value`` overrides (TOML values) to a parsed sweep.

    ``key`` is a spec key (``eps=2``), ``spec.KEY``, ``grid.AXIS`` (``grid.n=[1e4, 1e5]``),
    ``cases.LABEL.KEY`` (``cases.gdp1.mu=2``), ``methods.LABEL`` (a table) or
    ``methods.LABEL.PARAM`` (``methods.bb.B=100``), or a top-level key
    (``replicates=20``, ``seed=3``). An override given as a (key, value) pair carries its
    value as a Python object (taken as the TOML value it stands for: a tuple as a list,
    a numpy number as a Python number) and is applied the same way; messages name it
    "override 'key=value'" instead of "--set 'key=value'". Overrides apply in order.

    Raises
    ------
    InputError
        An item without ``=``, a key of another form, or one that goes into a value that
        is not a table (``grid.n.x=1`` when ``grid.n`` is a list).
    """
    data = copy.deepcopy(data)
    for override in overrides:
        if isinstance(override, str):
            item, option = override, "--set"
            if "=" not in item:
                raise InputError(f"--set expects key=value. Got {item!r}.")
            key, text = (s.strip() for s in item.split("=", 1))
            value = _parse_value(text, item)
        else:
            key, value = override[0], _toml_data(copy.deepcopy(override[1]))
            item, option = f"{key}={value!r}", "override"
        parts = key.split(".")
        section = parts[0]
        if len(parts) > 1 and (
            section not in OVERRIDE_DEPTH or len(parts) - 1 not in OVERRIDE_DEPTH[section]
        ):
            raise InputError(
                f"{option} {item!r}: KEY must be one of {OVERRIDE_FORMS}. Got {key!r}."
            )
        if len(parts) > 1:
            if section == "methods" and "methods" not in data:
                # A sweep without [methods] runs the default methods: methods.bb.B=100
                # changes bb among them, as it does in a file that lists them.
                data["methods"] = default_methods()
            target = data
            for depth, part in enumerate(parts[:-1]):
                if target.get(part) is None:  # absent, or a method given without parameters
                    target[part] = {}
                target = target[part]
                if not isinstance(target, dict):
                    where = ".".join(parts[: depth + 1])
                    raise InputError(
                        f"{option} {item!r}: {where!r} is {target!r}, not a table, so it has no "
                        f"key {parts[depth + 1]!r}. KEY must be one of {OVERRIDE_FORMS}."
                    )
            target[parts[-1]] = value
            # A value replaces the other section's key of that name: grid.n drops spec.n,
            # spec.n (as the bare n) drops the axis grid.n.
            other = {"grid": "spec", "spec": "grid"}.get(section)
            if other is not None and len(parts) == 2 and isinstance(data.get(other), dict):
                data[other].pop(parts[-1], None)
        elif key in SWEEP_KEYS:
            data[key] = value
        else:
            if not isinstance(data.setdefault("spec", {}), dict):
                raise InputError(f"{option} {item!r}: the sweep's 'spec' is not a table.")
            data["spec"][key] = value
            if isinstance(data.get("grid"), dict):
                data["grid"].pop(key, None)
    return data


def read_sweep_text(path: Path) -> str:
    """The text of a sweep file, or InputError naming what is wrong with the path.

    Raises
    ------
    InputError
        The path does not exist, is not a file (a folder, ``/dev/null``), cannot be read,
        or is not UTF-8 text (TOML files are UTF-8).
    """
    names = ", ".join(builtin_sweep_names())
    allowed = f"give a built-in sweep name ({names}) or a TOML file"
    try:
        kind = path_kind(path)
        if kind is None:
            from ldpsim.tasks.validation import did_you_mean

            hint = did_you_mean(str(path), builtin_sweep_names())
            raise InputError(
                f"Sweep {str(path)!r}{hint} is neither a file nor a built-in sweep; {allowed}."
            )
        if kind != "file":
            raise InputError(f"Sweep {str(path)!r} is a {kind}, not a TOML file; {allowed}.")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"Sweep {str(path)!r} cannot be read: {os_error_text(exc, path)}."
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"Sweep file {str(path)!r} is not UTF-8 text (byte {raw[exc.start]:#04x} at "
            f"offset {exc.start}); save it as UTF-8, as TOML requires."
        ) from None


def load_sweep(
    source: str | Path | Mapping[str, Any],
    overrides: Sequence[Override] | None = None,
    replicates: int | None = None,
    name: str | None = None,
) -> Sweep:
    """Load a sweep by built-in name, TOML path or tables, apply overrides and validate it.

    Parameters
    ----------
    source : str or Path or Mapping
        A built-in sweep's name, a sweep file's path, or the tables of a sweep file as
        :func:`tomllib.loads` gives them (:func:`_toml_data` takes Python values as TOML's).
    overrides : sequence of Override or None, default None
        Applied in order (:func:`apply_overrides`).
    replicates : int or None, default None
        Replicates per grid point, replacing the sweep's (after the overrides).
    name : str or None, default None
        The sweep's name (:func:`check_sweep_name`); default the built-in's name or the
        file's stem. Required for tables.

    Returns
    -------
    Sweep
        Its description notes what the overrides changed (:func:`note_overrides`).

    Raises
    ------
    InputError
        A bad or missing name, a missing or unreadable file, not UTF-8, a TOML syntax
        error, an unknown key, or any invalid value (the message names the key and what
        is allowed); tables fail with the message of the same tables in a file.
    """
    if name is not None:
        try:
            name = check_sweep_name(name)
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc)) from None
    if isinstance(source, Mapping):
        if name is None:
            raise InputError(
                "A sweep given as tables needs a name (name=...), as a file has its file "
                "name: it names the default store outputs/<name>.zarr."
            )
        data = _toml_data(source)
    else:
        source = str(source)
        if source in builtin_sweep_names():
            text = builtin_sweep_text(source)
            default = source
        else:
            text = read_sweep_text(Path(source))
            default = Path(source).stem
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"Sweep file {source!r} is not valid TOML: {exc}.") from None
        name = default if name is None else name
    changed = apply_overrides(data, overrides or [])
    if replicates is not None:
        changed["replicates"] = replicates
    unused = _unused_overrides(data, changed)
    if not unused:
        return validate_sweep(note_overrides(data, changed), name)
    # The description's note names them apart (below), not among what was run.
    old_spec = data["spec"] if isinstance(data.get("spec"), Mapping) else {}
    shown = {**changed, "spec": {k: v for k, v in changed["spec"].items() if k not in unused}}
    shown["spec"].update({k: old_spec[k] for k in unused if k in old_spec})
    final = dict(changed)
    if "description" in changed:
        final["description"] = note_overrides(data, shown)["description"]
    sweep = validate_sweep(final, name)
    labels = sweep.grid[CASE_AXIS]
    messages = tuple(
        f"the override {key} = {_inline(changed['spec'][key])} reaches no grid point: every "
        f"case run ({', '.join(map(repr, labels))}) sets {key!r} itself, and a case's values "
        f"override [spec]; set it with --set cases.LABEL.{key}=... instead"
        for key in unused
    )
    words = ", ".join(f"{key} = {_inline(changed['spec'][key])}" for key in unused)
    description = sweep.description
    if description:
        description += f" ({words}: overridden by every case, no effect)"
    return dataclasses.replace(sweep, description=description, unused=messages)


def _unused_overrides(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The [spec] keys that the overrides set or changed and that every case on the
    ``case`` grid axis sets itself: a case's values override [spec], so such an override
    reaches no grid point (``--set eps=0.5`` on a sweep whose cases all set ``eps``).

    Not refused: a store made with one records it in its spec (its identity), and the
    same command must resume it; :func:`load_sweep` notes it in the description and
    :func:`ldpsim.pipeline.api.run` warns of it (:attr:`Sweep.unused`).
    """
    spec, cases, grid = after.get("spec"), after.get("cases"), after.get("grid")
    if not all(isinstance(part, Mapping) for part in (spec, cases, grid)):
        return []
    labels = grid.get(CASE_AXIS)
    if not isinstance(labels, list) or not labels:
        return []
    old = before.get("spec") if isinstance(before.get("spec"), Mapping) else {}
    return [
        key
        for key, value in spec.items()
        if not (key in old and old[key] == value)  # the file's own value: no override
        and all(isinstance(cases.get(label), Mapping) and key in cases[label] for label in labels)
    ]


def validate_sweep(data: Mapping[str, Any], name: str) -> Sweep:
    """Check a parsed sweep and every one of its grid points."""
    from ldpsim.tasks.spec import SPEC_KEYS, find_unit, mechanism_param_keys, model_param_keys
    from ldpsim.tasks.validation import check_int, did_you_mean

    for key in data:
        if key not in SWEEP_KEYS:
            raise InputError(
                f"Unknown key {key!r}{did_you_mean(key, SWEEP_KEYS)} in sweep {name!r}. "
                f"Allowed keys are: {', '.join(SWEEP_KEYS)}."
            )
    if "replicates" not in data:
        raise InputError(
            f"The 'replicates' key is required in sweep {name!r}: replicates = N, an int "
            "in [1, 10000000], before the first table."
        )
    description = data.get("description", "")
    if not isinstance(description, str):
        raise InputError(
            f"The 'description' of sweep {name!r} must be a string (description = \"...\"). "
            f"Got {description!r}."
        )
    try:
        replicates = check_int(data.get("replicates"), "replicates", low=1, high=10**7)
        seed = check_int(data.get("seed", 0), "seed", low=0, high=2**63 - 1)
        rep_chunk = data.get("rep_chunk")
        if rep_chunk is not None:
            rep_chunk = check_int(rep_chunk, "rep_chunk", low=1, high=10**5)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc)) from None
    base = _with_backend(data.get("spec", {}), data.get("backend"))
    grid = data.get("grid", {})
    methods = data.get("methods", default_methods())
    for section, value in (("spec", base), ("grid", grid), ("methods", methods)):
        if not isinstance(value, Mapping):
            raise InputError(f"The {section!r} section must be a table. Got {value!r}.")
    if isinstance(base.get("model"), str):  # an unknown model first: its keys are unknown too
        try:
            find_unit("model", base["model"])
        except (TypeError, ValueError) as exc:
            raise InputError(f"{exc} (in [spec])") from None
    allowed = set(SPEC_KEYS) | model_param_keys() | mechanism_param_keys()
    for key in base:
        if key in ("methods", "seed"):
            raise InputError(
                f"The {key!r} key belongs at the top level of the sweep, not in [spec]."
            )
        if key not in allowed:
            listed = sorted(allowed - {"methods", "seed"})  # top-level keys (above)
            raise InputError(
                f"Unknown key {key!r}{did_you_mean(key, listed)} in [spec]. Allowed keys are: "
                f"{', '.join(listed)}."
            )
    cases = _check_cases(data.get("cases"), grid, allowed)
    for axis, values in grid.items():
        if axis == CASE_AXIS:
            if not cases:
                raise InputError(
                    f"The grid axis {CASE_AXIS!r} lists the labels of [cases.LABEL] tables, "
                    "and the sweep has none; add them or remove the axis."
                )
        elif axis not in allowed or axis in NOT_AXES:
            axes = sorted(allowed - set(NOT_AXES))
            raise InputError(
                f"Unknown grid axis {axis!r}{did_you_mean(axis, [CASE_AXIS, *axes])}. Axes "
                f"can be {CASE_AXIS!r} or any spec key: {', '.join(axes)}."
            )
        if axis in base:
            raise InputError(f"The key {axis!r} is both in [spec] and in [grid]; keep one.")
        if not isinstance(values, list) or not values:
            raise InputError(f"The grid axis {axis!r} must be a non-empty list. Got {values!r}.")
        for v in values:
            if not isinstance(v, numbers.Real | str) or isinstance(v, bool):
                raise InputError(
                    f"The grid axis {axis!r} must list scalar values (numbers or strings). "
                    f"Got {v!r}."
                )
        if axis == "n":
            grid = {**grid, "n": [_as_int(v, "n") for v in values]}
        if axis == CASE_AXIS:
            for label in values:
                if label not in cases:
                    raise InputError(
                        f"The grid axis {CASE_AXIS!r} lists {label!r}, which no [cases.LABEL] "
                        f"table defines; the cases are: {', '.join(map(repr, cases))}."
                    )
        _check_distinct(axis, grid[axis])
    if cases and CASE_AXIS not in grid:
        raise InputError(
            f"The sweep defines [cases] ({', '.join(map(repr, cases))}) but its grid has no "
            f"{CASE_AXIS!r} axis listing the ones to run; add grid.{CASE_AXIS} = [...]."
        )
    for label, params in methods.items():
        if isinstance(label, str) and not label.strip():  # it would name a blank row
            raise InputError(
                f"The method label {label!r} is blank; a label names its method's rows in "
                "every table, so give it a name of visible characters, e.g. [methods.bb] "
                "or [methods.bb_long]."
            )
        if params is not None and not isinstance(params, Mapping):
            raise InputError(
                f"The parameters of method {label!r} must be a table. Got {params!r}."
            )
    if "n" in base:
        base = {**base, "n": _as_int(base["n"], "n")}
    methods = {k: dict(v or {}) for k, v in methods.items()}
    defaulted = {}
    for label, params in methods.items():
        filled = recommended_choices(params, label)
        if filled:
            params.update(filled)
            defaulted[label] = tuple(filled)
    sweep = Sweep(
        name=name,
        description=description,
        replicates=replicates,
        seed=seed,
        base=dict(base),
        grid={k: list(v) for k, v in grid.items()},
        methods=methods,
        rep_chunk=rep_chunk,
        cases=cases,
        defaulted=defaulted,
    )
    _check_checkpoints(sweep.points())  # validates every grid point eagerly
    return sweep


#: Spec keys that are the same at every grid point of a store: never a grid axis. A
#: store holds one backend: the GPU's replicates come from other streams.
NOT_AXES = ("methods", "seed", "checkpoints", "backend")


def _with_backend(base: Any, backend: Any) -> Any:
    """The [spec] table with the sweep's top-level ``backend`` in it.

    The backend is a spec key (it keys the GPU's streams); the sweep file gives it at
    the top level or in [spec], not both. 'cpu', the default, is left out, so that a
    CPU sweep's identity is what it was before backends existed.
    """
    if not isinstance(base, Mapping):
        return base  # refused below, as any other bad [spec]
    if backend is not None and "backend" in base:
        raise InputError("The 'backend' key is both at the top level and in [spec]; keep one.")
    value = base.get("backend", backend)
    if value is None:
        return base
    from ldpsim.tasks.spec import BACKENDS
    from ldpsim.tasks.validation import did_you_mean

    if value not in BACKENDS:
        raise InputError(
            f"The 'backend' key must be one of {', '.join(map(repr, BACKENDS))}. Got {value!r}"
            f"{did_you_mean(value, BACKENDS)}."
        )
    rest = {key: v for key, v in base.items() if key != "backend"}
    return rest if value == "cpu" else {**rest, "backend": value}


def with_backend(sweep: Sweep, backend: str) -> Sweep:
    """``sweep`` run on ``backend`` ('cpu' or 'gpu'): ``--backend`` and ``run(backend=)``.

    Raises
    ------
    InputError
        Another backend name, or a grid point that has no GPU form (naming it).
    """
    base = _with_backend({k: v for k, v in sweep.base.items() if k != "backend"}, backend)
    moved = dataclasses.replace(sweep, base=base)
    moved.points()  # validated now, as a loaded sweep is
    return moved


def _check_checkpoints(points: list[GridPoint]) -> None:
    """Refuse checkpoints at grid points of different n.

    A store has one ``checkpoint`` axis for every grid point, and a grid point's
    checkpoints are the ones given and its own n (the final estimate, once, whether or
    not it is listed). With two values of n they would differ in number (a store write
    fails) or in their last value (the store would label one n as the other).
    """
    sizes = sorted({p.normalized.n for p in points if p.normalized.checkpoints is not None})
    if len(sizes) > 1:
        raise InputError(
            "The 'checkpoints' parameter needs the same n at every grid point: a store has "
            "one checkpoint axis, and it ends at n (a checkpoint equal to n is the final "
            f"estimate). Got n = {', '.join(map(str, sizes))}. Run a sweep per n, with "
            "checkpoints up to it, or leave out checkpoints."
        )


def _as_int(value: Any, name: str) -> Any:
    from ldpsim.tasks.spec import MAX_N
    from ldpsim.tasks.validation import check_int

    try:
        return check_int(value, name, low=2, high=MAX_N)
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc)) from None


def _check_distinct(axis: str, values: list[Any]) -> None:
    """Refuse an axis listing one value twice, numbers compared by value (1 and 1.0 alike).

    Two equal values would make two grid points that compute the same thing twice and
    store rows that cannot be told apart (checkpoints are checked alike, by
    :func:`ldpsim.tasks.validation.check_distinct`).
    """
    from ldpsim.tasks.validation import check_distinct

    try:
        check_distinct(values, f"The grid axis {axis!r}")
    except ValueError as exc:
        raise InputError(str(exc)) from None
